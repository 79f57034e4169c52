#pragma once
// The node's ResourceSlice (resource.k8s.io/v1) from its discovered GPUs: one device per GPU that
// many claims can share by consumable capacity
// (docs/dra.md#resourceslice-what-the-plugin-publishes). Pure: builds the object, publishes
// nothing.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/discovery.h"
#include "nlohmann/json.hpp"

namespace hami::dra {

class DraVendor;  // dra/vendor.h

// upstream HAMi-DRA's driver name and device type, so its DeviceClass and claims work unchanged.
inline constexpr char kDefaultDriverName[] = "hami-core-gpu.project-hami.io";
inline constexpr char kDeviceType[] = "hami-gpu";
inline constexpr int64_t kMiB = int64_t{1} << 20;

// What one published device offers, as the driver accounts it (memory already scaled).
struct DeviceCapacity {
  std::string name;  // "gpu-<NVML index>"
  std::string uuid;
  int index = 0;  // NVML index (the CUDA order inside a container)
  int64_t memory_mib = 0;
  int cores = 100;
  bool operator==(const DeviceCapacity&) const = default;
};

// Attributes NVML knows besides gpu::GpuInfo (left out of the device when empty).
struct GpuExtras {
  std::string architecture;             // "Hopper"
  std::string cuda_compute_capability;  // "9.0" (published as semver "9.0.0")
  std::string driver_version;           // "550.54.15"
  std::string pcie_root;                // "pci0000:3a"
};

struct SliceOptions {
  std::string driver = kDefaultDriverName;
  std::string node_name;
  std::string node_uid;  // the Node's metadata.uid, for the ownerReference
  int64_t generation = 1;
  double memory_scaling = 1.0;  // deviceMemoryScaling: published memory = physical x scaling
  // Without consumable capacity (DRAConsumableCapacity off): exclusive devices, no policies.
  bool shared = true;
  const DraVendor* vendor = nullptr;  // device names, type and attributes; null: NVIDIA's
};

// The vendor's device name (null: NVIDIA's "gpu-<index>", stable across restarts: NVML index
// order is the PCI order).
std::string DeviceName(const gpu::GpuInfo& gpu, const DraVendor* vendor = nullptr);
// The accounting view of each GPU (scaled memory, 100 cores). Errors: a GPU without memory, a
// duplicate index or UUID.
StatusOr<std::vector<DeviceCapacity>> DeviceCapacities(const std::vector<gpu::GpuInfo>& gpus,
                                                       double memory_scaling,
                                                       const DraVendor* vendor = nullptr);
// "<node>-<driver, dots as dashes>": the slice's stable name.
std::string SliceName(const std::string& node_name, const std::string& driver);
// NVML's "00000000:3B:00.0" as Kubernetes' pciBusID "0000:3b:00.0"; "" when it does not parse.
std::string NormalizePciBusId(const std::string& nvml_bus_id);

// The ResourceSlice object. Errors: no node name or uid, a driver name that is not a DNS
// subdomain of at most 63 characters, more than 128 GPUs, the errors of DeviceCapacities.
StatusOr<nlohmann::json> BuildResourceSlice(const std::vector<gpu::GpuInfo>& gpus,
                                            const std::map<std::string, GpuExtras>& extras,
                                            const SliceOptions& options);

}  // namespace hami::dra
