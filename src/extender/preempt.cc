#include "extender/preempt.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/time/time.h"
#include "core/json_util.h"
#include "extender/extender.h"

namespace hami::extender {
namespace {

int64_t CreatedUnix(const Json& pod) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, StringAt(pod, {"metadata", "creationTimestamp"}), &t,
                       &err))
    return 0;
  return absl::ToUnixSeconds(t);
}

// What evicting a pod frees: device MiB + cores + devices over its grant.
int64_t GrantSize(const core::PodAllocation& a) {
  int64_t n = 0;
  for (const auto& c : a.containers)
    for (const auto& d : c) n += d.usedmem_mib + d.usedcores + 1;
  return n;
}

scheduler::PlacedPodResources ResourcesOf(const PodRecord& rec) {
  scheduler::PlacedPodResources res;  // CPU and memory stay out: kube-scheduler checks those
  res.kinds = rec.kinds;
  if (res.kinds.size() != rec.allocation.containers.size()) res.kinds.clear();
  res.init_finished = rec.init_finished;
  return res;
}

}  // namespace

// ---- the rules ----

std::optional<int64_t> PodPriority(const Json& pod) {
  const Json* p = FieldAt(pod, {"spec", "priority"});
  if (p == nullptr || p->is_null()) return 0;
  int64_t v = 0;
  if (!core::jsonutil::ToInt(*p, INT32_MIN, INT32_MAX, "spec.priority", &v).ok())
    return std::nullopt;
  return v;
}

bool IsCriticalPod(const Json& pod) {
  const std::string pc = StringAt(pod, {"spec", "priorityClassName"});
  if (pc == "system-node-critical" || pc == "system-cluster-critical") return true;
  if (auto p = PodPriority(pod); p && *p >= kCriticalPriority) return true;
  return StringAt(pod, {"metadata", "namespace"}) == "kube-system";
}

