#pragma once
// DeviceDiscovery over NVML. libnvidia-ml.so.1 is dlopen()ed at run time with the normal library
// search (LD_LIBRARY_PATH first), so a host without the driver still starts, and tests load the
// fake from src/fakes. Versioned symbols (nvmlInit_v2, ...) are preferred, with the old names as
// fallback.
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpu/discovery.h"
#include "gpu/nvml_api.h"

namespace hami::gpu {

struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";
  // Root of sysfs; NUMA falls back to <sysfs_root>/bus/pci/devices/<bus id>/numa_node.
  std::string sysfs_root = "/sys";
  // Xids caused by applications, not the device (NVIDIA's device plugin skips the same set).
  std::set<uint64_t> ignored_xids = {13, 31, 43, 45, 68, 109};
  // How long one nvmlEventSetWait blocks; bounds how fast a watch stops.
  unsigned event_wait_ms = 200;
};

class NvmlDiscovery final : public DeviceDiscovery, public MigControl {
 public:
  // Loads the library, resolves symbols and calls nvmlInit. Errors name the library or symbol.
  static StatusOr<std::unique_ptr<NvmlDiscovery>> Open(NvmlOptions options = {});
  ~NvmlDiscovery() override;

  StatusOr<std::vector<GpuInfo>> ListDevices() override;
  StatusOr<std::vector<GpuLink>> Topology() override;
  StatusOr<std::unique_ptr<HealthWatch>> WatchHealth(HealthCallback cb) override;

  // MIG (FailedPrecondition when the library has no MIG API).
  StatusOr<std::vector<MigInstance>> ListMigInstances(const std::string& gpu_uuid) override;
  StatusOr<MigInstance> CreateMigInstance(const std::string& gpu_uuid, const std::string& profile,
                                          MigPlacement placement) override;
  Status DestroyMigInstance(const std::string& gpu_uuid, unsigned gpu_instance_id) override;

  struct Api;  // resolved entry points (nvml_discovery.cc)

 private:
  class Watch;
  NvmlDiscovery(NvmlOptions options, std::unique_ptr<Api> api);
  Status Check(nvml::Return r, const char* what) const;
  StatusOr<std::vector<nvml::Device>> Handles();
  int NumaNode(nvml::Device d, const std::string& bus_id) const;
  // MIG helpers (nvml_discovery.cc).
  bool HasMigApi() const;
  StatusOr<nvml::Device> ByUuid(const std::string& gpu_uuid) const;
  std::vector<MigProfileInfo> MigProfiles(nvml::Device d, bool schedulable_only) const;
  StatusOr<std::vector<nvml::GpuInstance>> GpuInstances(nvml::Device d,
                                                        const MigProfileInfo& p) const;
  StatusOr<MigInstance> Describe(nvml::Device d, nvml::GpuInstance gi,
                                 const MigProfileInfo& p) const;
  std::vector<nvml::ComputeInstance> ComputeInstances(nvml::GpuInstance gi) const;
  std::string MigDeviceUuid(nvml::Device d, unsigned gi_id, unsigned ci_id) const;

  NvmlOptions options_;
  std::unique_ptr<Api> api_;
};

}  // namespace hami::gpu
