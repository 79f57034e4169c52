#pragma once
// GpuTelemetry over NVML. The inventory (index, UUID, model, total memory) comes from the node's
// gpu::DeviceDiscovery; the numbers that change (memory used, utilisation, per-process SM use) are
// not part of that interface, so this file resolves the few NVML calls it needs itself, with dlopen
// of the same library (normal search order: tests point LD_LIBRARY_PATH at the fake
// libnvidia-ml.so.1).
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "gpu/discovery.h"
#include "monitor/gpu_telemetry.h"

namespace hami::monitor {

class NvmlTelemetry final : public GpuTelemetry {
 public:
  // `inventory` must outlive this object. Errors name the library or the missing symbol.
  static StatusOr<std::unique_ptr<NvmlTelemetry>> Open(
      gpu::DeviceDiscovery& inventory, const std::string& library = "libnvidia-ml.so.1");
  ~NvmlTelemetry() override;

  StatusOr<std::vector<HostGpu>> Devices() override;
  StatusOr<std::vector<ProcessUtil>> ProcessUtilization(const std::string& uuid,
                                                        int64_t window_ms) override;
  // As the driver hands them out, with `since_us` its lastSeenTimeStamp.
  StatusOr<std::vector<ProcessSample>> ProcessSamples(const std::string& uuid, uint64_t since_us,
                                                      uint64_t now_us) override;

  struct Api;

 private:
  NvmlTelemetry(gpu::DeviceDiscovery& inventory, void* handle, std::unique_ptr<Api> api);
  StatusOr<std::vector<gpu::GpuInfo>> Inventory();

  gpu::DeviceDiscovery& inventory_;
  void* handle_;
  std::unique_ptr<Api> api_;
  Mutex mu_;
  std::vector<gpu::GpuInfo> cached_
      ABSL_GUARDED_BY(mu_);  // GPUs do not come and go while the driver is loaded
};

}  // namespace hami::monitor
