// The device plugin's /refit client against an HTTPS server (cpp-httplib) standing in for the
// scheduler: what it sends (upstream's JSON, the token file's token as Bearer), how it reads each
// reply, and what it refuses to do (plain HTTP, an unverified certificate).
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "deviceplugin/refit_client.h"
#include "http/testing/self_signed.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

core::RefitRequest Request() {
  core::RefitRequest r;
  r.pod_uid = "u-1";
  r.pod_namespace = "default";
  r.pod_name = "p";
  r.node_name = "node-1";
  r.container_index = 0;
  r.container_name = "main";
  r.device_type = "NVIDIA";
  r.allowed_device_uuids = {"GPU-b"};
  return r;
}

class RefitClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-refit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cert_ = dir_ + "/tls.crt";
    key_ = dir_ + "/tls.key";
    token_ = dir_ + "/token";
    ASSERT_TRUE(http::testing::WriteSelfSigned("localhost", cert_, key_));
    std::ofstream(token_) << "tok-1\n";
    server_ = std::make_unique<httplib::SSLServer>(cert_.c_str(), key_.c_str());
    ASSERT_TRUE(server_->is_valid());
    server_->Post("/refit", [this](const httplib::Request& q, httplib::Response& r) {
      seen_auth_ = q.get_header_value("Authorization");
      seen_body_ = q.body;
      r.status = status_;
      r.set_content(reply_, "application/json");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
    fs::remove_all(dir_);
  }
  SchedulerRefitOptions Options() {
    SchedulerRefitOptions o;
    o.endpoint = "https://localhost:" + std::to_string(port_) + "/";
    o.ca_pem = Slurp(cert_);
    o.token_file = token_;
    return o;
  }
  std::string dir_, cert_, key_, token_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  int port_ = 0;
  int status_ = 200;
  std::string reply_ = R"({"succeeded":true,"containerDevices":"GPU-b,NVIDIA,20000,30:"})";
  std::string seen_auth_, seen_body_;
};

TEST_F(RefitClientTest, SendsTheRequestWithThePodsToken) {
  auto client = NewSchedulerRefitClient(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  auto moved = (*client)->Refit(Request());
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(moved->size(), 1u);
  EXPECT_EQ((*moved)[0].uuid, "GPU-b");
  EXPECT_EQ((*moved)[0].usedmem_mib, 20000);
  EXPECT_EQ(seen_auth_, "Bearer tok-1");
  auto body = core::ParseRefitRequest(seen_body_);
  ASSERT_TRUE(body.ok()) << seen_body_;
  EXPECT_EQ(*body, Request());
}

TEST_F(RefitClientTest, ReadsEveryReply) {
  auto client = NewSchedulerRefitClient(Options());
  ASSERT_TRUE(client.ok()) << client.status();
  const struct {
    int status;
    const char* body;
    const char* want;  // in the error
  } cases[] = {
      {200, R"({"succeeded":false,"failureReason":"no allowed device fits"})",
       "scheduler refused refit: no allowed device fits"},
      {403, R"({"succeeded":false,"failureReason":"refit caller refused: not a device plugin"})",
       "status 403: refit caller refused"},
      {503, "upstream connect error", "status 503"},
      {200, "{not-json", "refit response"},
      {200, R"({"succeeded":true})", "no devices"},
      {200, R"({"succeeded":true,"containerDevices":"GPU-b,NVIDIA,x,1:"})", "GPU-b"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    status_ = c.status;
    reply_ = c.body;
    auto moved = (*client)->Refit(Request());
    ASSERT_FALSE(moved.ok());
    EXPECT_NE(std::string(moved.status().message()).find(c.want), std::string::npos)
        << moved.status();
  }
}

TEST_F(RefitClientTest, NeverSendsTheTokenUnverified) {
  SchedulerRefitOptions plain = Options();
  plain.endpoint = "http://localhost:" + std::to_string(port_);
  auto refused = NewSchedulerRefitClient(plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("is not https://"), std::string::npos);
  // A certificate that does not chain to the configured CA: the call fails before a byte is sent.
  SchedulerRefitOptions other = Options();
  ASSERT_TRUE(http::testing::WriteSelfSigned("localhost", dir_ + "/o.crt", dir_ + "/o.key"));
  other.ca_pem = Slurp(dir_ + "/o.crt");
  auto client = NewSchedulerRefitClient(other);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_FALSE((*client)->Refit(Request()).ok());
  EXPECT_TRUE(seen_auth_.empty());
}

}  // namespace
}  // namespace hami::deviceplugin
