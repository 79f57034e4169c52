#include "extender/controller.h"

#include "common/log.h"

namespace hami::extender {

Controller::Controller(k8s::Client& client, ClusterState& state, ControllerOptions opts)
    : client_(client), state_(state), opts_(std::move(opts)) {
  k8s::InformerOptions po;
  po.resource = k8s::kPods;
  po.watch_timeout_seconds = opts_.watch_timeout_seconds;
  pods_ = std::make_unique<k8s::Informer>(client_, po);
  pods_->AddHandlers({[this](const Json& p) { state_.OnPod(p); },
                      [this](const Json&, const Json& p) { state_.OnPod(p); },
                      [this](const Json& p) { state_.OnPodDeleted(p); }});
  k8s::InformerOptions no;
  no.resource = k8s::kNodes;
  no.label_selector = opts_.node_label_selector;
  no.watch_timeout_seconds = opts_.watch_timeout_seconds;
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
}

Controller::~Controller() { Stop(); }

void Controller::Start() {
  if (started_) return;
  started_ = true;
  // Nodes first so pods find their nodes (the cache also accepts pods of unknown nodes).
  nodes_->Start();
  quotas_->Start();
  pods_->Start();
  if (opts_.leader_elect) {
    auto e = k8s::LeaderElector::Create(client_, opts_.election);
    if (e.ok()) {
      elector_ = std::move(*e);
      elector_->Start();
    } else {
      spdlog::error("leader election not started: {}", std::string(e.status().message()));
    }
  }
  housekeeper_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stopping_) {
      cv_.wait_for(l, opts_.housekeeping_period);
      if (stopping_) break;
      l.unlock();
      if (Synced() && IsLeader()) HousekeepOnce();
      l.lock();
    }
  });
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (housekeeper_.joinable()) housekeeper_.join();
  if (elector_) elector_->Stop();
  pods_->Stop();
  nodes_->Stop();
  quotas_->Stop();
}

bool Controller::Synced() const { return pods_->HasSynced() && nodes_->HasSynced() && quotas_->HasSynced(); }

bool Controller::WaitForSync(std::chrono::milliseconds timeout) const {
  return pods_->WaitForSync(timeout) && nodes_->WaitForSync(timeout) && quotas_->WaitForSync(timeout);
}

bool Controller::IsLeader() const {
  if (!opts_.leader_elect) return true;
  return elector_ && elector_->IsLeader();
}

std::string Controller::Leader() const {
  if (!opts_.leader_elect) return opts_.election.identity;
  return elector_ ? elector_->ObservedLeader() : "";
}

bool Controller::Ready() const {
  if (!Synced()) return false;
  return !opts_.leader_elect || IsLeader() || !Leader().empty();
}

int Controller::HousekeepOnce() {
  int sent = 0;
  for (const auto& [name, patch] : state_.Housekeeping(nodes_->List())) {
    auto r = client_.Patch(k8s::kNodes, "", name, k8s::PatchType::kMerge, patch);
    if (r.ok()) ++sent;
    else spdlog::warn("node {}: handshake not written: {}", name, std::string(r.status().message()));
  }
  return sent;
}

}  // namespace hami::extender
