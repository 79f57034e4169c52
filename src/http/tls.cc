#include "http/tls.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/libc.h"

namespace hami::http {

CertPair::~CertPair() {
  if (leaf) X509_free(leaf);
  for (X509* c : chain) X509_free(c);
  if (key) EVP_PKEY_free(key);
}

StatusOr<std::string> ReadFileCapped(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return NotFound("cannot read ", path, ": ", ErrnoText(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path, ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return InvalidArgument(path, ": ", st.st_size, " bytes, larger than the limit of ", max_bytes);
  }
  std::string out;
  out.resize(max_bytes + 1);
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return Internal("cannot read ", path, ": ", ErrnoText(e));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  // The file may have grown between fstat and read.
  if (got > max_bytes)
    return InvalidArgument(path, ": larger than the limit of ", max_bytes, " bytes");
  out.resize(got);
  return out;
}

Status CheckKeyStrength(EVP_PKEY* key, const std::string& what) {
  const int bits = EVP_PKEY_get_bits(key);
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS:
      if (bits < 2048)
        return InvalidArgument(what, ": RSA key of ", bits, " bits; at least 2048 are required");
      return OkStatus();
    case EVP_PKEY_EC:
      if (bits < 256)
        return InvalidArgument(what, ": EC key of ", bits, " bits; at least P-256 is required");
      return OkStatus();
    case EVP_PKEY_ED25519:
    case EVP_PKEY_ED448:
      return OkStatus();
    default:
      return InvalidArgument(
          what, ": unsupported key type (use RSA >= 2048 bits, ECDSA >= P-256 or Ed25519)");
  }
}

namespace {

// Never prompts: records that OpenSSL asked for a passphrase and declines.
int NoPassphrase(char*, int, int, void* asked) {
  *static_cast<bool*>(asked) = true;
  return -1;
}

}  // namespace

StatusOr<std::shared_ptr<CertPair>> LoadCertPair(const std::string& cert_file,
                                                 const std::string& key_file) {
  HAMI_ASSIGN_OR_RETURN(std::string cert_pem, ReadFileCapped(cert_file, kMaxPemFileBytes));
  HAMI_ASSIGN_OR_RETURN(std::string key_pem, ReadFileCapped(key_file, kMaxPemFileBytes));
  auto pair = std::make_shared<CertPair>();
  bool asked = false;
  BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  pair->leaf = PEM_read_bio_X509(cb, nullptr, &NoPassphrase, &asked);
  while (pair->leaf) {
    X509* c = PEM_read_bio_X509(cb, nullptr, &NoPassphrase, &asked);
    if (!c) break;
    pair->chain.push_back(c);
  }
  BIO_free(cb);
  ERR_clear_error();
  if (!pair->leaf) return InvalidArgument(cert_file, ": no PEM certificate found");
  BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  asked = false;
  pair->key = PEM_read_bio_PrivateKey(kb, nullptr, &NoPassphrase, &asked);
  BIO_free(kb);
  ERR_clear_error();
  if (!pair->key && asked)
    return InvalidArgument(
        key_file,
        ": the private key is encrypted; passphrases are not supported (store it "
        "unencrypted in the secret, e.g. `openssl pkey -in KEY -out KEY.plain`)");
  if (!pair->key) return InvalidArgument(key_file, ": no PEM private key found");
  HAMI_RETURN_IF_ERROR(CheckKeyStrength(pair->key, key_file));
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    ERR_clear_error();
    return InvalidArgument(key_file, ": the private key does not match the certificate in ",
                           cert_file);
  }
  return pair;
}

Status ConfigureServerContext(SSL_CTX* ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
    return Internal("cannot set the TLS minimum version");
  // TLS 1.2: forward secrecy (ECDHE) and authenticated encryption (GCM, ChaCha20-Poly1305) only.
  // TLS 1.3 suites are all AEAD with ephemeral key exchange; OpenSSL's default list stays.
  static constexpr const char* kTls12Suites =
      "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
      "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
  if (SSL_CTX_set_cipher_list(ctx, kTls12Suites) != 1) {
    ERR_clear_error();
    return Internal("cannot set the TLS 1.2 cipher suites");
  }
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  return OkStatus();
}

}  // namespace hami::http
