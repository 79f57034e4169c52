#pragma once
// ClusterState: turns the Kubernetes objects the informers deliver (nodes, pods, resource quotas)
// into updates of the scheduler's incremental usage cache, and keeps the per-pod and per-namespace
// bookkeeping the extender needs (quota usage, metrics, reservations in flight).
//
// All state is rebuilt from annotations (docs/upstream-contract.md#where-usage-comes-from): a
// node's devices from
// hami.io/node-nvidia-register (JSON or legacy CSV), a pod's usage from hami.io/vgpu-node +
// hami.io/vgpu-devices-allocated. A restart therefore loses nothing.
//
// Reservations: Filter records a pod here (TryReserve) *before* it patches the decision onto the
// pod. Until the informer delivers the pod carrying exactly that decision, informer copies of the
// pod with another (older) decision are ignored, so a stale watch event can never replace a newer
// reservation. Thread-safe: informer threads and HTTP threads call in concurrently.
//
// What an annotation is trusted for (docs/security.md, "Extender integrity"): a pod is charged for
// the decision it carries only if spec.schedulerName is ours, it is unbound or bound to the node
// the decision names, and every device it names exists on that node with at least the claimed room.
// A decision no bind follows holds its devices for StateOptions::reservation_ttl_s at most; once a
// pod is seen bound its decision is final (later edits are reported and ignored). Pods that fail a
// check are reported (StateOptions::on_rejected_decision, RejectedDecisions()).
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/status.h"
#include "core/mig.h"
#include "core/model.h"
#include "core/pod_request.h"
#include "scheduler/gpu_reservation.h"
#include "scheduler/scheduler.h"
#include "vendors/vendor_set.h"

