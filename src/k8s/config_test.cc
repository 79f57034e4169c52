#include "k8s/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"

namespace hami::k8s {
namespace {

const char kCa[] = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n";
const char kCert[] = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n";
const char kKey[] = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n";

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hami_kubeconfig_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_ / "certs");
    Write("certs/ca.crt", kCa);
    Write("certs/client.crt", kCert);
    Write("certs/client.key", kKey);
    Write("token", "file-token\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  std::string Path(const std::string& rel) const { return (dir_ / rel).string(); }
  std::filesystem::path dir_;
};

std::string B64(const std::string& s) {
  return absl::Base64Escape(s);
}

std::string Config(const std::string& cluster, const std::string& user,
                   const std::string& ctx_extra = "",
                   const std::string& current = "current-context: dev\n") {
  return "apiVersion: v1\nkind: Config\n" + current + "clusters:\n- name: c1\n  cluster:\n" +
         cluster + "users:\n- name: u1\n  user:\n" + user +
         "contexts:\n- name: dev\n  context:\n    cluster: c1\n    user: u1\n" + ctx_extra +
         "- name: other\n  context:\n    cluster: c1\n    user: u1\n    namespace: other-ns\n";
}

TEST_F(KubeconfigTest, GoodConfigs) {
  struct Case {
    std::string name, yaml, context;
    std::string server, token, ns, ca, cert, key;
    bool insecure = false;
  };
  const std::string server = "    server: https://10.0.0.1:6443\n";
  std::vector<Case> cases = {
      {"token and CA data",
       Config(server + "    certificate-authority-data: " + B64(kCa) + "\n", "    token: abc\n"),
       "", "https://10.0.0.1:6443", "abc", "default", kCa, "", ""},
      {"relative cert files",
       Config(server + "    certificate-authority: certs/ca.crt\n",
              "    client-certificate: certs/client.crt\n    client-key: certs/client.key\n"),
       "", "https://10.0.0.1:6443", "", "default", kCa, kCert, kKey},
      {"cert data wins over file",
       Config(server, "    client-certificate-data: " + B64(kCert) +
                          "\n    client-certificate: missing.crt\n    client-key-data: " +
                          B64(kKey) + "\n"),
       "", "https://10.0.0.1:6443", "", "default", "", kCert, kKey},
      {"insecure with namespace",
       Config(server + "    insecure-skip-tls-verify: true\n", "    token: t\n",
              "    namespace: gpu\n"),
       "", "https://10.0.0.1:6443", "t", "gpu", "", "", "", true},
      {"explicit context", Config(server, "    token: t\n"), "other", "https://10.0.0.1:6443", "t",
       "other-ns", "", "", ""},
      {"token file", Config(server, "    tokenFile: token\n"), "", "https://10.0.0.1:6443",
       "file-token", "default", "", "", ""},
      {"trailing slash trimmed", Config("    server: http://127.0.0.1:8080/\n", "    token: t\n"),
       "", "http://127.0.0.1:8080", "t", "default", "", "", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Write("config", c.yaml);
    auto cfg = LoadKubeconfig(Path("config"), c.context);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_EQ(cfg->server, c.server);
    EXPECT_EQ(cfg->bearer_token, c.token);
    EXPECT_EQ(cfg->namespace_name, c.ns);
    EXPECT_EQ(cfg->ca_pem, c.ca);
    EXPECT_EQ(cfg->client_cert_pem, c.cert);
    EXPECT_EQ(cfg->client_key_pem, c.key);
    EXPECT_EQ(cfg->insecure_skip_tls_verify, c.insecure);
  }
}

TEST_F(KubeconfigTest, BadConfigsSayWhatToFix) {
  struct Case {
    std::string name, yaml, context;
    std::vector<std::string> message_parts;
  };
  const std::string server = "    server: https://10.0.0.1:6443\n";
  std::vector<Case> cases = {
      {"not yaml", "clusters: [\n  - {name: x\n", "", {"line ", "not valid YAML"}},
      {"not a map", "- a\n- b\n", "", {"expected a YAML map"}},
      {"wrong kind", "kind: Pod\n", "", {"kind", "expected Config"}},
      {"no current context",
       Config(server, "    token: t\n", "", ""),
       "",
       {"no current-context", "use-context"}},
      {"unknown context",
       Config(server, "    token: t\n"),
       "prod",
       {"context \"prod\" not found", "available: dev, other"}},
      {"missing server",
       Config("    insecure-skip-tls-verify: true\n", "    token: t\n"),
       "",
       {"clusters[c1].cluster.server", "missing"}},
      {"bad scheme",
       Config("    server: 10.0.0.1:6443\n", "    token: t\n"),
       "",
       {"server", "must start with https://"}},
      {"bad base64",
       Config(server + "    certificate-authority-data: '!!!'\n", "    token: t\n"),
       "",
       {"line 8", "certificate-authority-data", "not valid base64"}},
      {"data not PEM",
       Config(server + "    certificate-authority-data: " + B64("hello") + "\n", "    token: t\n"),
       "",
       {"certificate-authority-data", "not PEM"}},
      {"missing CA file",
       Config(server + "    certificate-authority: nope/ca.crt\n", "    token: t\n"),
       "",
       {"certificate-authority", "nope/ca.crt"}},
      {"cert without key",
       Config(server, "    client-certificate: certs/client.crt\n"),
       "",
       {"client-key", "needs both"}},
      {"exec only",
       Config(server, "    exec:\n      command: aws\n"),
       "",
       {"users[u1].user.exec", "not supported"}},
      {"insecure and CA",
       Config(
           server + "    insecure-skip-tls-verify: true\n    certificate-authority: certs/ca.crt\n",
           "    token: t\n"),
       "",
       {"insecure-skip-tls-verify", "cannot be combined"}},
      {"bad bool",
       Config(server + "    insecure-skip-tls-verify: maybe\n", "    token: t\n"),
       "",
       {"expected true or false", "maybe"}},
      {"clusters not a list",
       "kind: Config\ncurrent-context: dev\ncontexts:\n- name: dev\n  context: {cluster: "
       "c1}\nclusters: 5\n",
       "",
       {"clusters", "expected a list"}},
      {"deep nesting", std::string(200, '['), "", {"nested deeper"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Write("config", c.yaml);
    auto cfg = LoadKubeconfig(Path("config"), c.context);
    ASSERT_FALSE(cfg.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(cfg.status())) << cfg.status();
    const std::string msg(cfg.status().message());
    EXPECT_NE(msg.find(Path("config")), std::string::npos) << msg;
    for (const auto& part : c.message_parts)
      EXPECT_NE(msg.find(part), std::string::npos) << "want \"" << part << "\" in: " << msg;
  }
}

TEST_F(KubeconfigTest, MissingFileIsNotFound) {
  auto cfg = LoadKubeconfig(Path("does-not-exist"));
  ASSERT_FALSE(cfg.ok());
  EXPECT_TRUE(absl::IsNotFound(cfg.status()));
  EXPECT_NE(std::string(cfg.status().message()).find("does-not-exist"), std::string::npos);
}

TEST_F(KubeconfigTest, InCluster) {
  Write("ca.crt", kCa);
  Write("namespace", "hami-system\n");
  struct Case {
    std::string host, port, want_server;
  };
  for (const Case& c : std::vector<Case>{{"10.96.0.1", "443", "https://10.96.0.1:443"},
                                         {"fd00::1", "6443", "https://[fd00::1]:6443"}}) {
    auto cfg = InClusterConfigFrom(c.host, c.port, dir_.string());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_EQ(cfg->server, c.want_server);
    EXPECT_EQ(cfg->bearer_token, "file-token");
    EXPECT_EQ(cfg->token_file, Path("token"));
    EXPECT_EQ(cfg->ca_pem, kCa);
    EXPECT_EQ(cfg->namespace_name, "hami-system");
  }
  auto missing_env = InClusterConfigFrom("", "", dir_.string());
  EXPECT_TRUE(absl::IsFailedPrecondition(missing_env.status()));
  auto missing_token = InClusterConfigFrom("10.0.0.1", "443", Path("certs"));
  ASSERT_FALSE(missing_token.ok());
  EXPECT_NE(std::string(missing_token.status().message()).find("token"), std::string::npos);
}

}  // namespace
}  // namespace hami::k8s
