#include "extender/extender.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "common/log.h"
#include "core/annotations.h"
#include "core/pod_codec.h"
#include "k8s/errors.h"
#include "k8s/names.h"

namespace hami::extender {
namespace {

constexpr const char* kNotInCache = "node not found in the scheduler cache";

std::string PodKey(const core::PodRequest& p) {
  return StrCat(p.namespace_, "/", p.name);
}

Json PodRef(const std::string& ns, const std::string& name, const std::string& uid) {
  Json r{{"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", ns}, {"name", name}};
  if (!uid.empty()) r["uid"] = uid;
  return r;
}

std::string Reason(const scheduler::NodeFailure& f) {
  if (f.reason == kNotInCache)
    return "node unregistered: no usable hami.io/node-nvidia-register annotation (or its handshake "
           "timed out)";
  return f.reason;
}

// The per-device usage of `state` as one synthetic pod (one container per task slot), so a private
// cache reproduces slots, memory and cores exactly.
core::PodAllocation UsageAsAllocation(const scheduler::NodeState& state) {
  core::PodAllocation a;
  a.node = state.info.name;
  for (size_t i = 0; i < state.info.devices.size() && i < state.usage.size(); ++i) {
    const auto& u = state.usage[i];
    for (int k = 0; k < std::max(u.used, u.usedmem_mib > 0 || u.usedcores > 0 ? 1 : 0); ++k) {
      core::ContainerDevice d;
      d.uuid = state.info.devices[i].uuid;
      d.usedmem_mib = k == 0 ? u.usedmem_mib : 0;
      d.usedcores = k == 0 ? u.usedcores : 0;
      a.containers.push_back({d});
    }
  }
  return a;
}

// Whether what a pod is charged against a quota depends on the device it gets: a percentage of the
// card's memory (nvidia.com/gpumem-percentage without gpumem).
bool ChargeDependsOnDevice(const core::PodRequest& pod) {
  for (const auto& c : pod.containers)
    for (const auto& d : c.devices)
      if (d.memreq_mib == 0 && d.mem_percentage > 0) return true;
  return false;
}

int64_t NanosSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
      .count();
}

// The vendor types a pod asks for, or a decision grants (the outcome counters' device_type).
std::set<std::string> RequestedTypes(const core::PodRequest& pod) {
  std::set<std::string> out;
  for (const auto& c : pod.containers)
    for (const auto& d : c.devices) out.insert(d.vendor);
  return out;
}
std::set<std::string> GrantedTypes(const core::PodAllocation& allocation) {
  std::set<std::string> out;
  for (const auto& c : allocation.containers)
    for (const auto& d : c) out.insert(d.vendor);
  return out;
}

// Adds the time of its scope to a counter (ExtenderCounters' filter_*_ns).
class StageTimer {
 public:
  explicit StageTimer(std::atomic<int64_t>& sum)
      : sum_(sum), t0_(std::chrono::steady_clock::now()) {}
  ~StageTimer() { sum_.fetch_add(NanosSince(t0_), std::memory_order_relaxed); }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  std::atomic<int64_t>& sum_;
  const std::chrono::steady_clock::time_point t0_;
};

// decide_mu_ held shared (optimistic decisions run together) or exclusive (a pod that kept losing).
// decide_mu_ guards no data (it orders decisions), and a lock that is shared or exclusive by a
// run-time flag cannot be annotated: no thread-safety analysis here.
class DecideLock {
 public:
  DecideLock(absl::Mutex& mu, bool exclusive) ABSL_NO_THREAD_SAFETY_ANALYSIS
      : mu_(mu),
        exclusive_(exclusive) {
    if (exclusive_)
      mu_.Lock();
    else
      mu_.ReaderLock();
  }
  ~DecideLock() { Release(); }
  DecideLock(const DecideLock&) = delete;
  DecideLock& operator=(const DecideLock&) = delete;
  void Release() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!held_) return;
    held_ = false;
    if (exclusive_)
      mu_.Unlock();
    else
      mu_.ReaderUnlock();
  }

 private:
  absl::Mutex& mu_;
  const bool exclusive_;
  bool held_ = true;
};

}  // namespace

Json DecisionPatch(const std::string& node, const std::map<std::string, std::string>& decision,
                   int64_t now) {
  Json ann{{core::kVgpuNode, node},
           {core::kVgpuTime, std::to_string(now)},
           {core::kBindPhase, nullptr},
           {core::kBindTime, nullptr}};
  for (const auto& [k, v] : decision) ann[k] = v;
  return Json{
      {"metadata", {{"annotations", std::move(ann)}, {"labels", {{core::kVgpuNode, node}}}}}};
}

Extender::Extender(scheduler::Scheduler& sched, ClusterState& state, k8s::Client* client,
                   ExtenderOptions opts)
    : sched_(sched),
      state_(state),
      client_(client),
      opts_(std::move(opts)),
      clock_(opts_.clock ? *opts_.clock : RealClock::Get()) {
  if (k8s::Client* ec = opts_.event_client ? opts_.event_client : client_; ec != nullptr) {
    k8s::EventRecorderOptions ro;
    ro.capacity = std::max<size_t>(opts_.event_queue, 1);
    events_ = std::make_unique<k8s::EventRecorder>(*ec, ro);
  }
  if (client_ != nullptr && opts_.decision_writers > 0) {
    DecisionWriterOptions wo;
    wo.threads = opts_.decision_writers;
    // A failed write waits for its /bind as long as the reservation may.
    wo.keep_failed = std::chrono::seconds(std::max<int64_t>(state_.options().reservation_ttl_s, 1));
    writer_ = std::make_unique<DecisionWriter>(
        [this](const DecisionWrite& w) { return WriteDecision(w); }, wo);
  }
}

