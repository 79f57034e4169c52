#pragma once
// The scheduler extender's verbs (docs/upstream-contract.md#life-of-a-gpu-pod steps 3-4,
// #scheduler-extender-v1):
//
//  Filter: picks exactly one node and the GPUs per container with the scheduler library, charges
//  the
//    namespace quota, reserves the usage in the cache, and merge-patches the decision onto the pod
//    (off the request path: DecisionWriter writes it, Bind waits for it before the Binding)
//    in upstream's keys and formats (hami.io/vgpu-node [+ label], hami.io/vgpu-time,
//    hami.io/vgpu-devices-to-allocate, hami.io/vgpu-devices-allocated). Other candidates come back
//    in FailedNodes (retryable) or FailedAndUnresolvableNodes (can never fit as registered) with
//    upstream-style reasons ("2/4 CardInsufficientMemory"). A request with the full Nodes list
//    (nodeCacheCapable=false, e.g. the cluster-autoscaler dry-run) is simulated on a private copy:
//    nothing is reserved or patched.
//  Bind: POSTs the Binding with hami.io/bind-phase=allocating and hami.io/bind-time in its
//    annotations (the API server merges them into the pod atomically with spec.nodeName, so the
//    device plugin never sees a bound pod without its phase). On failure: unreserve,
//    bind-phase=failed, Event BindingFailed; on success Event BindingSucceed (Filter likewise
//    FilteringSucceed / FilteringFailed). Events go through a bounded queue (k8s::EventRecorder)
//    and never delay a verb.
//
// Both verbs act only on the pod they name (docs/security.md, "Extender integrity"): namespace,
// name, uid and node must be Kubernetes names (k8s/names.h); the pod must exist with that uid on
// the API server (informer cache first) and not be bound yet (Filter); Bind is refused unless it
// binds the very pod, by uid, to the node its reservation names, or, for a pod that requests no
// devices, to a node that exists. Nothing else is released on a refusal. A reservation that no
// bind follows lapses after StateOptions::reservation_ttl_s. The decision patch carries the pod's
// uid, so a pod re-created under the same name is never given another's decision.
//
// There is no node lock (docs/design.md): concurrent binds to one node proceed; the device plugin
// finds its pod as the one bound to its node with bind-phase allocating and a non-empty to-allocate
// record. Only the leader decides: a follower answers every verb with an Error, which
// kube-scheduler retries. Leadership is checked when a verb starts and again before the decision is
// written.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "core/pod_request.h"
#include "core/refit_wire.h"
#include "extender/decision_writer.h"
#include "extender/http_server.h"
#include "extender/state.h"
#include "extender/wire.h"
#include "k8s/client.h"
#include "k8s/event_recorder.h"
#include "scheduler/scheduler.h"
#include "vendors/vendor_set.h"

