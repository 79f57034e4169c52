#pragma once
// KubeletPodView over kubelet's PodResources API v1 (List), on its unix socket
// (default /var/lib/kubelet/pod-resources/kubelet.sock).
#include <memory>
#include <string>

#include "deviceplugin/pending_pod.h"

namespace hami::deviceplugin {

inline constexpr char kDefaultPodResourcesSocket[] = "/var/lib/kubelet/pod-resources/kubelet.sock";

class PodResourcesView final : public KubeletPodView {
 public:
  // `resource_name`: whose devices count as "holding devices" (our extended resource).
  PodResourcesView(std::string socket_path, std::string resource_name);
  ~PodResourcesView() override;
  StatusOr<std::vector<KubeletPod>> ListPods() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::deviceplugin