void Extender::FlushEvents() {
  if (events_) events_->Flush();
}

void Extender::FlushDecisions() {
  if (writer_) writer_->Flush();
}

Status Extender::WriteDecision(const DecisionWrite& w) {
  // Leadership is checked again right before the decision is written (a follower writes nothing;
  // its reservation lapses and its /bind is refused).
  if (!Leading()) return Unavailable(NotLeaderError());
  const auto t0 = std::chrono::steady_clock::now();
  // The patched pod the API server returns is not needed: not parsed.
  Status s =
      client_->PatchNoReply(k8s::kPods, w.namespace_, w.name, k8s::PatchType::kMerge, w.patch);
  counters_.decision_write_ns.fetch_add(NanosSince(t0), std::memory_order_relaxed);
  if (!s.ok()) counters_.decision_write_failures.fetch_add(1, std::memory_order_relaxed);
  return s;
}

Status Extender::AwaitDecision(const std::string& uid) {
  if (!writer_) return OkStatus();
  const auto t0 = std::chrono::steady_clock::now();
  DecisionWriter::Outcome o = writer_->Await(uid, opts_.decision_wait);
  counters_.bind_wait_ns.fetch_add(NanosSince(t0), std::memory_order_relaxed);
  switch (o.kind) {
    case DecisionWriter::Outcome::kWritten:
      return OkStatus();
    case DecisionWriter::Outcome::kPending:
      writer_->Cancel(uid);
      return Unavailable("its decision is not written to the pod after ",
                         opts_.decision_wait.count(), " ms (the API server is behind)");
    case DecisionWriter::Outcome::kFailed:
      break;
  }
  // The writer's patch failed: this bind sends it once more, as kube-scheduler's retry of the
  // /filter used to when Filter wrote it itself.
  Status again = WriteDecision(*o.write);
  if (again.ok()) return again;
  return Status(again.code(),
                StrCat("its decision cannot be written to the pod: ",
                       std::string(o.error.message()), "; again: ", std::string(again.message())));
}

std::string Extender::NotLeaderError() const {
  std::string leader = opts_.leader_name ? opts_.leader_name() : "";
  return StrCat("this hami-scheduler replica is not the leader (leader: ",
                leader.empty() ? "unknown" : leader, "); kube-scheduler will retry");
}

void Extender::Event(const Json& ref, const std::string& type, const std::string& reason,
                     const std::string& message) {
  if (events_ == nullptr) return;
  k8s::EventSpec ev;
  ev.involved_object = ref;
  ev.type = type;
  ev.reason = reason;
  ev.message = message;
  ev.component = opts_.component;
  // Never waits for the API server: a full queue drops the event.
  if (!events_->Record(std::move(ev)))
    counters_.events_dropped.fetch_add(1, std::memory_order_relaxed);
}

StatusOr<ExtenderOptions::LivePodRef> Extender::LivePod(const std::string& ns,
                                                        const std::string& name) const {
  if (opts_.pod_lookup) {
    if (auto p = opts_.pod_lookup(ns, name)) return p;
  }
  if (client_ == nullptr) return ExtenderOptions::LivePodRef();
  HAMI_ASSIGN_OR_RETURN(Json p, client_->Get(k8s::kPods, ns, name));
  return std::make_shared<const Json>(std::move(p));
}

bool Extender::NodeExists(const std::string& node) const {
  if (sched_.cache().HasNode(node)) return true;
  if (client_ == nullptr) return false;
  return client_->Get(k8s::kNodes, "", node).ok();
}

namespace {
std::string NodeNameOf(const Json& pod) {
  if (!pod.is_object()) return "";
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return "";
  auto n = spec->find("nodeName");
  return n != spec->end() && n->is_string() ? n->get<std::string>() : "";
}
std::string UidOfJson(const Json& pod) {
  if (!pod.is_object() || !pod.contains("metadata") || !pod["metadata"].is_object()) return "";
  return pod["metadata"].value("uid", "");
}
}  // namespace

Status Extender::CheckFilterPod(const core::PodRequest& pod, const Json& request_pod) const {
  if (pod.uid.empty()) return InvalidArgument("pod ", PodKey(pod), " has no metadata.uid");
  HAMI_RETURN_IF_ERROR(k8s::ValidateObjectRef(pod.namespace_, pod.name, pod.uid));
  if (std::string n = NodeNameOf(request_pod); !n.empty())
    return FailedPrecondition("pod ", PodKey(pod), " is already bound to node ", n,
                              "; its decision stands");
  if (auto rec = state_.Find(pod.uid)) {
    if (rec->namespace_ != pod.namespace_ || rec->name != pod.name)
      return FailedPrecondition("uid ", pod.uid, " belongs to pod ", rec->namespace_, "/",
                                rec->name, ", not ", PodKey(pod));
    if (!rec->bound_node.empty())
      return FailedPrecondition("pod ", PodKey(pod), " is already bound to node ", rec->bound_node,
                                "; its decision stands");
  }
  HAMI_ASSIGN_OR_RETURN(ExtenderOptions::LivePodRef live, LivePod(pod.namespace_, pod.name));
  if (!live) return OkStatus();
  if (UidOfJson(*live) != pod.uid)
    return FailedPrecondition("pod ", PodKey(pod), " on the API server has uid ", UidOfJson(*live),
                              ", not ", pod.uid);
  if (std::string n = NodeNameOf(*live); !n.empty())
    return FailedPrecondition("pod ", PodKey(pod), " is already bound to node ", n,
                              "; its decision stands");
  return OkStatus();
}

