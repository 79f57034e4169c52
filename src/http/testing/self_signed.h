#pragma once
// Test/benchmark helper: writes a fresh self-signed certificate with common name `cn` and its key
// as PEM files, each written to a temporary and renamed into place (as kubelet updates a mounted
// secret). `key_type`: "P-256" (default), another curve name ("P-224", "P-384"), or "RSA:<bits>".
// A non-empty `passphrase` encrypts the key (AES-256-CBC). Header-only; needs OpenSSL 3.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace hami::http::testing {

inline bool WriteSelfSigned(const std::string& cn, const std::string& cert_path,
                            const std::string& key_path, const std::string& key_type = "P-256",
                            const std::string& passphrase = "") {
  EVP_PKEY* key = key_type.rfind("RSA:", 0) == 0
                      ? EVP_RSA_gen(static_cast<unsigned>(std::stoul(key_type.substr(4))))
                      : EVP_EC_gen(key_type.c_str());
  if (key == nullptr) return false;
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  bool ok = X509_sign(x, key, EVP_sha256()) > 0;
  FILE* f = std::fopen((cert_path + ".tmp").c_str(), "w");
  ok = ok && f && PEM_write_X509(f, x) == 1;
  if (f) std::fclose(f);
  f = std::fopen((key_path + ".tmp").c_str(), "w");
  if (passphrase.empty()) {
    ok = ok && f && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  } else {
    ok = ok && f &&
         PEM_write_PKCS8PrivateKey(f, key, EVP_aes_256_cbc(), passphrase.data(),
                                   static_cast<int>(passphrase.size()), nullptr, nullptr) == 1;
  }
  if (f) std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
  if (!ok) return false;
  std::filesystem::rename(key_path + ".tmp", key_path);
  std::filesystem::rename(cert_path + ".tmp", cert_path);
  return true;
}

}  // namespace hami::http::testing
