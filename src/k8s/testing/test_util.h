#pragma once
// Helpers shared by the k8s tests that run against the fake API server.
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

namespace hami::k8s::testing {

// Polls `cond` until it holds or `timeout` passes; returns the last result. Used to wait for
// asynchronous effects (watch events, elections) without asserting on time.
inline bool Eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// A minimal pod object.
inline nlohmann::json MakePod(const std::string& ns, const std::string& name,
                              const std::string& node = "",
                              const nlohmann::json& labels = nlohmann::json::object()) {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
                        {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

inline nlohmann::json MakeNode(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "4"}}}}}};
}

}  // namespace hami::k8s::testing