Status Extender::CheckBind(const ExtenderBindingArgs& a, std::string* reserved_uid) const {
  reserved_uid->clear();
  HAMI_RETURN_IF_ERROR(k8s::ValidateObjectRef(a.pod_namespace, a.pod_name, a.pod_uid));
  HAMI_RETURN_IF_ERROR(k8s::ValidateDns1123Subdomain(a.node, "node name"));
  const std::string key = StrCat(a.pod_namespace, "/", a.pod_name);
  std::string uid = a.pod_uid;
  if (uid.empty()) uid = state_.UidOf(a.pod_namespace, a.pod_name).value_or("");
  if (auto rec = uid.empty() ? std::nullopt : state_.Find(uid)) {
    if (rec->namespace_ != a.pod_namespace || rec->name != a.pod_name)
      return FailedPrecondition("uid ", uid, " belongs to pod ", rec->namespace_, "/", rec->name,
                                ", not ", key);
    if (rec->allocation.node != a.node)
      return FailedPrecondition("pod ", key, " was decided for node ", rec->allocation.node,
                                ", not ", a.node);
    if (!NodeExists(a.node)) return FailedPrecondition("node ", a.node, " does not exist");
    *reserved_uid = uid;
    return OkStatus();
  }
  // No reservation: only a pod that needs no devices may be bound (CPU-only pods routed here).
  HAMI_ASSIGN_OR_RETURN(ExtenderOptions::LivePodRef live, LivePod(a.pod_namespace, a.pod_name));
  const std::string no_decision = StrCat(
      "pod ", key, " has no device decision to bind (never filtered here, or its ",
      "reservation lapsed after ", state_.options().reservation_ttl_s, " s); filter it again");
  if (!live) return FailedPrecondition(no_decision, "; it cannot be checked either");
  if (!a.pod_uid.empty() && UidOfJson(*live) != a.pod_uid)
    return FailedPrecondition("pod ", key, " on the API server has uid ", UidOfJson(*live),
                              ", not ", a.pod_uid);
  auto parsed = state_.options().vendors->ParsePod(*live);
  if (!parsed.ok() || parsed->HasDevices()) return FailedPrecondition(no_decision);
  if (!NodeExists(a.node)) return FailedPrecondition("node ", a.node, " does not exist");
  return OkStatus();
}

// ---- Filter's phases ----

StatusOr<core::PodRequest> DecodeFilterPod(const ExtenderArgs& args,
                                           const vendors::VendorSet& vendors) {
  auto parsed = vendors.ParsePod(args.pod);
  if (!parsed.ok())
    return InvalidArgument("pod cannot be scheduled as written: ",
                           std::string(parsed.status().message()));
  return parsed;
}

const std::vector<std::string>& CandidateNodes(const ExtenderArgs& args,
                                               std::vector<std::string>* storage) {
  // NodeNames is used in place (5000 names at 5k nodes); only the Nodes form builds a list.
  if (args.node_names) return *args.node_names;
  *storage = args.CandidateNames();
  return *storage;
}

FilterStep ScheduleStep(const Status& status, bool placed, bool explained) {
  if (absl::IsAborted(status)) return FilterStep::kLostRace;
  if (!status.ok()) return FilterStep::kDone;
  if (placed) return FilterStep::kFits;
  return explained ? FilterStep::kDone : FilterStep::kExplain;
}

FilterStep QuotaStep(const Status& quota, bool charge_depends_on_device,
                     const FilterRetries& retries, size_t candidates) {
  if (quota.ok()) return FilterStep::kFits;
  if (charge_depends_on_device && retries.quota_rule_outs < FilterRetries::kQuotaRetries &&
      candidates > 1)
    return FilterStep::kRuleOutNode;
  return FilterStep::kDone;
}

FilterStep ReserveStep(const Status& reserve) {
  if (reserve.ok()) return FilterStep::kReserved;
  if (absl::IsAborted(reserve) || absl::IsAlreadyExists(reserve)) return FilterStep::kLostRace;
  return FilterStep::kDone;
}

StatusOr<EncodedDecision> EncodeFilterDecision(const vendors::VendorSet& vendors,
                                               const core::PodAllocation& allocation, int64_t now) {
  EncodedDecision e;
  // Each vendor's decision annotations (NVIDIA: its to-allocate/allocated pair).
  HAMI_ASSIGN_OR_RETURN(e.annotations, vendors.EncodeDecision(allocation, now));
  e.fingerprint = vendors.DecisionFingerprint(e.annotations);
  return e;
}

