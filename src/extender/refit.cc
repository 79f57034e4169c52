// Extender::Refit: the NUMA refit's scheduler side (extender.h; docs/upstream-contract.md, "NUMA
// refit").
#include "scheduler/refit.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "core/pod_codec.h"
#include "extender/extender.h"
#include "vendors/nvidia/annotations.h"

namespace hami::extender {
namespace {

// Container names in decision order: init containers first, then app containers.
std::vector<std::string> ContainerNames(const Json& pod) {
  std::vector<std::string> out;
  const Json* spec = pod.is_object() && pod.contains("spec") ? &pod["spec"] : nullptr;
  if (spec == nullptr || !spec->is_object()) return out;
  for (const char* list : {"initContainers", "containers"}) {
    auto it = spec->find(list);
    if (it == spec->end() || !it->is_array()) continue;
    for (const Json& c : *it) out.push_back(StringAt(c, {"name"}));
  }
  return out;
}

std::vector<core::ContainerDevice> OfVendor(const std::vector<core::ContainerDevice>& devices,
                                            const std::string& vendor) {
  std::vector<core::ContainerDevice> out;
  for (const auto& d : devices)
    if (d.vendor == vendor) out.push_back(d);
  return out;
}

std::string Uuids(const std::vector<core::ContainerDevice>& devices) {
  std::vector<std::string> ids;
  ids.reserve(devices.size());
  for (const auto& d : devices) ids.push_back(d.uuid);
  return StrCat("[", absl::StrJoin(ids, " "), "]");
}

}  // namespace

StatusOr<std::string> ReplaceContainerEntry(std::string_view annotation, size_t index,
                                            std::string_view entry) {
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(annotation.data(), annotation.size()), ';');
  if (index >= parts.size() || parts[index].empty() ||
      (index + 1 == parts.size() && !annotation.empty() && annotation.back() == ';'))
    return FailedPrecondition("annotation has no container entry at index ", index);
  parts[index] = std::string(entry);
  return absl::StrJoin(parts, ";");
}

