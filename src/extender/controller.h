#pragma once
// Keeps ClusterState in sync with the API server and runs what only the leader may do.
//  - informers: pods (all namespaces), nodes, resource quotas -> ClusterState; a restart rebuilds
//    everything from the annotations they deliver; policy/v1 PodDisruptionBudgets for /preempt
//    (not part of Synced(): a cluster that does not let us list them still schedules);
//  - optional leader election on a coordination.k8s.io Lease (k8s::LeaderElector);
//  - housekeeping (leader only, every `housekeeping_period`): upstream's node handshake and the
//    clean-up of nodes whose device plugin stopped answering
//    (docs/upstream-contract.md#node-registration-and-handshake);
//  - on every replica, every `housekeeping_period`: decisions that no bind followed within the
//    reservation TTL give their devices back (ClusterState::ExpireReservations).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "extender/state.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/leader_election.h"

namespace hami::extender {

struct ControllerOptions {
  bool leader_elect = false;
  k8s::LeaderElectionConfig election;  // identity, lease name/namespace, timings
  std::chrono::milliseconds housekeeping_period{15'000};
  std::string node_label_selector;  // only these nodes (upstream --node-label-selector)
  int64_t watch_timeout_seconds = 300;
  // With leader_elect: lead exactly when this pod's kube-scheduler holds the Lease of this name (in
  // election.lease_namespace) instead of electing on election.lease_name. kube-scheduler's identity
  // is "<host name>_<uuid>" and a pod's host name is its name, the part of election.identity before
  // '_'. kube-scheduler calls the extender on 127.0.0.1, so the scheduling kube-scheduler always
  // talks to the deciding extender; with two independent elections they can end up in different
  // pods, and then every /filter is answered "not the leader". Expiry: the record must change
  // (renewTime) within election.lease_duration, measured on our own clock.
  std::string follow_lease;
  // This replica's own pod: when both are set it carries the label hami.io/scheduler-role: leader
  // or follower (upstream's; a Service can select the leader on it), rewritten when the role
  // changes, checked every election.retry_period.
  std::string self_pod_namespace, self_pod_name;
};

// What the scheduler's informers keep of each object (k8s::InformerOptions::transform), so a
// store of 100,000 pods carrying managedFields and last-applied copies holds only what is read:
// - pods: metadata name, namespace, uid, resourceVersion, labels, annotations (but
//   kubectl.kubernetes.io/last-applied-configuration), ownerReferences (kind and controller),
//   creation and deletion timestamps;
//   spec nodeName, schedulerName, priority, priorityClassName, preemptionPolicy, overhead and
//   each container's (init containers too) name, resources and restartPolicy; status phase and
//   each init container status's name and state;
// - nodes: everything but metadata.managedFields, the last-applied annotation and status.images,
//   volumesAttached and volumesInUse (the large, unread parts).
// - any object: metadata.managedFields and the last-applied annotation (TrimObjectMetadata; the
//   DRA hook's slices, claims and classes keep the rest).
void TrimPodForScheduler(Json& pod);
void TrimNodeForScheduler(Json& node);
void TrimObjectMetadata(Json& obj);
// The same cut made while a list page is parsed (k8s::InformerOptions::drop_while_parsing), for
// the large parts only (managedFields, the last-applied copy, env, probes, volumes, conditions,
// images); never a field the Trim functions keep.
bool DropPodFieldWhileParsing(int depth, const std::string& key);
bool DropNodeFieldWhileParsing(int depth, const std::string& key);

// The label upstream HAMi puts on its scheduler pods, and its two values.
inline constexpr char kSchedulerRoleLabel[] = "hami.io/scheduler-role";

class Controller {
 public:
  Controller(k8s::Client& client, ClusterState& state, ControllerOptions opts);
  ~Controller();  // Stop()

  void Start();
  void Stop();

  // Informers have delivered their first list.
  bool Synced() const;
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  // Leading (or not electing at all).
  bool IsLeader() const;
  // The current holder of the lease ("" when unknown; our identity when leading).
  std::string Leader() const;
  // /readyz: synced, and with election on, leading or knowing who leads.
  bool Ready() const;

  // One housekeeping pass now (tests); returns how many node patches were sent.
  int HousekeepOnce();
  // One read of the followed Lease now (tests; the background loop does it every retry_period).
  void FollowOnce();
  // Writes the role label on our own pod now if it differs from the last one written (tests; the
  // background loop does it every retry_period). True when the pod carries the current role.
  bool LabelRoleOnce();

  // The pod from the informer cache (nullopt when it has not arrived), for
  // ExtenderOptions::pod_lookup.
  std::shared_ptr<const Json> LookupPod(const std::string& ns, const std::string& name) const;
  // The pod of a uid from the informer cache (null when not there), for
  // ExtenderOptions::pod_by_uid.
  std::shared_ptr<const Json> LookupPodByUid(const std::string& uid) const;
  // The PodDisruptionBudgets from the informer cache; nullopt until their first list has arrived
  // (ExtenderOptions::pdbs).
  std::optional<std::vector<Json>> PodDisruptionBudgets() const;

  k8s::Informer& pods() { return *pods_; }
  k8s::Informer& nodes() { return *nodes_; }

 private:
  // A thread that runs `step` now and then every election.retry_period until Stop().
  std::thread EveryRetryPeriod(std::function<void()> step);

  k8s::Client& client_;
  ClusterState& state_;
  ControllerOptions opts_;
  std::unique_ptr<k8s::Informer> pods_, nodes_, quotas_, pdbs_;
  // Pods by uid ("namespace/name"), kept by the pod informer's handlers.
  mutable Mutex uid_mu_;
  std::map<std::string, std::string> key_by_uid_ ABSL_GUARDED_BY(uid_mu_);
  std::unique_ptr<k8s::LeaderElector> elector_;
  std::thread housekeeper_, follower_, labeler_;
  // Held across the patch, so that two passes never write the label at once.
  Mutex role_mu_;
  std::string role_written_ ABSL_GUARDED_BY(role_mu_);  // the role label last written ("" = none)
  // follow_lease: the holder last read and when its record last changed.
  mutable Mutex lease_mu_;
  std::string lease_holder_ ABSL_GUARDED_BY(lease_mu_), lease_renew_ ABSL_GUARDED_BY(lease_mu_);
  std::chrono::steady_clock::time_point lease_changed_ ABSL_GUARDED_BY(lease_mu_){};
  Mutex mu_;
  CondVar cv_;  // stopping
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ = false;
};

}  // namespace hami::extender
