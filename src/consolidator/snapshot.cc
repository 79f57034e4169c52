#include "consolidator/snapshot.h"

#include <algorithm>

#include "core/annotations.h"
#include "core/node_codec.h"
#include "core/pod_codec.h"
#include "k8s/client.h"
#include "k8s/label_selector.h"
#include "scheduler/gpu_reservation.h"
#include "vendors/nvidia/annotations.h"

namespace hami::consolidator {
namespace {

const Json& Field(const Json& obj, const char* a, const char* b = nullptr) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(a);
  if (it == obj.end()) return kNull;
  if (b == nullptr) return *it;
  if (!it->is_object()) return kNull;
  auto jt = it->find(b);
  return jt == it->end() ? kNull : *jt;
}

std::string Str(const Json& v) {
  return v.is_string() ? v.get<std::string>() : std::string();
}

// The value of key `k` in metadata.<map> ("" when absent); *present says whether it is there.
std::string MetaMap(const Json& obj, const char* map, const char* k, bool* present = nullptr) {
  const Json& m = Field(obj, "metadata", map);
  auto it = m.is_object() ? m.find(k) : m.end();
  const bool there = m.is_object() && it != m.end() && it->is_string();
  if (present != nullptr) *present = there;
  return there ? it->get<std::string>() : std::string();
}

// The controller owner reference (controller: true), or null.
const Json* ControllerOwner(const Json& pod) {
  const Json& refs = Field(pod, "metadata", "ownerReferences");
  if (!refs.is_array()) return nullptr;
  for (const Json& r : refs)
    if (r.is_object() && r.value("controller", false)) return &r;
  return nullptr;
}

std::string PodKey(const Json& pod) {
  return Str(Field(pod, "metadata", "namespace")) + "/" + Str(Field(pod, "metadata", "name"));
}

// Unix minutes of a metav1.Time field; -1 when absent or unreadable.
int32_t MinuteOf(const Json& v) {
  if (!v.is_string()) return -1;
  StatusOr<int64_t> us = k8s::ParseTimeMicros(v.get<std::string>());
  return us.ok() ? static_cast<int32_t>(*us / 60'000'000) : -1;
}

// Whether `pod` landed on the reservation of move `f`: bound to its node, holding its GPU, of its
// namespace and controller owner, decided onto it (the scheduler names the reservation, the evicted
// pod's uid, on the pod it steers there: scheduler::kGpuReservationPodKey).
bool TookReservation(const Json& pod, const InFlight& f) {
  if (f.reserve_until_s == 0 ||
      MetaMap(pod, "annotations", scheduler::kGpuReservationPodKey) != f.uid ||
      Str(Field(pod, "spec", "nodeName")) != f.to_node ||
      Str(Field(pod, "metadata", "namespace")) != f.pod_key.substr(0, f.pod_key.find('/')))
    return false;
  const Json* owner = ControllerOwner(pod);
  if (owner == nullptr || Str(Field(*owner, "uid")) != f.owner_uid) return false;
  StatusOr<core::PodAllocation> alloc =
      core::DecodePodDevices(MetaMap(pod, "annotations", vendors::nvidia::kNvidiaDevicesAllocated));
  if (!alloc.ok()) return false;
  for (const auto& c : alloc->containers)
    for (const core::ContainerDevice& d : c)
      if (d.uuid == f.to_gpu) return true;
  return false;
}

}  // namespace

const char* HoldName(Hold h) {
  switch (h) {
    case Hold::kMovable:
      return "movable";
    case Hold::kBarePod:
      return "no controller owner";
    case Hold::kJobNotOptedIn:
      return "a Job's pod without hami.io/consolidate";
    case Hold::kOtherOwner:
      return "owner is not a Deployment, ReplicaSet or StatefulSet";
    case Hold::kAnnotated:
      return "hami.io/no-consolidate";
    case Hold::kNamespaceOptedOut:
      return "namespace opted out";
    case Hold::kPdbBlocks:
      return "PodDisruptionBudget allows no disruption";
    case Hold::kPdbMultiple:
      return "more than one PodDisruptionBudget";
    case Hold::kNotRunning:
      return "not running";
    case Hold::kBackoff:
      return "backing off after a failed move";
    case Hold::kNoProfile:
      return "no trusted usage profile";
    case Hold::kSharesGpu:
      return "its GPU holds a pod without a profile";
  }
  return "?";
}

