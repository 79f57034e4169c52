#pragma once
// The container environment and mounts that arm libvgpu for one container's decision (upstream
// names and values). Pure: no files are touched here.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "deviceplugin/config.h"
#include "deviceplugin/pending_pod.h"

namespace hami::deviceplugin {

struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  bool operator==(const MountSpec&) const = default;
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  // The CDI strategies' part (vendors/nvidia/device_list.h): the container's annotations
  // (cdi-annotations) and the qualified CDI device names of ContainerAllocateResponse.cdi_devices
  // (cdi-cri).
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;
  // To be created empty before the container starts, mode 0770 (never world-writable), owned by
  // region_uid:region_gid where given (-1 = the plugin's own id): the container's user and the
  // pod's fsGroup, so libvgpu in the container can create its region file (mode 0660) there.
  std::string region_host_dir;
  int64_t region_uid = -1;
  int64_t region_gid = -1;
  // libvgpu's limits file (src/vgpu/README.md, "Armed limits"): written to limits_host_path (mode
  // 0444) before the container starts and mounted read-only next to libvgpu.so. Its values win over
  // the environment, which the container's processes can change.
  std::string limits_host_path;
  std::string limits_file;
};

// Env keys (upstream contract).
inline constexpr char kEnvVisibleDevices[] = "NVIDIA_VISIBLE_DEVICES";
inline constexpr char kEnvMemoryLimitPrefix[] = "CUDA_DEVICE_MEMORY_LIMIT_";
inline constexpr char kEnvSmLimit[] = "CUDA_DEVICE_SM_LIMIT";
inline constexpr char kEnvSharedCache[] = "CUDA_DEVICE_MEMORY_SHARED_CACHE";
inline constexpr char kEnvOversubscribe[] = "CUDA_OVERSUBSCRIBE";
// Ours, not upstream's: with oversubscription, libvgpu keeps limit / scaling of it as device
// memory.
inline constexpr char kEnvMemoryScaling[] = "CUDA_DEVICE_MEMORY_SCALING";
inline constexpr char kEnvLogLevel[] = "LIBCUDA_LOG_LEVEL";
inline constexpr char kEnvCorePolicy[] = "GPU_CORE_UTILIZATION_POLICY";
inline constexpr char kEnvTaskPriority[] = "CUDA_TASK_PRIORITY";
inline constexpr char kLimitsFileName[] = "vgpu.limits";

// `cache_file_name` is the region file's name inside the container's region directory (unique per
// allocation, e.g. a random UUID + ".cache"); without its ".cache" it is the allocation's ID, which
// keys the cdi-annotations strategy's annotation (NVIDIA's plugin keys it with a random UUID per
// response). `gpu_indices` maps this node's GPU UUIDs to NVML indices, for device ID strategy
// "index". The device list follows config.device_list_strategy; the libvgpu environment, mounts and
// limits file are the same whatever the strategy. Errors: no devices, a device without a memory
// limit (usedmem 0 or less: libvgpu would read a 0 limit as "no limit"), a pod UID or container
// name that cannot be a single path component, a device ID that cannot be a CDI device name, a GPU
// without an index under strategy "index".
StatusOr<ContainerAllocation> BuildContainerAllocation(
    const PendingPod& pod, const PendingContainer& ctr, const PluginConfig& config,
    const std::string& cache_file_name, const std::map<std::string, int>& gpu_indices = {});

// A container whose decided devices are all MIG instances (docs/migration.md, "Dynamic MIG"): the
// device list names the MIG devices (`mig_uuids`, one "MIG-..." per decided device, in order) under
// config.device_list_strategy, by UUID whatever the device ID strategy; nothing of libvgpu is set,
// mounted or written (no limits, no region directory, no ld.so.preload): the instance isolates
// memory and compute itself. `allocation_id` keys the cdi-annotations strategy's annotation.
StatusOr<ContainerAllocation> BuildMigContainerAllocation(const PendingPod& pod,
                                                          const PendingContainer& ctr,
                                                          const PluginConfig& config,
                                                          const std::vector<std::string>& mig_uuids,
                                                          std::string_view allocation_id);

// A container on a node in operating mode mps (deviceplugin/mps.h): the device list under
// config.device_list_strategy, CUDA_VISIBLE_DEVICES naming the decided GPUs by UUID in decision
// order, the MPS client environment (the control daemon's pipe directory, each device's pinned
// memory limit, the active thread percentage from the granted cores unless the core policy is
// disable) and mounts of the daemon's pipe directory (same path) and shm directory (at /dev/shm);
// nothing of libvgpu. Errors as BuildContainerAllocation's (no devices, a device granting no
// memory: MPS would read a 0 limit as none).
StatusOr<ContainerAllocation> BuildMpsContainerAllocation(
    const PendingPod& pod, const PendingContainer& ctr, const PluginConfig& config,
    std::string_view allocation_id, const std::map<std::string, int>& gpu_indices = {});
// MIG devices whole (`mig_uuids`, each "MIG-..."), as above and for kubelet's choice under a
// static MIG strategy (static_mig.h): only the device list, by UUID, under
// config.device_list_strategy. Error when an ID is not a MIG UUID.
StatusOr<ContainerAllocation> BuildMigDeviceListAllocation(
    const std::vector<std::string>& mig_uuids, const PluginConfig& config,
    std::string_view allocation_id);

}  // namespace hami::deviceplugin
