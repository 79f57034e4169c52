#pragma once
// TLS for the HTTP servers: the certificate/key pair read from PEM files with a size cap and
// checked for strength, and the server-side OpenSSL settings (TLS 1.2 with ECDHE + AEAD suites,
// or 1.3).
#include <openssl/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::http {

// Larger certificate or key files are refused (a PEM chain is a few KiB).
inline constexpr size_t kMaxPemFileBytes = 1u << 20;

// One loaded certificate chain + key; freed when the last handshake using it is done.
struct CertPair {
  X509* leaf = nullptr;
  std::vector<X509*> chain;
  EVP_PKEY* key = nullptr;
  CertPair() = default;
  CertPair(const CertPair&) = delete;
  CertPair& operator=(const CertPair&) = delete;
  ~CertPair();
};

// Reads at most max_bytes of a regular file (not a device or FIFO: /dev/zero fails at once).
StatusOr<std::string> ReadFileCapped(const std::string& path, size_t max_bytes);

// Loads and checks a pair: PEM certificate(s) (leaf first, then the chain) and an unencrypted PEM
// private key that matches the leaf. Refused: RSA under 2048 bits, EC curves under 256 bits, DSA/DH
// keys, an encrypted key (no passphrase prompt: the error says to decrypt it), files over
// kMaxPemFileBytes. Errors name the file.
StatusOr<std::shared_ptr<CertPair>> LoadCertPair(const std::string& cert_file,
                                                 const std::string& key_file);

// Why a key is too weak to serve, or OK. `what` names it in the error.
Status CheckKeyStrength(EVP_PKEY* key, const std::string& what);

// Server settings on a fresh context: TLS 1.2 minimum; for 1.2 only ECDHE key exchange with AEAD
// ciphers (AES-GCM, ChaCha20-Poly1305); no renegotiation, no compression; server cipher order.
Status ConfigureServerContext(SSL_CTX* ctx);

}  // namespace hami::http
