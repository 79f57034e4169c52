#pragma once
// The fixture of the wire-level tests of the fake API server: a started server and a raw client
// (no rate limit, no retries) that returns what came back.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"

namespace hami::k8s::testing {

class FakeApiServerFixture : public ::testing::Test {
 protected:
  void StartServer(const FakeApiServerOptions& o) {
    fake_ = std::make_unique<FakeApiServer>(o);
    ASSERT_TRUE(fake_->Start().ok());
    ClientConfig cfg;
    cfg.server = fake_->url();
    cfg.qps = 0;
    cfg.max_retries = 0;
    client_ = std::move(*Client::Create(cfg));
  }
  // Raw request; returns {code, parsed body}.
  std::pair<int, nlohmann::json> Do(const std::string& method, const std::string& path,
                                    const std::string& body = "",
                                    const std::string& ct = "application/json") {
    auto r = client_->Request(method, path, body, body.empty() ? "" : ct);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {0, nullptr};
    return {r->code, nlohmann::json::parse(r->body, nullptr, false)};
  }
  std::unique_ptr<FakeApiServer> fake_;
  std::unique_ptr<Client> client_;
};

}  // namespace hami::k8s::testing