namespace hami::extender {

using Json = nlohmann::json;

struct StateOptions {
  const Clock* clock = nullptr;  // default RealClock
  // upstream: a node still "Requesting" after 60 s (and with nothing allocatable) is unhealthy
  int64_t handshake_timeout_s = vendors::kHandshakeTimeoutS;
  // The enabled vendors (not owned; never null: a default install's is VendorSet::NvidiaOnly()).
  // Nodes register every enabled vendor's devices (Vendor::DecodeNode, handshake per vendor key)
  // and a pod's usage is the union of every vendor's allocated annotation.
  const vendors::VendorSet* vendors = &vendors::VendorSet::NvidiaOnly();
  // Only pods whose spec.schedulerName is this are charged from their annotations (the API server
  // fills an absent schedulerName with "default-scheduler").
  std::string scheduler_name = "hami-scheduler";
  // How long a decision that no bind follows holds its devices, in seconds (flag
  // --reservation-ttl): from TryReserve, or for a decision found on an unbound pod from the earlier
  // of its hami.io/vgpu-time and when this replica first saw it.
  int64_t reservation_ttl_s = 60;
  // Called (outside the state's lock, at most once per pod, reason and decision) for a pod whose
  // decision is not charged or over-commits a device: the Controller turns it into an Event.
  std::function<void(const Json& pod_ref, const std::string& reason, const std::string& message)>
      on_rejected_decision;
};

// Reasons a decision found on a pod is not charged (or, kOverCommitted, charged and reported).
inline constexpr const char* kRejectForeignScheduler =
    "ForeignScheduler";                                               // other spec.schedulerName
inline constexpr const char* kRejectNodeMismatch = "NodeMismatch";    // bound elsewhere
inline constexpr const char* kRejectUnknownDevice = "UnknownDevice";  // not on that node
inline constexpr const char* kRejectExceedsDevice = "ExceedsDevice";  // claims more than it holds
// A MIG grant the device cannot hold (not in mig mode, unknown profile or placement, other memory
// or cores than the profile's, or slices another pod holds): core::CheckMigGrant.
inline constexpr const char* kRejectMigPlacement = "MigPlacementInvalid";
// Decision annotations that do not decode (a field missing, not a number, negative, ...).
inline constexpr const char* kRejectUndecodable = "Undecodable";
inline constexpr const char* kRejectChangedAfterBind =
    "ChangedAfterBind";                                         // edited once bound: ignored
inline constexpr const char* kOverCommitted = "OverCommitted";  // with the others, too much

// A node's registration as the scheduler sees it. `unhealthy` is set when the handshake timed out
// with no allocatable devices (docs/upstream-contract.md#node-registration-and-handshake); the node
// then offers no devices.
struct NodeView {
  core::NodeInfo info;
  bool registered = false;  // some enabled vendor registers on it (VendorSet::DecodeNode)
  bool unhealthy = false;
  bool refused = false;  // not registered because an annotation was refused (not merely absent)
  std::string error;     // why the annotation did not decode
};
// Pure conversion of a Node object (docs/upstream-contract.md#pod-and-node-fields) at time `now`
// (Unix seconds): every enabled vendor's devices (VendorSet::DecodeNode: NVIDIA's first, each
// vendor's handshake by the same rule); a node on which any vendor registers is registered.
NodeView NodeViewFromJson(const Json& node, int64_t now, int64_t handshake_timeout_s,
                          const vendors::VendorSet& vendors = vendors::VendorSet::NvidiaOnly());
// A Node object as a vendor reads it: string annotations and labels, status.capacity (allocatable
// for resources capacity lacks) as integers, and the first non-empty InternalIP address (as given:
// vendors check it before use).
vendors::NodeView VendorNodeView(const Json& node);

// The decision a pod object carries, if it holds devices now: placed (hami.io/vgpu-node and a
// decodable hami.io/vgpu-devices-allocated), not finished (phase Succeeded/Failed) and not a failed
// bind that left it unbound. nullopt otherwise.
// The decision is the union of every enabled vendor's allocated annotation.
std::optional<core::PodAllocation> HeldAllocation(
    const Json& pod, std::string* why_not = nullptr,
    const vendors::VendorSet& vendors = vendors::VendorSet::NvidiaOnly());
// obj[k0][k1]... (nullptr when a step is missing or not an object), and its string value ("" when
// absent or not a string).
const Json* FieldAt(const Json& obj, std::initializer_list<const char*> keys);
std::string StringAt(const Json& obj, std::initializer_list<const char*> keys);
// The annotation map of an object (string values only).
std::map<std::string, std::string> AnnotationsOf(const Json& obj);

// A Node's status.allocatable CPU (milli) and memory (MiB, rounded up); 0 where absent or malformed
// (0 = not tracked: the scheduler does not filter on it).
core::CpuMemory NodeAllocatable(const Json& node);
// The CPU and memory a Pod object needs on its node (core::EffectivePodRequest of its containers'
// requests, limits where a request is absent; spec.overhead is not counted); zero when it does not
// parse (VendorSet::ParsePod).
core::CpuMemory PodNodeRequest(const Json& pod, const vendors::VendorSet& vendors);

// Container kinds of a Pod object in decision order (init containers first; restartPolicy Always
// = sidecar), as core::ContainerKinds does for a parsed pod.
std::vector<core::ContainerKind> KindsOfPodJson(const Json& pod);

// What a pod counts against its namespace's quotas: quota resource (e.g. "nvidia.com/gpumem",
// "hygon.com/dcumem") -> MiB of device memory or cores, over every enabled vendor's devices
// (effective usage: init containers collapsed; vendors::VendorSet::QuotaCharge). Absent = 0.
using PodTotals = std::map<std::string, int64_t>;
// True when the pod has init containers (not sidecars) and status.initContainerStatuses says every
// one of them terminated with exit code 0: their device usage and quota are released, as upstream
// does.
bool InitContainersSucceeded(const Json& pod);

struct PodRecord {
  std::string uid, namespace_, name;
  core::PodAllocation allocation;  // node + devices per container
  std::vector<core::ContainerKind> kinds;
  PodTotals totals;
  std::string encoded;         // hami.io/vgpu-devices-allocated text (with vendors: the
                               // VendorSet::DecisionFingerprint of the allocated keys)
  bool confirmed = false;      // seen on the API server (false: a reservation in flight)
  bool init_finished = false;  // InitContainersSucceeded when last seen
  std::string bound_node;      // spec.nodeName seen (or our bind succeeded); "" = not bound
  int64_t expires_at = 0;      // Unix seconds when an unbound decision lapses; 0 = bound
  // The MIG instances the device plugin made for the pod, as it wrote them back into
  // hami.io/vgpu-mig-allocations (entries with migUUID, gpuInstanceID and computeInstanceID);
  // refreshed on every update of the pod. For the metrics only: nothing is charged by them.
  std::vector<core::MigAllocation> mig_runtime;
  // The fingerprint the pod carried before a NUMA refit moved a container (RefitContainer), until
  // the informer delivers the pod with the new one: copies with the old decision are stale.
  std::string refit_from;
  // The consolidation reservation the pod's decision was made on (scheduler::kGpuReservationPodKey,
  // "" = none) and the uid of the pod's controller owner: together with the decision's GPU they
  // tell which reservation the pod consumed (gpu_reservations.cc).
  std::string gpu_reservation, owner_uid;
};

// The uid of `pod`'s controller owner ("" = none).
std::string ControllerOwnerUid(const Json& pod);

// What ClusterState::RefitContainer asks of its caller (Extender::Refit).
struct RefitSteps {
  // The container's new devices of the refitted vendor, decided against the cache as it is with the
  // container's grant of that vendor taken out (scheduler::FitInRestrictedDevices).
  std::function<StatusOr<std::vector<core::ContainerDevice>>()> fit;
  // The fingerprint (PodRecord::encoded) of the decision the pod will carry with `after`.
  std::function<StatusOr<std::string>(const core::PodAllocation& after)> fingerprint;
};

struct QuotaRecord {
  std::string namespace_, name;
  // limits.<resource> of every vendor's quota keys the object sets: resource -> the limit in MiB
  // (memory: the value x the key's unit, e.g. memoryFactor) or cores.
  std::map<std::string, int64_t> limits;
};

class ClusterState {
 public:
  ClusterState(scheduler::Scheduler& sched, StateOptions opts);