// One pod's way through the phases: the request, the retry budgets, the decision once made and the
// reply built so far (the quota's rule-outs stay in FailedNodes whatever comes next).
struct Extender::FilterCycle {
  FilterCycle(const core::PodRequest& p, const std::vector<std::string>& c)
      : pod(p),
        candidates(c),
        kinds(core::ContainerKinds(p)),
        charge_depends_on_device(ChargeDependsOnDevice(p)) {
    // Reasons per node are needed only when no node fits: decide without them (the library then
    // stops at the best bound instead of scoring and explaining every node) and explain once when
    // nothing fits (FilterStep::kExplain). On success FailedNodes therefore holds only nodes ruled
    // out by the quota (kube-scheduler reads the failed nodes only when the pod ends up
    // unschedulable).
    so.explain = false;
  }
  // The quota refused `node` for a charge that depends on the card: decide again without it.
  void RuleOut(const std::string& node) {
    ++retries.quota_rule_outs;
    if (cand != &narrowed) narrowed = candidates;
    narrowed.erase(std::remove(narrowed.begin(), narrowed.end(), node), narrowed.end());
    cand = &narrowed;
  }

  const core::PodRequest& pod;
  const std::vector<std::string>& candidates;  // as kube-scheduler sent them
  const std::vector<core::ContainerKind> kinds;
  const bool charge_depends_on_device;
  const std::vector<std::string>* cand = &candidates;  // minus the nodes ruled out
  std::vector<std::string> narrowed;
  scheduler::ScheduleOptions so;
  scheduler::QuotaRoom quota;  // so.quota: what the namespace's quotas leave, as of this attempt
  FilterRetries retries;
  bool steered = false;  // Decide's
  // Steered: the consolidation reservation the decision is made on (id, workload).
  scheduler::GpuReservation reservation;
  scheduler::Decision decision;  // once kFits
  EncodedDecision encoded;       // once kFits
  int64_t now = 0;               // the decision's vgpu-time
  ExtenderFilterResult out;
};

ExtenderFilterResult Extender::FilterError(ExtenderFilterResult out, std::string error) {
  counters_.filter_errors.fetch_add(1, std::memory_order_relaxed);
  out.error = std::move(error);
  return out;
}

ExtenderFilterResult Extender::Filter(const ExtenderArgs& args) {
  counters_.filter_total.fetch_add(1, std::memory_order_relaxed);
  // 1. Decode and validate the request.
  if (!Leading()) return FilterError({}, NotLeaderError());
  if (opts_.synced && !opts_.synced())
    return FilterError({},
                       "hami-scheduler has not listed every pod and node yet (informers not "
                       "synced); kube-scheduler will retry");
  auto parsed = DecodeFilterPod(args, *state_.options().vendors);
  if (!parsed.ok()) return FilterError({}, std::string(parsed.status().message()));
  const core::PodRequest& pod = *parsed;

  // 2. Candidate nodes; the paths that decide nothing live here.
  std::vector<std::string> from_nodes;
  const std::vector<std::string>& candidates = CandidateNodes(args, &from_nodes);
  if (!pod.HasDevices()) {
    if (args.nodes) {  // dry run of a pod without devices: nothing of ours to judge
      ExtenderFilterResult out;
      out.node_names = candidates;
      out.nodes = args.nodes;
      return out;
    }
    return FilterWithoutDevices(pod, candidates);
  }
  // The pod's CPU and memory stay in the request: kube-scheduler has filtered them already, and the
  // cache counts every pod bound to a node and every reservation (ClusterState), so a node it
  // passed is refused here only when the pods the cache knows leave less than the pod asks
  // (docs/scheduler.md); CPU-aware policies (fgd, default) score with them exactly as in `hami
  // sim`.
  if (args.nodes) return Simulate(args, pod);

  // 3. Pod checks.
  state_.ExpireReservations();
  if (Status ok = CheckFilterPod(pod, args.pod); !ok.ok()) {
    counters_.refused_requests.fetch_add(1, std::memory_order_relaxed);
    return FilterError({}, std::string(ok.message()));
  }
  // A pod filtered again (an earlier bind failed or was never attempted) gives its old reservation
  // up.
  if (state_.Drop(pod.uid)) (void)sched_.Unreserve(pod.uid);
  if (writer_) writer_->Cancel(pod.uid);  // and its decision, if it is not written yet

  // A replacement the consolidation controller planned for goes to the GPU reserved for it.
  if (auto reserved = FilterOnReservedGpu(pod, args.pod, candidates)) return *std::move(reserved);
  return Decide(pod, candidates, /*steered=*/nullptr);
}

std::optional<ExtenderFilterResult> Extender::FilterOnReservedGpu(
    const core::PodRequest& pod, const Json& request_pod,
    const std::vector<std::string>& candidates) {
  auto taken = state_.TakeGpuReservation(pod.namespace_, ControllerOwnerUid(request_pod), pod.uid);
  if (!taken) return std::nullopt;
  // Not decided onto it after all: the reservation waits for the workload's next pod.
  const auto give_back = [&] { state_.ReturnGpuReservation(taken->reservation.id, pod.uid); };
  // The pod's own GPU selectors still hold: a use-gpuuuid list without the reserved GPU wins.
  const std::vector<std::string>& own = pod.selectors.use_uuids;
  if (std::find(candidates.begin(), candidates.end(), taken->node) == candidates.end() ||
      (!own.empty() && std::find(own.begin(), own.end(), taken->reservation.uuid) == own.end())) {
    give_back();
    return std::nullopt;
  }
  core::PodRequest steered = pod;
  steered.selectors.use_uuids = {taken->reservation.uuid};
  const std::vector<std::string> node = {taken->node};
  ExtenderFilterResult out = Decide(steered, node, &taken->reservation);
  if (!out.error.empty() || (out.node_names && !out.node_names->empty())) {
    if (!out.node_names || out.node_names->empty()) give_back();
    return out;
  }
  give_back();
  spdlog::info("pod {}: does not fit GPU {} on node {} reserved by consolidation: decided as usual",
               PodKey(pod), taken->reservation.uuid, taken->node);
  return std::nullopt;
}