namespace hami::extender {

struct ExtenderOptions {
  const Clock* clock = nullptr;  // default RealClock
  // Leader gate; null = always the leader (single replica, or leader election off).
  std::function<bool()> is_leader;
  std::function<std::string()> leader_name;  // for the follower's error message
  // Whether the informers have delivered their first list; null = always. /filter refuses until
  // then: a cache without every pod would hand out devices those pods hold.
  std::function<bool()> synced;
  std::string component = "hami-scheduler";  // Event source
  bool filter_failed_events = true;          // Event FilteringFailed when no node fits
  // Events FilteringSucceed / BindingSucceed (upstream's), one API write per pod each; posted from
  // a queue of event_queue entries on a background thread, dropped (counted) when it is full.
  bool success_events = true;
  size_t event_queue = 1024;
  // The client Events are posted with: its own rate limiter, as kube-scheduler gives its event
  // broadcaster its own client, so Events never take a token a decision write needs. Null: the
  // extender's client.
  k8s::Client* event_client = nullptr;
  // The pod as the API server has it, from the informer cache (nullopt: not there). When unset or
  // when it finds nothing, the pod is read from the API server (client); with neither, the
  // request's own copy is trusted (tests of the pure paths).
  // Shared and immutable (the informer's own object: no copy per request); null when not there.
  using LivePodRef = std::shared_ptr<const Json>;
  std::function<LivePodRef(const std::string& ns, const std::string& name)> pod_lookup;
  // /preempt: the pod of a uid from the informer cache (null: not there). Unset: only pods that
  // hold devices are found (their record names them; pod_lookup or the client reads them).
  std::function<LivePodRef(const std::string& uid)> pod_by_uid;
  // /preempt: the policy/v1 PodDisruptionBudgets of the cluster (informer cache). Unset: none.
  // nullopt while they are not listed (not synced yet, or no RBAC to list them): Preempt then
  // adds no victim of its own and only refines kube-scheduler's.
  std::function<std::optional<std::vector<Json>>()> pdbs;
  // Threads that write decision patches off /filter's path (DecisionWriter): /filter reserves and
  // answers, /bind waits for the pod's patch before it binds. 0: /filter writes it itself.
  int decision_writers = 2;
  // How long /bind waits for its pod's decision patch; then it gives the reservation up and fails
  // (kube-scheduler filters the pod again).
  std::chrono::milliseconds decision_wait{10'000};
};

// Latencies of one verb in upstream's buckets (hami_scheduler_{filter,bind}_duration_seconds:
// 1 ms ... 10 s). Lock-free: one atomic count per bucket, observations above the last bound count
// in `count` only (the +Inf bucket).
struct LatencyHistogram {
  static constexpr std::array<int64_t, 12> kBoundsNs = {
      1'000'000,   5'000'000,   10'000'000,    25'000'000,    50'000'000,    100'000'000,
      250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
  std::array<std::atomic<int64_t>, kBoundsNs.size()> per_bucket{};  // in (previous bound, bound]
  std::atomic<int64_t> count{0}, sum_ns{0};
  void Observe(int64_t ns);
};

// Upstream's allocation outcome counters (its docs/develop/scheduler-metrics.md), by bounded
// labels: phase ("filter", "bind"), device_type (the vendor type of the grants, "" when unknown)
// and failure_reason ("none" for a success, else a fixed category such as "no_fit").
class OutcomeCounters {
 public:
  enum Kind { kAllocations, kAllocationFailures, kBindRollbacks, kKinds };
  using Labels = std::array<std::string, 3>;  // phase, device_type, failure_reason
  void Add(Kind kind, std::string_view phase, std::string_view device_type,
           std::string_view failure_reason);
  std::map<Labels, int64_t> Snapshot(Kind kind) const;