  // ---- informer callbacks ----
  void OnNode(const Json& node);
  void OnNodeDeleted(const Json& node);
  void OnPod(const Json& pod);
  void OnPodDeleted(const Json& pod);
  void OnQuota(const Json& quota);
  void OnQuotaDeleted(const Json& quota);

  // ---- Filter / Bind ----
  // Records a decision for the pod and charges its namespace's quota. RESOURCE_EXHAUSTED (message
  // names the quota, the limit and the usage) when a quota would be exceeded; nothing is recorded.
  Status TryReserve(PodRecord record);
  // Forgets the pod (reservation given up, bind failed). Returns true when it was known.
  bool Drop(const std::string& uid);
  // Checks a request (webhook) against the namespace's quotas without charging it.
  Status CheckQuota(const std::string& ns, const PodTotals& demand) const;
  // What a placed pod counts against its namespace's quotas (with init_finished the init
  // containers no longer count: core::EffectiveDeviceUsage).
  PodTotals ChargeOf(const std::vector<core::ContainerKind>& kinds,
                     const core::PodAllocation& alloc, bool init_finished = false) const;
  // What the namespace's quotas leave a pod to be decided there, for the scheduler's card choice
  // (ScheduleOptions::quota): per vendor, the least room (limit less usage, at least 0) of its
  // memory and of its cores keys over the namespace's quotas. No vendors when no quota limits any.
  scheduler::QuotaRoom QuotaRoomOf(const std::string& ns) const;
  // Whether `resource` is a quota key of an enabled vendor, and whether it counts memory.
  const vendors::QuotaKey* QuotaKeyOf(const std::string& resource) const;
  std::optional<std::string> UidOf(const std::string& ns, const std::string& name) const;
  std::optional<PodRecord> Find(const std::string& uid) const;
  // The NUMA refit's move of one container's grant of `vendor` (docs/upstream-contract.md, "NUMA
  // refit"), under the state's lock so no informer event interleaves: the pod (charged, on `node`)
  // is recorded in the cache without that grant, steps.fit decides the new devices, the namespace
  // quota is checked with the new charge, and the pod is recorded with them (cache, quota usage,
  // fingerprint). Returns the pod's record from before, for UndoRefit. Any failure restores the
  // pod as it was: NotFound (not charged), FailedPrecondition (another node, or the fit's refusal),
  // ResourceExhausted (quota). `res` is the pod's CPU, memory and container kinds.
  StatusOr<PodRecord> RefitContainer(const std::string& uid, const std::string& node,
                                     size_t container, const std::string& vendor,
                                     const scheduler::PlacedPodResources& res,
                                     const RefitSteps& steps);
  // Puts back the record RefitContainer returned (the patch that was to carry the move failed),
  // unless the pod changed since.
  void UndoRefit(const PodRecord& before, const scheduler::PlacedPodResources& res);
  // Our bind of the pod to `node` succeeded: its decision no longer expires.
  void MarkBound(const std::string& uid, const std::string& node);
  // Gives back the devices of every unbound decision whose TTL has passed (cache included).
  // Returns how many. Cheap when none is due (one atomic read). Expired GPU reservations of the
  // consolidation controller give their room back too (not counted).
  int ExpireReservations();

