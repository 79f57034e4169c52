#pragma once
// Offline references for the inflation experiment (docs/sim.md, "How far from an offline packing"):
// for a prefix of one seed's arrivals, an upper bound on the GPU milli that any placement of those
// tasks can allocate (a linear or integer relaxation solved with GLPK), and what an offline packer
// that sees the whole prefix at once achieves through the production scheduler.
//
// The relaxation pools the nodes of one shape (CPU, memory, GPU count, model, vendor) into a class
// and counts, per task shape and node class, how many tasks go there (y >= 0, integer with
// BoundOptions::integer). Per node class c with N nodes: CPU, memory and GPU milli of its tasks <=
// N times the node's; tasks that need a GPU of their own (whole GPUs, or more than 500 milli of
// one) use at most N x GPUs of them; tasks that take more than half of a node's CPU, memory or GPUs
// fit at most one per node (<= N each). Each is a sum over the class's nodes of a constraint every
// single node obeys, so every real placement is a solution and the optimum is an upper bound.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::sim {

struct BoundOptions {
  // Every task without GPUs that fits some node must be placed (true of every run in which none of
  // them failed; the bound then holds for those runs only).
  bool place_cpu_only = false;
  // The first `must_place` tasks of the prefix are all placed (a policy that fails none of them:
  // every pod that arrived before some point got its place). PackingUpperBound fails with
  // FailedPrecondition when no placement of the prefix can.
  size_t must_place = 0;
  // When >= 0, the relaxation answers another question: the least GPU milli of the first
  // `must_place` tasks that a placement allocating at least target_milli must leave unplaced
  // (PackingBound::lp_milli and integer_milli then hold that minimum; FailedPrecondition when no
  // placement allocates that much at all).
  int64_t target_milli = -1;
  // Integer task counts (branch and bound); the result is used only when proven optimal.
  bool integer = false;
  double time_limit_s = 60;
  // Per node class, count the GPUs by how they are filled with shares (every maximal multiset of
  // the prefix's per-GPU shares below 1000 milli that fits 1000): two shares of 810 and 650 never
  // share a GPU, and a GPU holding an 810 keeps 190 milli that only shares of at most 190 can use.
  // Skipped (pooled milli only) when there are more than max_patterns such multisets.
  bool gpu_patterns = true;
  size_t max_patterns = 200000;
};

// Every multiset of `sizes` (milli per GPU, distinct, > 0) whose sum is at most 1000 and to which
// no size can be added, as counts parallel to `sizes`; empty when there are more than `limit`.
std::vector<std::vector<int>> MaximalGpuPatterns(const std::vector<int>& sizes, size_t limit);

// Tasks of one shape are interchangeable in the relaxation; so are nodes of one class.
using TaskShapeKey = std::tuple<int64_t, int64_t, int, int, std::vector<std::string>, std::string>;
using NodeClassKey = std::tuple<int64_t, int64_t, int, std::string, std::string>;
TaskShapeKey ShapeOf(const TraceTask& t);
NodeClassKey ClassOf(const TraceNode& n);

struct PackingBound {
  int task_shapes = 0;
  int node_classes = 0;
  int gpu_patterns = 0;      // fill patterns per node class (0: pooled milli only)
  int64_t demand_milli = 0;  // GPU milli the prefix asks
  double lp_milli = 0;       // optimum of the linear relaxation
  bool integer_optimal = false;
  double integer_milli = 0;  // optimum with integer counts (when integer_optimal)
  // The optimal solution (integer when integer_optimal): how many tasks of each shape it puts on
  // each node class.
  std::map<TaskShapeKey, std::map<NodeClassKey, double>> placed;
  // With BoundOptions::target_milli: how many of the early tasks of each shape the optimum fails.
  std::map<TaskShapeKey, double> failed;
  // The tightest proven bound: integer_milli when integer_optimal, else lp_milli.
  double best_milli() const { return integer_optimal ? integer_milli : lp_milli; }
};

// `prefix`: task indices (repeats allowed: resampled copies) placed together.
StatusOr<PackingBound> PackingUpperBound(const std::vector<TraceNode>& nodes,
                                         const std::vector<TraceTask>& tasks,
                                         const std::vector<int>& prefix,
                                         const BoundOptions& options);

