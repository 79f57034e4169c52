#pragma once
// The pure domain model shared by every layer: what a node has, what a pod asks for, what the
// scheduler decided. No I/O, no threads. Units: memory in MiB, cores in percent of one device
// (a device may register more than 100 cores when deviceCoreScaling > 1), CPU in milli-cores; all
// integers (docs/design.md#contracts).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hami::core {

// Vendor keyword of NVIDIA devices ("CommonWord" upstream); written in decision annotations.
inline constexpr const char kNvidiaVendor[] = "NVIDIA";

// One legal MIG placement of a profile on a GPU.
struct MigPlacement {
  int start = 0;
  int size = 0;
  bool operator==(const MigPlacement&) const = default;
};

struct MigProfile {
  std::string name;  // e.g. "1g.10gb"
  int64_t memory_mib = 0;
  int core = 0;
  int slice_count = 0;
  std::vector<MigPlacement> placements;
  bool operator==(const MigProfile&) const = default;
};

// One physical device as its node registers it (hami.io/node-<vendor>-register).
struct DeviceInfo {
  std::string uuid;        // "GPU-0fc3eda5-..."
  int index = 0;           // index on the node (NVML order)
  int count = 0;           // split count: the most tasks that may share the device
  int64_t devmem_mib = 0;  // after deviceMemoryScaling
  int devcore = 100;       // 100 * deviceCoreScaling
  std::string type;        // model, e.g. "NVIDIA-Tesla V100-PCIE-32GB"
  std::string vendor = kNvidiaVendor;
  int numa = 0;
  bool health = true;
  std::string mode;  // "hami-core" | "mig" | "mps" | "" (= hami-core)
  std::vector<MigProfile> mig_profiles;
  // The physical card this device is a part of, when a card registers as several devices (Vastai
  // die mode: the card's AIC id); "" = the device is a card of its own. Under the `mutex` policy a
  // used device makes its whole card busy.
  std::string card = {};
  bool operator==(const DeviceInfo&) const = default;
};

// What is in use on one device (sum over the pods placed on it, reservations included).
struct DeviceUsage {
  int used = 0;  // number of tasks (slots)
  int64_t usedmem_mib = 0;
  int usedcores = 0;
  uint32_t mig_slices = 0;  // MIG-mode devices: slices held by instances (bit i = slice i)
  bool operator==(const DeviceUsage&) const = default;
};

// A node as the scheduler sees it: allocatable CPU/memory and its registered devices.
struct NodeInfo {
  std::string name;
  int64_t cpu_milli = 0;   // allocatable; 0 = not tracked
  int64_t memory_mib = 0;  // allocatable; 0 = not tracked
  std::map<std::string, std::string> labels;
  std::vector<DeviceInfo> devices;
  // Pairwise link scores (hami.io/node-nvidia-score): uuid -> (uuid -> score).
  std::map<std::string, std::map<std::string, int>> link_scores;
  // UUIDs excluded from new allocations (hami.io/device-cordon).
  std::vector<std::string> cordoned;
};

// What one container asks of one vendor's devices, after defaulting
// (docs/upstream-contract.md#resource-model).
struct DeviceRequest {
  std::string vendor = kNvidiaVendor;
  int nums = 0;            // number of distinct physical devices
  int64_t memreq_mib = 0;  // per device; 0 when mem_percentage is used
  int mem_percentage = 0;  // 1..100 of the device's memory when memreq_mib == 0
  int coresreq = 0;        // per device, percent; 100 = exclusive card
  int priority = -1;       // nvidia.com/priority; -1 = not given
  bool operator==(const DeviceRequest&) const = default;
};

// Selection constraints from pod annotations (use/nouse type and UUID, numa-bind, policies).
struct DeviceSelectors {
  std::vector<std::string> use_types;  // case-insensitive substring of the model
  std::vector<std::string> nouse_types;
  std::vector<std::string> use_uuids;  // exact
  std::vector<std::string> nouse_uuids;
  std::string vgpu_mode;  // "", "hami-core", "mig"
  bool numa_bind = false;
  // nvidia.com/mig-profile-preference: MIG profile names ("4g.20gb") or slice classes ("4g"),
  // most preferred first; on a MIG-mode device these profiles are tried first (core/mig.h).
  std::vector<std::string> mig_profile_preference;
  bool operator==(const DeviceSelectors&) const = default;
};

enum class ContainerKind { kInit, kSidecar, kApp };

struct ContainerRequest {
  std::string name;
  ContainerKind kind = ContainerKind::kApp;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<DeviceRequest> devices;  // one entry per vendor it uses
};

struct ScoringWeights {
  int slot = 1;
  int core = 1;
  int memory = 1;
  bool operator==(const ScoringWeights&) const = default;
};

// A pod as the scheduler sees it.
struct PodRequest {
  std::string uid;
  std::string namespace_;
  std::string name;
  std::vector<ContainerRequest> containers;  // init and sidecar containers first, then app
  DeviceSelectors selectors;
  std::string node_policy;  // hami.io/node-scheduler-policy; "" = configured default
  std::string gpu_policy;   // hami.io/gpu-scheduler-policy; "" = configured default
  bool has_weights = false;
  ScoringWeights weights;  // hami.io/device-scoring-weights
  std::map<std::string, std::string> annotations;
  std::map<std::string, std::string> labels;
  bool HasDevices() const {
    for (const auto& c : containers)
      if (!c.devices.empty()) return true;
    return false;
  }
};

// One device granted to one container.
struct ContainerDevice {
  std::string uuid;
  std::string vendor = kNvidiaVendor;  // the "Type" field of the annotation
  int64_t usedmem_mib = 0;
  int usedcores = 0;
  int index = -1;  // device index on the node, when known (not encoded)
  // A MIG instance on a MIG-mode device (hami.io/vgpu-mig-allocations, core/mig.h): the profile
  // and the slices it takes; empty profile = not a MIG grant.
  std::string mig_profile = {};
  MigPlacement mig_placement = {};
  bool operator==(const ContainerDevice&) const = default;
};

// The decision for a pod: per container (same order as PodRequest::containers), its devices.
struct PodAllocation {
  std::string node;
  std::vector<std::vector<ContainerDevice>> containers;
  bool HasDevices() const {  // as PodRequest::HasDevices: some container was granted a device
    for (const auto& c : containers)
      if (!c.empty()) return true;
    return false;
  }
  bool operator==(const PodAllocation&) const = default;
};

}  // namespace hami::core
