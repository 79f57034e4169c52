#include "extender/controller.h"

#include <set>

#include "common/log.h"

namespace hami::extender {
namespace {

// "<host>_<suffix>" -> "<host>" (client-go's and our identities).
std::string HostOf(const std::string& identity) {
  return identity.substr(0, identity.find('_'));
}

constexpr char kLastApplied[] = "kubectl.kubernetes.io/last-applied-configuration";

// A copy of obj's `keys` that are present (nothing when obj is not an object).
Json Pick(Json& obj, std::initializer_list<const char*> keys) {
  Json out = Json::object();
  if (!obj.is_object()) return out;
  for (const char* k : keys)
    if (auto it = obj.find(k); it != obj.end()) out[k] = std::move(*it);
  return out;
}

void TrimContainers(Json& spec, const char* key) {
  auto it = spec.find(key);
  if (it == spec.end() || !it->is_array()) return;
  for (Json& c : *it) c = Pick(c, {"name", "resources", "restartPolicy"});
}

}  // namespace

bool DropPodFieldWhileParsing(int depth, const std::string& key) {
  // Depth 2: members of metadata, spec and status; 3: of annotations, labels, ...; 4: of each
  // container (and of other list entries, none of which has a member of these names that is read).
  static const std::set<std::string, std::less<>> kDepth2 = {"managedFields",
                                                             "volumes",
                                                             "affinity",
                                                             "tolerations",
                                                             "topologySpreadConstraints",
                                                             "conditions",
                                                             "containerStatuses",
                                                             "ephemeralContainerStatuses",
                                                             "ephemeralContainers"};
  static const std::set<std::string, std::less<>> kDepth4 = {
      "env",           "envFrom",       "volumeMounts",
      "volumeDevices", "livenessProbe", "readinessProbe",
      "startupProbe",  "lifecycle",     "securityContext",
      "command",       "args",          "ports",
      "image"};
  switch (depth) {
    case 2:
      return kDepth2.count(key) != 0;
    case 3:
      return key == kLastApplied;
    case 4:
      return kDepth4.count(key) != 0;
    default:
      return false;
  }
}

bool DropNodeFieldWhileParsing(int depth, const std::string& key) {
  if (depth == 2)
    return key == "managedFields" || key == "images" || key == "volumesAttached" ||
           key == "volumesInUse";
  return depth == 3 && key == kLastApplied;
}

void TrimPodForScheduler(Json& pod) {
  if (!pod.is_object()) return;
  Json out = Json::object();
  if (auto md = pod.find("metadata"); md != pod.end() && md->is_object()) {
    out["metadata"] =
        Pick(*md, {"name", "namespace", "uid", "resourceVersion", "labels", "annotations",
                   "ownerReferences", "creationTimestamp", "deletionTimestamp"});
    if (auto a = out["metadata"].find("annotations"); a != out["metadata"].end() && a->is_object())
      a->erase(kLastApplied);
    // Of each owner, what preemption reads (a DaemonSet's pods are not evicted); the controller
    // owner's uid too on a pod decided onto a consolidation reservation (the state matches the
    // reservation's workload by it, gpu_reservations.cc).
    const bool reserved =
        FieldAt(out, {"metadata", "annotations", scheduler::kGpuReservationPodKey}) != nullptr;
    if (auto o = out["metadata"].find("ownerReferences");
        o != out["metadata"].end() && o->is_array())
      for (Json& owner : *o)
        owner = reserved && owner.is_object() && owner.value("controller", false)
                    ? Pick(owner, {"kind", "controller", "uid"})
                    : Pick(owner, {"kind", "controller"});
  }
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    Json s = Pick(*spec, {"nodeName", "schedulerName", "priority", "priorityClassName",
                          "preemptionPolicy", "overhead", "containers", "initContainers"});
    TrimContainers(s, "containers");
    TrimContainers(s, "initContainers");
    out["spec"] = std::move(s);
  }
  if (auto st = pod.find("status"); st != pod.end() && st->is_object()) {
    Json s = Pick(*st, {"phase", "initContainerStatuses"});
    if (auto ics = s.find("initContainerStatuses"); ics != s.end() && ics->is_array())
      for (Json& c : *ics) c = Pick(c, {"name", "state"});
    out["status"] = std::move(s);
  }
  pod = std::move(out);
}

void TrimObjectMetadata(Json& obj) {
  if (!obj.is_object()) return;
  if (auto md = obj.find("metadata"); md != obj.end() && md->is_object()) {
    md->erase("managedFields");
    if (auto a = md->find("annotations"); a != md->end() && a->is_object()) a->erase(kLastApplied);
  }
}

void TrimNodeForScheduler(Json& node) {
  if (!node.is_object()) return;
  TrimObjectMetadata(node);
  if (auto st = node.find("status"); st != node.end() && st->is_object())
    for (const char* k : {"images", "volumesAttached", "volumesInUse"}) st->erase(k);
}

