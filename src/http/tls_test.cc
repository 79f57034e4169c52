// TLS loading: key strength, size caps, encrypted keys, and the server's TLS 1.2 suites.
#include "http/tls.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "http/testing/self_signed.h"

namespace hami::http {
namespace {

class TlsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hami-tls-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    cert_ = (dir_ / "tls.crt").string();
    key_ = (dir_ / "tls.key").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string cert_, key_;
};

TEST_F(TlsFiles, KeyStrengthTable) {
  struct Case {
    const char* key_type;
    bool ok;
    const char* words;  // in the error
  };
  const Case cases[] = {{"P-256", true, ""},
                        {"P-384", true, ""},
                        {"RSA:2048", true, ""},
                        {"RSA:1024", false, "RSA key of 1024 bits"},
                        {"P-224", false, "EC key of 224 bits"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key_type);
    ASSERT_TRUE(testing::WriteSelfSigned("t", cert_, key_, c.key_type));
    auto pair = LoadCertPair(cert_, key_);
    EXPECT_EQ(pair.ok(), c.ok) << pair.status();
    if (!c.ok) {
      EXPECT_NE(std::string(pair.status().message()).find(c.words), std::string::npos)
          << pair.status();
      EXPECT_NE(std::string(pair.status().message()).find(key_), std::string::npos)
          << pair.status();
    }
  }
}

TEST_F(TlsFiles, EncryptedKeyFailsWithAMessage) {
  ASSERT_TRUE(testing::WriteSelfSigned("t", cert_, key_, "P-256", "secret"));
  auto pair = LoadCertPair(cert_, key_);
  ASSERT_FALSE(pair.ok());
  EXPECT_NE(std::string(pair.status().message()).find("encrypted"), std::string::npos)
      << pair.status();
}

TEST_F(TlsFiles, SizeCapAndSpecialFiles) {
  EXPECT_FALSE(ReadFileCapped("/dev/zero", kMaxPemFileBytes).ok());
  EXPECT_NE(std::string(ReadFileCapped("/dev/zero", kMaxPemFileBytes).status().message())
                .find("not a regular file"),
            std::string::npos);
  const std::string big = (dir_ / "big.pem").string();
  { std::ofstream(big) << std::string(kMaxPemFileBytes + 1, 'A'); }
  auto r = ReadFileCapped(big, kMaxPemFileBytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("larger than"), std::string::npos) << r.status();
  ASSERT_TRUE(testing::WriteSelfSigned("t", cert_, key_));
  EXPECT_FALSE(LoadCertPair("/dev/zero", key_).ok());
  EXPECT_FALSE(LoadCertPair(cert_, big).ok());
  EXPECT_FALSE(ReadFileCapped((dir_ / "missing").string(), 10).ok());
  // Exactly at the cap is read whole.
  const std::string at = (dir_ / "at.pem").string();
  { std::ofstream(at) << std::string(1000, 'B'); }
  auto ok = ReadFileCapped(at, 1000);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 1000u);
}

TEST_F(TlsFiles, MismatchedKeyIsRefused) {
  ASSERT_TRUE(testing::WriteSelfSigned("a", cert_, key_));
  const std::string other_cert = (dir_ / "o.crt").string(), other_key = (dir_ / "o.key").string();
  ASSERT_TRUE(testing::WriteSelfSigned("b", other_cert, other_key));
  auto pair = LoadCertPair(cert_, other_key);
  ASSERT_FALSE(pair.ok());
  EXPECT_NE(std::string(pair.status().message()).find("does not match"), std::string::npos);
}

TEST(ServerContext, Tls12SuitesAreEcdheAead) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  ASSERT_TRUE(ConfigureServerContext(ctx).ok());
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
  STACK_OF(SSL_CIPHER)* ciphers = SSL_CTX_get_ciphers(ctx);
  int tls12 = 0;
  for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
    if (std::string(SSL_CIPHER_get_version(c)) == "TLSv1.3")
      continue;  // 1.3 suites: all AEAD + (EC)DHE
    ++tls12;
    SCOPED_TRACE(SSL_CIPHER_get_name(c));
    EXPECT_EQ(SSL_CIPHER_get_kx_nid(c), NID_kx_ecdhe);
    EXPECT_TRUE(SSL_CIPHER_is_aead(c));
  }
  EXPECT_GT(tls12, 0);
  SSL_CTX_free(ctx);
}

}  // namespace
}  // namespace hami::http
