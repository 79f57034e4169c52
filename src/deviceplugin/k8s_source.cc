#include "deviceplugin/k8s_source.h"

#include <algorithm>
#include <optional>

#include "common/log.h"
#include "core/annotations.h"
#include "core/lock_codec.h"
#include "core/mig.h"
#include "core/pod_codec.h"
#include "vendors/nvidia/annotations.h"

namespace hami::deviceplugin {

using Json = nlohmann::json;

namespace {

const std::string* Annotation(const Json& obj, const char* key) {
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return nullptr;
  auto an = md->find("annotations");
  if (an == md->end() || !an->is_object()) return nullptr;
  auto v = an->find(key);
  if (v == an->end() || !v->is_string()) return nullptr;
  return v->get_ptr<const std::string*>();
}

std::string Str(const Json& obj, const char* a, const char* b) {
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

struct ContainerSpec {
  std::string name;
  int priority = -1;
  bool disable_control = false;
  int64_t uid = -1, gid = -1;
};

// securityContext.<key> of `obj` as a non-negative integer, or -1.
int64_t SecurityId(const Json& obj, const char* key) {
  auto sc = obj.find("securityContext");
  if (sc == obj.end() || !sc->is_object()) return -1;
  auto v = sc->find(key);
  if (v == sc->end() || !v->is_number_integer()) return -1;
  const int64_t id = v->get<int64_t>();
  return id >= 0 && id <= 0xfffffffe ? id : -1;
}

// Init containers first, then app containers: the order of the decision annotation.
std::vector<ContainerSpec> Containers(const Json& pod, int64_t region_group) {
  std::vector<ContainerSpec> out;
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return out;
  const int64_t pod_uid = SecurityId(*spec, "runAsUser"), pod_gid = SecurityId(*spec, "runAsGroup");
  int64_t fs_group = SecurityId(*spec, "fsGroup");
  // The region group the webhook added, held by every process of the pod like fsGroup.
  if (auto sc = spec->find("securityContext");
      region_group >= 0 && sc != spec->end() && sc->is_object()) {
    auto groups = sc->find("supplementalGroups");
    if (groups != sc->end() && groups->is_array() &&
        std::find(groups->begin(), groups->end(), Json(region_group)) != groups->end())
      fs_group = region_group;
  }
  for (const char* list : {"initContainers", "containers"}) {
    auto l = spec->find(list);
    if (l == spec->end() || !l->is_array()) continue;
    for (const auto& c : *l) {
      ContainerSpec s;
      if (!c.is_object()) {
        out.push_back(s);  // keeps the positions of the decision entries
        continue;
      }
      if (c.contains("name") && c["name"].is_string()) s.name = c["name"].get<std::string>();
      s.uid = SecurityId(c, "runAsUser");
      if (s.uid < 0) s.uid = pod_uid;
      s.gid = fs_group;
      if (s.gid < 0) s.gid = SecurityId(c, "runAsGroup");
      if (s.gid < 0) s.gid = pod_gid;
      if (auto r = c.find("resources"); r != c.end() && r->is_object()) {
        for (const char* kind : {"limits", "requests"}) {
          auto m = r->find(kind);
          if (m == r->end() || !m->is_object()) continue;
          auto p = m->find(vendors::nvidia::kDefaultGpuPriorityResource);
          if (p == m->end()) continue;
          if (p->is_string()) {
            try {
              s.priority = std::stoi(p->get<std::string>());
            } catch (...) {
            }
          } else if (p->is_number_integer() && p->get<int64_t>() >= 0 &&
                     p->get<int64_t>() <= 1000) {
            s.priority = static_cast<int>(p->get<int64_t>());
          }
          break;
        }
      }
      if (auto env = c.find("env"); env != c.end() && env->is_array()) {
        for (const auto& e : *env) {
          if (!e.is_object()) continue;
          auto name = e.find("name");
          auto value = e.find("value");
          if (name != e.end() && name->is_string() && *name == "CUDA_DISABLE_CONTROL" &&
              value != e.end() && value->is_string()) {
            std::string v = value->get<std::string>();
            s.disable_control =
                v == "true" || v == "1" || v == "True" || v == "TRUE" || v == "t" || v == "T";
          }
        }
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

StatusOr<std::optional<PendingPod>> PendingFromPodJson(const Json& pod, const std::string& node,
                                                       const std::string& scheduler_name,
                                                       int64_t region_group) {
  PendingPod p;
  p.uid = Str(pod, "metadata", "uid");
  p.namespace_ = Str(pod, "metadata", "namespace");
  p.name = Str(pod, "metadata", "name");
  const std::string* to_allocate = Annotation(pod, vendors::nvidia::kNvidiaDevicesToAllocate);
  if (to_allocate == nullptr) return std::optional<PendingPod>();
  if (Str(pod, "spec", "nodeName") != node) return std::optional<PendingPod>();
  std::string pod_phase = Str(pod, "status", "phase");
  if (!pod_phase.empty() && pod_phase != "Pending") return std::optional<PendingPod>();
  auto decision = core::DecodePodDevices(*to_allocate);
  if (!decision.ok())
    return Annotate(decision.status(), StrCat("pod ", p.namespace_, "/", p.name, " ",
                                              vendors::nvidia::kNvidiaDevicesToAllocate));
  // MIG grants ride beside the record; the device they name carries profile and placement.
  std::vector<core::MigAllocation> mig;
  if (const std::string* text = Annotation(pod, core::kMigAllocations)) {
    auto entries = core::DecodeMigAllocations(*text);
    if (!entries.ok())
      return Annotate(entries.status(),
                      StrCat("pod ", p.namespace_, "/", p.name, " ", core::kMigAllocations));
    core::AttachMigAllocations(*entries, &*decision);
    for (const auto& e : *entries) {
      const auto& ctr = decision->containers;
      if (e.container_index < static_cast<int>(ctr.size()) &&
          e.device_index < static_cast<int>(ctr[e.container_index].size()) &&
          ctr[e.container_index][e.device_index].uuid == e.gpu_uuid &&
          !ctr[e.container_index][e.device_index].mig_profile.empty())
        mig.push_back(e);
    }
  }
  if (const std::string* mode = Annotation(pod, core::kNumaAlignment)) {
    // The webhook refuses other values; one that slipped past asks for nothing.
    if (auto m = core::ParseNumaAlignment(*mode); m.ok()) p.numa_alignment = *m;
  }
  if (const std::string* bt = Annotation(pod, core::kBindTime)) {
    try {
      p.bind_time = std::stoll(*bt);
    } catch (...) {
    }
  }
  std::vector<ContainerSpec> specs = Containers(pod, region_group);
  for (size_t i = 0; i < decision->containers.size(); ++i) {
    if (decision->containers[i].empty()) continue;
    if (i >= specs.size())
      return InvalidArgument("pod ", p.namespace_, "/", p.name, ": ",
                             vendors::nvidia::kNvidiaDevicesToAllocate, " has entry ", i,
                             " but the pod has ", specs.size(), " containers");
    PendingContainer c;
    c.index = static_cast<int>(i);
    c.name = specs[i].name;
    c.devices = decision->containers[i];
    c.priority = specs[i].priority;
    c.disable_control = specs[i].disable_control;
    c.uid = specs[i].uid;
    c.gid = specs[i].gid;
    for (const auto& e : mig)
      if (e.container_index == static_cast<int>(i)) c.mig.push_back(e);
    p.containers.push_back(std::move(c));
  }
  if (p.containers.empty()) return std::optional<PendingPod>();

  // The record is trusted only as the scheduler leaves it after binding the pod here: anyone who
  // can create or edit a pod can write the annotation itself (the webhook strips and guards it, but
  // a pod it never saw - ignore label, another scheduler, webhook down - would otherwise be armed
  // as written).
  std::vector<std::string> why;
  const std::string* phase = Annotation(pod, core::kBindPhase);
  if (phase == nullptr)
    why.push_back(StrCat("no ", core::kBindPhase));
  else if (*phase != core::kBindPhaseAllocating)
    why.push_back(
        StrCat(core::kBindPhase, " is \"", *phase, "\", not ", core::kBindPhaseAllocating));
  const std::string* vnode = Annotation(pod, core::kVgpuNode);
  if (vnode == nullptr)
    why.push_back(StrCat("no ", core::kVgpuNode));
  else if (*vnode != node)
    why.push_back(StrCat(core::kVgpuNode, " is \"", *vnode, "\", not this node"));
  const std::string scheduler = Str(pod, "spec", "schedulerName");
  if (scheduler != scheduler_name)
    why.push_back(StrCat("spec.schedulerName is \"", scheduler, "\", not ", scheduler_name));
  auto md = pod.find("metadata");
  if (md != pod.end() && md->is_object() && Str(*md, "labels", core::kWebhookLabel) == "ignore")
    why.push_back(
        StrCat("labelled ", core::kWebhookLabel, "=ignore, so the webhook never checked it"));
  for (const auto& w : why) p.refused += StrCat(p.refused.empty() ? "" : ", ", w);
  return std::optional<PendingPod>(std::move(p));
}

K8sPendingPodSource::K8sPendingPodSource(k8s::Client* client, std::string node_name,
                                         std::string scheduler_name, int64_t region_group)
    : client_(client),
      node_(std::move(node_name)),
      scheduler_name_(std::move(scheduler_name)),
      region_group_(region_group) {}

StatusOr<std::vector<PendingPod>> K8sPendingPodSource::ListPending() {
  k8s::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node_;
  HAMI_ASSIGN_OR_RETURN(Json list, client_->List(k8s::kPods, "", opts));
  std::vector<PendingPod> out;
  if (!list.contains("items") || !list["items"].is_array()) return out;
  for (const auto& pod : list["items"]) {
    auto p = PendingFromPodJson(pod, node_, scheduler_name_, region_group_);
    if (!p.ok()) {
      spdlog::warn("skipping pod: {}", std::string(p.status().message()));
      continue;
    }
    if (!p->has_value()) continue;
    if (!(*p)->refused.empty())
      spdlog::warn("pod {}: not arming its devices: {}", (*p)->Key(), (*p)->refused);
    out.push_back(std::move(**p));
  }
  return out;
}

Status K8sPendingPodSource::MarkAllocated(const PendingPod& pod, int container_index) {
  auto r = client_->Mutate(k8s::kPods, pod.namespace_, pod.name, [&](Json& obj) -> Status {
    if (Str(obj, "metadata", "uid") != pod.uid)
      return NotFound("pod ", pod.Key(), " was re-created");
    const std::string* text = Annotation(obj, vendors::nvidia::kNvidiaDevicesToAllocate);
    if (text == nullptr)
      return FailedPrecondition("pod ", pod.Key(), " has no ",
                                vendors::nvidia::kNvidiaDevicesToAllocate);
    HAMI_ASSIGN_OR_RETURN(core::PodAllocation a, core::DecodePodDevices(*text));
    if (container_index < 0 || container_index >= static_cast<int>(a.containers.size()) ||
        a.containers[container_index].empty())
      return FailedPrecondition("pod ", pod.Key(), ": container ", container_index,
                                " is not waiting any more");
    a.containers[container_index].clear();
    HAMI_ASSIGN_OR_RETURN(std::string encoded, core::EncodePodDevices(a));
    auto& annotations = obj["metadata"]["annotations"];
    annotations[vendors::nvidia::kNvidiaDevicesToAllocate] = encoded;
    bool done = true;
    for (const auto& c : a.containers) done = done && c.empty();
    if (done) annotations[core::kBindPhase] = core::kBindPhaseSuccess;
    return OkStatus();
  });
  return r.status();
}

Status K8sPendingPodSource::RecordMig(const PendingPod& pod,
                                      const std::vector<core::MigAllocation>& created) {
  auto r = client_->Mutate(k8s::kPods, pod.namespace_, pod.name, [&](Json& obj) -> Status {
    if (Str(obj, "metadata", "uid") != pod.uid)
      return NotFound("pod ", pod.Key(), " was re-created");
    const std::string* text = Annotation(obj, core::kMigAllocations);
    if (text == nullptr)
      return FailedPrecondition("pod ", pod.Key(), " has no ", core::kMigAllocations);
    HAMI_ASSIGN_OR_RETURN(std::vector<core::MigAllocation> entries,
                          core::DecodeMigAllocations(*text));
    for (auto& e : entries) {
      for (const auto& c : created) {
        if (SameMigGrant(e, c)) e = c;
      }
    }
    obj["metadata"]["annotations"][core::kMigAllocations] = core::EncodeMigAllocations(entries);
    return OkStatus();
  });
  return r.status();
}

StatusOr<std::vector<core::MigAllocation>> K8sPendingPodSource::ActiveMigGrants() {
  k8s::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + node_;
  HAMI_ASSIGN_OR_RETURN(Json list, client_->List(k8s::kPods, "", opts));
  std::vector<core::MigAllocation> out;
  if (!list.contains("items") || !list["items"].is_array()) return out;
  for (const auto& pod : list["items"]) {
    const std::string phase = Str(pod, "status", "phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    const std::string* text = Annotation(pod, core::kMigAllocations);
    if (text == nullptr) continue;
    auto entries = core::DecodeMigAllocations(*text);
    if (!entries.ok())
      return Annotate(entries.status(),
                      StrCat("pod ", Str(pod, "metadata", "namespace"), "/",
                             Str(pod, "metadata", "name"), " ", core::kMigAllocations));
    out.insert(out.end(), entries->begin(), entries->end());
  }
  return out;
}

Status K8sPendingPodSource::MarkFailed(const PendingPod& pod, std::string_view reason) {
  spdlog::error("pod {}: {}", pod.Key(), std::string(reason));
  auto r = client_->Mutate(k8s::kPods, pod.namespace_, pod.name, [&](Json& obj) -> Status {
    if (Str(obj, "metadata", "uid") != pod.uid)
      return NotFound("pod ", pod.Key(), " was re-created");
    obj["metadata"]["annotations"][core::kBindPhase] = core::kBindPhaseFailed;
    return OkStatus();
  });
  return r.status();
}

NodeRegistrar::NodeRegistrar(k8s::Client* client, std::string node_name, AnnotationsFn annotations,
                             const Clock* clock, CapacityFn capacity)
    : client_(client),
      node_(std::move(node_name)),
      annotations_(std::move(annotations)),
      clock_(clock),
      capacity_(std::move(capacity)) {}

bool NodeRegistrar::Changed() const {
  return annotations_() != last_written_;
}

Status NodeRegistrar::SyncOnce() {
  std::map<std::string, std::string> want = annotations_();
  Json quantities = Json::object();  // status.capacity and .allocatable wanted (strings)
  if (capacity_)
    for (const auto& [name, value] : capacity_()) quantities[name] = std::to_string(value);
  bool status_agrees = true;  // the Node read below already holds them (kubelet may drop them)
  auto r = client_->Mutate(k8s::kNodes, "", node_, [&](Json& obj) -> Status {
    status_agrees = true;
    const Json& read = obj;  // const: reading must not add keys to what Mutate writes back
    for (const char* field : {"capacity", "allocatable"}) {
      const Json* have = nullptr;
      if (auto st = read.find("status"); st != read.end() && st->is_object())
        if (auto f = st->find(field); f != st->end()) have = &*f;
      for (const auto& [name, value] : quantities.items())
        status_agrees = status_agrees && have != nullptr && have->is_object() &&
                        have->value(name, Json()) == value;
    }
    auto& annotations = obj["metadata"]["annotations"];
    if (!annotations.is_object()) annotations = Json::object();
    for (const auto& [k, v] : want) annotations[k] = v;
    // Answer the scheduler's handshake: it marks the node unhealthy while "Requesting" stays, and
    // keeps the node out while its cleanup mark ("Deleted_...") stays.
    const std::string* hs = Annotation(obj, vendors::nvidia::kNodeHandshake);
    if (hs == nullptr || hs->find(core::kHandshakeRequesting) != std::string::npos ||
        hs->find("Deleted") != std::string::npos) {
      annotations[vendors::nvidia::kNodeHandshake] =
          core::EncodeHandshake({"Reported", clock_->UnixSeconds()});
    }
    return OkStatus();
  });
  if (!r.ok()) return Annotate(r.status(), StrCat("update node ", node_, " annotations"));
  last_written_ = std::move(want);
  if (quantities.empty() || status_agrees) return OkStatus();
  Json patch = {{"status", {{"capacity", quantities}, {"allocatable", quantities}}}};
  if (auto p = client_->Patch(k8s::kNodes, "", node_, k8s::PatchType::kMerge, patch, "status");
      !p.ok())
    return Annotate(p.status(), StrCat("report node ", node_, " capacity (nodes/status)"));
  return OkStatus();
}

}  // namespace hami::deviceplugin