ExtenderFilterResult Extender::Decide(const core::PodRequest& pod,
                                      const std::vector<std::string>& candidates,
                                      const scheduler::GpuReservation* steered) {
  // 4. Schedule, encode, charge the quota and reserve; each retry kind is a named step.
  FilterCycle c(pod, candidates);
  c.steered = steered != nullptr;
  if (steered != nullptr) c.reservation = *steered;
  for (;;) {
    switch (DecideAndReserve(c)) {
      case FilterStep::kReserved:
        return Commit(c);  // 5. write the decision
      case FilterStep::kLostRace:
        if (c.retries.AfterLostRace()) continue;
        return FilterError(std::move(c.out),
                           StrCat("pod ", PodKey(pod), ": lost the race for every fitting node ",
                                  FilterRetries::kOptimisticAttempts + 1,
                                  " times (the cluster changed under it); retry"));
      case FilterStep::kExplain:
        c.so.explain = true;
        continue;
      case FilterStep::kRuleOutNode:
        c.RuleOut(c.decision.node);
        continue;
      case FilterStep::kFits:  // never returned by DecideAndReserve
      case FilterStep::kDone:
        return std::move(c.out);
    }
  }
}

FilterStep Extender::DecideAndReserve(FilterCycle& c) {
  // Decisions run concurrently (optimistic: Schedule reads, Reserve re-checks). A decision that
  // loses a race - the winner changed before Schedule's own re-check (ABORTED) or before Reserve -
  // is made again; after FilterRetries::kOptimisticAttempts lost races the pod decides alone
  // (decide_mu_ exclusive), so only an informer update can still get in its way. The lock covers
  // deciding and reserving, never the patch.
  DecideLock lock(decide_mu_, c.retries.Exclusive());
  // The policy chooses cards within what the namespace's quotas leave (none: a null check per
  // request); TryReserve below checks the decision against them again.
  c.quota = state_.QuotaRoomOf(c.pod.namespace_);
  c.so.quota = &c.quota;
  auto d = [&] {
    StageTimer t(counters_.filter_library_ns);
    return sched_.Schedule(c.pod, c.cand, c.so);
  }();
  switch (ScheduleStep(d.status(), d.ok() && !d->node.empty(), c.so.explain)) {
    case FilterStep::kLostRace:
      counters_.reserve_conflicts.fetch_add(1, std::memory_order_relaxed);
      return FilterStep::kLostRace;
    case FilterStep::kExplain:
      return FilterStep::kExplain;
    case FilterStep::kDone:
      if (!d.ok()) {
        c.out = FilterError(std::move(c.out),
                            StrCat("pod ", PodKey(c.pod), ": ", std::string(d.status().message())));
        return FilterStep::kDone;
      }
      if (c.steered) {  // not on the reserved GPU: Filter decides again as usual
        c.out.node_names = std::vector<std::string>{};
        return FilterStep::kDone;
      }
      counters_.filter_unschedulable.fetch_add(1, std::memory_order_relaxed);
      for (const std::string& type : RequestedTypes(c.pod))
        counters_.outcomes.Add(OutcomeCounters::kAllocationFailures, "filter", type, "no_fit");
      for (const auto& f : d->failures)
        (f.retryable ? c.out.failed_nodes : c.out.failed_and_unresolvable)[f.node] = Reason(f);
      c.out.node_names = std::vector<std::string>{};
      if (opts_.filter_failed_events)
        Event(PodRef(c.pod.namespace_, c.pod.name, c.pod.uid), "Warning", "FilteringFailed",
              StrCat("no node fits: ", c.candidates.size(), " nodes do not fit"));
      return FilterStep::kDone;
    default:
      break;
  }
  c.decision = std::move(*d);

  // Encode the decision (vgpu-time is this attempt's).
  c.now = clock_.UnixSeconds();
  auto encoded = EncodeFilterDecision(*state_.options().vendors, c.decision.allocation, c.now);
  if (!encoded.ok()) {
    c.out = FilterError(std::move(c.out),
                        StrCat("pod ", PodKey(c.pod), ": cannot encode the decision: ",
                               std::string(encoded.status().message())));
    return FilterStep::kDone;
  }
  c.encoded = std::move(*encoded);
  // Pooled devices (remote GPUs): what their server's decision carries (the lupine endpoint).
  if (!c.decision.pool_node.empty()) {
    auto extra = state_.PoolAnnotationsOf(c.decision.pool_node);
    if (!extra.ok()) {
      c.out = FilterError(std::move(c.out),
                          StrCat("pod ", PodKey(c.pod), ": cannot encode the decision: ",
                                 std::string(extra.status().message())));
      return FilterStep::kDone;
    }
    for (auto& [k, v] : *extra) c.encoded.annotations[k] = std::move(v);
  }

  // Quota: the policy chose cards within the room the namespace's quotas left (as upstream checks
  // them per device while fitting); the final guard is here, under the state's lock. It refuses
  // what the choice could not see: a concurrent decision that charged the namespace meanwhile, the
  // init containers' peak. A pod whose charge depends on the card (a percentage of its memory) and
  // whose decision exceeds the quota rules that node out and decides again
  // (FilterRetries::kQuotaRetries times at most).
  PodRecord rec;
  rec.uid = c.pod.uid;
  rec.namespace_ = c.pod.namespace_;
  rec.name = c.pod.name;
  rec.allocation = c.decision.allocation;
  rec.allocation.node = c.decision.node;
  rec.kinds = c.kinds;
  rec.totals = state_.ChargeOf(c.kinds, rec.allocation);
  rec.encoded = c.encoded.fingerprint;
  rec.gpu_reservation = c.reservation.id;
  rec.owner_uid = c.reservation.owner_uid;
  const Status q = state_.TryReserve(rec);
  switch (QuotaStep(q, c.charge_depends_on_device, c.retries, c.cand->size())) {
    case FilterStep::kRuleOutNode:
      c.out.failed_nodes[c.decision.node] =
          StrCat("ResourceQuotaNotFit: ", std::string(q.message()));
      return FilterStep::kRuleOutNode;
    case FilterStep::kDone: {
      counters_.filter_unschedulable.fetch_add(1, std::memory_order_relaxed);
      for (const std::string& type : RequestedTypes(c.pod))
        counters_.outcomes.Add(OutcomeCounters::kAllocationFailures, "filter", type, "quota");
      const std::string why = StrCat("ResourceQuotaNotFit: ", std::string(q.message()));
      for (const auto& n : *c.cand) c.out.failed_nodes[n] = why;
      c.out.node_names = std::vector<std::string>{};
      return FilterStep::kDone;
    }
    default:
      break;
  }

  // Reserve in the cache (re-checks what Schedule read).
  const Status r = [&] {
    StageTimer t(counters_.filter_library_ns);
    return sched_.Reserve(c.pod, c.decision);
  }();
  const FilterStep step = ReserveStep(r);
  if (step == FilterStep::kReserved) return step;
  state_.Drop(c.pod.uid);
  if (step == FilterStep::kLostRace) {
    // A concurrent decision took the room first, or a stale informer copy re-added the pod.
    counters_.reserve_conflicts.fetch_add(1, std::memory_order_relaxed);
    if (absl::IsAlreadyExists(r)) (void)sched_.Unreserve(c.pod.uid);
    return step;
  }
  c.out =
      FilterError(std::move(c.out), StrCat("pod ", PodKey(c.pod), ": ", std::string(r.message())));
  return FilterStep::kDone;
}