Controller::Controller(k8s::Client& client, ClusterState& state, ControllerOptions opts)
    : client_(client), state_(state), opts_(std::move(opts)) {
  k8s::InformerOptions po;
  po.resource = k8s::kPods;
  po.watch_timeout_seconds = opts_.watch_timeout_seconds;
  po.transform = TrimPodForScheduler;
  po.drop_while_parsing = DropPodFieldWhileParsing;
  pods_ = std::make_unique<k8s::Informer>(client_, po);
  auto index = [this](const Json& p, bool add) {
    const std::string uid = StringAt(p, {"metadata", "uid"});
    MutexLock l(uid_mu_);
    if (add)
      key_by_uid_[uid] = k8s::Informer::KeyOf(p);
    else
      key_by_uid_.erase(uid);
  };
  pods_->AddHandlers({[this, index](const Json& p) {
                        index(p, true);
                        state_.OnPod(p);
                      },
                      [this, index](const Json&, const Json& p) {
                        index(p, true);
                        state_.OnPod(p);
                      },
                      [this, index](const Json& p) {
                        index(p, false);
                        state_.OnPodDeleted(p);
                      }});
  k8s::InformerOptions no;
  no.resource = k8s::kNodes;
  no.label_selector = opts_.node_label_selector;
  no.watch_timeout_seconds = opts_.watch_timeout_seconds;
  no.transform = TrimNodeForScheduler;
  no.drop_while_parsing = DropNodeFieldWhileParsing;
  nodes_ = std::make_unique<k8s::Informer>(client_, no);
  nodes_->AddHandlers({[this](const Json& n) { state_.OnNode(n); },
                       [this](const Json&, const Json& n) { state_.OnNode(n); },
                       [this](const Json& n) { state_.OnNodeDeleted(n); }});
  k8s::InformerOptions qo;
  qo.resource = k8s::kResourceQuotas;
  qo.watch_timeout_seconds = opts_.watch_timeout_seconds;
  quotas_ = std::make_unique<k8s::Informer>(client_, qo);
  quotas_->AddHandlers({[this](const Json& q) { state_.OnQuota(q); },
                        [this](const Json&, const Json& q) { state_.OnQuota(q); },
                        [this](const Json& q) { state_.OnQuotaDeleted(q); }});
  k8s::InformerOptions bo;
  bo.resource = k8s::kPodDisruptionBudgets;
  bo.watch_timeout_seconds = opts_.watch_timeout_seconds;
  pdbs_ = std::make_unique<k8s::Informer>(client_, bo);
}

Controller::~Controller() {
  Stop();
}

std::thread Controller::EveryRetryPeriod(std::function<void()> step) {
  return std::thread([this, step = std::move(step)] {
    MutexLock l(mu_);
    while (!stopping_) {
      l.Unlock();
      step();
      l.Lock();
      cv_.WaitFor(mu_, opts_.election.retry_period);
    }
  });
}

void Controller::Start() {
  if (started_) return;
  started_ = true;
  // Nodes first so pods find their nodes (the cache also accepts pods of unknown nodes).
  nodes_->Start();
  quotas_->Start();
  pdbs_->Start();
  pods_->Start();
  if (opts_.leader_elect && !opts_.follow_lease.empty()) {
    follower_ = EveryRetryPeriod([this] { FollowOnce(); });
  } else if (opts_.leader_elect) {
    auto e = k8s::LeaderElector::Create(client_, opts_.election);
    if (e.ok()) {
      elector_ = std::move(*e);
      elector_->Start();
    } else {
      spdlog::error("leader election not started: {}", std::string(e.status().message()));
    }
  }
  if (!opts_.self_pod_name.empty() && !opts_.self_pod_namespace.empty()) {
    labeler_ = EveryRetryPeriod([this] { LabelRoleOnce(); });
  }
  housekeeper_ = std::thread([this] {
    MutexLock l(mu_);
    while (!stopping_) {
      cv_.WaitFor(mu_, opts_.housekeeping_period);
      if (stopping_) break;
      l.Unlock();
      state_.ExpireReservations();
      if (Synced() && IsLeader()) HousekeepOnce();
      l.Lock();
    }
  });
}

void Controller::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (housekeeper_.joinable()) housekeeper_.join();
  if (follower_.joinable()) follower_.join();
  if (labeler_.joinable()) labeler_.join();
  if (elector_) elector_->Stop();
  pods_->Stop();
  nodes_->Stop();
  quotas_->Stop();
  pdbs_->Stop();
}

