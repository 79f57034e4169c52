#pragma once
// The scheduler's view of one node: its registration (core::NodeInfo), what is in use on each
// device and of the node's CPU/memory, and derived per-node facts that policies read on every
// decision (free milli per GPU, fully free GPUs, pod classes). Every update touches O(devices of
// the node).
//
// "Milli" is the policy-neutral size of a GPU share: 1000 = a whole device. A device's used milli
// is the larger of its memory and core fractions (a device with all slots taken counts as full), so
// the FGD-style policies work unchanged on real HAMi devices and are exact in the simulator.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model.h"

namespace hami::scheduler {

inline constexpr int kMilliPerGpu = 1000;

// Pod classes for class-aware policies: 0 = shares one GPU (< 1000 milli), k = k whole GPUs
// (k = 1..8), 9 = more than 8 GPUs. CPU-only pods have no class.
inline constexpr int kPodClasses = 10;
inline constexpr int kNoPodClass = -1;

// The fields of a device the decision path reads, packed together (DeviceInfo also carries strings
// and MIG tables; reading those for every device of every node costs cache misses).
struct DeviceCaps {
  int64_t devmem_mib = 0;
  int count = 0;
  int devcore = 0;
  int numa = 0;
  bool health = true;
  bool cordoned = false;
  bool mig = false;  // MIG mode: every grant is a MIG instance (core/mig.h)
};

// Milli of a request of (mem MiB, cores %) on `dev`, rounded up.
int RequestMilli(const core::DeviceInfo& dev, int64_t mem_mib, int cores);
int RequestMilli(const DeviceCaps& dev, int64_t mem_mib, int cores);
// Free milli of a device given its usage (0 when its slots are exhausted).
int FreeMilli(const core::DeviceInfo& dev, const core::DeviceUsage& usage);

// What one pod adds to one device (effective usage: init containers already collapsed).
struct DeviceDelta {
  int device = -1;  // index into NodeInfo::devices
  int slots = 0;
  int64_t mem_mib = 0;
  int cores = 0;
  uint32_t mig_slices = 0;  // MIG slices taken (core::MigSliceMask)
  int mig_profile = -1;     // per-container grants: index into DeviceInfo::mig_profiles
  // Grants of the pod on the device without a MIG instance (no MIG profile). On a MIG-mode device
  // such a grant blocks the device (NodeState::plain_on_mig).
  int plain_grants = 0;
  bool operator==(const DeviceDelta&) const = default;
};

// What one pod adds to one node.
struct PodDelta {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<DeviceDelta> devices;
  int pod_class = kNoPodClass;
};

// What a decision can read about a node without its lock (ClusterCache keeps one per node in a
// contiguous array, published with a sequence lock): enough for a quick reject and for a policy's
// upper bound on the node's score (NodeScorer::UpperBound). Usage-dependent fields follow
// NodeState::Apply; the rest are fixed while the node's registration is.
struct NodeSummary {
  // Usage-dependent.
  int64_t cpu_free = 0, mem_free = 0;  // NodeState::cpu_free() / mem_free()
  int64_t sum_used = 0, sum_usedcores = 0, sum_usedmem = 0;
  int64_t free_milli_total = 0;
  int64_t max_free_mem =
      0;  // largest devmem - usedmem over usable devices (healthy, not cordoned, a slot left)
  int max_free_cores = 0;  // largest devcore - usedcores over usable devices
  int usable = 0;          // usable devices
  int max_free_milli = 0;  // largest free_milli over all devices
  int fully_free = 0;      // NodeState::fully_free
  int last_slot =
      0;  // usable devices with exactly one slot left (their free milli drops to 0 when taken)
  // Free milli of the usable devices, ascending, when there are at most kFreeLevels of them.
  static constexpr int kFreeLevels = 8;
  std::array<int16_t, kFreeLevels> free_levels{};
  // The least free milli >= f among the usable devices, or f when unknown (more than kFreeLevels
  // usable devices), or -1 when none.
  int LeastFreeAtLeast(int f) const {
    if (usable > kFreeLevels) return f;
    for (int i = 0; i < usable; ++i)
      if (free_levels[i] >= f) return free_levels[i];
    return -1;
  }
  // Fixed by the registration.
  int gpus = 0;
  bool track_cpu = false, track_mem = false;  // info.cpu_milli > 0, info.memory_mib > 0
  int64_t total_count = 0, total_devcore = 0, total_devmem = 0;
  int64_t min_devmem = 0, max_devmem = 0;  // over the devices (0 when none)
  int mig_gpus = 0;  // devices in MIG mode (one may take several instances of one request)
  int min_devcore = 0, max_devcore = 0;
  // Identity of the node's device kind when every device has the same vendor, type, memory and
  // cores (ClusterCache interns kinds; -1 when mixed or no devices), and one such device (valid
  // while the caller holds the cache's view).
  int kind = -1;
  const core::DeviceInfo* kind_device = nullptr;
};

// GPUs per device type over every node of a cluster (ClusterCache::gpu_capacity).
using GpuCapacity = std::map<std::string, int64_t>;

struct NodeState {
  core::NodeInfo info;
  std::vector<core::DeviceUsage> usage;  // parallel to info.devices
  std::vector<char> cordoned;            // parallel to info.devices
  std::vector<DeviceCaps> caps;          // parallel to info.devices
  // Parallel to info.devices: on a MIG-mode device, the grants without a MIG instance that pods
  // hold (a decision whose hami.io/vgpu-mig-allocations entry is missing, e.g. one written by an
  // older HAMi). While above 0 the device takes nothing (fail closed, as upstream: which slices
  // such an instance holds is unknown, so no placement can be known free). A count, not a flag:
  // the device opens again only when the last such grant has left.
  std::vector<int> plain_on_mig;
  int64_t cpu_used = 0;
  int64_t mem_used = 0;
  int pods = 0;

