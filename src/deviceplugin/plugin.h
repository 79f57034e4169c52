#pragma once
// The kubelet device plugin (API v1beta1) for NVIDIA GPUs shared through libvgpu.
//
// Serves DevicePlugin on <plugin_dir>/<socket_name>, registers resource `resource_name` with
// kubelet on <plugin_dir>/kubelet.sock, advertises every GPU as split_count replicas "<uuid>-<n>"
// and streams health changes. Allocate finds the pod being allocated through a PendingPodSource and
// answers with the libvgpu environment and mounts (allocate_env.h). A watch thread notices kubelet
// restarts (kubelet.sock recreated, or our socket deleted) and serves + registers again.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/rng.h"
#include "common/status.h"
#include "core/model.h"
#include "deviceplugin/config.h"
#include "deviceplugin/pending_pod.h"
#include "deviceplugin/proto/api.pb.h"
#include "deviceplugin/refit_client.h"
#include "deviceplugin/static_mig.h"
#include "gpu/discovery.h"

namespace grpc {
class Server;
}

namespace hami::deviceplugin {

inline constexpr char kApiVersion[] = "v1beta1";
inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";

class DevicePlugin {
 public:
  // `discovery` and `pending` must outlive the plugin. `seed` drives region file names.
  DevicePlugin(PluginConfig config, gpu::DeviceDiscovery* discovery, PendingPodSource* pending,
               uint64_t seed);
  ~DevicePlugin();
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Optional: kubelet's PodResources view, used to tell apart pods that wait for the same number of
  // devices (see SelectPending). Must outlive the plugin; set before Start.
  void SetKubeletPodView(KubeletPodView* view) { kubelet_view_ = view; }
  // Optional: the scheduler's NUMA refit (refit_client.h) and this node's name. Without it a pod
  // asking hami.io/numa-alignment is armed with its grant as before (the mismatch is logged).
  // Must outlive the plugin; set before Start.
  void SetRefitClient(RefitClient* client, std::string node_name) {
    refit_ = client;
    node_name_ = std::move(node_name);
  }
  // Operating mode mig: what creates the MIG instances that decisions grant (NvmlDiscovery). Must
  // outlive the plugin; set before Start. Without it, MIG grants fail at Allocate.
  void SetMigControl(gpu::MigControl* mig) { mig_ = mig; }
  // Static MIG strategies (static_mig.h): also advertise these MIG devices, one kubelet device
  // each named by its MIG UUID, and answer Allocate for them with the device list only. With
  // `with_shared_gpus` false the plugin serves them alone (a mixed strategy's
  // nvidia.com/mig-<profile> resource). Under any strategy but none, GPUs with MIG on are never
  // shared through libvgpu. Set before Start.
  void ServeStaticMig(std::vector<StaticMigDevice> devices, bool with_shared_gpus);

  // Discovers devices and starts serving; registration with kubelet is attempted now and retried
  // by the watch thread until kubelet.sock answers. Errors: invalid config, discovery failure,
  // socket that cannot be served.
  Status Start();
  // Stops the watch, the health watch and the server. Idempotent.
  void Stop();

  // Registration entries for hami.io/node-nvidia-register (health included).
  std::vector<core::DeviceInfo> NodeDevices() const;
  // The node annotations to patch: hami.io/node-nvidia-register (upstream JSON) and, when
  // `with_link_scores` (upstream: ENABLE_TOPOLOGY_SCORE), hami.io/node-nvidia-score.
  std::map<std::string, std::string> NodeAnnotations(bool with_link_scores) const;
  // One pass of MIG reclaim (operating mode mig; the daemon runs it every registration interval):
  // an instance on a GPU registered in mode mig that no active pod's grant names (same GPU,
  // placement and profile, and the MIG UUID once the pod records one;
  // PendingPodSource::ActiveMigGrants), or a GPU instance without a compute instance, is destroyed
  // when two passes in a row find it so: a pod being admitted is never raced. Returns how many were
  // destroyed; when the active grants are unknown the error says why and nothing is destroyed.
  StatusOr<int> ReclaimMigInstances();
  // Successful Register calls so far (one per kubelet (re)start).
  int registrations() const { return registrations_.load(); }
  std::string SocketPath() const;
  std::string KubeletSocketPath() const;

  // RPC bodies; the gRPC service delegates here (tests may call them directly).
  v1beta1::DevicePluginOptions Options() const;
  v1beta1::ListAndWatchResponse DeviceList() const;
  v1beta1::PreferredAllocationResponse PreferredAllocation(
      const v1beta1::PreferredAllocationRequest& req);
  StatusOr<v1beta1::AllocateResponse> Allocate(const v1beta1::AllocateRequest& req);