ExtenderFilterResult Extender::Commit(FilterCycle& c) {
  const core::PodRequest& pod = c.pod;
  const scheduler::Decision& d = c.decision;
  auto release = [&] {
    state_.Drop(pod.uid);
    (void)sched_.Unreserve(pod.uid);
  };
  if (!Leading()) {  // lost the lease while deciding: write nothing
    release();
    return FilterError(std::move(c.out), NotLeaderError());
  }
  if (client_ != nullptr) {
    StageTimer t(counters_.filter_patch_ns);
    Json patch = DecisionPatch(d.node, c.encoded.annotations, c.now);
    patch["metadata"]["uid"] = pod.uid;  // precondition: never a re-created pod of that name
    if (c.steered)  // who took the reservation, for every later reader (gpu_reservation.h)
      patch["metadata"]["annotations"][scheduler::kGpuReservationPodKey] = c.reservation.id;
    // Off the request path: the writer sends it, /bind waits for it (and sends it again if it
    // failed) before the Binding.
    Status p = OkStatus();
    if (writer_)
      writer_->Submit({pod.uid, pod.namespace_, pod.name, std::move(patch)});
    else
      p = client_->PatchNoReply(k8s::kPods, pod.namespace_, pod.name, k8s::PatchType::kMerge,
                                patch);
    if (!p.ok()) {
      release();
      for (const std::string& type : GrantedTypes(d.allocation))
        counters_.outcomes.Add(OutcomeCounters::kAllocationFailures, "filter", type,
                               "annotation_patch");
      ExtenderFilterResult out = FilterError(
          std::move(c.out),
          StrCat("pod ", PodKey(pod), ": cannot write the decision: ", std::string(p.message())));
      Event(PodRef(pod.namespace_, pod.name, pod.uid), "Warning", "FilteringFailed", out.error);
      return out;
    }
  }
  // 6. The reply.
  for (const std::string& type : GrantedTypes(d.allocation))
    counters_.outcomes.Add(OutcomeCounters::kAllocations, "filter", type, "none");
  for (const auto& f : d.failures)
    (f.retryable ? c.out.failed_nodes : c.out.failed_and_unresolvable)[f.node] = Reason(f);
  c.out.node_names = std::vector<std::string>{d.node};
  if (opts_.success_events)
    Event(PodRef(pod.namespace_, pod.name, pod.uid), "Normal", "FilteringSucceed",
          StrCat("fit node ", d.node, " (of ", c.candidates.size(), " candidate nodes)"));
  return std::move(c.out);
}

