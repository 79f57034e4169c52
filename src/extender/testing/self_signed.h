#pragma once
// Test/benchmark helper: writes a fresh self-signed P-256 certificate with common name `cn` and its
// key as PEM files, each written to a temporary and renamed into place (as kubelet updates a
// mounted secret). Header-only; needs OpenSSL 3.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace hami::extender::testing {

inline bool WriteSelfSigned(const std::string& cn, const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return false;
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  bool ok = X509_sign(x, key, EVP_sha256()) > 0;
  FILE* f = std::fopen((cert_path + ".tmp").c_str(), "w");
  ok = ok && f && PEM_write_X509(f, x) == 1;
  if (f) std::fclose(f);
  f = std::fopen((key_path + ".tmp").c_str(), "w");
  ok = ok && f && PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (f) std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
  if (!ok) return false;
  std::filesystem::rename(key_path + ".tmp", key_path);
  std::filesystem::rename(cert_path + ".tmp", cert_path);
  return true;
}

}  // namespace hami::extender::testing