 private:
  mutable absl::Mutex mu_;
  std::map<Labels, int64_t> counts_[kKinds] ABSL_GUARDED_BY(mu_);
};

// Counters for /metrics (monotonic).
struct ExtenderCounters {
  std::atomic<int64_t> filter_total{0}, filter_errors{0}, filter_unschedulable{0};
  std::atomic<int64_t> bind_total{0}, bind_errors{0};
  std::atomic<int64_t> reserve_conflicts{0};
  std::atomic<int64_t> refused_requests{
      0};  // /filter or /bind refused: names, uid, node or bound state
  std::atomic<int64_t> events_dropped{0};  // Events not queued: the API server is behind
  // /preempt calls, and those answered with an HTTP error (bad request, not leader, not synced).
  std::atomic<int64_t> preempt_total{0}, preempt_errors{0};
  // NUMA refit (/refit): requests, grants moved, requests refused (in-band failures).
  std::atomic<int64_t> refit_total{0}, refit_moved{0}, refit_refused{0};
  // Where /filter time goes (nanoseconds summed over calls), so the extender's own share can be
  // told from the scheduler library's: the ExtenderArgs parse, the library (Schedule + Reserve),
  // the decision patch (an API round trip) and the reply encoding.
  // With the decision writer, "patch" is handing the patch over; the write itself is
  // decision_write_ns (on the writer's threads) and /bind's wait for it bind_wait_ns.
  std::atomic<int64_t> filter_parse_ns{0}, filter_library_ns{0}, filter_patch_ns{0},
      filter_encode_ns{0};
  std::atomic<int64_t> decision_write_ns{0}, bind_wait_ns{0};
  // Decision patch writes that failed: the writer's (the /bind that follows sends the patch once
  // more) and that second write's.
  std::atomic<int64_t> decision_write_failures{0};
  // Whole /filter and /bind requests (HandleFilter, HandleBind) by upstream's result label:
  // [0] success (an answer without Error, unschedulable included), [1] error.
  LatencyHistogram filter_latency[2], bind_latency[2];
  OutcomeCounters outcomes;
};

// ---- Filter's phases, in order (Extender::Filter reads as their sequence, the way
// kube-scheduler's schedule_one.go does; the pure ones are exposed for their table tests) ----
//  1. decode + validate: DecodeFilterPod (and the leader gate)
//  2. candidate nodes:   CandidateNodes; pods without devices and dry runs leave here
//  3. pod checks:        Extender::CheckFilterPod (names, uid, not bound); an old reservation goes
//  4. schedule, encode, quota, reserve (under decide_mu_): each sub-step's result is a FilterStep
//     (ScheduleStep, EncodeFilterDecision, QuotaStep, ReserveStep); the retry kinds are the steps
//     kLostRace, kExplain and kRuleOutNode, with their budgets in FilterRetries
//  5. commit:            leader re-check, the decision patch
//  6. reply:             FailedNodes / NodeNames, Event

// Where one decide attempt leads.
enum class FilterStep {
  kFits,      // this sub-step passed: go on to the next one
  kReserved,  // decided and reserved: commit it
  kLostRace,  // a concurrent decision got in first (Schedule's re-check, or Reserve): decide again
  kExplain,   // no node fits and the attempt ran without reasons: decide again, explaining
  kRuleOutNode,  // the quota refused a card-dependent charge: decide again without that node
  kDone,         // a final answer is in the reply: unschedulable, or an error
};

// The retry kinds' budgets. Lost races: kOptimisticAttempts attempts with decide_mu_ shared, then
// one alone (exclusive), then an error; an explanation is one extra attempt that costs nothing;
// quota rule-outs: kQuotaRetries at most.
struct FilterRetries {
  static constexpr int kOptimisticAttempts = 8;
  static constexpr int kQuotaRetries = 8;
  int lost_races = 0;
  int quota_rule_outs = 0;
  // Whether the next attempt decides alone.
  bool Exclusive() const { return lost_races == kOptimisticAttempts; }
  // Counts a lost race; false once the exclusive attempt was lost too.
  bool AfterLostRace() { return ++lost_races <= kOptimisticAttempts; }
};

// 1. The pod of a filter request; errors say it cannot be scheduled as written.
StatusOr<core::PodRequest> DecodeFilterPod(const ExtenderArgs& args,
                                           const vendors::VendorSet& vendors);
// 2. The candidate node names: NodeNames in place, or the names of Nodes copied into *storage.
const std::vector<std::string>& CandidateNodes(const ExtenderArgs& args,
                                               std::vector<std::string>* storage);
// 4. Schedule's result (`placed`: a node was chosen): kLostRace (ABORTED), kDone (another error, or
// no node fits once `explained`), kExplain (no node fits, no reasons yet), kFits.
FilterStep ScheduleStep(const Status& status, bool placed, bool explained);
// The decision's annotations (every vendor's) and their fingerprint (PodRecord::encoded).
struct EncodedDecision {
  std::map<std::string, std::string> annotations;
  std::string fingerprint;
};
StatusOr<EncodedDecision> EncodeFilterDecision(const vendors::VendorSet& vendors,
                                               const core::PodAllocation& allocation, int64_t now);
// The quota's verdict on the decision: kFits, kRuleOutNode (a charge that depends on the card, with
// rule-outs left and another candidate), or kDone (unschedulable on every candidate).
FilterStep QuotaStep(const Status& quota, bool charge_depends_on_device,
                     const FilterRetries& retries, size_t candidates);
// Reserve's result: kReserved, kLostRace (ABORTED: the room went first; ALREADY_EXISTS: a stale
// informer copy of the pod), kDone (an error).
FilterStep ReserveStep(const Status& reserve);

class Extender {
 public:
  // `client` may be null in tests of the pure paths (then nothing is patched or bound).
  Extender(scheduler::Scheduler& sched, ClusterState& state, k8s::Client* client,
           ExtenderOptions opts);

