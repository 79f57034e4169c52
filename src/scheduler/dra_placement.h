#pragma once
// hami-cpp's node choice for pods with DRA claims (docs/dra.md#placement,
// docs/dra-placement.md). On a node the devices are stock DRA's choice: the first that fit
// (dra_allocator.h), written into the claim by kube-scheduler, never by us. Among the nodes we
// choose: each feasible node is scored with the `default` policy's scorer (and its learned
// models) on the state that first fit leaves there. One code for `hami sim --policy dra-hami`
// (sim/dra_hami.h) and the extender's hook for pods with claims of our driver
// (extender/dra_hook.h), so what the simulator measures is what production does. Pure: no
// transport, no clock, no threads of its own.
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/rng.h"
#include "common/status.h"
#include "core/pod_request.h"
#include "scheduler/dra_allocator.h"
#include "scheduler/framework.h"
#include "scheduler/node_state.h"

namespace hami::scheduler::dra {

// `default`'s profile (scorer and learning) with a first-fit GPU picker: the lowest positions that
// pass the generic checks, a device admitted only when its type equals one of the pod's use_types
// (the CEL `productName ==` of a claim, not use-gputype's substring) or there are none. The
// simulator places with it; production builds the placement from the allocator's result instead
// (PlacementFromResults) and scores it with the same scorer.
StatusOr<std::unique_ptr<Profile>> MakeDraProfile();

// ---- production: the cluster as resource.k8s.io/v1 publishes it ----

// A node's CPU and memory as the scheduler counts them: allocatable and requested (0 = not
// tracked, as core::NodeInfo).
struct NodeResources {
  int64_t cpu_milli = 0, memory_mib = 0;
  int64_t cpu_used = 0, memory_used = 0;
};

// The published devices of one driver and what allocated claims hold of them. Immutable.
class DraView {
 public:
  // `slices`: ResourceSlices (other drivers' pools are ignored); `classes`: DeviceClasses;
  // `claims`: ResourceClaims, the allocated ones being the usage. A class or an allocation the
  // model cannot read is left out (other drivers' classes may use any CEL); errors: a slice it
  // cannot read (dra_allocator.h).
  static StatusOr<DraView> Build(const std::string& driver,
                                 const std::vector<nlohmann::json>& slices,
                                 const std::vector<nlohmann::json>& classes,
                                 const std::vector<nlohmann::json>& claims);

  const std::string& driver() const { return driver_; }
  const Allocator& allocator() const { return allocator_; }
  const AllocatedState& allocated() const { return state_; }
  // GPUs per productName over the driver's complete pools (CycleState::gpu_capacity).
  std::shared_ptr<const GpuCapacity> gpu_capacity() const { return capacity_; }
  // The node as the scorer sees it: one device per device of the driver's complete pools there
  // (pool order; memory in MiB rounded down, cores, productName as the type, 1000 slots when
  // shared, 1 when exclusive), one pod per allocated claim with its consumed capacity.
  NodeState NodeStateOf(const std::string& node, const NodeResources& resources) const;
  // Position of a result's device in NodeStateOf(node) (-1: not a device of this driver there).
  int PositionOf(const std::string& node, const Result& result) const;

 private:
  DraView(std::string driver, Allocator allocator)
      : driver_(std::move(driver)), allocator_(std::move(allocator)) {}
  std::string driver_;
  Allocator allocator_;
  AllocatedState state_;
  std::shared_ptr<const GpuCapacity> capacity_;
  // Per node: the allocated claims' results on it (one entry per claim).
  std::map<std::string, std::vector<std::vector<Result>>> claims_on_;
};

// The pod's claims as the scheduler's request: `pod` (its containers' CPU and memory) with one
// container more, "dra-claims", holding a device request per claim request (count, memory in MiB
// rounded up or the whole device when not named, cores or 100 when not named).
core::PodRequest DraPodRequest(core::PodRequest pod,
                               const std::vector<std::vector<DeviceRequest>>& claims);

// The placement first fit's `results` make on `node` (devices as PositionOf), as EvaluateNode
// would fill it for the same devices; false when a device is not on the node or CPU or memory do
// not fit.
bool PlacementFromResults(const DraView& view, const CycleState& cycle, const NodeState& node,
                          const std::vector<Result>& results, Placement* placement);

// One node's answer for a pod.
struct DraNodeVerdict {
  std::string node;
  bool fits = false;
  std::string why;              // when it does not fit: the allocator's or the CPU's reason
  int64_t key = 0;              // when it fits: the scorer's key (higher is better)
  std::vector<Result> results;  // when it fits: first fit's devices, claims in order
  PodDelta delta;               // when it fits: what the pod adds there
};

class DraPlacer {
 public:
  static StatusOr<std::unique_ptr<DraPlacer>> Create();

  // Each of `nodes`' verdict for the pod asking `claims` (each claim's requests, allocated one
  // after the other as kube-scheduler does), in `nodes` order. `pod` as DraPodRequest makes it
  // (uid set). Errors: the claims name what the model does not cover.
  StatusOr<std::vector<DraNodeVerdict>> Evaluate(
      const DraView& view, const core::PodRequest& pod,
      const std::vector<std::vector<DeviceRequest>>& claims,
      const std::vector<std::pair<std::string, NodeResources>>& nodes, Rng& rng) const;
  // The learning policies observe the pod once per uid (Reserve of the profile's plugins); at most
  // kMaxLearned uids are remembered (the oldest forgotten first, its lesson kept).
  void Learn(const core::PodRequest& pod, const PodDelta& delta);
  const Profile& profile() const { return *profile_; }
  static constexpr size_t kMaxLearned = 100'000;

 private:
  explicit DraPlacer(std::unique_ptr<Profile> profile) : profile_(std::move(profile)) {}
  std::unique_ptr<Profile> profile_;
  Mutex mu_;
  std::set<std::string> learned_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> learned_order_ ABSL_GUARDED_BY(mu_);
  size_t learned_next_ ABSL_GUARDED_BY(mu_) = 0;  // ring position in learned_order_
};

// The extender's 0..10 by rank: 10 for the nodes of the highest key, one less per lower distinct
// key, 0 at most ten keys down; nodes that do not fit are left out. With the extender's weight at
// 21 or more, one point outweighs kube-scheduler's LeastAllocated + BalancedAllocation (200), so
// the highest key decides and kube-scheduler's own score only breaks ties among those nodes
// (docs/dra-placement.md, the `dra-hami-extender` model).
std::map<std::string, int> RankScores(const std::vector<DraNodeVerdict>& verdicts);

}  // namespace hami::scheduler::dra
