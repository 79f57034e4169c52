#include "monitor/k8s_pod_directory.h"

namespace hami::monitor {
namespace {

std::string Field(const k8s::Json& pod, const char* key) {
  auto meta = pod.find("metadata");
  if (meta == pod.end() || !meta->is_object()) return "";
  auto v = meta->find(key);
  return v != meta->end() && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

K8sPodDirectory::K8sPodDirectory(k8s::Client& client, const std::string& node_name) {
  k8s::InformerOptions opts;
  opts.resource = k8s::kPods;
  if (!node_name.empty()) opts.field_selector = "spec.nodeName=" + node_name;
  informer_ = std::make_unique<k8s::Informer>(client, opts);
  informer_->AddHandlers({
      [this](const k8s::Json& pod) { Put(pod); },
      [this](const k8s::Json&, const k8s::Json& pod) { Put(pod); },
      [this](const k8s::Json& pod) { Drop(pod); },
  });
}

K8sPodDirectory::~K8sPodDirectory() {
  Stop();
}

void K8sPodDirectory::Start() {
  informer_->Start();
}
void K8sPodDirectory::Stop() {
  informer_->Stop();
}

bool K8sPodDirectory::Synced() const {
  return informer_->HasSynced();
}

std::optional<PodName> K8sPodDirectory::Find(const std::string& pod_uid) const {
  MutexLock l(mu_);
  auto it = by_uid_.find(pod_uid);
  if (it == by_uid_.end()) return std::nullopt;
  return it->second;
}

void K8sPodDirectory::Put(const k8s::Json& pod) {
  std::string uid = Field(pod, "uid");
  if (uid.empty()) return;
  MutexLock l(mu_);
  by_uid_[uid] = PodName{Field(pod, "namespace"), Field(pod, "name")};
}

void K8sPodDirectory::Drop(const k8s::Json& pod) {
  std::string uid = Field(pod, "uid");
  MutexLock l(mu_);
  by_uid_.erase(uid);
}

}  // namespace hami::monitor