bool Controller::LabelRoleOnce() {
  if (opts_.self_pod_name.empty() || opts_.self_pod_namespace.empty()) return false;
  MutexLock l(role_mu_);
  const std::string role = IsLeader() ? "leader" : "follower";
  if (role == role_written_) return true;
  auto p = client_.Patch(k8s::kPods, opts_.self_pod_namespace, opts_.self_pod_name,
                         k8s::PatchType::kMerge,
                         Json{{"metadata", {{"labels", {{kSchedulerRoleLabel, role}}}}}});
  if (!p.ok()) {
    spdlog::warn("label {}={} on pod {}/{} not written: {}", kSchedulerRoleLabel, role,
                 opts_.self_pod_namespace, opts_.self_pod_name, std::string(p.status().message()));
    return false;
  }
  role_written_ = role;
  return true;
}

std::shared_ptr<const Json> Controller::LookupPod(const std::string& ns,
                                                  const std::string& name) const {
  return pods_->Find(ns + "/" + name);
}

std::shared_ptr<const Json> Controller::LookupPodByUid(const std::string& uid) const {
  std::string key;
  {
    MutexLock l(uid_mu_);
    auto it = key_by_uid_.find(uid);
    if (it == key_by_uid_.end()) return nullptr;
    key = it->second;
  }
  auto p = pods_->Find(key);
  return p && StringAt(*p, {"metadata", "uid"}) == uid ? p : nullptr;
}

std::optional<std::vector<Json>> Controller::PodDisruptionBudgets() const {
  if (!pdbs_->HasSynced()) return std::nullopt;
  return pdbs_->List();
}

bool Controller::Synced() const {
  return pods_->HasSynced() && nodes_->HasSynced() && quotas_->HasSynced();
}

bool Controller::WaitForSync(std::chrono::milliseconds timeout) const {
  return pods_->WaitForSync(timeout) && nodes_->WaitForSync(timeout) &&
         quotas_->WaitForSync(timeout);
}

void Controller::FollowOnce() {
  auto lease = client_.Get(k8s::kLeases, opts_.election.lease_namespace, opts_.follow_lease);
  std::string holder, renew;
  if (lease.ok()) {
    const Json spec = lease->value("spec", Json::object());
    if (spec.is_object()) {
      if (auto h = spec.find("holderIdentity"); h != spec.end() && h->is_string())
        holder = h->get<std::string>();
      if (auto r = spec.find("renewTime"); r != spec.end() && r->is_string())
        renew = r->get<std::string>();
    }
  } else if (!absl::IsNotFound(lease.status())) {
    SPDLOG_DEBUG("lease {}: {}", opts_.follow_lease, std::string(lease.status().message()));
    return;  // keep what we knew; expiry still applies
  }
  MutexLock l(lease_mu_);
  if (holder != lease_holder_ || renew != lease_renew_) {
    if (HostOf(holder) != HostOf(lease_holder_))
      spdlog::info("kube-scheduler lease {}: held by {}{}", opts_.follow_lease,
                   holder.empty() ? "nobody" : holder,
                   !holder.empty() && HostOf(holder) == HostOf(opts_.election.identity)
                       ? " (this pod: leading)"
                       : "");
    lease_holder_ = holder;
    lease_renew_ = renew;
    lease_changed_ = std::chrono::steady_clock::now();
  }
}

bool Controller::IsLeader() const {
  if (!opts_.leader_elect) return true;
  if (!opts_.follow_lease.empty()) {
    MutexLock l(lease_mu_);
    // renew_deadline, not lease_duration: we see a renewal up to retry_period late, and another
    // kube-scheduler may take over lease_duration after the renewal itself.
    return !lease_holder_.empty() && HostOf(lease_holder_) == HostOf(opts_.election.identity) &&
           std::chrono::steady_clock::now() - lease_changed_ < opts_.election.renew_deadline;
  }
  return elector_ && elector_->IsLeader();
}

std::string Controller::Leader() const {
  if (!opts_.leader_elect) return opts_.election.identity;
  if (!opts_.follow_lease.empty()) {
    MutexLock l(lease_mu_);
    if (std::chrono::steady_clock::now() - lease_changed_ >= opts_.election.lease_duration)
      return "";
    return HostOf(lease_holder_);
  }
  return elector_ ? elector_->ObservedLeader() : "";
}

bool Controller::Ready() const {
  if (!Synced()) return false;
  return !opts_.leader_elect || IsLeader() || !Leader().empty();
}

int Controller::HousekeepOnce() {
  // The handshakes (every node's, each time a device plugin reports) must not delay a decision
  // patch or a bind: they take only what the scheduling path leaves of the API budget.
  k8s::BackgroundRequests background;
  int sent = 0;
  for (const auto& [name, patch] : state_.Housekeeping(nodes_->List())) {
    auto r = client_.Patch(k8s::kNodes, "", name, k8s::PatchType::kMerge, patch);
    if (r.ok())
      ++sent;
    else
      spdlog::warn("node {}: handshake not written: {}", name, std::string(r.status().message()));
  }
  return sent;
}

}  // namespace hami::extender
