#pragma once
// Builders of ResourceClaim objects as the API server returns them after allocation, for the DRA
// tests: MakeClaim("ns", "c1", "uid-1").Result("gpu", "gpu-0", "4Gi", "30").Json().
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "dra/driver.h"
#include "dra/slice.h"
#include "nlohmann/json.hpp"

namespace hami::dra::testing {

inline constexpr char kNode[] = "node-a";

class ClaimBuilder {
 public:
  ClaimBuilder(std::string ns, std::string name, std::string uid) {
    j_ = {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
          {"spec", {{"devices", {{"requests", nlohmann::json::array()}}}}},
          {"status", {{"allocation", {{"devices", {{"results", nlohmann::json::array()}}}}}}}};
  }
  // A shared result with consumedCapacity (memory and cores as Quantity text; "" = left out).
  ClaimBuilder& Result(const std::string& request, const std::string& device,
                       const std::string& memory, const std::string& cores,
                       const std::string& pool = kNode,
                       const std::string& driver = kDefaultDriverName) {
    nlohmann::json r = {{"request", request},
                        {"driver", driver},
                        {"pool", pool},
                        {"device", device},
                        {"shareID", StrCat("share-", ++n_)}};
    nlohmann::json consumed = nlohmann::json::object();
    if (!memory.empty()) consumed["memory"] = memory;
    if (!cores.empty()) consumed["cores"] = cores;
    r["consumedCapacity"] = consumed;
    Results().push_back(r);
    return *this;
  }
  // An exclusive result (consumable capacity off: no shareID, no consumedCapacity).
  ClaimBuilder& Whole(const std::string& request, const std::string& device) {
    Results().push_back({{"request", request},
                         {"driver", kDefaultDriverName},
                         {"pool", kNode},
                         {"device", device}});
    return *this;
  }
  ClaimBuilder& Unallocated() {
    j_["status"].erase("allocation");
    return *this;
  }
  const nlohmann::json& Json() const { return j_; }

 private:
  nlohmann::json& Results() { return j_["status"]["allocation"]["devices"]["results"]; }
  nlohmann::json j_;
  int n_ = 0;
};

inline ClaimBuilder MakeClaim(std::string ns, std::string name, std::string uid) {
  return ClaimBuilder(std::move(ns), std::move(name), std::move(uid));
}

// A CDI spec's first device's environment, by name.
inline std::map<std::string, std::string> SpecEnv(const nlohmann::json& spec) {
  std::map<std::string, std::string> env;
  for (const auto& e : spec["devices"][0]["containerEdits"]["env"]) {
    const std::string kv = e.get<std::string>();
    env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  return env;
}

// Two GPUs of 16 GiB in NVML index order.
inline std::vector<DeviceCapacity> TwoGpus() {
  return {{"gpu-0", "GPU-0", 0, 16384, 100}, {"gpu-1", "GPU-1", 1, 16384, 100}};
}

// A temporary directory removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/hami-dra-XXXXXX";
    const char* p = ::mkdtemp(t);
    path_ = p != nullptr ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Claims by "ns/name", as a fake API server would serve them; Delete makes a claim NotFound.
class MapClaims final : public ClaimSource {
 public:
  void Put(const nlohmann::json& claim) {
    MutexLock l(mu_);
    claims_[Key(claim["metadata"]["namespace"], claim["metadata"]["name"])] = claim;
  }
  void Delete(const std::string& ns, const std::string& name) {
    MutexLock l(mu_);
    claims_.erase(Key(ns, name));
  }
  StatusOr<nlohmann::json> GetClaim(const std::string& ns, const std::string& name) override {
    MutexLock l(mu_);
    auto it = claims_.find(Key(ns, name));
    if (it == claims_.end()) return NotFound("resourceclaims \"", name, "\" not found");
    ++gets_;
    return it->second;
  }
  void PutPod(const nlohmann::json& pod) {
    MutexLock l(mu_);
    pods_[Key(pod["metadata"]["namespace"], pod["metadata"]["name"])] = pod;
  }
  StatusOr<nlohmann::json> GetPod(const std::string& ns, const std::string& name) override {
    MutexLock l(mu_);
    auto it = pods_.find(Key(ns, name));
    if (it == pods_.end()) return NotFound("pods \"", name, "\" not found");
    return it->second;
  }
  int gets() {
    MutexLock l(mu_);
    return gets_;
  }
  // Records the entries written (the last per claim uid) and counts the writes.
  Status WriteDeviceStatus(const ClaimRef& ref, const std::string& /*driver*/,
                           const std::string& /*pool*/, const nlohmann::json& entries) override {
    MutexLock l(mu_);
    ++status_writes_;
    statuses_[ref.uid] = entries;
    return OkStatus();
  }
  int status_writes() {
    MutexLock l(mu_);
    return status_writes_;
  }
  nlohmann::json LastStatus(const std::string& uid) {
    MutexLock l(mu_);
    auto it = statuses_.find(uid);
    return it == statuses_.end() ? nlohmann::json() : it->second;
  }

 private:
  static std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }
  Mutex mu_;
  std::map<std::string, nlohmann::json> claims_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::json> pods_ ABSL_GUARDED_BY(mu_);
  int gets_ ABSL_GUARDED_BY(mu_) = 0;
  int status_writes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, nlohmann::json> statuses_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::dra::testing
