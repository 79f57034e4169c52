#pragma once
// The health of the GPUs `hami dra-plugin` publishes, for the kubelet's resource health stream
// (DRAResourceHealth.NodeWatchResources, docs/dra.md#health): every device starts healthy; an NVML
// health event (an Xid critical error) marks one device, or every device, unhealthy until an event
// says it recovered. Streams wait for a change or resend the full list periodically, so the
// kubelet's per-device timeout never lapses on a quiet node. Thread-safe.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "gpu/discovery.h"

namespace hami::dra {

// How long the kubelet may go without an update of a device before it shows Unknown; the
// streams resend the list at a third of it.
inline constexpr int64_t kHealthTimeoutSeconds = 60;

class HealthBoard {
 public:
  struct Device {
    std::string name;  // the published device name ("gpu-<index>")
    std::string uuid;
  };
  struct Entry {
    std::string device;
    bool healthy = true;
    int64_t updated_unix = 0;  // when this device last changed (or was first seen)
    std::string message;       // why it is unhealthy; empty when healthy
    bool operator==(const Entry&) const = default;
  };

  HealthBoard(std::string pool, std::vector<Device> devices);

  const std::string& pool() const { return pool_; }
  // Applies an NVML health event (an empty uuid: every device); returns whether anything changed.
  // Unknown uuids change nothing.
  bool Apply(const gpu::HealthEvent& ev);
  // The full list, in published order, and the version it belongs to.
  std::vector<Entry> Snapshot(uint64_t* version) const;
  // Blocks until the version is past `seen`, `timeout` passed, or Shutdown; returns the version.
  uint64_t WaitChange(uint64_t seen, std::chrono::milliseconds timeout) const;
  // Wakes every waiter; WaitChange returns at once from now on.
  void Shutdown();
  bool shut_down() const;

 private:
  const std::string pool_;
  const std::vector<Device> devices_;
  mutable Mutex mu_;
  mutable CondVar cv_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hami::dra