  // Derived, kept current by Apply().
  std::vector<int> free_milli;  // per device, 0..1000
  int64_t free_milli_total = 0;
  int fully_free = 0;                          // devices with free_milli == 1000
  std::array<int, kPodClasses> class_count{};  // GPU pods on the node per class
  int classes_present = 0;                     // number of classes with class_count > 0
  // The vendor of every device when they all share one (the usual case), else empty.
  std::string uniform_vendor;
  // Sums over the node's devices (capacity and usage), for node-level scores.
  int64_t total_count = 0, total_devcore = 0, total_devmem = 0;
  int64_t sum_used = 0, sum_usedcores = 0, sum_usedmem = 0;

  // Builds the state of a node with no pods.
  static NodeState Make(core::NodeInfo info);

  int gpus() const { return static_cast<int>(info.devices.size()); }
  // Whether device `d` can take a grant at all: healthy, not cordoned, and not a MIG-mode device
  // blocked by a grant without its MIG instance (plain_on_mig). Slots and sizes are not looked at.
  bool Usable(int d) const { return caps[d].health && !caps[d].cordoned && plain_on_mig[d] == 0; }
  int64_t cpu_free() const { return info.cpu_milli - cpu_used; }
  int64_t mem_free() const { return info.memory_mib - mem_used; }
  // Index of the device with this uuid, or -1.
  int DeviceIndex(const std::string& uuid) const;

  // Adds (sign = +1) or removes (sign = -1) a pod's usage; O(devices of the delta).
  void Apply(const PodDelta& delta, int sign);
  // The summary of this state (O(devices)); `kind` and `kind_device` are left for the cache to set.
  NodeSummary Summarize() const;
  // True when `delta` still fits on top of the current usage (slots, memory, cores, exclusivity,
  // CPU and memory of the node). Used to commit a reservation optimistically.
  bool Fits(const PodDelta& delta) const;

 private:
  void Refresh(int device);
};

// The class of a pod from what it takes on a node.
int PodClassOf(const NodeState& node, const PodDelta& delta);

}  // namespace hami::scheduler
