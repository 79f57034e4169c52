#pragma once
// The NUMA refit's fit (docs/upstream-contract.md, "NUMA refit"): kubelet's Topology Manager let a
// container have only the GPUs NUMA-local to the CPUs it pinned, and the scheduler's grant is not
// among them. The refit decides the container's grant again with the very fit /filter runs
// (Scheduler::Schedule: the pod's policies, numa-bind, type and uuid selectors, mutex), on its node
// only and among the allowed GPUs only, for the amounts the grant already charges (the pod was
// admitted and its quota charged for them; only the devices move).
//
// Upstream's restrictNodeUsage narrows a copy of the node's device list; here the narrowing is the
// request's own uuid selector (use-gpuuuid ∩ allowed), which the fit already honours, so the choice
// among the allowed GPUs is the one the fit makes on a node that has only those GPUs
// (RefitTest.TestFitInRestrictedDevicesMatchesFitOnSmallerNode). The caller removes the
// container's own usage from the cache first (extender::ClusterState::RefitContainer), so the
// grant never competes with itself.
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "scheduler/scheduler.h"

namespace hami::scheduler {

// The failure when no GPU of the vendor on the node is in the allowed set: told apart from "the
// allowed GPUs are full" because it usually means the caller sent replica IDs ("<uuid>-3") or
// another node's UUIDs instead of this node's physical UUIDs.
inline constexpr char kAllowedSetUnmatched[] = "AllowedDeviceSetUnmatched";

struct RefitTarget {
  size_t container = 0;                        // in PodRequest::containers (init first)
  std::vector<core::ContainerDevice> current;  // its grant of `vendor` now
  std::string vendor = core::kNvidiaVendor;
  std::vector<std::string> allowed;  // physical device UUIDs the container may have
};

// The one-container request the refit fits (upstream restrictNodeUsage + the replayed request):
// the target container alone, without CPU or memory (the pod's record keeps charging those), its
// `vendor` request only (other vendors' grants never move), current.size() devices of the memory
// and cores the grant charges, the pod's selectors with use_uuids = allowed ∩ the vendor's devices
// of `node` (∩ the pod's own use-gpuuuid when it sets one), the pod's policies and weights.
// Errors (FailedPrecondition, a message for the pod's Event): no grant, a MIG grant or an allowed
// GPU in MIG mode (a refit moves a hami-core share, not an instance), grants of different amounts
// per device ("heterogeneous": one request carries one amount), kAllowedSetUnmatched, or a pinned
// use-gpuuuid that allows none of the allowed GPUs.
StatusOr<core::PodRequest> RestrictedRequest(const core::PodRequest& pod, const RefitTarget& target,
                                             const core::NodeInfo& node);

// The container's new devices on `node` (upstream fitInRestrictedDevices): RestrictedRequest, then
// Schedule on that node alone. FailedPrecondition "no allowed device fits: <reasons>" when none
// does (the fit's reasons per GPU, e.g. "1/3 CardInsufficientMemory, 2/3 CardUuidMismatch"),
// NotFound for a node the cache does not hold. Decides only: nothing is reserved.
StatusOr<std::vector<core::ContainerDevice>> FitInRestrictedDevices(const Scheduler& sched,
                                                                    const core::PodRequest& pod,
                                                                    const RefitTarget& target,
                                                                    const std::string& node);

}  // namespace hami::scheduler
