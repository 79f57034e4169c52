#pragma once
// The FGD paper's workload-inflation experiment (as described in docs/sim.md)
// run through the production scheduler (scheduler::Scheduler), and its metric.
//
// Mapping of the trace onto HAMi devices (docs/sim.md): every simulated GPU registers
// devmem = 16000 MiB (16 MiB per milli), devcore = 100 and a split count of 1000. A task of
// gpu_milli m asks per GPU memreq = 16*m MiB (exact) and cores = m/10 (floor, never binding: memory
// is exact), so a GPU's free milli is exactly 1000 - the sum of its tasks' milli; gpu_spec "A|B"
// becomes nvidia.com/use-gputype A,B; cpu_milli and memory_mib are the node CPU and memory
// requests.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "core/model.h"
#include "sim/trace.h"
#include "vendors/vendor_set.h"

namespace hami::sim {

inline constexpr int64_t kMibPerMilli = 16;
inline constexpr int64_t kSimGpuMemMib = 1000 * kMibPerMilli;
inline constexpr int kSimSplitCount = 1000;
inline constexpr int kCurveMax = 130;  // A(k) for k = 0..130

// Heterogeneous traces (docs/vendors.md): a node's GPUs register with vendor = node.vendor and a
// task asks its vendor's devices (TraceNode/TraceTask::vendor as ResolveVendors leaves it; "" =
// NVIDIA). The device shape above is the same for every vendor; the vendor's own rules (templates,
// whole devices, allowed counts) apply through VendorSet's scheduler rules. A whole-GPU task of
// another vendor asks 100 % of the device's memory (not 16000 MiB) so that templates do not apply
// to it.
// MIG (TraceNode::mig): GPUs 0..mig_gpus-1 of the node register in MIG mode with the set's profiles
// and memory (docs/sim.md, "MIG nodes"); a task's vgpu_mode and MIG profile preference become its
// selectors. A task on a MIG GPU gets the smallest instance that covers 16*m MiB and m/10 cores.
core::NodeInfo ToNodeInfo(const TraceNode& node, const std::string& name);
core::PodRequest ToPodRequest(const TraceTask& task, const std::string& uid);

struct ClusterTotals {
  int64_t nodes = 0;
  int64_t gpus = 0;
  int64_t milli_cpu = 0;
  int64_t memory_mib = 0;
};
ClusterTotals Totals(const std::vector<TraceNode>& nodes);

// Rewrites every non-empty `vendor` of the trace to the Type keyword of the vendor of `set` it
// names (VendorSet::Find: "hygon" -> "DCU"); NVIDIA becomes "". Errors name the row and the vendors
// known.
Status ResolveVendors(const vendors::VendorSet& set, std::vector<TraceNode>* nodes,
                      std::vector<TraceTask>* tasks);
// True when some node or task names a vendor other than NVIDIA.
bool HasOtherVendors(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& tasks);

// A(k): the mean GPU allocation ratio (percent, 2 decimals) over the pod events whose arrived
// demand rounds to k percent of capacity; fallback k-1..k+1; else the previous point (documented).
class AllocationCurve {
 public:
  explicit AllocationCurve(int64_t capacity_milli) : capacity_(capacity_milli) {}
  // One pod event: cumulative requested GPU milli (failed pods included) and allocated GPU milli.
  void Record(int64_t arrived_milli, int64_t used_milli);
  std::vector<double> Points() const;  // size kCurveMax + 1

 private:
  static constexpr int kBuckets = 1000;
  int64_t capacity_;
  std::array<double, kBuckets> sum_{};
  std::array<int64_t, kBuckets> count_{};
};

// One task event of a run as the scheduler decided it (RunConfig::record_placements).
struct TaskPlacement {
  int task = 0;                    // index into the trace's tasks
  std::string node;                // "" = fitted nowhere (dropped)
  core::PodAllocation allocation;  // devices per container (empty for a task without GPUs)
};

struct RunConfig {
  std::string policy;
  uint64_t seed = 42;
  double inflation = 1.3;
  // The enabled vendors (not owned; never null: NVIDIA only unless the trace names others, which
  // ResolveVendors checks against this set). NVIDIA rows keep the generic checks; the others are
  // checked by their vendor.
  const vendors::VendorSet* vendors = &vendors::VendorSet::NvidiaOnly();
  // Keep every decision in RunResult::placements (for replaying the run through the extender).
  bool record_placements = false;
};

struct RunResult {
  std::string policy;
  uint64_t seed = 0;
  int64_t tasks_arrived = 0;
  int64_t tasks_scheduled = 0;
  int64_t tasks_failed = 0;
  std::vector<double> curve;  // A(k), k = 0..130
  // Task events per device vendor ("NVIDIA", "DCU", ...; tasks without GPUs are not counted), by
  // name.
  struct VendorCount {
    int64_t arrived = 0;
    int64_t scheduled = 0;
  };
  std::map<std::string, VendorCount> by_vendor;
  double wall_seconds = 0;
  std::vector<TaskPlacement> placements;  // arrival order; only with RunConfig::record_placements
};

// The arrival order of one seed: the trace sorted by name and shuffled, then resampled copies
// (uniform, with replacement, from the file order) appended while sum + gpu_milli(candidate) <=
// inflation * capacity. Also returns, through node_order, the tie-break rank of every node (a
// random permutation).
std::vector<int> ArrivalOrder(const std::vector<TraceTask>& tasks, int64_t capacity_milli,
                              double inflation, size_t nodes, Rng& rng,
                              std::vector<int>* node_rank);

// What a run replays, built from the trace and the seed exactly as RunInflation builds it: the
// nodes with their tie-break names, the arrival order and each task's pod, drawn from `rng` (seeded
// with the run's seed). Scheduling then draws from the scheduler's own stream
// (SchedulerOptions::seed = the run's seed), not from `rng`.
struct RunPlan {
  int64_t capacity_milli = 0;
  std::vector<core::NodeInfo> nodes;  // named "%04d-<sn>" (docs/sim.md), in name order of the trace
  std::vector<int> order;             // task indices in arrival order
  std::vector<core::PodRequest> pods;  // per task (uid empty; RunInflation names event i "t<i>")
};
StatusOr<RunPlan> PlanRun(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& tasks,
                          const RunConfig& config, Rng& rng);

// Runs config.policy: a scheduler policy (scheduler/registry.h) through the production scheduler,
// or a policy the simulator models itself (SimOnlyPolicies(): "dra-stock", sim/dra_stock.h;
// "dra-hami", sim/dra_hami.h).
StatusOr<RunResult> RunInflation(const std::vector<TraceNode>& nodes,
                                 const std::vector<TraceTask>& tasks, const RunConfig& config);

// The policies only the simulator runs (no scheduler profile): {name, one-line doc}; and whether
// `name` is a policy RunInflation can run (OK, or the scheduler registry's error).
const std::vector<std::pair<std::string, std::string>>& SimOnlyPolicies();
Status CheckPolicy(const std::string& name);

}  // namespace hami::sim
