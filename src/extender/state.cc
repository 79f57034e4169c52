#include "extender/state.h"

#include <algorithm>
#include <climits>
#include <map>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "core/annotations.h"
#include "core/mig.h"
#include "core/node_codec.h"
#include "core/pod_codec.h"
#include "core/quantity.h"
#include "vendors/nvidia/annotations.h"

namespace hami::extender {

namespace nvidia = vendors::nvidia;

const Json* FieldAt(const Json& j, std::initializer_list<const char*> keys) {
  const Json* cur = &j;
  for (const char* k : keys) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string StringAt(const Json& j, std::initializer_list<const char*> keys) {
  const Json* v = FieldAt(j, keys);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

namespace {

// An annotation of an object, or nullptr.
const std::string* Annotation(const Json& obj, const char* key) {
  const Json* v = FieldAt(obj, {"metadata", "annotations", key});
  return v && v->is_string() ? &v->get_ref<const std::string&>() : nullptr;
}

// The entries of the pod's hami.io/vgpu-mig-allocations that carry the runtime identity the device
// plugin writes back once an instance exists. An annotation that does not decode gives none: the
// decision itself is checked (and reported) where it is charged.
std::vector<core::MigAllocation> MigRuntimeOf(const Json& pod) {
  std::vector<core::MigAllocation> out;
  const std::string* text = Annotation(pod, core::kMigAllocations);
  if (text == nullptr) return out;
  auto entries = core::DecodeMigAllocations(*text);
  if (!entries.ok()) return out;
  for (core::MigAllocation& e : *entries)
    if (e.HasRuntime()) out.push_back(std::move(e));
  return out;
}

std::string KeyOf(const std::string& ns, const std::string& name) {
  return StrCat(ns, "/", name);
}

// Integer value of a quantity-valued map entry (allocatable count, quota limit); nullopt when
// absent or malformed.
std::optional<int64_t> QuantityAt(const Json& obj, std::initializer_list<const char*> path,
                                  const std::string& key) {
  const Json* m = FieldAt(obj, path);
  if (m == nullptr || !m->is_object()) return std::nullopt;
  auto it = m->find(key);
  if (it == m->end()) return std::nullopt;
  auto q = core::ParseQuantityJson(*it);
  if (!q.ok()) return std::nullopt;
  return core::QuantityToUnits(*q, core::Rounding::kDown);
}

// A quantity-valued map entry in milli units (CPU) or MiB (memory, rounded up); 0 when absent or
// malformed (0 = not tracked).
int64_t MilliAt(const Json& obj, std::initializer_list<const char*> path, const char* key) {
  const Json* m = FieldAt(obj, path);
  if (m == nullptr || !m->is_object() || !m->contains(key)) return 0;
  auto q = core::ParseQuantityJson((*m)[key]);
  if (!q.ok()) return 0;
  auto milli = core::QuantityToMilli(*q);
  return milli.ok() ? std::max<int64_t>(*milli, 0) : 0;
}
int64_t MiBAt(const Json& obj, std::initializer_list<const char*> path, const char* key) {
  const Json* m = FieldAt(obj, path);
  if (m == nullptr || !m->is_object() || !m->contains(key)) return 0;
  auto q = core::ParseQuantityJson((*m)[key]);
  if (!q.ok() || q->IsNegative()) return 0;
  return core::QuantityToMiB(*q, core::Rounding::kUp);
}

}  // namespace

core::CpuMemory NodeAllocatable(const Json& node) {
  return {MilliAt(node, {"status", "allocatable"}, "cpu"),
          MiBAt(node, {"status", "allocatable"}, "memory")};
}

core::CpuMemory PodNodeRequest(const Json& pod, const vendors::VendorSet& vendors) {
  auto parsed = vendors.ParsePod(pod);
  if (!parsed.ok()) return {};
  return core::EffectivePodRequest(*parsed);
}

std::map<std::string, std::string> AnnotationsOf(const Json& obj) {
  std::map<std::string, std::string> out;
  if (const Json* a = FieldAt(obj, {"metadata", "annotations"}); a && a->is_object())
    for (const auto& [k, val] : a->items())
      if (val.is_string()) out[k] = val.get<std::string>();
  return out;
}

vendors::NodeView VendorNodeView(const Json& node) {
  vendors::NodeView v;
  if (const Json* name = FieldAt(node, {"metadata", "name"}); name && name->is_string())
    v.name = name->get<std::string>();
  v.annotations = AnnotationsOf(node);
  if (const Json* labels = FieldAt(node, {"metadata", "labels"}); labels && labels->is_object())
    for (const auto& [k, val] : labels->items())
      if (val.is_string()) v.labels[k] = val.get<std::string>();
  for (const char* part : {"capacity", "allocatable"}) {
    const Json* m = FieldAt(node, {"status", part});
    if (m == nullptr || !m->is_object()) continue;
    for (const auto& [k, val] : m->items()) {
      if (v.capacity.count(k)) continue;
      if (auto n = QuantityAt(node, {"status", part}, k)) v.capacity[k] = *n;
    }
  }
  if (const Json* addrs = FieldAt(node, {"status", "addresses"}); addrs && addrs->is_array())
    for (const Json& a : *addrs)
      if (a.is_object() && a.value("type", Json()) == "InternalIP" && a.contains("address") &&
          a["address"].is_string() && !a["address"].get<std::string>().empty()) {
        v.internal_ip = a["address"].get<std::string>();
        break;
      }
  return v;
}

NodeView NodeViewFromJson(const Json& node, int64_t now, int64_t handshake_timeout_s,
                          const vendors::VendorSet& vendors) {
  NodeView v;
  v.info.name = StringAt(node, {"metadata", "name"});
  const core::CpuMemory alloc = NodeAllocatable(node);
  v.info.cpu_milli = alloc.cpu_milli;
  v.info.memory_mib = alloc.memory_mib;
  if (const Json* labels = FieldAt(node, {"metadata", "labels"}); labels && labels->is_object())
    for (const auto& [k, val] : labels->items())
      if (val.is_string()) v.info.labels[k] = val.get<std::string>();
  // Every enabled vendor's devices, NVIDIA's first, each vendor's handshake by the same rule.
  vendors::VendorSet::NodeDevices d =
      vendors.DecodeNode(VendorNodeView(node), now, handshake_timeout_s);
  v.error = std::move(d.errors);
  if (!d.registered) {
    v.refused = !v.error.empty();
    if (v.error.empty())
      v.error = "node registers no device of an enabled vendor (device plugin not running?)";
    return v;
  }
  v.registered = true;
  v.unhealthy = d.unhealthy;
  v.info.devices = std::move(d.devices);
  if (const std::string* cordon = Annotation(node, core::kDeviceCordon))
    v.info.cordoned = core::DecodeDeviceCordon(*cordon);
  if (const std::string* score = Annotation(node, nvidia::kNodeNvidiaScore)) {
    // Malformed: the scores are ignored but the devices kept (docs/migration.md), and it is said.
    auto s = core::DecodeLinkScores(*score);
    if (s.ok())
      v.info.link_scores = std::move(*s);
    else
      v.error = StrCat(v.error, v.error.empty() ? "" : "; ", nvidia::kNodeNvidiaScore, ": ",
                       std::string(s.status().message()), " (link scores ignored)");
  }
  return v;
}

std::vector<core::ContainerKind> KindsOfPodJson(const Json& pod) {
  std::vector<core::ContainerKind> kinds;
  if (const Json* init = FieldAt(pod, {"spec", "initContainers"}); init && init->is_array())
    for (const auto& c : *init)
      kinds.push_back(c.is_object() && c.value("restartPolicy", "") == "Always"
                          ? core::ContainerKind::kSidecar
                          : core::ContainerKind::kInit);
  if (const Json* app = FieldAt(pod, {"spec", "containers"}); app && app->is_array())
    kinds.insert(kinds.end(), app->size(), core::ContainerKind::kApp);
  return kinds;
}

std::optional<core::PodAllocation> HeldAllocation(const Json& pod, std::string* why_not,
                                                  const vendors::VendorSet& vendors) {
  auto no = [&](std::string why) -> std::optional<core::PodAllocation> {
    if (why_not) *why_not = std::move(why);
    return std::nullopt;
  };
  const std::string phase = StringAt(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed") return no("pod finished");
  const std::string* node = Annotation(pod, core::kVgpuNode);
  if (node == nullptr || node->empty()) return no("no decision annotations");
  const std::string* bind_phase = Annotation(pod, core::kBindPhase);
  if (bind_phase && *bind_phase == core::kBindPhaseFailed &&
      StringAt(pod, {"spec", "nodeName"}).empty())
    return no("bind failed and the pod is not bound");
  bool any = false;
  auto all = vendors.DecodeDecision(AnnotationsOf(pod), &any);
  if (!any) return no("no decision annotations");
  if (!all.ok()) return no(std::string(all.status().message()));
  all->node = *node;
  return std::move(*all);
}

bool InitContainersSucceeded(const Json& pod) {
  const Json* init = FieldAt(pod, {"spec", "initContainers"});
  if (init == nullptr || !init->is_array()) return false;
  const Json* statuses = FieldAt(pod, {"status", "initContainerStatuses"});
  if (statuses == nullptr || !statuses->is_array()) return false;
  int regular = 0;
  for (const auto& c : *init) {
    if (!c.is_object() || c.value("restartPolicy", "") == "Always")
      continue;  // a sidecar keeps running
    ++regular;
    const std::string name = c.value("name", "");
    bool ok = false;
    for (const auto& st : *statuses) {
      if (!st.is_object() || st.value("name", "") != name) continue;
      const Json* code = FieldAt(st, {"state", "terminated", "exitCode"});
      ok = code != nullptr && code->is_number_integer() && code->get<int64_t>() == 0;
    }
    if (!ok) return false;
  }
  return regular > 0;
}

ClusterState::ClusterState(scheduler::Scheduler& sched, StateOptions opts)
    : sched_(sched), opts_(std::move(opts)), clock_(opts_.clock ? *opts_.clock : RealClock::Get()) {
  vendor_quota_keys_ = opts_.vendors->QuotaKeys();
  for (const auto& k : vendor_quota_keys_) quota_keys_.emplace(k.key.resource, k.key);
}

PodTotals ClusterState::ChargeOf(const std::vector<core::ContainerKind>& kinds,
                                 const core::PodAllocation& alloc, bool init_finished) const {
  return opts_.vendors->QuotaCharge(core::DeviceTotalsByVendor(kinds, alloc, init_finished));
}

const vendors::QuotaKey* ClusterState::QuotaKeyOf(const std::string& resource) const {
  auto it = quota_keys_.find(resource);
  return it == quota_keys_.end() ? nullptr : &it->second;
}

void ClusterState::ApplyNode(const Json& node, int64_t now) {
  NodeView v = NodeViewFromJson(node, now, opts_.handshake_timeout_s, *opts_.vendors);
  if (v.info.name.empty()) return;
  // What a decision served by this node carries (remote GPU: the lupine endpoint); read on every
  // update, as it depends on fields (addresses) the fingerprint below leaves out.
  {
    std::optional<StatusOr<std::map<std::string, std::string>>> pool;
    if (v.registered)
      for (const auto& vendor : opts_.vendors->vendors()) {
        if (!vendor->pooled()) continue;
        const bool serves = std::any_of(
            v.info.devices.begin(), v.info.devices.end(),
            [&](const core::DeviceInfo& d) { return d.vendor == vendor->common_word(); });
        if (serves) pool = vendor->PoolAnnotations(VendorNodeView(node));
      }
    absl::MutexLock l(&nodes_mu_);
    if (pool)
      pool_annotations_.insert_or_assign(v.info.name, std::move(*pool));
    else
      pool_annotations_.erase(v.info.name);
  }
  // Skip the cache update when nothing the scheduler reads changed (status heartbeats).
  std::string fp = StrCat(v.registered, v.unhealthy, "|", v.info.cpu_milli, "|", v.info.memory_mib,
                          "|", core::EncodeNodeDevicesJson(v.info.devices), "|",
                          core::EncodeDeviceCordon(v.info.cordoned), "|",
                          core::EncodeLinkScores(v.info.link_scores));
  for (const auto& [k, val] : v.info.labels) fp += StrCat("|", k, "=", val);
  {
    absl::MutexLock l(&nodes_mu_);
    auto it = node_fingerprint_.find(v.info.name);
    if (it != node_fingerprint_.end() && it->second == fp) return;
    node_fingerprint_[v.info.name] = fp;
  }
  if (!v.registered) {
    // Said once per change of the node (the fingerprint above): a registration that was refused
    // (garbage, too many devices, an expired handshake) is a warning; a node without any is not.
    if (v.refused)
      spdlog::warn("node {}: not offered: {}", v.info.name, v.error);
    else
      SPDLOG_DEBUG("node {}: {}", v.info.name, v.error);
    sched_.RemoveNode(v.info.name);
    return;
  }
  if (v.unhealthy) spdlog::warn("node {}: {}", v.info.name, v.error);
  const std::string name = v.info.name;
  sched_.UpsertNode(std::move(v.info));
  CheckDecisionsOnNode(name);
}

void ClusterState::CheckDecisionsOnNode(const std::string& node) {
  std::vector<Report> reports;
  {
    absl::MutexLock l(&mu_);
    auto u = unchecked_.find(node);
    if (u == unchecked_.end()) return;
    const std::set<std::string> uids = std::move(u->second);
    unchecked_.erase(u);
    for (const std::string& uid : uids) {
      auto it = pods_.find(uid);
      if (it == pods_.end() || it->second.allocation.node != node) continue;
      const PodRecord& rec = it->second;
      // What CheckDecisionLocked reads of the pod: it was ours and bound to this node when charged.
      const Json pod{
          {"metadata", {{"uid", uid}, {"name", rec.name}, {"namespace", rec.namespace_}}},
          {"spec", {{"schedulerName", opts_.scheduler_name}, {"nodeName", rec.bound_node}}}};
      std::string message;
      bool over = false;
      const std::string reason =
          CheckDecisionLocked(pod, rec.allocation, rec.kinds, false, &message, &over);
      if (reason.empty()) continue;
      const std::string fingerprint = StrCat(node, "|", rec.encoded);
      RemoveLocked(uid);
      (void)sched_.RemovePod(uid);
      ReportLocked(pod, reason, fingerprint, message, reports);
    }
  }
  Emit(reports);
}

void ClusterState::OnNode(const Json& node) {
  const int64_t now = clock_.UnixSeconds();
  ApplyNode(node, now);
  SyncGpuReservations(StringAt(node, {"metadata", "name"}),
                      StringAt(node, {"metadata", "annotations", scheduler::kGpuReservationsKey}),
                      now);
}

void ClusterState::OnNodeDeleted(const Json& node) {
  const std::string name = StringAt(node, {"metadata", "name"});
  {
    absl::MutexLock l(&nodes_mu_);
    node_fingerprint_.erase(name);
    pool_annotations_.erase(name);
  }
  sched_.RemoveNode(name);
  SyncGpuReservations(name, "", clock_.UnixSeconds());
}

StatusOr<std::map<std::string, std::string>> ClusterState::PoolAnnotationsOf(
    const std::string& node) const {
  absl::MutexLock l(&nodes_mu_);
  auto it = pool_annotations_.find(node);
  if (it == pool_annotations_.end())
    return NotFound("node ", node, " serves no pooled devices (not registered, or gone)");
  return it->second;
}

void ClusterState::AddLocked(PodRecord rec) {
  RemoveLocked(rec.uid);
  auto& u = ns_usage_[rec.namespace_];
  for (const auto& [resource, amount] : rec.totals) u[resource] += amount;
  uid_by_key_[KeyOf(rec.namespace_, rec.name)] = rec.uid;
  if (!rec.gpu_reservation.empty()) {
    gpu_reservation_pods_.emplace(rec.gpu_reservation, rec.uid);
    ClaimGpuReservationLocked(rec.uid, rec.namespace_, rec.owner_uid, rec.gpu_reservation,
                              rec.allocation, !rec.bound_node.empty());
  }
  std::string uid = rec.uid;
  pods_.emplace(std::move(uid), std::move(rec));
}

void ClusterState::RemoveLocked(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  auto& u = ns_usage_[it->second.namespace_];
  for (const auto& [resource, amount] : it->second.totals)
    if ((u[resource] -= amount) == 0) u.erase(resource);  // released: no stale zero entries
  LeaveGpuReservationLocked(it->second);
  auto k = uid_by_key_.find(KeyOf(it->second.namespace_, it->second.name));
  if (k != uid_by_key_.end() && k->second == uid) uid_by_key_.erase(k);
  // A pod on a node the cache never holds (remote-GPU clients on nodes without devices) leaves no
  // entry behind.
  if (auto u = unchecked_.find(it->second.allocation.node); u != unchecked_.end()) {
    u->second.erase(uid);
    if (u->second.empty()) unchecked_.erase(u);
  }
  pods_.erase(it);
}

// A pod reference for Events.
Json PodRefOf(const Json& pod) {
  Json r{{"kind", "Pod"},
         {"apiVersion", "v1"},
         {"namespace", StringAt(pod, {"metadata", "namespace"})},
         {"name", StringAt(pod, {"metadata", "name"})}};
  if (std::string uid = StringAt(pod, {"metadata", "uid"}); !uid.empty()) r["uid"] = uid;
  return r;
}

// Why the MIG grants of a decision cannot be charged on `node` ("" = they can): each must be one
// the device offers (core::CheckMigGrant), must not overlap another grant of the decision that runs
// beside it (one container may hold several instances of one GPU; the containers other than init
// containers run together, so their instances are apart too), and with `fresh` hold no slice
// already charged.
static std::string CheckMigGrants(const scheduler::NodeState& node,
                                  const core::PodAllocation& alloc,
                                  const std::vector<core::ContainerKind>& kinds, bool fresh) {
  std::map<std::string, uint32_t> running;  // slices of the non-init containers, per device
  for (size_t k = 0; k < alloc.containers.size(); ++k) {
    // Kinds line up with the containers when both come from the same pod (else: each alone).
    const bool together =
        kinds.size() == alloc.containers.size() && kinds[k] != core::ContainerKind::kInit;
    std::map<std::string, uint32_t> own;  // this container's slices, per device
    for (const auto& cd : alloc.containers[k]) {
      if (cd.mig_profile.empty()) continue;
      const int i = node.DeviceIndex(cd.uuid);
      if (i < 0) continue;  // UnknownDevice, reported by the caller
      if (std::string why = core::CheckMigGrant(node.info.devices[i], cd); !why.empty()) return why;
      const uint32_t mask = core::MigSliceMask(cd.mig_placement);
      const std::string where = StrCat("MIG placement {start ", cd.mig_placement.start, ", size ",
                                       cd.mig_placement.size, "} on device ", cd.uuid);
      uint32_t& held = together ? running[cd.uuid] : own[cd.uuid];
      if ((held & mask) != 0) return StrCat(where, " overlaps another instance of the decision");
      held |= mask;
      if (fresh && (node.usage[i].mig_slices & mask) != 0)
        return StrCat(where, " overlaps an instance already charged");
    }
  }
  return "";
}

std::string ClusterState::CheckDecisionLocked(const Json& pod, const core::PodAllocation& alloc,
                                              const std::vector<core::ContainerKind>& kinds,
                                              bool fresh, std::string* message,
                                              bool* over_committed) const {
  *over_committed = false;
  std::string scheduler = StringAt(pod, {"spec", "schedulerName"});
  if (scheduler.empty()) scheduler = "default-scheduler";
  if (scheduler != opts_.scheduler_name) {
    *message = StrCat("pod names scheduler \"", scheduler, "\", not ", opts_.scheduler_name,
                      ": its device decision is not ours and is not charged");
    return kRejectForeignScheduler;
  }
  const std::string bound = StringAt(pod, {"spec", "nodeName"});
  if (!bound.empty() && bound != alloc.node) {
    *message = StrCat("pod is bound to node ", bound, " but its decision names node ", alloc.node,
                      ": the decision is not charged");
    return kRejectNodeMismatch;
  }
  // Under the node's lock, no copy of its state (this runs for every pod event the informer sees).
  // A node not (yet) known: nothing to check against.
  std::string verdict;
  if (!sched_.HasPooledGrants(alloc)) {
    sched_.cache().WithNode(alloc.node, [&](const scheduler::NodeState& node) {
      verdict = CheckAgainstNode(node, alloc, kinds, fresh, message, over_committed);
    });
    return verdict;
  }
  // Pooled grants (remote GPUs) are checked on the node that serves them, each device once.
  auto split = sched_.SplitPooled(alloc);
  if (!split.ok()) {
    *message = StrCat(split.status().message(), ": the decision is not charged");
    return kRejectUnknownDevice;
  }
  sched_.cache().WithNode(alloc.node, [&](const scheduler::NodeState& node) {
    verdict = CheckAgainstNode(node, split->local, kinds, fresh, message, over_committed);
  });
  if (!verdict.empty() || split->pooled.node.empty()) return verdict;
  std::string pooled_message;
  bool pooled_over = false;
  const std::vector<core::ContainerKind> one_app(split->pooled.containers.size(),
                                                 core::ContainerKind::kApp);
  sched_.cache().WithNode(split->pooled.node, [&](const scheduler::NodeState& node) {
    verdict = CheckAgainstNode(node, split->pooled, one_app, fresh, &pooled_message, &pooled_over);
  });
  if (!verdict.empty() || (pooled_over && !*over_committed)) {
    *message = std::move(pooled_message);
    *over_committed = pooled_over;
  }
  return verdict;
}

std::string ClusterState::CheckAgainstNode(const scheduler::NodeState& node,
                                           const core::PodAllocation& alloc,
                                           const std::vector<core::ContainerKind>& kinds,
                                           bool fresh, std::string* message, bool* over_committed) {
  if (std::string why = CheckMigGrants(node, alloc, kinds, fresh); !why.empty()) {
    *message = StrCat(why, ": the decision is not charged");
    return kRejectMigPlacement;
  }
  for (const auto& [uuid, u] : core::EffectiveDeviceUsage(kinds, alloc)) {
    size_t i = 0;
    while (i < node.info.devices.size() && node.info.devices[i].uuid != uuid) ++i;
    if (i == node.info.devices.size()) {
      *message =
          StrCat("decision names device ", uuid, ", which node ", alloc.node, " does not have");
      return kRejectUnknownDevice;
    }
    const core::DeviceInfo& d = node.info.devices[i];
    if (u.used > std::max(d.count, 1) || u.usedmem_mib > d.devmem_mib || u.usedcores > d.devcore) {
      *message = StrCat("decision claims ", u.used, " task(s), ", u.usedmem_mib, " MiB and ",
                        u.usedcores, " cores on device ", uuid, ", which holds ", d.count,
                        " task(s), ", d.devmem_mib, " MiB and ", d.devcore, " cores");
      return kRejectExceedsDevice;
    }
    if (!fresh || i >= node.usage.size()) continue;
    const core::DeviceUsage& in_use = node.usage[i];
    if (in_use.used + u.used > std::max(d.count, 1) ||
        in_use.usedmem_mib + u.usedmem_mib > d.devmem_mib ||
        in_use.usedcores + u.usedcores > d.devcore) {
      *over_committed = true;
      *message = StrCat("with the pods already charged, device ", uuid, " would hold ",
                        in_use.used + u.used, " task(s), ", in_use.usedmem_mib + u.usedmem_mib,
                        " MiB and ", in_use.usedcores + u.usedcores, " cores of ", d.count, ", ",
                        d.devmem_mib, " MiB and ", d.devcore);
    }
  }
  return "";
}

void ClusterState::ReportLocked(const Json& pod, const std::string& reason,
                                const std::string& fingerprint, std::string message,
                                std::vector<Report>& out) {
  const std::string uid = StringAt(pod, {"metadata", "uid"});
  std::string& last = reported_[uid];
  const std::string key = StrCat(reason, "|", fingerprint);
  if (last == key) return;
  last = key;
  ++rejected_[reason];
  spdlog::warn("pod {}/{}: {}: {}", StringAt(pod, {"metadata", "namespace"}),
               StringAt(pod, {"metadata", "name"}), reason, message);
  out.push_back({PodRefOf(pod), reason, std::move(message)});
}

void ClusterState::Emit(const std::vector<Report>& reports) const {
  if (!opts_.on_rejected_decision) return;
  for (const auto& r : reports) opts_.on_rejected_decision(r.ref, r.reason, r.message);
}

void ClusterState::ScheduleExpiryLocked(const std::string& uid, int64_t at) {
  expiry_.emplace(at, uid);
  next_expiry_.store(expiry_.begin()->first, std::memory_order_relaxed);
}

void ClusterState::OnPod(const Json& pod) {
  const std::string uid = StringAt(pod, {"metadata", "uid"});
  if (uid.empty()) return;
  std::string why;
  auto alloc = HeldAllocation(pod, &why, *opts_.vendors);
  std::vector<core::MigAllocation> mig_runtime;
  if (alloc) mig_runtime = MigRuntimeOf(pod);
  // A running pod's decision that does not decode charges nothing; it is reported, since the pod
  // may hold devices nobody is charged for.
  std::string undecodable;
  if (!alloc) {
    const std::string phase = StringAt(pod, {"status", "phase"});
    const std::string* node = Annotation(pod, core::kVgpuNode);
    bool any = false;
    if (phase != "Succeeded" && phase != "Failed" && node != nullptr && !node->empty()) {
      auto decoded = opts_.vendors->DecodeDecision(AnnotationsOf(pod), &any);
      if (any && !decoded.ok()) undecodable = std::string(decoded.status().message());
    }
  }
  std::vector<Report> reports;
  [&] {
    const std::string phase = StringAt(pod, {"status", "phase"});
    const bool finished = phase == "Succeeded" || phase == "Failed";
    const std::string bound = StringAt(pod, {"spec", "nodeName"});
    absl::MutexLock l(&mu_);
    auto it = pods_.find(uid);
    if (!alloc) {
      expired_.erase(uid);
      if (it != pods_.end() && !finished && !it->second.bound_node.empty() &&
          it->second.allocation.HasDevices() && (it->second.confirmed || !bound.empty())) {
        // A pod seen bound keeps its booking until it finishes or is deleted: a decision removed
        // (or made undecodable) after bind is an edit, not ours, as a changed one is. A pod we
        // placed without devices (CPU only) never carried one: it goes on as a CPU-only pod.
        // Our own /bind can come before the informer's copy of our patch: an unbound copy of a
        // pod not yet confirmed predates the patch (the binding follows it), and is kept below.
        const std::string* node = Annotation(pod, core::kVgpuNode);
        ReportLocked(
            pod, kRejectChangedAfterBind,
            StrCat("gone|", node ? *node : "", "|",
                   opts_.vendors->DecisionFingerprint(AnnotationsOf(pod))),
            StrCat("decision annotations removed or unreadable (",
                   undecodable.empty() ? why : undecodable, ") after the pod was bound to ",
                   it->second.bound_node, "; the decision it was bound with is still charged"),
            reports);
        return;
      }
      if (!undecodable.empty())
        ReportLocked(pod, kRejectUndecodable,
                     StrCat(*Annotation(pod, core::kVgpuNode), "|",
                            opts_.vendors->DecisionFingerprint(AnnotationsOf(pod))),
                     StrCat("decision annotations do not decode: ", undecodable), reports);
      if (it != pods_.end()) {
        // A reservation in flight is kept: this copy of the pod predates our patch.
        if (!it->second.confirmed && !finished) return;
        RemoveLocked(uid);
        (void)sched_.RemovePod(uid);
      }
      // Without devices the pod still takes CPU and memory on the node it is bound to
      // (kube-scheduler placed it, or it runs on a node we do not decide): the policies count it as
      // the sim does.
      auto c = cpu_only_.find(uid);
      if (finished || bound.empty()) {
        if (c != cpu_only_.end()) {
          (void)sched_.RemovePod(uid);
          cpu_only_.erase(c);
        }
        return;
      }
      if (c != cpu_only_.end() && c->second == bound) return;  // the cache already holds it
      const core::CpuMemory req = PodNodeRequest(pod, *opts_.vendors);
      scheduler::PlacedPodResources res;
      res.cpu_milli = req.cpu_milli;
      res.memory_mib = req.memory_mib;
      core::PodAllocation none;
      none.node = bound;
      if (sched_.AddPod(uid, none, res).ok()) cpu_only_[uid] = bound;
      return;
    }
    const std::string encoded = opts_.vendors->DecisionFingerprint(AnnotationsOf(pod));
    const std::string fingerprint = StrCat(alloc->node, "|", encoded);
    const std::vector<core::ContainerKind> kinds = KindsOfPodJson(pod);
    const bool init_finished = InitContainersSucceeded(pod);
    if (it != pods_.end()) {
      const bool same = it->second.encoded == encoded && it->second.allocation.node == alloc->node;
      if (!it->second.confirmed && !same) return;  // stale copy; our newer reservation stands
      if (!same && !it->second.refit_from.empty() && encoded == it->second.refit_from)
        return;  // a copy from before our NUMA refit's patch
      if (same) it->second.refit_from.clear();
      if (!same && !it->second.bound_node.empty()) {
        // Bound pods are never decided again: a changed decision is an edit, not ours.
        ReportLocked(
            pod, kRejectChangedAfterBind, fingerprint,
            StrCat("decision annotations changed after the pod was bound to ",
                   it->second.bound_node, "; the decision it was bound with is still charged"),
            reports);
        return;
      }
      if (same) {
        if (!bound.empty() && bound != alloc->node) {
          std::string message;
          bool over = false;
          const std::string reason =
              CheckDecisionLocked(pod, *alloc, kinds, false, &message, &over);
          RemoveLocked(uid);
          (void)sched_.RemovePod(uid);
          ReportLocked(pod, reason, fingerprint, message, reports);
          return;
        }
        it->second.confirmed = true;
        it->second.mig_runtime = mig_runtime;  // a copy: the record may be made again below
        if (!bound.empty()) {
          it->second.bound_node = bound;
          it->second.expires_at = 0;
          ClaimGpuReservationLocked(uid, it->second.namespace_, it->second.owner_uid,
                                    it->second.gpu_reservation, it->second.allocation, true);
        }
        // The cache already holds exactly this, unless the init containers have finished since:
        // then it is recorded again with their usage released.
        if (it->second.init_finished == init_finished) return;
      }
    }
    {
      if (bound.empty()) {
        if (auto e = expired_.find(uid); e != expired_.end() && e->second == fingerprint)
          return;  // lapsed
      }
      // A consolidation reservation the decision was made on gives its room to the pod first (a
      // replica that read the reservation before the pod would see the GPU over-committed).
      const std::string* reservation = Annotation(pod, scheduler::kGpuReservationPodKey);
      const std::string owner_uid = ControllerOwnerUid(pod);
      if (reservation != nullptr)
        if (HeldGpuReservation* h = GpuReservationForLocked(
                uid, StringAt(pod, {"metadata", "namespace"}), owner_uid, *reservation, *alloc))
          ReleaseGpuReservationLocked(*h);  // held by the pod once it is recorded (AddLocked)
      std::string message;
      bool over = false;
      const std::string reason =
          CheckDecisionLocked(pod, *alloc, kinds, it == pods_.end(), &message, &over);
      if (!reason.empty()) {
        if (it != pods_.end()) {
          RemoveLocked(uid);
          (void)sched_.RemovePod(uid);
        }
        ReportLocked(pod, reason, fingerprint, message, reports);
        return;
      }
      if (over) ReportLocked(pod, kOverCommitted, fingerprint, message, reports);
      PodRecord rec;
      rec.uid = uid;
      rec.namespace_ = StringAt(pod, {"metadata", "namespace"});
      rec.name = StringAt(pod, {"metadata", "name"});
      rec.kinds = kinds;
      rec.allocation = std::move(*alloc);
      rec.init_finished = init_finished;
      rec.totals = ChargeOf(rec.kinds, rec.allocation, init_finished);
      rec.encoded = encoded;
      rec.confirmed = true;
      rec.bound_node = bound;
      rec.mig_runtime = std::move(mig_runtime);
      if (reservation != nullptr) rec.gpu_reservation = *reservation;
      rec.owner_uid = owner_uid;
      const int64_t now = clock_.UnixSeconds();
      if (bound.empty()) {
        // Unbound: the earlier of when it was decided (as it says) and now, plus the TTL.
        int64_t since = now;
        if (const std::string* t = Annotation(pod, core::kVgpuTime)) {
          int64_t v = 0;
          if (absl::SimpleAtoi(*t, &v) && v > 0 && v < since) since = v;
        }
        rec.expires_at = since + opts_.reservation_ttl_s;
        if (rec.expires_at <= now) {
          expired_[uid] = fingerprint;
          if (it != pods_.end()) {
            RemoveLocked(uid);
            (void)sched_.RemovePod(uid);
          }
          return;
        }
      }
      cpu_only_.erase(uid);  // AddPod below replaces that record
      scheduler::PlacedPodResources res;
      res.kinds = rec.kinds;
      res.init_finished = init_finished;
      if (res.kinds.size() != rec.allocation.containers.size()) res.kinds.clear();
      const core::CpuMemory req = PodNodeRequest(pod, *opts_.vendors);
      res.cpu_milli = req.cpu_milli;
      res.memory_mib = req.memory_mib;
      // With the usage rule on, a pod placed by its usage profile packs by it again after a
      // restart (the rule decides whether it is believed: its namespace, the format).
      std::optional<usage::Tenant> tenant;
      if (const scheduler::UsageRule* rule = sched_.usage_rule())
        tenant = rule->TenantOfPlaced(rec.namespace_, Annotation(pod, scheduler::kUsageProfileKey),
                                      rec.allocation);
      Status st = sched_.AddPod(uid, rec.allocation, res, tenant);
      if (!st.ok()) {
        spdlog::warn("pod {}/{}: cannot record its devices: {}", rec.namespace_, rec.name,
                     std::string(st.message()));
        return;
      }
      expired_.erase(uid);
      if (rec.expires_at != 0) ScheduleExpiryLocked(uid, rec.expires_at);
      if (!sched_.cache().HasNode(rec.allocation.node)) unchecked_[rec.allocation.node].insert(uid);
      AddLocked(std::move(rec));
    }
  }();
  Emit(reports);
}

void ClusterState::OnPodDeleted(const Json& pod) {
  const std::string uid = StringAt(pod, {"metadata", "uid"});
  absl::MutexLock l(&mu_);
  expired_.erase(uid);
  reported_.erase(uid);
  RemoveLocked(uid);
  cpu_only_.erase(uid);
  (void)sched_.RemovePod(uid);
}

void ClusterState::OnQuota(const Json& quota) {
  QuotaRecord q;
  q.namespace_ = StringAt(quota, {"metadata", "namespace"});
  q.name = StringAt(quota, {"metadata", "name"});
  // A scoped quota (spec.scopes, spec.scopeSelector) applies to some pods only; usage is tracked
  // per namespace, so such a quota is not enforced here (upstream skips it too).
  const Json* spec = FieldAt(quota, {"spec"});
  const bool scoped = spec != nullptr && spec->is_object() &&
                      ((spec->contains("scopes") && !(*spec)["scopes"].empty()) ||
                       (spec->contains("scopeSelector") && !(*spec)["scopeSelector"].is_null()));
  if (!scoped)
    for (const auto& [resource, key] : quota_keys_)
      if (auto v = QuantityAt(quota, {"spec", "hard"}, "limits." + resource)) {
        // Negative = nothing allowed; a limit past int64 once scaled is no limit anyone can
        // reach: saturate.
        const int64_t value = std::max<int64_t>(*v, 0);
        q.limits[resource] = value > INT64_MAX / key.unit ? INT64_MAX : value * key.unit;
      }
  absl::MutexLock l(&mu_);
  if (q.limits.empty()) {
    quotas_.erase(KeyOf(q.namespace_, q.name));
    return;
  }
  quotas_[KeyOf(q.namespace_, q.name)] = std::move(q);
}

void ClusterState::OnQuotaDeleted(const Json& quota) {
  absl::MutexLock l(&mu_);
  quotas_.erase(
      KeyOf(StringAt(quota, {"metadata", "namespace"}), StringAt(quota, {"metadata", "name"})));
}

Status ClusterState::CheckQuotaLocked(const std::string& ns, const PodTotals& demand) const {
  auto lo = quotas_.lower_bound(ns + "/");
  if (lo == quotas_.end() || lo->second.namespace_ != ns) return OkStatus();
  static const PodTotals kNone;
  auto u = ns_usage_.find(ns);
  const PodTotals& used = u != ns_usage_.end() ? u->second : kNone;
  for (auto it = lo; it != quotas_.end() && it->second.namespace_ == ns; ++it) {
    const QuotaRecord& q = it->second;
    for (const auto& [resource, limit] : q.limits) {
      auto d = demand.find(resource);
      if (d == demand.end() || d->second <= 0) continue;
      auto in_use = used.find(resource);
      const int64_t busy = in_use == used.end() ? 0 : in_use->second;
      if (busy + d->second <= limit) continue;
      const vendors::QuotaKey* key = QuotaKeyOf(resource);
      const char* unit = key != nullptr && key->memory ? " MiB" : "";
      return ResourceExhausted("exceeding resource quota ", ns, "/", q.name, ": limits.", resource,
                               " is ", limit, unit, ", ", busy, unit, " in use, this pod asks ",
                               d->second, unit);
    }
  }
  return OkStatus();
}

scheduler::QuotaRoom ClusterState::QuotaRoomOf(const std::string& ns) const {
  scheduler::QuotaRoom room;
  absl::ReaderMutexLock l(&mu_);
  if (quotas_.empty()) return room;
  auto lo = quotas_.lower_bound(ns + "/");
  if (lo == quotas_.end() || lo->second.namespace_ != ns) return room;
  static const PodTotals kNone;
  auto u = ns_usage_.find(ns);
  const PodTotals& used = u != ns_usage_.end() ? u->second : kNone;
  for (auto it = lo; it != quotas_.end() && it->second.namespace_ == ns; ++it) {
    for (const auto& [resource, limit] : it->second.limits) {
      auto in_use = used.find(resource);
      const int64_t left =
          std::max<int64_t>(0, limit - (in_use == used.end() ? 0 : in_use->second));
      for (const auto& k : vendor_quota_keys_) {
        if (k.key.resource != resource) continue;
        auto v = std::find_if(
            room.vendors.begin(), room.vendors.end(),
            [&](const scheduler::QuotaRoom::Vendor& r) { return r.vendor == k.vendor; });
        if (v == room.vendors.end()) v = room.vendors.insert(v, {k.vendor});
        int64_t& slot = k.key.memory ? v->mem_mib : v->cores;
        slot = std::min(slot, left);
      }
    }
  }
  return room;
}

Status ClusterState::TryReserve(PodRecord record) {
  absl::MutexLock l(&mu_);
  RemoveLocked(record.uid);
  HAMI_RETURN_IF_ERROR(CheckQuotaLocked(record.namespace_, record.totals));
  record.confirmed = false;
  record.bound_node.clear();
  record.expires_at = clock_.UnixSeconds() + opts_.reservation_ttl_s;
  ScheduleExpiryLocked(record.uid, record.expires_at);
  expired_.erase(record.uid);
  AddLocked(std::move(record));
  return OkStatus();
}

std::optional<PodRecord> ClusterState::Find(const std::string& uid) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

void ClusterState::MarkBound(const std::string& uid, const std::string& node) {
  absl::MutexLock l(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  it->second.bound_node = node;
  it->second.expires_at = 0;
  ClaimGpuReservationLocked(uid, it->second.namespace_, it->second.owner_uid,
                            it->second.gpu_reservation, it->second.allocation, /*bound=*/true);
}

int ClusterState::ExpireReservations() {
  const int64_t now = clock_.UnixSeconds();
  ExpireGpuReservations(now);
  if (next_expiry_.load(std::memory_order_relaxed) > now) return 0;
  absl::MutexLock l(&mu_);
  int n = 0;
  while (!expiry_.empty() && expiry_.begin()->first <= now) {
    const auto [at, uid] = *expiry_.begin();
    expiry_.erase(expiry_.begin());
    auto it = pods_.find(uid);
    if (it == pods_.end() || it->second.expires_at != at || !it->second.bound_node.empty())
      continue;  // moved on
    SPDLOG_INFO(
        "pod {}/{}: decision for node {} not followed by a bind within {} s: devices given back",
        it->second.namespace_, it->second.name, it->second.allocation.node,
        opts_.reservation_ttl_s);
    expired_[uid] = StrCat(it->second.allocation.node, "|", it->second.encoded);
    const bool in_flight = !it->second.confirmed;
    RemoveLocked(uid);
    (void)(in_flight ? sched_.Unreserve(uid) : sched_.RemovePod(uid));
    ++expired_total_;
    ++n;
  }
  next_expiry_.store(expiry_.empty() ? INT64_MAX : expiry_.begin()->first,
                     std::memory_order_relaxed);
  return n;
}

std::map<std::string, int64_t> ClusterState::RejectedDecisions() const {
  absl::ReaderMutexLock l(&mu_);
  return rejected_;
}

int64_t ClusterState::expired_reservations() const {
  absl::ReaderMutexLock l(&mu_);
  return expired_total_;
}

StatusOr<PodRecord> ClusterState::RefitContainer(const std::string& uid, const std::string& node,
                                                 size_t container, const std::string& vendor,
                                                 const scheduler::PlacedPodResources& res,
                                                 const RefitSteps& steps) {
  absl::MutexLock l(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return NotFound("pod ", uid, " is not tracked by the scheduler");
  const PodRecord before = it->second;
  if (before.allocation.node != node)
    return FailedPrecondition("pod ", before.namespace_, "/", before.name, " is tracked on node ",
                              before.allocation.node, ", not ", node);
  if (container >= before.allocation.containers.size())
    return FailedPrecondition("container ", container, " has no recorded ", vendor, " allocation");
  scheduler::PlacedPodResources pod_res = res;
  if (pod_res.kinds.size() != before.allocation.containers.size()) pod_res.kinds.clear();
  pod_res.init_finished = before.init_finished;
  auto record = [&](const core::PodAllocation& a) {
    (void)sched_.RemovePod(uid);
    return sched_.AddPod(uid, a, pod_res);
  };
  core::PodAllocation without = before.allocation;
  std::erase_if(without.containers[container],
                [&](const core::ContainerDevice& d) { return d.vendor == vendor; });
  HAMI_RETURN_IF_ERROR(record(without));
  auto restore = [&](Status why) {
    (void)record(before.allocation);
    return why;
  };
  auto moved = steps.fit();
  if (!moved.ok()) return restore(moved.status());
  core::PodAllocation after = without;
  for (const core::ContainerDevice& d : *moved) after.containers[container].push_back(d);
  auto fingerprint = steps.fingerprint(after);
  if (!fingerprint.ok()) return restore(fingerprint.status());
  PodRecord next = before;
  next.allocation = after;
  next.totals = ChargeOf(next.kinds, after, next.init_finished);
  next.encoded = *fingerprint;
  next.refit_from = before.encoded;
  RemoveLocked(uid);
  if (Status q = CheckQuotaLocked(next.namespace_, next.totals); !q.ok()) {
    AddLocked(before);
    return restore(ResourceExhausted("refit would exceed the resource quota: ", q.message()));
  }
  if (Status s = record(after); !s.ok()) {
    AddLocked(before);
    return restore(s);
  }
  AddLocked(std::move(next));
  return before;
}

void ClusterState::UndoRefit(const PodRecord& before, const scheduler::PlacedPodResources& res) {
  absl::MutexLock l(&mu_);
  auto it = pods_.find(before.uid);
  if (it == pods_.end() || it->second.refit_from != before.encoded) return;  // moved on since
  scheduler::PlacedPodResources pod_res = res;
  if (pod_res.kinds.size() != before.allocation.containers.size()) pod_res.kinds.clear();
  pod_res.init_finished = before.init_finished;
  (void)sched_.RemovePod(before.uid);
  (void)sched_.AddPod(before.uid, before.allocation, pod_res);
  AddLocked(before);
}

bool ClusterState::Drop(const std::string& uid) {
  absl::MutexLock l(&mu_);
  const bool known = pods_.count(uid) > 0;
  RemoveLocked(uid);
  return known;
}

Status ClusterState::CheckQuota(const std::string& ns, const PodTotals& demand) const {
  absl::ReaderMutexLock l(&mu_);
  return CheckQuotaLocked(ns, demand);
}

std::optional<std::string> ClusterState::UidOf(const std::string& ns,
                                               const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = uid_by_key_.find(KeyOf(ns, name));
  if (it == uid_by_key_.end()) return std::nullopt;
  return it->second;
}

std::vector<PodRecord> ClusterState::Pods() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<PodRecord> out;
  out.reserve(pods_.size());
  for (const auto& [uid, r] : pods_) out.push_back(r);
  return out;
}

std::vector<QuotaRecord> ClusterState::Quotas() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<QuotaRecord> out;
  for (const auto& [k, q] : quotas_) out.push_back(q);
  return out;
}

std::map<std::string, PodTotals> ClusterState::NamespaceUsage() const {
  absl::ReaderMutexLock l(&mu_);
  return ns_usage_;
}

size_t ClusterState::pod_count() const {
  absl::ReaderMutexLock l(&mu_);
  return pods_.size();
}

std::vector<std::pair<std::string, Json>> ClusterState::Housekeeping(
    const std::vector<Json>& nodes) {
  const int64_t now = clock_.UnixSeconds();
  std::vector<std::pair<std::string, Json>> patches;
  for (const auto& node : nodes) {
    ApplyNode(node, now);
    const std::string name = StringAt(node, {"metadata", "name"});
    if (name.empty()) continue;
    // Every vendor's handshake (hami.io/node-handshake, hami.io/node-handshake-dcu, ...) by the
    // one rule (VendorSet::HandshakeUpdates).
    Json ann = Json::object();
    for (const auto& [key, value] :
         opts_.vendors->HandshakeUpdates(VendorNodeView(node), now, opts_.handshake_timeout_s))
      ann[key] = value;
    if (!ann.empty())
      patches.emplace_back(name, Json{{"metadata", {{"annotations", std::move(ann)}}}});
  }
  return patches;
}

}  // namespace hami::extender