 private:
  class Service;
  friend class Service;

  Status StartServer();
  void StopServer();
  Status Register();
  void WatchLoop();
  void OnHealth(const gpu::HealthEvent& ev);
  v1beta1::ListAndWatchResponse DeviceListLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<v1beta1::ContainerAllocateResponse> AllocateOne(
      const v1beta1::ContainerAllocateRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  // The MIG devices of a container whose devices are all MIG grants: checks each grant against what
  // this node registered, reuses the instance at the decided placement when it is this container's
  // (made by an earlier try, or recorded on the pod), else creates it; records the identities on
  // the pod. Returns the MIG UUIDs in device order; on error, instances this call created are gone.
  StatusOr<std::vector<std::string>> EnsureMigInstances(const PendingPod& pod,
                                                        const PendingContainer& ctr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  // kubelet's choice of static MIG devices (every ID one of static_mig_): the device list only.
  StatusOr<v1beta1::ContainerAllocateResponse> AllocateStaticMig(
      const std::vector<std::string>& ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  std::string NewCacheFileName() ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  // The NUMA refit for one container request of GetPreferredAllocation that no pending pod's grant
  // fits (docs/upstream-contract.md, "NUMA refit"): when exactly one pod's next container wants
  // `size` devices and holds a grant not among `available`, and the pod asks
  // hami.io/numa-alignment, asks the scheduler to move the grant onto the offered GPUs. On success
  // returns the replicas of the new GPUs to prefer (and steers Allocate to the pod); a refit the
  // scheduler made but kubelet cannot take fails the pod (both modes: runtime and accounting would
  // disagree). On a refusal: best-effort keeps kubelet's choice (the pod is armed with its grant,
  // as without the refit), strict fails the pod (its Allocate is then refused). Empty when nothing
  // was decided.
  std::vector<std::string> NumaRefit(const std::vector<PendingPod>& pods, int size,
                                     const std::vector<std::string>& available)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);

  PluginConfig config_;
  gpu::DeviceDiscovery* discovery_;
  PendingPodSource* pending_;
  KubeletPodView* kubelet_view_ = nullptr;
  RefitClient* refit_ = nullptr;
  std::string node_name_;
  gpu::MigControl* mig_ = nullptr;
  // Static MIG devices and their index by MIG UUID: fixed before Start, read-only after.
  std::vector<StaticMigDevice> static_mig_;
  std::map<std::string, size_t> static_mig_index_;
  bool with_shared_gpus_ = true;

  // Guards the device state below; taken after alloc_mu_ or server_mu_, never before.
  mutable Mutex mu_ ABSL_ACQUIRED_AFTER(alloc_mu_, server_mu_);
  CondVar cv_;  // version_, generation_ or stopping_ changed
  std::vector<gpu::GpuInfo> all_gpus_ ABSL_GUARDED_BY(mu_);   // as discovered
  std::vector<gpu::GpuLink> links_ ABSL_GUARDED_BY(mu_);      // topology of all_gpus_
  std::vector<gpu::GpuInfo> gpus_ ABSL_GUARDED_BY(mu_);       // after filterdevices
  std::map<std::string, bool> healthy_ ABSL_GUARDED_BY(mu_);  // uuid -> healthy
  // GPUs of the static MIG devices: uuid -> healthy (not shared, never in a decision).
  std::map<std::string, bool> static_mig_gpu_healthy_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> replica_to_uuid_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;     // bumped on every device state change
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every server (re)start
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  Mutex alloc_mu_;  // serialises Allocate / GetPreferredAllocation (find + commit)
  Rng rng_ ABSL_GUARDED_BY(alloc_mu_);
  std::vector<SteeredChoice> steered_ ABSL_GUARDED_BY(alloc_mu_);
  // MIG instances this plugin made or handed out, by (GPU UUID, placement start): whose they are.
  struct MigOwner {
    std::string pod_uid;
    int container_index = -1;
    gpu::MigInstance instance;
  };
  std::map<std::pair<std::string, int>, MigOwner> mig_owners_ ABSL_GUARDED_BY(alloc_mu_);
  // Instances no active grant named on the last reclaim pass ("<gpu>/<gpu instance id>/<uuid>").
  std::set<std::string> mig_unclaimed_ ABSL_GUARDED_BY(alloc_mu_);

  Mutex server_mu_;
  std::unique_ptr<Service> service_ ABSL_GUARDED_BY(server_mu_);
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(server_mu_);

  std::unique_ptr<gpu::HealthWatch> health_watch_;
  std::atomic<bool> stop_{false};
  std::atomic<int> registrations_{0};
  int inotify_fd_ = -1;
  std::thread watcher_;
  bool started_ = false;
};

}  // namespace hami::deviceplugin
