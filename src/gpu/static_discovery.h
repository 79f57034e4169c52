#pragma once
// An in-memory DeviceDiscovery: devices and links are set by the owner, health changes are pushed
// with SetHealth. Thread-safe. Used by device plugin tests and benchmarks that need no NVML.
#include <map>

#include "common/mutex.h"
#include "gpu/discovery.h"

namespace hami::gpu {

class StaticDiscovery final : public DeviceDiscovery {
 public:
  explicit StaticDiscovery(std::vector<GpuInfo> devices, std::vector<GpuLink> links = {});
  ~StaticDiscovery() override;

  StatusOr<std::vector<GpuInfo>> ListDevices() override;
  StatusOr<std::vector<GpuLink>> Topology() override;
  StatusOr<std::unique_ptr<HealthWatch>> WatchHealth(HealthCallback cb) override;

  // Delivers a health event to every active watch (on the caller's thread).
  void SetHealth(const HealthEvent& event);
  void SetDevices(std::vector<GpuInfo> devices);
  // Makes ListDevices fail with `status` (ok = succeed again).
  void SetListError(Status status);

 private:
  class Watch;
  friend class Watch;
  void Unregister(int id);

  // Held while callbacks run so that a watch's destructor waits for a running callback.
  Mutex deliver_mu_;
  Mutex mu_ ABSL_ACQUIRED_AFTER(deliver_mu_);
  std::vector<GpuInfo> devices_ ABSL_GUARDED_BY(mu_);
  std::vector<GpuLink> links_ ABSL_GUARDED_BY(mu_);
  Status list_error_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, HealthCallback> callbacks_ ABSL_GUARDED_BY(mu_);
};

// Builds a GpuInfo the way tests read best: Gpu(0, "GPU-a", "Tesla T4", 15360).
GpuInfo MakeGpu(int index, std::string uuid, std::string model, int64_t memory_mib, int numa = 0);

}  // namespace hami::gpu