bool IsProtectedFromPreemption(const Json& pod) {
  if (!pod.is_object()) return true;
  if (const Json* d = FieldAt(pod, {"metadata", "deletionTimestamp"});
      d != nullptr && !d->is_null())
    return true;
  const std::string phase = StringAt(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed") return true;
  if (IsCriticalPod(pod) || !PodPriority(pod)) return true;
  if (const Json* owners = FieldAt(pod, {"metadata", "ownerReferences"});
      owners != nullptr && owners->is_array())
    for (const auto& o : *owners)
      if (o.is_object() && o.value("controller", false) == true &&
          o.value("kind", "") == "DaemonSet")
        return true;
  return false;
}

int64_t PdbViolationsUpperBound(int64_t proposed, size_t kept) {
  return std::min(proposed, static_cast<int64_t>(kept));
}

void SortVictimsByPreference(std::vector<VictimCandidate>& pods) {
  std::sort(pods.begin(), pods.end(), [](const VictimCandidate& a, const VictimCandidate& b) {
    return std::tie(a.priority, b.created_unix, b.grant, a.uid) <
           std::tie(b.priority, a.created_unix, a.grant, b.uid);
  });
}

PdbBudgets::PdbBudgets(const std::vector<Json>& pdbs) {
  for (const auto& p : pdbs) {
    const Json* sel = FieldAt(p, {"spec", "selector"});
    if (sel == nullptr || sel->is_null()) continue;  // policy/v1: a null selector selects no pods
    if (!LabelSelectorMatches(*sel, Json()).ok()) continue;
    Budget b;
    b.namespace_ = StringAt(p, {"metadata", "namespace"});
    b.selector = *sel;
    const Json* allowed = FieldAt(p, {"status", "disruptionsAllowed"});
    if (allowed != nullptr && !allowed->is_null() &&
        !core::jsonutil::ToInt(*allowed, 0, INT32_MAX, "disruptionsAllowed", &b.allowed).ok())
      b.allowed = 0;  // unreadable: allows nothing
    budgets_.push_back(std::move(b));
  }
}

bool PdbBudgets::Covers(const Budget& b, const Json& pod) const {
  if (StringAt(pod, {"metadata", "namespace"}) != b.namespace_) return false;
  const Json* labels = FieldAt(pod, {"metadata", "labels"});
  return LabelSelectorMatches(b.selector, labels ? *labels : Json()).value_or(false);
}

bool PdbBudgets::Violates(const Json& pod) const {
  for (const auto& b : budgets_)
    if (b.allowed <= 0 && Covers(b, pod)) return true;
  return false;
}

void PdbBudgets::Charge(const Json& pod) {
  for (auto& b : budgets_)
    if (Covers(b, pod)) --b.allowed;
}

// ---- the verb ----

struct Extender::PreemptNode {
  std::string name;
  std::vector<std::string> proposed;  // kube-scheduler's victims (uids, its order, no repeats)
  std::map<std::string, const Json*> sent;  // NodeNameToVictims: uid -> the pod as sent
  int64_t num_pdb_violations = 0;
  std::vector<const PodRecord*> records;    // every device grant on the node
  const std::vector<Json>* pdbs = nullptr;  // null: not listed, add no victims of our own
};

ExtenderOptions::LivePodRef Extender::PodByUid(const std::string& uid) const {
  if (opts_.pod_by_uid) {
    if (auto p = opts_.pod_by_uid(uid)) return p;
  }
  auto rec = state_.Find(uid);
  if (!rec) return nullptr;
  auto live = LivePod(rec->namespace_, rec->name);
  if (!live.ok() || !*live || StringAt(**live, {"metadata", "uid"}) != uid) return nullptr;
  return *live;
}

std::optional<MetaVictims> Extender::RefineNode(const core::PodRequest& pod, int64_t priority,
                                                const PreemptNode& n) const {
  // A node without our registration offers no devices: the preemptor cannot fit there.
  std::optional<scheduler::NodeState> snap = sched_.cache().Snapshot(n.name);
  if (!snap) return std::nullopt;
  // A private copy of the node, decided on by the same policies and Fit as /filter.
  std::unique_ptr<scheduler::Scheduler> sim = sched_.DryRun();
  core::NodeInfo info = snap->info;
  info.cpu_milli = 0;  // CPU and memory: kube-scheduler's own victims already make room for them
  info.memory_mib = 0;
  sim->UpsertNode(std::move(info));

  PdbBudgets budgets(n.pdbs ? *n.pdbs : std::vector<Json>{});
  std::set<std::string> evicted{pod.uid};  // an earlier reservation of the preemptor goes too
  MetaVictims out;
  for (const std::string& uid : n.proposed) {
    ExtenderOptions::LivePodRef live = PodByUid(uid);
    const Json* v = live ? live.get() : nullptr;
    if (v == nullptr) {
      auto s = n.sent.find(uid);
      if (s == n.sent.end()) continue;  // gone: whatever it held is free already
      v = s->second;
    }
    if (IsProtectedFromPreemption(*v) || PodPriority(*v).value_or(priority) >= priority) continue;
    out.pod_uids.push_back(uid);
    evicted.insert(uid);
    budgets.Charge(*v);
  }
  const size_t kept = out.pod_uids.size();
  // The dry run's usage rule starts from the live one's pods: the victims leave it too.
  for (const std::string& uid : evicted) (void)sim->RemovePod(uid);
  for (const PodRecord* rec : n.records)
    if (evicted.count(rec->uid) == 0)
      (void)sim->AddPod(rec->uid, rec->allocation, ResourcesOf(*rec));

  const std::vector<std::string> only{n.name};
  auto fits = [&] {
    auto d = sim->Schedule(pod, &only);
    return d.ok() && !d->node.empty();
  };
  if (!fits()) {
    // More victims only where kube-scheduler found some: a node it proposed none for cannot take
    // the pod for reasons of its own.
    if (n.proposed.empty() || n.pdbs == nullptr) return std::nullopt;
    std::vector<VictimCandidate> cands;
    std::map<std::string, ExtenderOptions::LivePodRef> pods;
    for (const PodRecord* rec : n.records) {
      if (evicted.count(rec->uid) != 0 || rec->bound_node != n.name) continue;
      // Only pods kube-scheduler knows on this node: it rejects a reply naming any other.
      auto live = LivePod(rec->namespace_, rec->name);
      if (!live.ok() || !*live) continue;
      const Json& p = **live;
      if (StringAt(p, {"metadata", "uid"}) != rec->uid ||
          StringAt(p, {"spec", "nodeName"}) != n.name)
        continue;
      const std::optional<int64_t> pr = PodPriority(p);
      if (!pr || *pr >= priority || IsProtectedFromPreemption(p) || budgets.Violates(p)) continue;
      cands.push_back({rec->uid, *pr, CreatedUnix(p), GrantSize(rec->allocation)});
      pods[rec->uid] = *live;
    }
    SortVictimsByPreference(cands);
    bool ok = false;
    for (const VictimCandidate& c : cands) {
      const Json& p = *pods[c.uid];
      if (budgets.Violates(p)) continue;  // an earlier victim used the budget up
      (void)sim->RemovePod(c.uid);
      out.pod_uids.push_back(c.uid);
      budgets.Charge(p);
      if ((ok = fits())) break;
    }
    if (!ok) return std::nullopt;
  }
  // Fits with no victim at all: kube-scheduler refuses an empty victim list from an extender that
  // is not ignorable ("expected at least one victim pod"), failing the whole preemption; leaving
  // the node out lets the other candidates go ahead.
  if (out.pod_uids.empty()) return std::nullopt;
  out.num_pdb_violations = PdbViolationsUpperBound(n.num_pdb_violations, kept);
  return out;
}

StatusOr<ExtenderPreemptionResult> Extender::Preempt(const ExtenderPreemptionArgs& args) {
  counters_.preempt_total.fetch_add(1, std::memory_order_relaxed);
  if (!Leading()) return Unavailable(NotLeaderError());
  if (opts_.synced && !opts_.synced())
    return Unavailable(
        "hami-scheduler has not listed every pod and node yet (informers not synced); "
        "kube-scheduler will retry");
  const std::optional<int64_t> priority = PodPriority(args.pod);
  if (!priority) return InvalidArgument("Pod.spec.priority must be a 32-bit integer");
  auto parsed = state_.options().vendors->ParsePod(args.pod);
  if (!parsed.ok())
    return InvalidArgument("pod cannot be scheduled as written: ",
                           std::string(parsed.status().message()));
  const core::PodRequest& pod = *parsed;

  // The proposals, in whichever form kube-scheduler sent them (MetaVictims when both are there).
  std::map<std::string, PreemptNode> nodes;
  if (args.node_to_meta_victims && !args.node_to_meta_victims->empty()) {
    for (const auto& [name, mv] : *args.node_to_meta_victims) {
      PreemptNode& n = nodes[name];
      n.num_pdb_violations = mv.num_pdb_violations;
      for (const auto& uid : mv.pod_uids)
        if (std::find(n.proposed.begin(), n.proposed.end(), uid) == n.proposed.end())
          n.proposed.push_back(uid);
    }
  } else if (args.node_to_victims) {
    for (const auto& [name, v] : *args.node_to_victims) {
      PreemptNode& n = nodes[name];
      n.num_pdb_violations = v.num_pdb_violations;
      for (const Json& p : v.pods) {
        // Keys matched case-folded, as the parser (and Go's decoder) read them.
        const Json* u = PodUidFold(p);
        const std::string uid = u != nullptr ? u->get<std::string>() : std::string();
        if (n.sent.emplace(uid, &p).second) n.proposed.push_back(uid);
      }
    }
  }

  ExtenderPreemptionResult out;
  if (!pod.HasDevices()) {
    // No devices: nothing of ours to judge; kube-scheduler's victims stand.
    for (const auto& [name, n] : nodes)
      if (!n.proposed.empty())
        out.node_to_meta_victims[name] = MetaVictims{n.proposed, n.num_pdb_violations};
    return out;
  }
  const std::vector<PodRecord> records = state_.Pods();
  for (const PodRecord& rec : records)
    if (auto it = nodes.find(rec.allocation.node); it != nodes.end())
      it->second.records.push_back(&rec);
  const std::optional<std::vector<Json>> pdbs =
      opts_.pdbs ? opts_.pdbs() : std::optional<std::vector<Json>>(std::vector<Json>{});
  for (auto& [name, n] : nodes) {
    n.name = name;
    n.pdbs = pdbs ? &*pdbs : nullptr;
    if (auto mv = RefineNode(pod, *priority, n)) out.node_to_meta_victims[name] = std::move(*mv);
  }
  return out;
}

HttpResponse Extender::HandlePreempt(std::string_view body) {
  auto args = ParseExtenderPreemptionArgs(body);
  if (!args.ok()) counters_.preempt_total.fetch_add(1, std::memory_order_relaxed);
  StatusOr<ExtenderPreemptionResult> r =
      args.ok() ? Preempt(*args) : StatusOr<ExtenderPreemptionResult>(args.status());
  if (r.ok())
    return {200, "application/json",
            ToJson(*r).dump(-1, ' ', false, Json::error_handler_t::replace)};
  counters_.preempt_errors.fetch_add(1, std::memory_order_relaxed);
  const int code = absl::IsInvalidArgument(r.status()) ? 400
                   : absl::IsUnavailable(r.status())   ? 503
                                                       : 500;
  return {code, "text/plain; charset=utf-8", StrCat(std::string(r.status().message()), "\n")};
}

}  // namespace hami::extender