  ExtenderFilterResult Filter(const ExtenderArgs& args);
  ExtenderBindingResult Bind(const ExtenderBindingArgs& args);

  // HTTP bodies in, HTTP bodies out (always a well-formed reply object; errors go in "Error").
  std::string HandleFilter(std::string_view body);
  std::string HandleBind(std::string_view body);

  // The preemption verb (preempt.cc; rules in preempt.h): kube-scheduler's proposed victims per
  // node, refined by the devices. Errors (the reply has no Error field, so HandlePreempt answers
  // them as HTTP errors, which kube-scheduler reports): INVALID_ARGUMENT for a request that cannot
  // be read, UNAVAILABLE from a follower or before the informers have synced.
  StatusOr<ExtenderPreemptionResult> Preempt(const ExtenderPreemptionArgs& args);
  // 200 with the ExtenderPreemptionResult; 400 for a bad request, 503 for UNAVAILABLE, 500 else.
  HttpResponse HandlePreempt(std::string_view body);
  // The NUMA refit (docs/upstream-contract.md, "NUMA refit"; upstream RefitNumaAllocation): moves
  // the NVIDIA grant of one container of a bound pod whose devices are still to be allocated onto
  // GPUs of `allowed_device_uuids`, decided by scheduler::FitInRestrictedDevices (the /filter fit,
  // one node, the allowed GPUs) with the amounts the grant charges. Only the leader refits, after
  // the informers synced, with decide_mu_ held exclusively (no Filter decides meanwhile). The pod
  // is read from the API server (its resourceVersion is the patch's precondition); the move is
  // recorded in the cache (ClusterState::RefitContainer), then written as one merge patch of
  // hami.io/vgpu-devices-to-allocate and hami.io/vgpu-devices-allocated, only this container's
  // entry replaced (consumed entries stay blank); a failed patch puts the cache back. A grant
  // already within the allowed set succeeds unchanged, without a patch. Refusals are in-band
  // (succeeded false, failureReason) with a NumaRefitFailed Event on the pod once the pod is known;
  // a move posts NumaRefitSucceed. The caller is authenticated by the route (refit_auth.h).
  core::RefitResponse Refit(const core::RefitRequest& request);
  // Body in, body out: a body that does not parse is an in-band failure, as upstream's route.
  std::string HandleRefit(std::string_view body);

  const ExtenderCounters& counters() const { return counters_; }
  // Waits until the Events queued so far are posted (tests).
  void FlushEvents();
  // Waits until the decision patches handed over so far are written or have failed (tests).
  void FlushDecisions();

