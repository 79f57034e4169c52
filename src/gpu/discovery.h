#pragma once
// GPU discovery: what devices a node has, how they are linked, and whether they are healthy.
// Implementations: NvmlDiscovery (libnvidia-ml.so.1 via dlopen), NullDiscovery (no GPUs),
// StaticDiscovery (in-memory, for tests and benchmarks).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::gpu {

// Path between two GPUs through PCIe; values are NVML's nvmlGpuTopologyLevel_t.
enum class PcieLevel : int {
  kUnknown = -1,
  kInternal = 0,     // same board (multi-GPU board)
  kSingle = 10,      // one PCIe switch
  kMultiple = 20,    // several switches, no host bridge
  kHostBridge = 30,  // same host bridge
  kNode = 40,        // same NUMA node
  kSystem = 50,      // across NUMA nodes (SMP interconnect)
};
const char* PcieLevelName(PcieLevel level);

// One legal MIG placement: a run of memory slices.
struct MigPlacement {
  int start = 0;
  int size = 0;
  bool operator==(const MigPlacement&) const = default;
};

// A MIG GPU instance profile as NVML reports it for a GPU in MIG mode.
struct MigProfileInfo {
  std::string name;  // "1g.10gb"
  unsigned nvml_index =
      0;  // NVML_GPU_INSTANCE_PROFILE_* (what nvmlDeviceGetGpuInstanceProfileInfo takes)
  unsigned nvml_id = 0;  // the profile id the instance calls take
  int slices = 0;        // compute slices (sliceCount)
  int instances = 0;     // most instances of the profile at once
  int sms = 0;           // streaming multiprocessors
  int64_t memory_mib = 0;
  std::vector<MigPlacement> placements;
  bool operator==(const MigProfileInfo&) const = default;
};

struct GpuInfo {
  int index = 0;             // NVML index
  std::string uuid;          // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string model;         // NVML name, e.g. "Tesla V100-PCIE-32GB"
  int64_t memory_mib = 0;    // total framebuffer
  int numa_node = -1;        // -1: unknown or not a NUMA system
  std::string pci_bus_id;    // NVML busId, e.g. "00000000:3B:00.0"
  bool mig_enabled = false;  // current MIG mode
  // With MIG on: the profiles instances can be created with, in NVML's profile order, without the
  // "+me" media variants (NVML allows one of those per GPU, which placements alone cannot express).
  std::vector<MigProfileInfo> mig_profiles;
  bool operator==(const GpuInfo&) const = default;
};

// The link between GPUs a and b (NVML indexes, a < b).
struct GpuLink {
  int a = 0;
  int b = 0;
  int nvlinks = 0;                       // active NVLinks from a whose remote end is b
  PcieLevel pcie = PcieLevel::kUnknown;  // common PCIe ancestor
  bool operator==(const GpuLink&) const = default;
};

struct HealthEvent {
  std::string uuid;  // empty: every device on the node
  bool healthy = false;
  uint64_t xid = 0;    // the Xid that caused it, 0 when not an Xid
  std::string reason;  // human-readable
};
using HealthCallback = std::function<void(const HealthEvent&)>;

// A running health watch; destroying it stops the watch and joins its thread. No callback runs
// after the destructor returns.
class HealthWatch {
 public:
  virtual ~HealthWatch() = default;
};

class DeviceDiscovery {
 public:
  virtual ~DeviceDiscovery() = default;
  // All physical GPUs in index order.
  virtual StatusOr<std::vector<GpuInfo>> ListDevices() = 0;
  // One entry per unordered pair (a < b), in (a, b) order.
  virtual StatusOr<std::vector<GpuLink>> Topology() = 0;
  // Starts watching device health; `cb` runs on the watch's own thread whenever a device changes
  // health (an Xid critical error marks a device unhealthy).
  virtual StatusOr<std::unique_ptr<HealthWatch>> WatchHealth(HealthCallback cb) = 0;
};

// A MIG device: a GPU instance and the compute instance that spans it.
struct MigInstance {
  std::string profile;  // "1g.10gb"
  MigPlacement placement;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string uuid;  // "MIG-..."; empty for a GPU instance without a compute instance
  bool operator==(const MigInstance&) const = default;
};

// Creates and destroys MIG instances on GPUs in MIG mode (NvmlDiscovery implements it). Errors name
// the GPU, the profile, the placement and NVML's code.
class MigControl {
 public:
  virtual ~MigControl() = default;
  // Every GPU instance on the GPU (by id), with its first compute instance.
  virtual StatusOr<std::vector<MigInstance>> ListMigInstances(const std::string& gpu_uuid) = 0;
  // A GPU instance of `profile` at exactly `placement` plus one compute instance spanning it.
  // Nothing is left behind on failure. A placement the GPU does not list is InvalidArgument; one
  // an instance already covers is ResourceExhausted (NVML_ERROR_INSUFFICIENT_RESOURCES).
  virtual StatusOr<MigInstance> CreateMigInstance(const std::string& gpu_uuid,
                                                  const std::string& profile,
                                                  MigPlacement placement) = 0;
  // Destroys GPU instance `gpu_instance_id` and its compute instances; NotFound when it is gone.
  virtual Status DestroyMigInstance(const std::string& gpu_uuid, unsigned gpu_instance_id) = 0;
};

// No GPUs, no links, nothing to watch: the node has no NVIDIA driver.
class NullDiscovery final : public DeviceDiscovery {
 public:
  StatusOr<std::vector<GpuInfo>> ListDevices() override { return std::vector<GpuInfo>{}; }
  StatusOr<std::vector<GpuLink>> Topology() override { return std::vector<GpuLink>{}; }
  StatusOr<std::unique_ptr<HealthWatch>> WatchHealth(HealthCallback) override {
    return std::unique_ptr<HealthWatch>(std::make_unique<HealthWatch>());
  }
};

}  // namespace hami::gpu