ExtenderFilterResult Extender::FilterWithoutDevices(const core::PodRequest& pod,
                                                    const std::vector<std::string>& candidates) {
  ExtenderFilterResult out;
  // Nodes without HAMi devices (unknown to the cache) take a pod without devices first: it strands
  // no GPU there; kube-scheduler chooses among them.
  std::vector<std::string> plain;
  for (const auto& n : candidates)
    if (!sched_.cache().WithNode(n, [](const scheduler::NodeState&) {})) plain.push_back(n);
  if (!plain.empty() || candidates.empty()) {
    out.node_names = std::move(plain);
    return out;
  }
  // Only GPU nodes: the policy places it as `hami sim` does (its CPU and memory next to the GPUs
  // that need them least), and the reservation holds its CPU until the informer delivers the bound
  // pod.
  (void)sched_.Unreserve(pod.uid);  // an earlier Filter of this pod whose bind never came
  scheduler::ScheduleOptions so;
  auto d = [&] {
    StageTimer t(counters_.filter_library_ns);
    return sched_.ScheduleAndReserve(pod, &candidates, so);
  }();
  if (!d.ok()) {
    counters_.filter_errors.fetch_add(1, std::memory_order_relaxed);
    out.error = StrCat("pod ", PodKey(pod), ": ", std::string(d.status().message()));
    return out;
  }
  if (d->node.empty()) {
    // kube-scheduler found these nodes fit; the cache says none does (CPU or memory): say why.
    so.explain = true;
    auto e = sched_.Schedule(pod, &candidates, so);
    counters_.filter_unschedulable.fetch_add(1, std::memory_order_relaxed);
    if (e.ok())
      for (const auto& f : e->failures)
        (f.retryable ? out.failed_nodes : out.failed_and_unresolvable)[f.node] = Reason(f);
    out.node_names = std::vector<std::string>{};
    return out;
  }
  out.node_names = std::vector<std::string>{d->node};
  return out;
}

ExtenderFilterResult Extender::Simulate(const ExtenderArgs& args, const core::PodRequest& pod) {
  ExtenderFilterResult out;
  // Same policies and learned models as the live decisions, on a private cache.
  std::unique_ptr<scheduler::Scheduler> sim = sched_.DryRun();
  const int64_t now = clock_.UnixSeconds();
  // A pod asking for pooled devices (remote GPUs) may run on a node without devices (left out of
  // the private cache, as /filter finds such nodes); the servers come along from the live cache
  // with their usage, never as candidates.
  const vendors::VendorSet& set = *state_.options().vendors;
  const bool pooled = sched_.AsksPooled(pod);
  std::map<std::string, const Json*> by_name;
  std::vector<std::string> names;
  for (const auto& n : *args.nodes) {
    NodeView v = NodeViewFromJson(n, now, state_.options().handshake_timeout_s, set);
    if (!v.registered && pooled && !v.info.name.empty() && v.info.devices.empty()) {
      by_name[v.info.name] = &n;
      names.push_back(v.info.name);
      continue;
    }
    if (!v.registered) {
      out.failed_nodes[v.info.name] = StrCat("node unregistered: ", v.error);
      continue;
    }
    by_name[v.info.name] = &n;
    names.push_back(v.info.name);
    const std::string name = v.info.name;
    sim->UpsertNode(std::move(v.info));
    // Usage of the devices the live cache knows on that node (same uuids), as one synthetic pod.
    auto snap = sched_.cache().Snapshot(name);
    if (snap) {
      core::PodAllocation a = UsageAsAllocation(*snap);
      if (!a.containers.empty()) (void)sim->AddPod("usage/" + name, a);
    }
  }
  if (pooled)
    sched_.cache().ForEachNode(
        nullptr,
        [&](const scheduler::NodeState& n) {
          if (by_name.count(n.info.name) ||
              std::none_of(n.info.devices.begin(), n.info.devices.end(),
                           [&](const core::DeviceInfo& d) { return set.Pooled(d.vendor); }))
            return;
          sim->UpsertNode(n.info);
          core::PodAllocation a = UsageAsAllocation(n);
          if (!a.containers.empty()) (void)sim->AddPod("usage/" + n.info.name, a);
        },
        [](const std::string&) {});
  scheduler::ScheduleOptions so;
  so.explain = true;
  const scheduler::QuotaRoom quota = state_.QuotaRoomOf(pod.namespace_);  // as /filter chooses
  so.quota = &quota;
  auto d = sim->Schedule(pod, &names, so);
  if (!d.ok()) {
    out.error = std::string(d.status().message());
    return out;
  }
  for (const auto& f : d->failures)
    (f.retryable ? out.failed_nodes : out.failed_and_unresolvable)[f.node] = Reason(f);
  if (d->node.empty()) {
    out.nodes = std::vector<Json>{};
    out.node_names = std::vector<std::string>{};
    return out;
  }
  out.nodes = std::vector<Json>{*by_name[d->node]};
  out.node_names = std::vector<std::string>{d->node};
  return out;
}