Hold OwnerHold(const Json& pod, const Json& ns, const EligibilityOptions& options) {
  const std::string pod_ns = Str(Field(pod, "metadata", "namespace"));
  bool ns_label = false;
  const std::string ns_value = MetaMap(ns, "labels", kNoConsolidate, &ns_label);
  if (options.skip_namespaces.count(pod_ns) != 0 || (ns_label && ns_value != "false"))
    return Hold::kNamespaceOptedOut;
  bool annotated = false;
  const std::string value = MetaMap(pod, "annotations", kNoConsolidate, &annotated);
  if (annotated && value != "false") return Hold::kAnnotated;
  const Json* owner = ControllerOwner(pod);
  if (owner == nullptr) return Hold::kBarePod;
  const std::string kind = owner->value("kind", "");
  const std::string api = owner->value("apiVersion", "");
  if (api == "apps/v1" && (kind == "ReplicaSet" || kind == "StatefulSet" || kind == "Deployment"))
    return Hold::kMovable;
  if (api == "batch/v1" && kind == "Job")
    return MetaMap(pod, "annotations", kConsolidate) == "true" ? Hold::kMovable
                                                               : Hold::kJobNotOptedIn;
  return Hold::kOtherOwner;
}

Hold PdbHold(const Json& pod, const std::vector<Json>& pdbs, std::string* pdb, int64_t* allowed) {
  pdb->clear();
  *allowed = 0;
  const std::string ns = Str(Field(pod, "metadata", "namespace"));
  const Json& labels = Field(pod, "metadata", "labels");
  const Json* match = nullptr;
  for (const Json& p : pdbs) {
    if (Str(Field(p, "metadata", "namespace")) != ns) continue;
    const Json& sel = Field(p, "spec", "selector");
    if (!sel.is_object() || sel.empty()) continue;  // the Eviction API: selects nothing
    StatusOr<bool> m = k8s::LabelSelectorMatches(sel, labels);
    if (!m.ok() || !*m) continue;
    if (match != nullptr) return Hold::kPdbMultiple;
    match = &p;
  }
  if (match == nullptr) return Hold::kMovable;
  *pdb = ns + "/" + Str(Field(*match, "metadata", "name"));
  const Json& st = Field(*match, "status");
  const Json& gen = Field(*match, "metadata", "generation");
  const Json& seen = Field(st, "observedGeneration");
  if (gen.is_number_integer() && (!seen.is_number_integer() || seen.get<int64_t>() < gen))
    return Hold::kPdbBlocks;  // the disruption controller has not caught up
  const Json& a = Field(st, "disruptionsAllowed");
  *allowed = a.is_number_integer() ? a.get<int64_t>() : 0;
  return *allowed > 0 ? Hold::kMovable : Hold::kPdbBlocks;
}

std::string WorkloadOf(const Json& pod) {
  const Json* owner = ControllerOwner(pod);
  if (owner == nullptr) return "";
  std::string kind = owner->value("kind", "");
  std::string name = owner->value("name", "");
  const std::string hash = MetaMap(pod, "labels", "pod-template-hash");
  if (kind == "ReplicaSet" && !hash.empty() && name.size() > hash.size() + 1 &&
      name.compare(name.size() - hash.size() - 1, std::string::npos, "-" + hash) == 0) {
    kind = "Deployment";
    name.resize(name.size() - hash.size() - 1);
  }
  return Str(Field(pod, "metadata", "namespace")) + "/" + kind + "/" + name;
}

