#pragma once
// Device plugin configuration: one table of options with defaults (PluginConfig), validated at
// start-up, and the per-node override file of upstream HAMi ({"nodeconfig":[{"name":...}]})
// applied over it.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::deviceplugin {

// The schedulerName of pods whose device decisions this plugin trusts (hami-scheduler's default).
inline constexpr char kDefaultSchedulerName[] = "hami-scheduler";

struct PluginConfig {
  // ---- kubelet ----
  std::string resource_name = "nvidia.com/gpu";  // extended resource advertised to kubelet
  std::string plugin_dir = "/var/lib/kubelet/device-plugins/";
  std::string socket_name = "nvidia-gpu.sock";  // our endpoint, relative to plugin_dir
  std::string kubelet_socket = "kubelet.sock";  // kubelet's Registration socket in plugin_dir
  std::string scheduler_name = kDefaultSchedulerName;  // only its decisions arm containers
  // Group of region directories for pods whose supplementalGroups hold it (the webhook's
  // --region-group adds it to every GPU pod): any user of the pod can then use the 0770 directory.
  // -1 = none (the pod's fsGroup or runAsGroup, if any).
  int64_t region_group = -1;

  // ---- devices (per-node overridable) ----
  int split_count = 10;                  // replicas advertised per GPU (deviceSplitCount)
  double memory_scaling = 1.0;           // devmem = physical * scaling; > 1 = oversubscription
  double core_scaling = 1.0;             // devcore = 100 * scaling
  int64_t preconfigured_memory_mib = 0;  // for GPUs whose memory NVML cannot report (0 = off)
  // operatingmode: hami-core (shared through libvgpu), mig (each container gets a MIG instance
  // on GPUs whose MIG mode is on; the others stay hami-core) or mps (every GPU is shared through
  // the node's NVIDIA MPS control daemon, which enforces each container's limits;
  // deviceplugin/mps.h).
  std::string mode = "hami-core";
  // migstrategy / --mig-strategy, NVIDIA's static MIG strategies for MIG devices the admin made:
  // none (MIG GPUs are not offered), single (every MIG device as `resource_name`), mixed (as
  // nvidia.com/mig-<profile>, one resource per profile). Not with mode mig.
  std::string mig_strategy = "none";
  bool enable_numa_topology = false;        // report each replica's NUMA node to kubelet
  bool enable_preferred_allocation = true;  // steer kubelet's replica choice to the decision
  std::vector<std::string> exclude_uuids;   // filterdevices.uuid
  std::vector<int> exclude_indices;         // filterdevices.index
  // --report-node-capacity / nodeconfig reportnodecapacity (upstream #2874): write the sum of the
  // healthy GPUs' registered memory and cores into the Node's status.capacity and .allocatable
  // under the two resource names below (the nvidia: section's resourceMemoryName and
  // resourceCoreName), so `kubectl describe node` and tools that read capacity see them.
  bool report_node_capacity = false;
  std::string memory_resource_name = "nvidia.com/gpumem";
  std::string cores_resource_name = "nvidia.com/gpucores";

  // ---- container environment ----
  std::string libcuda_log_level;        // LIBCUDA_LOG_LEVEL; "" = not set
  std::string core_policy = "default";  // GPU_CORE_UTILIZATION_POLICY: default | force | disable

  // ---- how Allocate names the GPUs to the runtime (vendors/nvidia/device_list.h) ----
  std::string device_list_strategy = "envvar";  // envvar, volume-mounts, cdi-annotations, cdi-cri
  std::string device_id_strategy = "uuid";      // uuid | index (NVML index)
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  std::string cdi_kind = "nvidia.com/gpu";  // <vendor>/<class> of the node's CDI spec
  // IMEX channels named to the runtime beside every GPU container's devices (deviceplugin/imex.h):
  // the ones of --imex-channel-ids whose device node was found at start.
  std::vector<int> imex_channels;

  // ---- host paths (libvgpu install, HOOK_PATH of upstream) ----
  std::string container_hook_dir =
      "/usr/local/vgpu";  // where the container sees libvgpu and its region
  std::string libvgpu_host_path = "/usr/local/vgpu/libvgpu.so";
  std::string ld_preload_host_path = "/usr/local/vgpu/ld.so.preload";
  std::string region_root = "/usr/local/vgpu/containers";  // host: <root>/<podUID>_<container>/
  std::string lock_dir = "/tmp/vgpulock";

  // ---- operating mode mps: the MPS control daemon, run by the admin (deviceplugin/mps.h) ----
  // Host directory of the daemon's pipes (its CUDA_MPS_PIPE_DIRECTORY; MPS's default): mounted at
  // the same path in MPS containers, which get it as CUDA_MPS_PIPE_DIRECTORY.
  std::string mps_pipe_dir = "/tmp/nvidia-mps";
  // Host directory the daemon's server uses as /dev/shm, mounted at the container's /dev/shm (MPS
  // clients share memory with their server there). "" = not mounted (the pods share it otherwise).
  std::string mps_shm_dir = "/dev/shm";
  // Host directory of the host PID broker's socket (host_pid_broker.h), mounted read-only into
  // armed containers at /tmp/vgpulock/hostpid with LIBVGPU_HOSTPID_BROKER=1; "" = no broker
  // (upstream's devicePlugin.hostPIDBroker.enabled=false). The plugin must run in the host PID
  // namespace.
  std::string host_pid_broker_dir;
};

// dir + "/" + name, without doubling a trailing slash of dir.
std::string JoinPath(const std::string& dir, const std::string& name);

// Checks ranges and enumerations; the message names the option.
Status Validate(const PluginConfig& config);

// The key of a node config entry's metav1.LabelSelector, and the name of the entry for nodes that
// no other entry selects (upstream's NodeConfigFallbackName).
inline constexpr char kNodeLabelSelectorKey[] = "nodelabelselector";
inline constexpr char kNodeConfigFallbackName[] = "*";

// This node's metadata.labels (a JSON object), read only when an entry's nodelabelselector has to
// be evaluated. Without one (--dry-run), the node has no labels: only an empty selector matches.
using NodeLabelsFn = std::function<StatusOr<nlohmann::json>()>;

// Applies the entries of an upstream per-node config file that choose this node over `config`:
// the entry whose "name" equals `node_name`; else every entry whose "nodelabelselector" matches
// the node's labels, in file order (each changes only the keys it sets); else the entry named
// "*". Every entry is checked for shape; two entries naming one node are an error. `source`
// names the file in errors. Unknown keys in an entry are errors (a typo must not silently keep a
// default).
Status ApplyNodeConfig(std::string_view json, std::string_view node_name, PluginConfig* config,
                       std::string_view source = "config.json",
                       const NodeLabelsFn& node_labels = nullptr);

// Reads and applies a per-node config file.
Status ApplyNodeConfigFile(const std::string& path, std::string_view node_name,
                           PluginConfig* config, const NodeLabelsFn& node_labels = nullptr);

}  // namespace hami::deviceplugin
