#pragma once
// Which pod is kubelet allocating? kubelet's Allocate names only replica IDs, never the pod. The
// decision lives on the pod (hami.io/vgpu-devices-to-allocate, one entry per container, consumed in
// order). A PendingPodSource lists the pods bound to this node that still wait for devices;
// SelectPending picks the one the request belongs to, or refuses when it cannot be sure: a wrong
// guess would arm a container with another pod's limits.
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "core/mig.h"
#include "core/model.h"
#include "core/numa_alignment.h"

namespace hami::deviceplugin {

struct PendingContainer {
  int index = 0;     // position in the decision (init containers first, then app)
  std::string name;  // container name (region directory "<podUID>_<name>")
  std::vector<core::ContainerDevice> devices;
  int priority = -1;             // nvidia.com/priority; -1 = not given
  bool disable_control = false;  // container env CUDA_DISABLE_CONTROL=true: no ld.so.preload mount
  // Owner of the region directory: the container's user (securityContext.runAsUser of the
  // container, else of the pod) and group (the pod's fsGroup, which every process of the pod holds,
  // else runAsGroup); -1 = not given, the directory keeps the plugin's own.
  int64_t uid = -1;
  int64_t gid = -1;
  // The container's MIG grants (hami.io/vgpu-mig-allocations entries of this container that name
  // one of its devices; that device carries the profile and placement too), with the instance's
  // identity once the device plugin has recorded it (RecordMig).
  std::vector<core::MigAllocation> mig;
  bool operator==(const PendingContainer&) const = default;
};

struct PendingPod {
  std::string uid;
  std::string namespace_;
  std::string name;
  int64_t bind_time = 0;  // hami.io/bind-time (Unix seconds)
  // Containers whose devices are still to be allocated, in decision order (non-empty entries only).
  std::vector<PendingContainer> containers;
  // Why the pod's decision is not trusted (not written by the scheduler for this node: bind phase,
  // node, schedulerName, ignore label); empty = trusted. Refused pods are never armed:
  // SelectPending and PreferenceCandidates pass over them and name them in the error kubelet
  // reports.
  std::string refused;
  // hami.io/numa-alignment: whether to ask the scheduler's NUMA refit when kubelet offers the next
  // container other GPUs than its grant (DevicePlugin::PreferredAllocation).
  core::NumaAlignment numa_alignment = core::NumaAlignment::kNone;
  std::string Key() const { return StrCat(namespace_, "/", name); }
};

class PendingPodSource {
 public:
  virtual ~PendingPodSource() = default;
  // Pods bound to this node whose NVIDIA decision still has containers waiting for Allocate, and
  // those carrying such a record that the scheduler did not write for this node
  // (PendingPod::refused). Must be current (kubelet admits a pod only after it is bound, so a fresh
  // read sees it).
  virtual StatusOr<std::vector<PendingPod>> ListPending() = 0;
  // The pod's container `container_index` was answered: erase its entry from the to-allocate record
  // (when none is left the pod's bind phase becomes success).
  virtual Status MarkAllocated(const PendingPod& pod, int container_index) = 0;
  // Allocate failed for the pod (bind phase failed).
  virtual Status MarkFailed(const PendingPod& pod, std::string_view reason) = 0;
  // The MIG instances created for the pod: puts migUUID, gpuInstanceID and computeInstanceID on
  // the matching entries of hami.io/vgpu-mig-allocations (matched by container, device, GPU,
  // profile and placement; other entries untouched).
  virtual Status RecordMig(const PendingPod& pod,
                           const std::vector<core::MigAllocation>& created) = 0;
  // The MIG grants (hami.io/vgpu-mig-allocations entries) of every pod on this node that has not
  // terminated: the instances still in use. An error (list failed, a grant that does not decode)
  // means "unknown": nothing may be reclaimed on it.
  virtual StatusOr<std::vector<core::MigAllocation>> ActiveMigGrants() = 0;
};

// Whether two MIG entries are the same grant (container, device, GPU, profile, placement), runtime
// identity aside.
bool SameMigGrant(const core::MigAllocation& a, const core::MigAllocation& b);

struct Selection {
  PendingPod pod;
  PendingContainer container;  // the pod's next container
};

// A replica choice we steered kubelet to for one pod (GetPreferredAllocation), remembered so that
// the Allocate carrying exactly those IDs is attributed to that pod even when others wait as well.
struct SteeredChoice {
  std::string pod_uid;
  int container_index = -1;
  std::set<std::string> ids;
};

// A pod as kubelet's PodResources API lists it: kubelet adds a pod to its list right before
// admitting it, and lists the devices each container already holds. So while kubelet admits pod X,
// X is listed with no devices of our resource for the container being allocated, and pods kubelet
// has not reached yet are not listed at all.
struct KubeletPod {
  std::string namespace_;
  std::string name;
  std::set<std::string> containers_with_devices;  // containers holding devices of our resource
  std::string Key() const { return StrCat(namespace_, "/", name); }
};

class KubeletPodView {
 public:
  virtual ~KubeletPodView() = default;
  virtual StatusOr<std::vector<KubeletPod>> ListPods() = 0;
};

// Picks the pod whose next container is being allocated with `kubelet_ids`:
//  1. candidates = pods whose next container wants exactly kubelet_ids.size() devices;
//  2. one candidate: it (upstream behaviour: kubelet's replica IDs carry no pod identity);
//  3. several: the only one kubelet lists (`kubelet_view`, asked only here) with that container
//  still
//     without devices; else the one we steered kubelet to with exactly these IDs;
//  otherwise NotFound (no candidate) or FailedPrecondition (ambiguous), naming the pods.
// Refused pods are never candidates; with no candidate, PermissionDenied names the refused pods
// that would have matched, and why.
StatusOr<Selection> SelectPending(const std::vector<PendingPod>& pods,
                                  const std::vector<std::string>& kubelet_ids,
                                  const std::vector<SteeredChoice>& steered = {},
                                  KubeletPodView* kubelet_view = nullptr);

// Pods whose next container wants `size` devices and whose GPUs each still have an available
// replica among `available` (UUID of each); used to steer GetPreferredAllocation.
std::vector<const PendingPod*> PreferenceCandidates(
    const std::vector<PendingPod>& pods, int size, const std::vector<std::string>& available_uuids);

// An in-memory PendingPodSource: pods are added by the owner (tests, benchmarks, a node without
// an API server). Thread-safe.
class MemoryPendingPodSource final : public PendingPodSource {
 public:
  void AddPod(PendingPod pod);
  StatusOr<std::vector<PendingPod>> ListPending() override;
  Status MarkAllocated(const PendingPod& pod, int container_index) override;
  Status MarkFailed(const PendingPod& pod, std::string_view reason) override;
  // Also sets the identity on the stored pod's container, as a re-read of the pod would show it.
  Status RecordMig(const PendingPod& pod, const std::vector<core::MigAllocation>& created) override;
  // The grants of every pod added and not removed (consumed containers included).
  StatusOr<std::vector<core::MigAllocation>> ActiveMigGrants() override;
  // The pod is gone (deleted, or terminated).
  void RemovePod(const std::string& uid);
  // uid -> failure reason, for inspection.
  std::map<std::string, std::string> Failed() const;
  // Makes ListPending fail (ok = succeed again).
  void SetListError(Status s);
  // Makes MarkAllocated fail, leaving the pod waiting (ok = succeed again).
  void SetMarkError(Status s);

 private:
  mutable Mutex mu_;
  std::vector<PendingPod> pods_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<core::MigAllocation>> mig_ ABSL_GUARDED_BY(mu_);  // by pod uid
  std::map<std::string, std::string> failed_ ABSL_GUARDED_BY(mu_);
  Status list_error_ ABSL_GUARDED_BY(mu_);
  Status mark_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::deviceplugin
