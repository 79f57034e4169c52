#pragma once
// `hami sim --policy dra-hami`: what hami-cpp's placement can reach for DRA pods
// (docs/dra-placement.md). The GPU on a node is stock DRA's choice, not ours: the first devices
// that fit, as scheduler/dra_allocator.h allocates them. The node is `default`'s choice: every
// feasible node is scored by the `default` policy's scorer (fgd-balance, with its learned models)
// on the state AFTER that first-fit allocation there, the highest wins, ties to the node earliest
// in name order. This is the extender hook of the design at its best (every feasible node seen, its
// score dominating kube-scheduler's own); against dra-stock it measures the node choice, against
// `default` the device choice. Every decision is checked against the stock allocator on the chosen
// node: a different device is an Internal error, never a silent divergence.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "core/model.h"
#include "scheduler/cluster_cache.h"
#include "scheduler/dra_allocator.h"
#include "scheduler/framework.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::sim {

// The reference allocator lives with the scheduler (the extender uses it too).
namespace dra = scheduler::dra;

inline constexpr std::string_view kDraHamiPolicy = "dra-hami";
// The same through what kube-scheduler really shows an extender: it filters nodes from a rotating
// start until FeasibleNodesToFind(n) fit (497 of 1,213), the extender scores only those, and its
// score (weight >= 21, so that one point of 0..10 outweighs the 200 of LeastAllocated +
// BalancedAllocation) decides; nodes of equal `default` score are then ordered by
// kube-scheduler's own score, and the last ties drawn at random (selectHost).
inline constexpr std::string_view kDraHamiExtenderPolicy = "dra-hami-extender";

// One decision: the node ("" = fits nowhere) and the devices (positions in the node's
// NodeInfo::devices, as the stock allocator's gpu-<index>) of the task's claim.
struct DraHamiDecision {
  std::string node;
  std::vector<int> devices;
  core::PodAllocation allocation;
};

// Places tasks one at a time on `nodes` (whole NVIDIA GPUs as ToNodeInfo builds them).
class DraHamiPlacer {
 public:
  // kube_view: decide as kDraHamiExtenderPolicy (sampled feasible nodes, kube-scheduler's ties).
  static StatusOr<std::unique_ptr<DraHamiPlacer>> Create(std::vector<core::NodeInfo> nodes,
                                                         uint64_t seed, bool kube_view = false);
  // Decides where `task` (asking `pod`, with a unique uid) goes and commits it there.
  StatusOr<DraHamiDecision> Place(const TraceTask& task, const core::PodRequest& pod);

 private:
  DraHamiPlacer(std::unique_ptr<scheduler::Profile> profile, dra::Allocator allocator,
                uint64_t seed, bool kube_view)
      : profile_(std::move(profile)),
        allocator_(std::move(allocator)),
        rng_(seed),
        kube_view_(kube_view) {}
  // The feasible node of the highest `default` key (every node; or, with kube_view_, the sampled
  // ones with kube-scheduler's ties); false when none.
  bool Choose(const TraceTask& task, const scheduler::CycleState& cycle, scheduler::Placement* best,
              DraHamiDecision* out);
  std::unique_ptr<scheduler::Profile> profile_;  // default's scorer and learning, first-fit picker
  scheduler::ClusterCache cache_;
  dra::Allocator allocator_;  // the stock allocator, to check every decision
  dra::AllocatedState claims_;
  Rng rng_;
  bool kube_view_ = false;
  size_t next_start_ = 0;  // kube-scheduler's rotating start (kube_view_)
};

StatusOr<RunResult> RunDraHami(const std::vector<TraceNode>& nodes,
                               const std::vector<TraceTask>& tasks, const RunConfig& config);

}  // namespace hami::sim
