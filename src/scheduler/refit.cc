#include "scheduler/refit.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"

namespace hami::scheduler {
namespace {

Status Refused(const std::string& message) {
  return absl::FailedPreconditionError(message);
}

}  // namespace

StatusOr<core::PodRequest> RestrictedRequest(const core::PodRequest& pod, const RefitTarget& target,
                                             const core::NodeInfo& node) {
  if (target.container >= pod.containers.size())
    return Refused(
        StrCat("container index ", target.container, " is outside the pod's containers"));
  const core::ContainerRequest& ctr = pod.containers[target.container];
  if (target.current.empty())
    return Refused(StrCat("container ", target.container, " (", ctr.name, ") has no ",
                          target.vendor, " grant to refit"));
  const core::ContainerDevice& first = target.current.front();
  for (const core::ContainerDevice& d : target.current) {
    if (!d.mig_profile.empty())
      return Refused(StrCat("container ", target.container, " holds MIG instance ", d.uuid,
                            "; the NUMA refit does not move MIG grants"));
    if (d.usedmem_mib != first.usedmem_mib || d.usedcores != first.usedcores)
      return Refused(StrCat("container ", target.container,
                            " reserves differing amounts per device; the refit does not "
                            "support heterogeneous reservations"));
  }
  const core::DeviceRequest* asked = nullptr;
  for (const core::DeviceRequest& r : ctr.devices)
    if (r.vendor == target.vendor) asked = &r;
  if (asked == nullptr)
    return Refused(StrCat("no ", target.vendor, " request to refit in container ", target.container,
                          " (", ctr.name, ")"));

  const std::set<std::string> allowed(target.allowed.begin(), target.allowed.end());
  std::vector<std::string> usable;  // allowed devices of the vendor on the node, in node order
  for (const core::DeviceInfo& d : node.devices) {
    if (d.vendor != target.vendor || !allowed.count(d.uuid)) continue;
    if (d.mode == "mig")
      return Refused(StrCat("allowed device ", d.uuid,
                            " is in MIG mode; the NUMA refit does not support MIG"));
    usable.push_back(d.uuid);
  }
  if (usable.empty())
    return Refused(StrCat(kAllowedSetUnmatched, ": none of [", absl::StrJoin(target.allowed, ","),
                          "] is a ", target.vendor, " device of node ", node.name));
  if (!pod.selectors.use_uuids.empty()) {
    std::erase_if(usable, [&](const std::string& u) {
      return std::find(pod.selectors.use_uuids.begin(), pod.selectors.use_uuids.end(), u) ==
             pod.selectors.use_uuids.end();
    });
    if (usable.empty())
      return Refused(StrCat("no allowed device fits: the pod's use-gpuuuid [",
                            absl::StrJoin(pod.selectors.use_uuids, ","), "] allows none of [",
                            absl::StrJoin(target.allowed, ","), "]"));
  }

  core::PodRequest out;
  out.uid = pod.uid;
  out.namespace_ = pod.namespace_;
  out.name = pod.name;
  out.selectors = pod.selectors;
  out.selectors.use_uuids = std::move(usable);
  out.node_policy = pod.node_policy;
  out.gpu_policy = pod.gpu_policy;
  out.has_weights = pod.has_weights;
  out.weights = pod.weights;
  out.annotations = pod.annotations;
  out.labels = pod.labels;
  core::ContainerRequest one;
  one.name = ctr.name;
  one.kind = core::ContainerKind::kApp;
  core::DeviceRequest req;
  req.vendor = target.vendor;
  req.nums = static_cast<int>(target.current.size());
  req.memreq_mib = first.usedmem_mib;
  req.coresreq = first.usedcores;
  req.priority = asked->priority;
  one.devices.push_back(req);
  out.containers.push_back(std::move(one));
  return out;
}

StatusOr<std::vector<core::ContainerDevice>> FitInRestrictedDevices(const Scheduler& sched,
                                                                    const core::PodRequest& pod,
                                                                    const RefitTarget& target,
                                                                    const std::string& node) {
  core::NodeInfo info;
  if (!sched.cache().WithNode(node, [&](const NodeState& n) { info = n.info; }))
    return absl::NotFoundError(StrCat("node ", node, " is not registered"));
  HAMI_ASSIGN_OR_RETURN(core::PodRequest request, RestrictedRequest(pod, target, info));
  const std::vector<std::string> candidates{node};
  ScheduleOptions options;
  options.explain = true;
  HAMI_ASSIGN_OR_RETURN(Decision d, sched.Schedule(request, &candidates, options));
  if (d.node.empty()) {
    std::string why = "no device of the node fits";
    for (const NodeFailure& f : d.failures)
      if (f.node == node) why = f.reason;
    return Refused(StrCat("no allowed device fits: ", why));
  }
  if (d.allocation.containers.size() != 1 ||
      d.allocation.containers[0].size() != target.current.size())
    return absl::InternalError(StrCat("the restricted fit chose ", d.allocation.containers.size(),
                                      " container grants, want 1 of ", target.current.size(),
                                      " devices"));
  return d.allocation.containers[0];
}

}  // namespace hami::scheduler
