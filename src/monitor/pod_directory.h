#pragma once
// Pod UID -> namespace/name, for the labels of per-container metrics and for stale-region cleanup.
// Implementations: StaticPodDirectory (tests, benchmarks), K8sPodDirectory (informer over this
// node's pods, k8s_pod_directory.h).
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace hami::monitor {

struct PodName {
  std::string namespace_name;
  std::string name;
  bool operator==(const PodName&) const = default;
};

class PodDirectory {
 public:
  virtual ~PodDirectory() = default;
  // True when the view is complete, so that a UID missing from it belongs to a pod that is gone.
  // Cleanup deletes nothing while this is false (e.g. the API server is unreachable at start-up).
  virtual bool Synced() const = 0;
  virtual std::optional<PodName> Find(const std::string& pod_uid) const = 0;
};

// In-memory directory. Thread-safe.
class StaticPodDirectory final : public PodDirectory {
 public:
  explicit StaticPodDirectory(bool synced = true) : synced_(synced) {}
  void Set(const std::string& uid, PodName name) {
    MutexLock l(mu_);
    pods_[uid] = std::move(name);
  }
  void Remove(const std::string& uid) {
    MutexLock l(mu_);
    pods_.erase(uid);
  }
  void SetSynced(bool synced) {
    MutexLock l(mu_);
    synced_ = synced;
  }
  bool Synced() const override {
    MutexLock l(mu_);
    return synced_;
  }
  std::optional<PodName> Find(const std::string& uid) const override {
    MutexLock l(mu_);
    auto it = pods_.find(uid);
    if (it == pods_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable Mutex mu_;
  bool synced_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PodName> pods_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::monitor