core::RefitResponse Extender::Refit(const core::RefitRequest& req) {
  counters_.refit_total.fetch_add(1, std::memory_order_relaxed);
  Json pod_ref;  // set once the pod is known: refusals about it become Events
  auto fail = [&](std::string reason) {
    counters_.refit_refused.fetch_add(1, std::memory_order_relaxed);
    if (!pod_ref.is_null()) Event(pod_ref, "Warning", "NumaRefitFailed", reason);
    return core::RefitResponse{false, "", std::move(reason)};
  };
  const vendors::VendorSet& vendor_set = *state_.options().vendors;
  if (vendor_set.ByCommonWord(req.device_type) == nullptr)
    return fail(StrCat("unknown device type \"", req.device_type, "\""));
  // Vendor type names match by substring upstream; only NVIDIA's device plugin sends refits.
  if (req.device_type != core::kNvidiaVendor)
    return fail(StrCat("device type \"", req.device_type,
                       "\" is not supported by the NUMA refit (NVIDIA only)"));
  if (!Leading()) return fail(NotLeaderError());
  if (opts_.synced && !opts_.synced())
    return fail("the scheduler's informers have not synced yet; retry later");

  // Exclusive: no Filter decides while the cache briefly holds the pod without its grant.
  absl::MutexLock decide(&decide_mu_);
  const std::optional<PodRecord> rec = state_.Find(req.pod_uid);
  if (!rec) return fail(StrCat("pod ", req.pod_uid, " is not tracked by the scheduler"));
  if (rec->namespace_ != req.pod_namespace || rec->name != req.pod_name)
    return fail(
        StrCat("pod ", req.pod_uid, " does not match ", req.pod_namespace, "/", req.pod_name));
  pod_ref = Json{{"kind", "Pod"},
                 {"apiVersion", "v1"},
                 {"namespace", rec->namespace_},
                 {"name", rec->name},
                 {"uid", rec->uid}};
  if (rec->allocation.node != req.node_name)
    return fail(StrCat("pod ", req.pod_namespace, "/", req.pod_name, " is tracked on node ",
                       rec->allocation.node, ", not ", req.node_name));

  // The pod as the API server has it now: its resourceVersion guards the patch.
  StatusOr<Json> live = absl::UnavailableError("no API client");
  if (client_ != nullptr) {
    live = client_->Get(k8s::kPods, req.pod_namespace, req.pod_name);
  } else if (auto cached = LivePod(req.pod_namespace, req.pod_name); cached.ok() && *cached) {
    live = **cached;
  }
  if (!live.ok()) return fail(StrCat("cannot read the pod: ", live.status().message()));
  if (StringAt(*live, {"metadata", "uid"}) != req.pod_uid)
    return fail(
        StrCat("pod ", req.pod_namespace, "/", req.pod_name, " is no longer ", req.pod_uid));
  const std::vector<std::string> names = ContainerNames(*live);
  const size_t index = static_cast<size_t>(req.container_index);
  if (index >= names.size())
    return fail(
        StrCat("container index ", req.container_index, " is outside the pod's containers"));
  if (!req.container_name.empty() && names[index] != req.container_name)
    return fail(StrCat("container index ", req.container_index, " is \"", names[index],
                       "\", not \"", req.container_name, "\""));
  std::map<std::string, std::string> annotations = AnnotationsOf(*live);
  const std::string pending_raw = annotations[vendors::nvidia::kNvidiaDevicesToAllocate];
  const std::string allocated_raw = annotations[vendors::nvidia::kNvidiaDevicesAllocated];
  auto pending = core::DecodePodDevices(pending_raw);
  if (!pending.ok())
    return fail(
        StrCat("cannot decode the pending allocation annotation: ", pending.status().message()));
  if (index >= pending->containers.size() || pending->containers[index].empty())
    return fail(
        StrCat("container ", index, " has no pending ", req.device_type, " allocation to refit"));
  if (index >= rec->allocation.containers.size())
    return fail(StrCat("container ", index, " has no recorded ", req.device_type, " allocation"));
  const std::vector<core::ContainerDevice> current =
      OfVendor(rec->allocation.containers[index], req.device_type);
  if (current.empty())
    return fail(StrCat("container ", index, " has no recorded ", req.device_type, " allocation"));

  const std::set<std::string> allowed(req.allowed_device_uuids.begin(),
                                      req.allowed_device_uuids.end());
  const bool already = std::all_of(current.begin(), current.end(),
                                   [&](const auto& d) { return allowed.count(d.uuid) > 0; });
  if (already) {
    auto entry = core::EncodeContainerDevices(current);
    if (!entry.ok()) return fail(std::string(entry.status().message()));
    return core::RefitResponse{true, *entry, ""};
  }

  auto pod = vendor_set.ParsePod(*live);
  if (!pod.ok()) return fail(StrCat("cannot read the pod's requests: ", pod.status().message()));
  const core::CpuMemory node_req = PodNodeRequest(*live, vendor_set);
  scheduler::PlacedPodResources res;
  res.cpu_milli = node_req.cpu_milli;
  res.memory_mib = node_req.memory_mib;
  res.kinds = KindsOfPodJson(*live);

  scheduler::RefitTarget target;
  target.container = index;
  target.current = current;
  target.vendor = req.device_type;
  target.allowed = req.allowed_device_uuids;
  std::string entry, pending_after, allocated_after;
  RefitSteps steps;
  steps.fit = [&] {
    return scheduler::FitInRestrictedDevices(sched_, *pod, target, req.node_name);
  };
  steps.fingerprint = [&](const core::PodAllocation& after) -> StatusOr<std::string> {
    HAMI_ASSIGN_OR_RETURN(
        entry, core::EncodeContainerDevices(OfVendor(after.containers[index], req.device_type)));
    HAMI_ASSIGN_OR_RETURN(pending_after, ReplaceContainerEntry(pending_raw, index, entry));
    HAMI_ASSIGN_OR_RETURN(allocated_after, ReplaceContainerEntry(allocated_raw, index, entry));
    std::map<std::string, std::string> patched = annotations;
    patched[vendors::nvidia::kNvidiaDevicesAllocated] = allocated_after;
    return vendor_set.DecisionFingerprint(patched);
  };
  auto before =
      state_.RefitContainer(req.pod_uid, req.node_name, index, req.device_type, res, steps);
  if (!before.ok()) return fail(std::string(before.status().message()));
  std::vector<core::ContainerDevice> moved;
  if (auto back = core::DecodeContainerDevices(entry); back.ok()) moved = *back;

  if (client_ != nullptr) {
    Json patch{{"metadata",
                {{"annotations",
                  {{vendors::nvidia::kNvidiaDevicesToAllocate, pending_after},
                   {vendors::nvidia::kNvidiaDevicesAllocated, allocated_after}}}}}};
    if (std::string rv = StringAt(*live, {"metadata", "resourceVersion"}); !rv.empty())
      patch["metadata"]["resourceVersion"] = rv;
    if (Status s = client_->PatchNoReply(k8s::kPods, req.pod_namespace, req.pod_name,
                                         k8s::PatchType::kMerge, patch);
        !s.ok()) {
      state_.UndoRefit(*before, res);
      return fail(StrCat("cannot patch pod annotations: ", s.message()));
    }
  }
  counters_.refit_moved.fetch_add(1, std::memory_order_relaxed);
  const std::string message =
      StrCat("NUMA refit moved container ", index, " from ", Uuids(current), " to ", Uuids(moved));
  SPDLOG_INFO("pod {}/{} on {}: {}", req.pod_namespace, req.pod_name, req.node_name, message);
  Event(pod_ref, "Normal", "NumaRefitSucceed", message);
  return core::RefitResponse{true, entry, ""};
}

std::string Extender::HandleRefit(std::string_view body) {
  auto req = core::ParseRefitRequest(body);
  if (!req.ok()) {
    counters_.refit_total.fetch_add(1, std::memory_order_relaxed);
    counters_.refit_refused.fetch_add(1, std::memory_order_relaxed);
    return core::EncodeRefitResponse({false, "", std::string(req.status().message())});
  }
  return core::EncodeRefitResponse(Refit(*req));
}

}  // namespace hami::extender