// Offline packing orders: "gpu-desc" = tasks with GPUs by decreasing total GPU milli (then per-GPU
// milli, then arrival), tasks without GPUs last; "cpu-first" = tasks without GPUs first, then as
// gpu-desc; "guided" = as gpu-desc, each task tried first on the nodes of the classes where the
// relaxation's solution `guide` put tasks of its shape (most first), then anywhere.
struct OfflinePacking {
  std::string policy;
  std::string order;
  int64_t used_milli = 0;
  int64_t gpu_failed = 0;
  int64_t cpu_only_failed = 0;
};
// Places the first `events` tasks of plan.order in the given order, one at a time through
// Scheduler::Schedule + Reserve with `policy`.
StatusOr<OfflinePacking> PackOffline(const RunPlan& plan, const std::vector<TraceTask>& tasks,
                                     size_t events, const std::string& policy,
                                     const std::string& order, const PackingBound* guide = nullptr);

// A constructive offline packing of the same prefix without any scheduler policy (order "direct",
// policy "none"): tasks with GPUs by decreasing GPU count, then per-GPU milli, then CPU; then the
// tasks without GPUs by decreasing CPU. Each goes to the nodes of the classes where `guide` (the
// relaxation's solution; may be null) still has room for its shape, else to any node, and there to
// the fitting GPUs with the least free milli (best fit) on the node that keeps the fewest free
// milli on them, then the fewest free milli in all, then the least free CPU. Feasibility (CPU,
// memory, GPU count, model, 1000 milli per GPU) is checked here; what it allocates is achievable by
// a placement that knows the whole prefix in advance, so it bounds the best packing from below.
StatusOr<OfflinePacking> PackDirect(const std::vector<TraceNode>& nodes,
                                    const std::vector<TraceTask>& tasks,
                                    const std::vector<int>& prefix, const PackingBound* guide);

// One seed of the experiment against those references, at the event where the arrived GPU demand
// last is <= the capacity (arrival 100 %).
struct SeedBound {
  uint64_t seed = 0;
  int64_t capacity_milli = 0;
  size_t events = 0;              // tasks arrived up to that event
  int64_t arrived_milli = 0;      // GPU milli they ask
  int64_t online_used_milli = 0;  // what `policy` allocated online at that event
  int64_t online_cpu_only_failed = 0;
  double online_a100 = 0;  // the policy's A(100)
  PackingBound bound;      // for the first `events` tasks
  // A(100) of any policy is at most this: over the events of A(100)'s bucket, the mean of the bound
  // of the prefix ending at the next checkpoint (BoundSeedOptions::checkpoints of them), in
  // percent.
  double a100_bound = 0;
  std::vector<OfflinePacking> offline;  // every (policy, order) tried
  // The online run's first failed task among the first `events` (events when none failed), and the
  // arrived GPU demand before it in percent of the capacity.
  size_t online_first_failure = 0;
  double online_first_failure_arrival = 0;
  // Bounds at arrival 100 % for placements that fail no task arriving before a point: for each
  // BoundSeedOptions::no_failure_before, then for the online run's first failure (last).
  struct Horizon {
    double arrival = 0;  // percent of the capacity arrived before the first task that may fail
    size_t must_place = 0;
    bool feasible = true;  // false: no placement places all of them
    double milli = 0;      // the bound (when feasible)
    // The GPU milli of those tasks the online run failed, and (BoundSeedOptions::target) the least
    // a placement reaching the target must fail (-1: not asked or the target is out of reach).
    int64_t online_failed_milli = 0;
    double min_failed_milli = -1;
    std::map<TaskShapeKey, double> min_failed;  // by shape, the tasks that minimum fails
  };
  std::vector<Horizon> horizons;
};
struct BoundSeedOptions {
  std::string policy = "default";
  double inflation = 1.3;
  BoundOptions bound;
  int checkpoints = 4;
  std::vector<std::string> offline_policies = {"default", "best-fit"};
  std::vector<std::string> offline_orders = {"gpu-desc", "cpu-first", "guided"};
  // Arrival points in percent (SeedBound::horizons).
  std::vector<double> no_failure_before;
  // Unallocated GPU % at arrival 100 % (e.g. 3.5): per horizon, also the least GPU demand among its
  // tasks that a placement leaving at most this much unallocated must fail. Negative: not asked.
  double target = -1;
};
StatusOr<SeedBound> BoundSeed(const std::vector<TraceNode>& nodes,
                              const std::vector<TraceTask>& tasks, uint64_t seed,
                              const BoundSeedOptions& options);

}  // namespace hami::sim
