// HTTPS to the fake API server: server verification against a CA from the config, insecure mode,
// tls-server-name, and client certificates (mutual TLS). Certificates are made here with OpenSSL.
#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <fstream>

#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::k8s {
namespace {

struct Pem {
  std::string cert, key;
};

std::string BioString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<size_t>(n));
  BIO_free(bio);
  return s;
}

// A self-signed certificate (usable as its own CA) for `cn` with the given subjectAltName.
Pem SelfSigned(const std::string& cn, const std::string& san, long serial) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : std::vector<std::pair<int, std::string>>{
           {NID_subject_alt_name, san},
           {NID_basic_constraints, "critical,CA:TRUE"},
           {NID_key_usage, "critical,digitalSignature,keyCertSign"},
           {NID_ext_key_usage, "serverAuth,clientAuth"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x, key, EVP_sha256());
  BIO* cb = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cb, x);
  BIO* kb = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(kb, key, nullptr, nullptr, 0, nullptr, nullptr);
  Pem pem{BioString(cb), BioString(kb)};
  X509_free(x);
  EVP_PKEY_free(key);
  return pem;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hami_tls_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    server_ =
        SelfSigned("fake-apiserver", "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc", 1);
    client_ = SelfSigned("hami-scheduler", "DNS:hami-scheduler", 2);
    Write("server.crt", server_.cert);
    Write("server.key", server_.key);
    Write("client-ca.crt", client_.cert);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::string P(const std::string& name) { return (dir_ / name).string(); }

  Status Probe(const testing::FakeApiServer& fake, ClientConfig cfg) {
    cfg.server = fake.url();
    cfg.max_retries = 0;
    auto c = Client::Create(cfg);
    if (!c.ok()) return c.status();
    return (*c)->List(kNodes, "").status();
  }

  std::filesystem::path dir_;
  Pem server_, client_;
};

TEST_F(TlsTest, ServerVerification) {
  testing::FakeApiServerOptions o;
  o.tls_cert_file = P("server.crt");
  o.tls_key_file = P("server.key");
  testing::FakeApiServer fake(o);
  ASSERT_TRUE(fake.Start().ok());
  ASSERT_EQ(fake.url().rfind("https://", 0), 0u);
  struct Case {
    std::string name;
    std::string ca;
    bool insecure;
    std::string server_name;
    bool ok;
  };
  std::vector<Case> cases = {
      {"trusted CA", server_.cert, false, "", true},
      {"unknown CA", client_.cert, false, "", false},
      {"insecure", "", true, "", true},
      {"tls-server-name in SAN", server_.cert, false, "kubernetes.default.svc", true},
      {"tls-server-name not in SAN", server_.cert, false, "wrong.example", false},
  };
  for (const auto& c : cases) {
    ClientConfig cfg;
    cfg.ca_pem = c.ca;
    cfg.insecure_skip_tls_verify = c.insecure;
    cfg.tls_server_name = c.server_name;
    Status s = Probe(fake, cfg);
    EXPECT_EQ(s.ok(), c.ok) << c.name << ": " << s;
    if (!c.ok) {
      EXPECT_TRUE(absl::IsUnavailable(s)) << c.name << ": " << s;
    }
  }
}

TEST_F(TlsTest, ClientCertificates) {
  testing::FakeApiServerOptions o;
  o.tls_cert_file = P("server.crt");
  o.tls_key_file = P("server.key");
  o.tls_client_ca_file = P("client-ca.crt");
  testing::FakeApiServer fake(o);
  ASSERT_TRUE(fake.Start().ok());
  ClientConfig cfg;
  cfg.ca_pem = server_.cert;
  EXPECT_FALSE(Probe(fake, cfg).ok());
  cfg.client_cert_pem = client_.cert;
  cfg.client_key_pem = client_.key;
  Status s = Probe(fake, cfg);
  EXPECT_TRUE(s.ok()) << s;
  // Several requests reuse the pooled TLS connection.
  cfg.server = fake.url();
  auto c = Client::Create(cfg);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*c)->List(kNodes, "").ok());
}

}  // namespace
}  // namespace hami::k8s