Snapshot BuildSnapshot(const Objects& objects, History* history, const scheduler::UsageRule& rule,
                       const EligibilityOptions& options, int32_t now_minute,
                       int32_t move_timeout_min) {
  Snapshot snap;
  consolidate::ClusterState& state = snap.state;
  state.now = now_minute;
  std::map<std::string, int> gpu_index;  // uuid -> index
  for (const Json& node : objects.nodes) {
    const std::string name = Str(Field(node, "metadata", "name"));
    StatusOr<std::vector<core::DeviceInfo>> devs =
        core::DecodeNodeDevices(MetaMap(node, "annotations", vendors::nvidia::kNodeNvidiaRegister));
    if (!devs.ok()) continue;
    const std::vector<std::string> cordoned =
        core::DecodeDeviceCordon(MetaMap(node, "annotations", core::kDeviceCordon));
    const bool unschedulable = Field(node, "spec", "unschedulable") == true;
    for (const core::DeviceInfo& d : *devs) {
      if (d.vendor != core::kNvidiaVendor || core::IsMigDevice(d) || !d.health) continue;
      const bool cordon = std::find(cordoned.begin(), cordoned.end(), d.uuid) != cordoned.end();
      gpu_index[d.uuid] = static_cast<int>(state.gpus.size());
      state.gpus.push_back({d.uuid, d.devmem_mib, !unschedulable && !cordon});
      snap.gpus.push_back({name, d.uuid, 0});
    }
  }
  std::map<std::string, const Json*> namespaces;
  for (const Json& n : objects.namespaces) namespaces[Str(Field(n, "metadata", "name"))] = &n;

  // Moves that finished: a pod of the workload created at or after the eviction runs now. Each
  // replacement finishes one move (the oldest first) and inherits that pod's move history.
  std::map<std::string, std::vector<int32_t>> inherited;  // pod key -> moves
  std::set<std::string> claimed;
  std::vector<InFlight> open;
  for (const InFlight& f : history->in_flight) {
    const Json* replacement = nullptr;
    for (const Json& pod : objects.pods) {
      const std::string key = PodKey(pod);
      if (claimed.count(key) != 0 || Str(Field(pod, "metadata", "uid")) == f.uid ||
          WorkloadOf(pod) != f.workload)
        continue;
      if (Str(Field(pod, "status", "phase")) != "Running") continue;
      if (MinuteOf(Field(pod, "metadata", "creationTimestamp")) < f.minute) continue;
      replacement = &pod;
      break;
    }
    if (replacement != nullptr) {
      const std::string key = PodKey(*replacement);
      claimed.insert(key);
      std::vector<int32_t> moves = history->moves[f.pod_key];
      history->moves.erase(f.pod_key);
      auto& into = inherited[key];
      into.insert(into.end(), moves.begin(), moves.end());
    } else if (now_minute < f.deadline_minute) {
      open.push_back(f);
      // Its replacement landed on the reserved GPU (not running yet): the reservation is
      // withdrawn, no scheduler replica charges it again (docs/consolidation.md).
      for (const Json& pod : objects.pods)
        if (TookReservation(pod, f)) open.back().reserve_until_s = 0;
    } else {
      history->moves.erase(f.pod_key);
      snap.timed_out.push_back(f);
    }
  }
  history->in_flight = open;
  for (auto& [key, moves] : inherited) {
    auto& h = history->moves[key];
    h.insert(h.end(), moves.begin(), moves.end());
    std::sort(h.begin(), h.end());
  }
  // Keep one day of history (the longest any budget looks back).
  for (auto it = history->moves.begin(); it != history->moves.end();) {
    auto& v = it->second;
    v.erase(
        std::remove_if(v.begin(), v.end(),
                       [&](int32_t m) { return m <= now_minute - consolidate::kMinutesPerDay; }),
        v.end());
    it = v.empty() ? history->moves.erase(it) : std::next(it);
  }

  std::vector<bool> foreign(state.gpus.size(), false);
  std::vector<std::pair<std::string, Hold>> held;
  for (const Json& pod : objects.pods) {
    const std::string node = Str(Field(pod, "spec", "nodeName"));
    const std::string phase = Str(Field(pod, "status", "phase"));
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    StatusOr<core::PodAllocation> alloc = core::DecodePodDevices(
        MetaMap(pod, "annotations", vendors::nvidia::kNvidiaDevicesAllocated));
    if (!alloc.ok()) continue;
    std::vector<int> on;
    for (const auto& c : alloc->containers)
      for (const core::ContainerDevice& d : c)
        if (auto g = gpu_index.find(d.uuid); g != gpu_index.end()) on.push_back(g->second);
    if (on.empty()) continue;
    for (int g : on) ++snap.gpus[static_cast<size_t>(g)].pods;
    const std::string ns = Str(Field(pod, "metadata", "namespace"));
    bool has_profile = false;
    const std::string profile =
        MetaMap(pod, "annotations", scheduler::kUsageProfileKey, &has_profile);
    std::optional<usage::Tenant> tenant =
        on.size() == 1 ? rule.TenantOfPlaced(ns, has_profile ? &profile : nullptr, *alloc)
                       : std::nullopt;
    const std::string key = PodKey(pod);
    if (!tenant) {
      for (int g : on) foreign[static_cast<size_t>(g)] = true;
      held.emplace_back(key, Hold::kNoProfile);
      continue;
    }
    consolidate::PodState ps;
    ps.name = key;
    ps.workload = WorkloadOf(pod);
    ps.gpu = on[0];
    ps.tenant = *tenant;
    int32_t start = MinuteOf(Field(pod, "status", "startTime"));
    if (start < 0) start = MinuteOf(Field(pod, "metadata", "creationTimestamp"));
    ps.since_minute = start < 0 ? now_minute : start;
    if (auto h = history->moves.find(key); h != history->moves.end()) ps.move_minutes = h->second;
    PodRef ref;
    ref.ns = ns;
    ref.name = Str(Field(pod, "metadata", "name"));
    ref.uid = Str(Field(pod, "metadata", "uid"));
    ref.node = node;
    ref.workload = ps.workload;
    if (const Json* owner = ControllerOwner(pod); owner != nullptr)
      ref.owner_uid = Str(Field(*owner, "uid"));
    for (const auto& c : alloc->containers)  // the one grant on our GPUs (`on` has one entry)
      for (const core::ContainerDevice& d : c)
        if (gpu_index.count(d.uuid) != 0) ref.mem_mib = d.usedmem_mib, ref.cores = d.usedcores;
    const auto nsit = namespaces.find(ns);
    Hold hold = OwnerHold(pod, nsit == namespaces.end() ? Json() : *nsit->second, options);
    const bool terminating = !Field(pod, "metadata", "deletionTimestamp").is_null();
    if (hold == Hold::kMovable && (phase != "Running" || terminating)) hold = Hold::kNotRunning;
    if (hold == Hold::kMovable) hold = PdbHold(pod, objects.pdbs, &ref.pdb, &ref.pdb_allowed);
    if (auto b = history->backoff_until.find(ps.workload);
        hold == Hold::kMovable && b != history->backoff_until.end() && now_minute < b->second)
      hold = Hold::kBackoff;
    ps.movable = hold == Hold::kMovable;
    ps.in_flight = terminating;
    if (!ps.movable) held.emplace_back(key, hold);
    state.pods.push_back(std::move(ps));
    snap.pods.push_back(std::move(ref));
  }
  for (size_t i = 0; i < snap.pods.size(); ++i) {
    consolidate::PodState& ps = state.pods[i];
    if (!foreign[static_cast<size_t>(ps.gpu)] || !ps.movable) continue;
    ps.movable = false;
    held.emplace_back(ps.name, Hold::kSharesGpu);
  }
  for (size_t g = 0; g < foreign.size(); ++g)
    if (foreign[g]) state.gpus[g].accepts = false;
  // Moves under way whose replacement is not running yet: they count toward the budgets (an
  // evicted pod still terminating is in the state already, in flight).
  std::set<std::string> present;
  for (const PodRef& r : snap.pods) present.insert(r.uid);
  for (const InFlight& f : history->in_flight) {
    if (present.count(f.uid) != 0) continue;
    consolidate::PodState ghost;
    ghost.name = f.pod_key;
    ghost.workload = f.workload;
    ghost.gpu = -1;
    ghost.in_flight = true;
    ghost.movable = false;
    ghost.since_minute = f.minute;
    if (auto h = history->moves.find(f.pod_key); h != history->moves.end())
      ghost.move_minutes = h->second;
    state.pods.push_back(std::move(ghost));
  }
  std::sort(held.begin(), held.end());
  for (auto& [pod, why] : held) snap.held.push_back({pod, why});
  return snap;
}

}  // namespace hami::consolidator