  // ---- GPU reservations of the consolidation controller (gpu_reservations.cc) ----
  // The reservations of `node`'s hami.io/consolidate-reservations annotation (`value`; "" or a
  // deleted node: none) at `now`: each live one not taken yet holds its room on its GPU in the
  // cache, charged only when the GPU has that room now; ones gone from the annotation or expired
  // give it back. An annotation that does not decode, and entries naming a GPU the node does not
  // register or expiring more than scheduler::kMaxGpuReservationS after `now`, hold nothing.
  void SyncGpuReservations(const std::string& node, const std::string& value, int64_t now);
  // A reservation serves one pod (docs/consolidation.md, "One replacement per reservation"): the
  // first pod of its workload decided onto it. Takes for pod `pod_uid` the live reservation of the
  // workload (namespace `ns`, controller owner `owner_uid`) that expires first among those no other
  // pod holds: its room is given back to the cache (the pod's own decision charges it) and the pod
  // holds it. A decision that names the reservation (PodRecord::gpu_reservation) and holds its GPU
  // is its holder too, also when this replica never took it (another leader decided the pod): the
  // reservation is then not charged, whichever of node and pod the informers deliver first. Once
  // the holder is bound the reservation is consumed; a holder dropped before that (its decision
  // lapsed, the pod deleted or filtered again) gives it back. nullopt when the workload has none.
  struct TakenGpuReservation {
    std::string node;
    scheduler::GpuReservation reservation;
  };
  std::optional<TakenGpuReservation> TakeGpuReservation(const std::string& ns,
                                                        const std::string& owner_uid,
                                                        const std::string& pod_uid);
  // The pod `pod_uid` was not decided onto reservation `id` after all (it did not fit there): the
  // reservation is free again and holds its room when the GPU has it.
  void ReturnGpuReservation(const std::string& id, const std::string& pod_uid);
  // Reservations known, as "<node> <id> <uuid> held|taken|landed|not-charged" (tests): taken by a
  // pod decided onto it, landed when that pod is bound.
  std::vector<std::string> GpuReservations() const;

  // ---- reads (metrics, tests) ----
  std::vector<PodRecord> Pods() const;
  std::vector<QuotaRecord> Quotas() const;
  std::map<std::string, PodTotals> NamespaceUsage() const;
  size_t pod_count() const;
  // Pods reported per reason (kReject*, kOverCommitted), and decisions expired, since start.
  std::map<std::string, int64_t> RejectedDecisions() const;
  int64_t expired_reservations() const;

  // Upstream's handshake (docs/upstream-contract.md#node-registration-and-handshake) as merge
  // patches to send, for the nodes the
  // informer holds: "Requesting_<now>" where the annotation does not say Requesting; removal of the
  // annotation (NodeCleanUp) for nodes found unhealthy. Also re-evaluates node health at `now`.
  std::vector<std::pair<std::string, Json>> Housekeeping(const std::vector<Json>& nodes);

  const StateOptions& options() const { return opts_; }
  // The annotations a decision served by pooled devices of `node` carries besides the vendor's
  // decision keys (remote GPU: hami.io/lupine-endpoint), as of the node's last update. NotFound
  // when the node serves none; the vendor's error when it cannot serve (e.g. no InternalIP).
  StatusOr<std::map<std::string, std::string>> PoolAnnotationsOf(const std::string& node) const;

