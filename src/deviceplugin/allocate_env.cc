#include "deviceplugin/allocate_env.h"

#include "core/model.h"
#include "deviceplugin/host_pid_broker.h"
#include "deviceplugin/imex.h"
#include "deviceplugin/mps.h"
#include "vendors/nvidia/device_list.h"
#include "vendors/vendor_set.h"

namespace hami::deviceplugin {

namespace {

const vendors::Vendor& NvidiaVendor() {
  static const vendors::Vendor& v =
      *vendors::VendorSet::NvidiaOnly().ByCommonWord(core::kNvidiaVendor);
  return v;
}

// A pod UID or container name becomes one directory name on the host: nothing that could climb out.
Status CheckPathComponent(const std::string& s, const char* what) {
  if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
      s.find('\0') != std::string::npos) {
    return InvalidArgument(what, " '", s, "' cannot name a region directory");
  }
  return OkStatus();
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

// The IDs the runtime gets for the decided GPUs: UUIDs, or NVML indices (device ID strategy index).
StatusOr<std::vector<std::string>> GpuIds(const PendingContainer& ctr, const PluginConfig& c,
                                          const std::map<std::string, int>& gpu_indices) {
  std::vector<std::string> ids;
  for (const auto& d : ctr.devices) {
    std::string id = d.uuid;
    if (c.device_id_strategy == "index") {
      auto it = gpu_indices.find(d.uuid);
      if (it == gpu_indices.end())
        return FailedPrecondition("GPU ", d.uuid,
                                  " has no NVML index on this node (device ID strategy index)");
      id = std::to_string(it->second);
    }
    ids.push_back(std::move(id));
  }
  return ids;
}

// The node's IMEX channels (imex.h) beside the device list, under the same strategies: the
// environment, mounts under the list's root, CDI devices of the class imex-channel.
Status ApplyImexChannels(const PluginConfig& c, const vendors::nvidia::DeviceListStrategies& s,
                         std::string_view allocation_id, ContainerAllocation* a) {
  namespace nv = vendors::nvidia;
  if (c.imex_channels.empty()) return OkStatus();
  std::vector<std::string> ids;
  for (const int id : c.imex_channels) ids.push_back(StrCat(id));
  if (s.envvar) a->envs[kEnvImexChannels] = Join(ids);
  if (s.volume_mounts) {
    for (const auto& id : ids)
      a->mounts.push_back({JoinPath(JoinPath(nv::kVolumeMountsRoot, kImexVolumeMountsDir), id),
                           nv::kVolumeMountsHostPath, false});
  }
  if (!s.AnyCdi()) return OkStatus();
  const std::string vendor = c.cdi_kind.substr(0, c.cdi_kind.find('/'));
  std::vector<std::string> names;
  for (const auto& id : ids) {
    auto name = nv::CdiDeviceName(StrCat(vendor, "/", kImexCdiClass), id);
    if (!name.ok()) return Annotate(name.status(), StrCat("IMEX channel ", id));
    names.push_back(*std::move(name));
  }
  if (s.cdi_annotations) {
    HAMI_ASSIGN_OR_RETURN(const std::string key,
                          nv::CdiAnnotationKey(c.cdi_annotation_prefix, allocation_id));
    std::string& value = a->annotations[key];
    for (const auto& n : names) value += (value.empty() ? "" : ",") + n;
  }
  if (s.cdi_cri) a->cdi_devices.insert(a->cdi_devices.end(), names.begin(), names.end());
  return OkStatus();
}

// The device list as config.device_list_strategy asks (vendors/nvidia/device_list.h): replaces the
// vendor's NVIDIA_VISIBLE_DEVICES, or drops it when only CDI strategies are on. `ids` name the
// devices to the runtime (GPU UUIDs or indices, MIG UUIDs).
Status ApplyDeviceList(const std::vector<std::string>& ids, const PluginConfig& c,
                       std::string_view allocation_id, ContainerAllocation* a) {
  namespace nv = vendors::nvidia;
  HAMI_ASSIGN_OR_RETURN(const nv::DeviceListStrategies strategies,
                        nv::ParseDeviceListStrategies(c.device_list_strategy));
  std::vector<std::string> cdi_names;
  for (const auto& id : ids) {
    // Every strategy lists the IDs (comma separated, as a path component, as a CDI name): one rule
    // for all of them, CDI's device-name rule, which NVML UUIDs and indices satisfy.
    auto name = nv::CdiDeviceName(c.cdi_kind, id);
    if (!name.ok()) return Annotate(name.status(), StrCat("device ", id));
    cdi_names.push_back(*std::move(name));
  }
  a->envs.erase(kEnvVisibleDevices);
  if (strategies.envvar) a->envs[kEnvVisibleDevices] = Join(ids);
  if (strategies.volume_mounts) {
    // The runtime reads the list from the mount points' names (NVIDIA's plugin: this wins over
    // envvar when both are on).
    a->envs[kEnvVisibleDevices] = nv::kVolumeMountsRoot;
    for (const auto& id : ids)
      a->mounts.push_back({JoinPath(nv::kVolumeMountsRoot, id), nv::kVolumeMountsHostPath, false});
  }
  if (strategies.cdi_annotations) {
    HAMI_ASSIGN_OR_RETURN(const std::string key,
                          nv::CdiAnnotationKey(c.cdi_annotation_prefix, allocation_id));
    a->annotations[key] = Join(cdi_names);
  }
  if (strategies.cdi_cri) a->cdi_devices = cdi_names;
  return ApplyImexChannels(c, strategies, allocation_id, a);
}

// The decision always names the memory granted (a whole card is its full memory); 0 would reach
// libvgpu (or MPS) as "no limit", so a record saying 0 is refused rather than run unlimited.
Status CheckLimits(const PendingPod& pod, const PendingContainer& ctr) {
  if (ctr.devices.empty())
    return InvalidArgument("pod ", pod.Key(), " container ", ctr.name, ": decision has no devices");
  for (const auto& d : ctr.devices) {
    if (d.usedmem_mib < 0 || d.usedcores < 0)
      return InvalidArgument("pod ", pod.Key(), ": negative limit for ", d.uuid);
    if (d.usedmem_mib == 0)
      return InvalidArgument("pod ", pod.Key(), " container ", ctr.name,
                             ": the decision grants 0 MiB on ", d.uuid,
                             "; refusing to start it without a memory limit");
  }
  return OkStatus();
}

}  // namespace

StatusOr<ContainerAllocation> BuildContainerAllocation(
    const PendingPod& pod, const PendingContainer& ctr, const PluginConfig& c,
    const std::string& cache_file_name, const std::map<std::string, int>& gpu_indices) {
  HAMI_RETURN_IF_ERROR(CheckPathComponent(pod.uid, "pod UID"));
  HAMI_RETURN_IF_ERROR(CheckPathComponent(ctr.name, "container name"));
  HAMI_RETURN_IF_ERROR(CheckPathComponent(cache_file_name, "cache file name"));
  HAMI_RETURN_IF_ERROR(CheckLimits(pod, ctr));
  ContainerAllocation a;
  // The decision's part (visible devices, memory and SM limits) is the NVIDIA vendor's, one source
  // with the scheduler side (Vendor::AllocateEnv).
  a.envs = NvidiaVendor().AllocateEnv(ctr.devices);
  std::string_view allocation_id = cache_file_name;
  if (allocation_id.size() > 6 && allocation_id.substr(allocation_id.size() - 6) == ".cache")
    allocation_id.remove_suffix(6);
  HAMI_ASSIGN_OR_RETURN(const std::vector<std::string> ids, GpuIds(ctr, c, gpu_indices));
  HAMI_RETURN_IF_ERROR(ApplyDeviceList(ids, c, allocation_id, &a));
  a.envs[kEnvSharedCache] = JoinPath(c.container_hook_dir, cache_file_name);
  if (c.memory_scaling > 1.0) {
    a.envs[kEnvOversubscribe] = "true";
    a.envs[kEnvMemoryScaling] = StrCat(c.memory_scaling);
  }
  if (!c.libcuda_log_level.empty()) a.envs[kEnvLogLevel] = c.libcuda_log_level;
  if (c.core_policy != "default") a.envs[kEnvCorePolicy] = c.core_policy;
  if (ctr.priority >= 0) a.envs[kEnvTaskPriority] = StrCat(ctr.priority);

  a.region_host_dir = JoinPath(c.region_root, StrCat(pod.uid, "_", ctr.name));
  a.region_uid = ctr.uid;
  a.region_gid = ctr.gid;
  a.mounts.push_back({JoinPath(c.container_hook_dir, "libvgpu.so"), c.libvgpu_host_path, true});
  a.mounts.push_back({c.container_hook_dir, a.region_host_dir, false});
  a.mounts.push_back({"/tmp/vgpulock", c.lock_dir, false});
  if (!c.host_pid_broker_dir.empty()) {
    // Nested in the writable lock directory, so listed after it; read-only: a container may ask
    // the broker, never replace its socket.
    a.mounts.push_back({kHostPidBrokerContainerDir, c.host_pid_broker_dir, true});
    a.envs[kEnvHostPidBroker] = "1";
  }
  if (!ctr.disable_control)
    a.mounts.push_back({"/etc/ld.so.preload", c.ld_preload_host_path, true});

  // The limits file: every libvgpu setting above except the device list and the log level, and the
  // core policy even when it is "default" (so that the environment cannot say "disable").
  a.limits_host_path = JoinPath(c.region_root, StrCat(pod.uid, "_", ctr.name, ".limits"));
  std::map<std::string, std::string> armed = a.envs;
  armed.erase(kEnvVisibleDevices);
  armed.erase(kEnvLogLevel);
  armed.erase(kEnvHostPidBroker);  // a gate of the environment, not a limit
  armed.erase(kEnvImexChannels);   // the runtime's, as the device list
  armed[kEnvCorePolicy] = c.core_policy;
  a.limits_file = "# libvgpu limits for this container, written by the hami device plugin\n";
  for (const auto& [k, v] : armed) a.limits_file += StrCat(k, "=", v, "\n");
  a.mounts.push_back({JoinPath(c.container_hook_dir, kLimitsFileName), a.limits_host_path, true});
  return a;
}

StatusOr<ContainerAllocation> BuildMigContainerAllocation(const PendingPod& pod,
                                                          const PendingContainer& ctr,
                                                          const PluginConfig& c,
                                                          const std::vector<std::string>& mig_uuids,
                                                          std::string_view allocation_id) {
  if (ctr.devices.empty())
    return InvalidArgument("pod ", pod.Key(), " container ", ctr.name, ": decision has no devices");
  if (mig_uuids.size() != ctr.devices.size())
    return Internal("pod ", pod.Key(), " container ", ctr.name, ": ", mig_uuids.size(),
                    " MIG device(s) for ", ctr.devices.size(), " decided device(s)");
  auto a = BuildMigDeviceListAllocation(mig_uuids, c, allocation_id);
  if (!a.ok()) return Annotate(a.status(), StrCat("pod ", pod.Key()));
  return a;
}

StatusOr<ContainerAllocation> BuildMigDeviceListAllocation(
    const std::vector<std::string>& mig_uuids, const PluginConfig& c,
    std::string_view allocation_id) {
  if (mig_uuids.empty()) return InvalidArgument("no MIG devices");
  for (const auto& u : mig_uuids) {
    if (u.rfind("MIG-", 0) != 0) return InvalidArgument("'", u, "' is not a MIG device UUID");
  }
  ContainerAllocation a;
  HAMI_RETURN_IF_ERROR(ApplyDeviceList(mig_uuids, c, allocation_id, &a));
  return a;
}

StatusOr<ContainerAllocation> BuildMpsContainerAllocation(
    const PendingPod& pod, const PendingContainer& ctr, const PluginConfig& c,
    std::string_view allocation_id, const std::map<std::string, int>& gpu_indices) {
  HAMI_RETURN_IF_ERROR(CheckLimits(pod, ctr));
  ContainerAllocation a;
  HAMI_ASSIGN_OR_RETURN(const std::vector<std::string> ids, GpuIds(ctr, c, gpu_indices));
  HAMI_RETURN_IF_ERROR(ApplyDeviceList(ids, c, allocation_id, &a));
  std::vector<std::string> uuids;
  for (const auto& d : ctr.devices) uuids.push_back(d.uuid);
  a.envs[kEnvCudaVisibleDevices] = Join(uuids);
  a.envs[kEnvMpsPipeDirectory] = c.mps_pipe_dir;
  a.envs[kEnvMpsPinnedMemLimit] = MpsPinnedMemLimit(ctr.devices);
  if (const int pct = MpsActiveThreadPercentage(ctr.devices); pct > 0 && c.core_policy != "disable")
    a.envs[kEnvMpsActiveThreadPercentage] = StrCat(pct);
  a.mounts.push_back({c.mps_pipe_dir, c.mps_pipe_dir, false});
  if (!c.mps_shm_dir.empty()) a.mounts.push_back({"/dev/shm", c.mps_shm_dir, false});
  return a;
}

}  // namespace hami::deviceplugin
