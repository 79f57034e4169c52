#pragma once
// PodDirectory over the API server: an informer on the pods bound to this node
// (fieldSelector spec.nodeName=<node>), indexed by UID.
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "monitor/pod_directory.h"

namespace hami::monitor {

class K8sPodDirectory final : public PodDirectory {
 public:
  // `client` must outlive the directory. An empty node name watches every pod of the cluster.
  K8sPodDirectory(k8s::Client& client, const std::string& node_name);
  ~K8sPodDirectory() override;

  void Start();
  void Stop();

  bool Synced() const override;
  std::optional<PodName> Find(const std::string& pod_uid) const override;

 private:
  void Put(const k8s::Json& pod);
  void Drop(const k8s::Json& pod);

  std::unique_ptr<k8s::Informer> informer_;
  mutable Mutex mu_;
  std::map<std::string, PodName> by_uid_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::monitor