 private:
  struct Report {
    Json ref;
    std::string reason, message;
  };
  void AddLocked(PodRecord rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why `alloc` found on `pod` must not be charged ("" = it may), with a message; sets
  // *over_committed when it fits each device alone but not with what the cache already holds
  // (checked only when `fresh`: no earlier record of the pod is in the cache).
  std::string CheckDecisionLocked(const Json& pod, const core::PodAllocation& alloc,
                                  const std::vector<core::ContainerKind>& kinds, bool fresh,
                                  std::string* message, bool* over_committed) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // CheckDecisionLocked's device checks against the node's state (the cache's node lock held);
  // reads nothing of ours.
  static std::string CheckAgainstNode(const scheduler::NodeState& node,
                                      const core::PodAllocation& alloc,
                                      const std::vector<core::ContainerKind>& kinds, bool fresh,
                                      std::string* message, bool* over_committed);
  void ReportLocked(const Json& pod, const std::string& reason, const std::string& fingerprint,
                    std::string message, std::vector<Report>& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(const std::vector<Report>& reports) const;
  void ScheduleExpiryLocked(const std::string& uid, int64_t at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status CheckQuotaLocked(const std::string& ns, const PodTotals& demand) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void ApplyNode(const Json& node, int64_t now);
  // Checks the decisions charged while their node was not yet known (the pod informer can deliver a
  // pod before its node) now that `node` is: the ones the node's devices cannot hold are dropped
  // and reported, as they would have been had the node come first.
  void CheckDecisionsOnNode(const std::string& node);

  scheduler::Scheduler& sched_;
  StateOptions opts_;
  const Clock& clock_;

  mutable absl::Mutex mu_;
  std::map<std::string, PodRecord> pods_ ABSL_GUARDED_BY(mu_);          // by uid
  std::map<std::string, std::string> uid_by_key_ ABSL_GUARDED_BY(mu_);  // "ns/name" -> uid
  std::map<std::string, PodTotals> ns_usage_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, QuotaRecord> quotas_ ABSL_GUARDED_BY(mu_);  // "ns/name"
  // Every enabled vendor's quota keys by resource (immutable after construction).
  std::map<std::string, vendors::QuotaKey> quota_keys_;
  // The same keys with their vendor's Type keyword (immutable after construction).
  std::vector<vendors::VendorSet::VendorQuotaKey> vendor_quota_keys_;
  // Bound pods without devices (uid -> node): in the scheduler cache for their CPU and memory only.
  std::map<std::string, std::string> cpu_only_ ABSL_GUARDED_BY(mu_);
  std::multimap<int64_t, std::string> expiry_ ABSL_GUARDED_BY(mu_);   // expires_at -> uid (lazy)
  std::atomic<int64_t> next_expiry_{INT64_MAX};                       // earliest key of expiry_
  std::map<std::string, std::string> expired_ ABSL_GUARDED_BY(mu_);   // uid -> lapsed decision
  std::map<std::string, std::string> reported_ ABSL_GUARDED_BY(mu_);  // uid -> reason|decision
  std::map<std::string, int64_t> rejected_ ABSL_GUARDED_BY(mu_);      // reason -> pods
  int64_t expired_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::set<std::string>> unchecked_
      ABSL_GUARDED_BY(mu_);  // node -> uids charged unchecked

  struct HeldGpuReservation {
    std::string node;
    scheduler::GpuReservation r;
    bool charged = false;  // its room is in the cache (gpu_reservations.cc CacheKey) and quota
    std::string holder;    // uid of the pod it went to ("" = none yet)
    bool landed = false;   // the holder was bound: consumed for good
    PodTotals quota;       // what it adds to its namespace's quota usage while charged
  };
  void ReleaseGpuReservationLocked(HeldGpuReservation& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges `h`'s room when its GPU has it; `log`: say why not.
  void ChargeGpuReservationLocked(HeldGpuReservation& h, bool log)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reservation `id` when pod `uid` (of namespace `ns`, controller owner `owner_uid`, with
  // decision `alloc`) may hold it: of its workload, its GPU in `alloc`, no other holder. Else null.
  HeldGpuReservation* GpuReservationForLocked(const std::string& uid, const std::string& ns,
                                              const std::string& owner_uid, const std::string& id,
                                              const core::PodAllocation& alloc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The pod (as above; `bound` or not) holds the reservation it names, when it may.
  void ClaimGpuReservationLocked(const std::string& uid, const std::string& ns,
                                 const std::string& owner_uid, const std::string& id,
                                 const core::PodAllocation& alloc, bool bound)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The record of pod `rec` leaves: a reservation it held but did not land on is free again.
  void LeaveGpuReservationLocked(const PodRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireGpuReservations(int64_t now);
  std::map<std::string, HeldGpuReservation> gpu_reservations_ ABSL_GUARDED_BY(mu_);  // by id
  // Reservation id -> uids of the pod records naming it (PodRecord::gpu_reservation).
  std::multimap<std::string, std::string> gpu_reservation_pods_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> next_gpu_reservation_expiry_{INT64_MAX};  // of the charged ones
  // node -> the annotation value last refused (warned once per value).
  std::map<std::string, std::string> refused_gpu_reservations_ ABSL_GUARDED_BY(mu_);

  mutable absl::Mutex nodes_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<std::string, std::string> node_fingerprint_ ABSL_GUARDED_BY(nodes_mu_);
  // Nodes serving pooled devices: what a decision they serve carries (PoolAnnotationsOf).
  std::map<std::string, StatusOr<std::map<std::string, std::string>>> pool_annotations_
      ABSL_GUARDED_BY(nodes_mu_);
};

}  // namespace hami::extender
