#pragma once
// The Kubernetes side of the device plugin:
// - K8sPendingPodSource: pods bound to this node that wait for Allocate, read fresh from the API
//   server (hami.io/vgpu-devices-to-allocate, consumed container by container; bind phase).
// - NodeRegistrar: writes hami.io/node-nvidia-register (+ link scores) on the node when they change
//   and answers the scheduler's handshake (hami.io/node-handshake "Requesting_..." ->
//   "Reported_...").
#include <functional>
#include <map>
#include <string>

#include "common/clock.h"
#include "deviceplugin/config.h"
#include "deviceplugin/pending_pod.h"
#include "k8s/client.h"

namespace hami::deviceplugin {

// Pending pods from a pod object (exposed for tests): none when the pod is not waiting on `node`.
// A pod on `node` with a to-allocate record that the scheduler did not leave there (bind-phase not
// allocating, hami.io/vgpu-node not `node`, spec.schedulerName not `scheduler_name`, or labelled
// hami.io/webhook=ignore) comes back with PendingPod::refused saying why. A pod whose
// supplementalGroups hold `region_group` (>= 0; the webhook adds it) gets that group for its region
// directories. Errors name the pod and annotation.
StatusOr<std::optional<PendingPod>> PendingFromPodJson(
    const nlohmann::json& pod, const std::string& node,
    const std::string& scheduler_name = kDefaultSchedulerName, int64_t region_group = -1);

class K8sPendingPodSource final : public PendingPodSource {
 public:
  // `client` must outlive the source.
  K8sPendingPodSource(k8s::Client* client, std::string node_name,
                      std::string scheduler_name = kDefaultSchedulerName,
                      int64_t region_group = -1);
  StatusOr<std::vector<PendingPod>> ListPending() override;
  Status MarkAllocated(const PendingPod& pod, int container_index) override;
  Status MarkFailed(const PendingPod& pod, std::string_view reason) override;
  Status RecordMig(const PendingPod& pod, const std::vector<core::MigAllocation>& created) override;
  // Pods on the node whose phase is not Succeeded or Failed.
  StatusOr<std::vector<core::MigAllocation>> ActiveMigGrants() override;

 private:
  k8s::Client* client_;
  std::string node_;
  std::string scheduler_name_;
  int64_t region_group_;
};

class NodeRegistrar {
 public:
  using AnnotationsFn = std::function<std::map<std::string, std::string>()>;
  // Extended resources for the Node's status.capacity and .allocatable (NodeCapacity); empty =
  // none written.
  using CapacityFn = std::function<std::map<std::string, int64_t>()>;
  NodeRegistrar(k8s::Client* client, std::string node_name, AnnotationsFn annotations,
                const Clock* clock, CapacityFn capacity = nullptr);
  // Patches the node when an annotation differs or the handshake asks; no write when all agree.
  // Then, when capacity is reported, patches nodes/<name>/status when the Node read does not hold
  // the sums in both status.capacity and .allocatable (a new value, or a Node that lost them).
  Status SyncOnce();
  // True when the current annotations differ from the last ones written successfully.
  bool Changed() const;

 private:
  k8s::Client* client_;
  std::string node_;
  AnnotationsFn annotations_;
  const Clock* clock_;
  std::map<std::string, std::string> last_written_;
  CapacityFn capacity_;
};

}  // namespace hami::deviceplugin