 private:
  struct FilterCycle;  // one pod's way through Filter's phases (extender.cc)
  struct PreemptNode;  // one candidate node of Preempt (preempt.cc)
  // Preempt's refinement of one node's victims; nullopt drops the node from the reply.
  std::optional<MetaVictims> RefineNode(const core::PodRequest& pod, int64_t priority,
                                        const PreemptNode& n) const;
  // A pod by uid for Preempt (pod_by_uid, else its record); null when not found.
  ExtenderOptions::LivePodRef PodByUid(const std::string& uid) const;
  // Phase 4 under decide_mu_: kReserved, a retry kind, or kDone with the reply in c.out.
  FilterStep DecideAndReserve(FilterCycle& c);
  // Phases 4-6 for `pod` on `candidates` (`steered`: the consolidation reservation whose GPU only
  // it is decided onto, named in the decision's patch; an unschedulable answer is then neither
  // counted nor reported, Filter decides again as usual).
  ExtenderFilterResult Decide(const core::PodRequest& pod,
                              const std::vector<std::string>& candidates,
                              const scheduler::GpuReservation* steered);
  // The pod's decision on the GPU the consolidation controller reserved for its workload
  // (ClusterState::TakeGpuReservation: same namespace, the uid of `request_pod`'s controller
  // owner, no other pod holding it), when there is one, its node is a candidate and the pod fits
  // there; nullopt otherwise (the reservation is given back).
  std::optional<ExtenderFilterResult> FilterOnReservedGpu(
      const core::PodRequest& pod, const Json& request_pod,
      const std::vector<std::string>& candidates);
  // Phases 5 and 6 for a reserved decision.
  ExtenderFilterResult Commit(FilterCycle& c);
  // `out` (what the reply holds so far) with `error`, counted.
  ExtenderFilterResult FilterError(ExtenderFilterResult out, std::string error);
  ExtenderFilterResult Simulate(const ExtenderArgs& args, const core::PodRequest& pod);
  // A pod without devices: nodes without HAMi devices first; else the policy's choice, reserved.
  ExtenderFilterResult FilterWithoutDevices(const core::PodRequest& pod,
                                            const std::vector<std::string>& candidates);
  std::string NotLeaderError() const;
  bool Leading() const { return !opts_.is_leader || opts_.is_leader(); }
  // The pod on the API server: OK(null) when it cannot be checked (no lookup, no client).
  StatusOr<ExtenderOptions::LivePodRef> LivePod(const std::string& ns,
                                                const std::string& name) const;
  // Filter's checks of the pod it is asked to decide for (names, uid, not bound).
  Status CheckFilterPod(const core::PodRequest& pod, const Json& request_pod) const;
  // Bind's checks; *reserved_uid = the uid whose reservation this bind may release ("" = none).
  Status CheckBind(const ExtenderBindingArgs& a, std::string* reserved_uid) const;
  bool NodeExists(const std::string& node) const;
  // The decision patch to the API server (the writer's threads, or Bind sending a failed one
  // again); refused once this replica no longer leads.
  Status WriteDecision(const DecisionWrite& w);
  // Bind's wait for the pod's decision patch: OK once it is on the pod; else why not (it failed
  // twice, or it is still not written after decision_wait).
  Status AwaitDecision(const std::string& uid);
  void Event(const Json& pod_ref, const std::string& type, const std::string& reason,
             const std::string& message);

  scheduler::Scheduler& sched_;
  ClusterState& state_;
  k8s::Client* client_;
  ExtenderOptions opts_;
  const Clock& clock_;
  ExtenderCounters counters_;
  // Filter's decide+reserve: shared while optimistic, exclusive for a pod that kept losing races.
  absl::Mutex decide_mu_;
  std::unique_ptr<k8s::EventRecorder> events_;  // with a client
  std::unique_ptr<DecisionWriter> writer_;      // with a client and decision_writers; goes first
};

// The annotation value `annotation` (hami.io/vgpu-devices-*: one entry per container, each ending
// in
// ';') with entry `index` replaced by `entry`, every other byte kept (blank consumed entries, the
// trailing separator). FailedPrecondition when the value has no non-empty entry at `index`.
StatusOr<std::string> ReplaceContainerEntry(std::string_view annotation, size_t index,
                                            std::string_view entry);

// Merge patch that writes a decision onto a pod (exposed for tests): annotations vgpu-node,
// vgpu-time, every vendor's decision annotations (VendorSet::EncodeDecision: NVIDIA's to-allocate
// and allocated), bind-phase and bind-time removed; label vgpu-node.
Json DecisionPatch(const std::string& node, const std::map<std::string, std::string>& decision,
                   int64_t unix_seconds);

}  // namespace hami::extender