ExtenderBindingResult Extender::Bind(const ExtenderBindingArgs& a) {
  counters_.bind_total.fetch_add(1, std::memory_order_relaxed);
  ExtenderBindingResult out;
  if (opts_.is_leader && !opts_.is_leader()) {
    counters_.bind_errors.fetch_add(1, std::memory_order_relaxed);
    out.error = NotLeaderError();
    return out;
  }
  std::string uid;
  if (Status ok = CheckBind(a, &uid); !ok.ok()) {
    // Refused before anything changed: no reservation is released, nothing is written.
    counters_.bind_errors.fetch_add(1, std::memory_order_relaxed);
    counters_.refused_requests.fetch_add(1, std::memory_order_relaxed);
    out.error = StrCat("binding pod ", a.pod_namespace, "/", a.pod_name, " to node ", a.node,
                       " refused: ", std::string(ok.message()));
    return out;
  }
  if (client_ == nullptr) {
    if (!uid.empty()) state_.MarkBound(uid, a.node);
    return out;
  }
  // The decision must be on the pod before the Binding (the device plugin reads it there).
  if (Status w = uid.empty() ? OkStatus() : AwaitDecision(uid); !w.ok()) {
    counters_.bind_errors.fetch_add(1, std::memory_order_relaxed);
    if (auto rec = state_.Find(uid))
      for (const std::string& type : GrantedTypes(rec->allocation))
        counters_.outcomes.Add(OutcomeCounters::kAllocationFailures, "bind", type,
                               "annotation_patch");
    state_.Drop(uid);
    (void)sched_.Unreserve(uid);
    out.error = StrCat("binding pod ", a.pod_namespace, "/", a.pod_name, " to node ", a.node,
                       " failed: ", std::string(w.message()), "; filter it again");
    Event(PodRef(a.pod_namespace, a.pod_name, a.pod_uid), "Warning", "BindingFailed", out.error);
    return out;
  }
  const std::string now = std::to_string(clock_.UnixSeconds());
  Status s =
      client_->Bind(a.pod_namespace, a.pod_name, uid.empty() ? a.pod_uid : uid, a.node,
                    {{core::kBindPhase, core::kBindPhaseAllocating}, {core::kBindTime, now}});
  if (s.ok()) {
    if (!uid.empty()) state_.MarkBound(uid, a.node);
    if (opts_.success_events)
      Event(PodRef(a.pod_namespace, a.pod_name, a.pod_uid), "Normal", "BindingSucceed",
            StrCat("bound ", a.pod_namespace, "/", a.pod_name, " to node ", a.node));
    return out;
  }
  if (absl::IsAlreadyExists(s) || k8s::IsConflict(s)) {
    // A retried bind whose first attempt went through: already bound to this very node is success.
    auto pod = client_->Get(k8s::kPods, a.pod_namespace, a.pod_name);
    if (pod.ok() && pod->value("spec", Json::object()).value("nodeName", "") == a.node &&
        (uid.empty() || UidOfJson(*pod) == uid)) {
      if (!uid.empty()) state_.MarkBound(uid, a.node);
      return out;
    }
  }
  counters_.bind_errors.fetch_add(1, std::memory_order_relaxed);
  counters_.outcomes.Add(OutcomeCounters::kAllocationFailures, "bind", "", "apiserver_bind");
  if (!uid.empty()) {  // the reservation of this very pod (checked above), never another's
    state_.Drop(uid);
    (void)sched_.Unreserve(uid);
    counters_.outcomes.Add(OutcomeCounters::kBindRollbacks, "bind", "", "apiserver_bind");
  }
  auto p = client_->Patch(
      k8s::kPods, a.pod_namespace, a.pod_name, k8s::PatchType::kMerge,
      Json{{"metadata",
            {{"annotations",
              {{core::kBindPhase, core::kBindPhaseFailed}, {core::kBindTime, now}}}}}});
  if (!p.ok())
    SPDLOG_DEBUG("bind-phase failed not recorded: {}", std::string(p.status().message()));
  out.error = StrCat("binding pod ", a.pod_namespace, "/", a.pod_name, " to node ", a.node,
                     " failed: ", std::string(s.message()));
  Event(PodRef(a.pod_namespace, a.pod_name, a.pod_uid), "Warning", "BindingFailed", out.error);
  return out;
}

void OutcomeCounters::Add(Kind kind, std::string_view phase, std::string_view device_type,
                          std::string_view failure_reason) {
  absl::MutexLock l(&mu_);
  ++counts_[kind][{std::string(phase), std::string(device_type), std::string(failure_reason)}];
}

std::map<OutcomeCounters::Labels, int64_t> OutcomeCounters::Snapshot(Kind kind) const {
  absl::MutexLock l(&mu_);
  return counts_[kind];
}

void LatencyHistogram::Observe(int64_t ns) {
  const auto* bound = std::lower_bound(kBoundsNs.begin(), kBoundsNs.end(), ns);
  if (bound != kBoundsNs.end())
    per_bucket[static_cast<size_t>(bound - kBoundsNs.begin())].fetch_add(1,
                                                                         std::memory_order_relaxed);
  sum_ns.fetch_add(ns, std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
}

std::string Extender::HandleFilter(std::string_view body) {
  const auto t0 = std::chrono::steady_clock::now();
  auto args = [&] {
    StageTimer t(counters_.filter_parse_ns);
    return ParseExtenderArgs(body);
  }();
  ExtenderFilterResult r;
  if (args.ok()) {
    r = Filter(*args);
  } else {
    counters_.filter_errors.fetch_add(1, std::memory_order_relaxed);
    r.error = std::string(args.status().message());
  }
  std::string reply = [&] {
    StageTimer t(counters_.filter_encode_ns);
    return SerializeFilterResult(r);
  }();
  counters_.filter_latency[r.error.empty() ? 0 : 1].Observe(NanosSince(t0));
  return reply;
}

std::string Extender::HandleBind(std::string_view body) {
  const auto t0 = std::chrono::steady_clock::now();
  ExtenderBindingResult r;
  if (auto args = ParseExtenderBindingArgs(body); args.ok()) {
    r = Bind(*args);
  } else {
    counters_.bind_errors.fetch_add(1, std::memory_order_relaxed);
    r.error = std::string(args.status().message());
  }
  std::string reply = ToJson(r).dump();
  counters_.bind_latency[r.error.empty() ? 0 : 1].Observe(NanosSince(t0));
  return reply;
}

}  // namespace hami::extender
