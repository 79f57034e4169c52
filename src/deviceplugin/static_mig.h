#pragma once
// NVIDIA's static MIG strategies (--mig-strategy / nodeconfig migstrategy single or mixed): the MIG
// devices an administrator created beforehand (nvidia-smi mig -cgi ... -C) are advertised to
// kubelet one device per MIG device, named by its MIG UUID, and handed out whole; kubelet picks
// them, no scheduling decision is involved and libvgpu is not used (the instance isolates memory
// and compute itself). GPUs with MIG off stay shared through libvgpu. The instances are read once
// at start: a changed MIG layout needs a plugin restart (as NVIDIA's plugin).
#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/config.h"
#include "gpu/discovery.h"

namespace hami::deviceplugin {

struct StaticMigDevice {
  std::string uuid;      // "MIG-...": the kubelet device ID and what the runtime is given
  std::string gpu_uuid;  // the GPU it is carved from (health follows the GPU's)
  std::string profile;   // "1g.10gb"
  int numa_node = -1;    // the GPU's
  bool operator==(const StaticMigDevice&) const = default;
};

// One kubelet resource of MIG devices and the socket it is served on.
struct StaticMigResource {
  std::string resource_name;  // single: config.resource_name; mixed: nvidia.com/mig-<profile>
  std::string socket_name;    // single: config.socket_name; mixed: nvidia-mig-<profile>.sock
  std::vector<StaticMigDevice> devices;  // GPU index order, then GPU instance id
  bool operator==(const StaticMigResource&) const = default;
};

// The resources of config.mig_strategy over `gpus` (after filterdevices): none of them for
// strategy none or when no GPU has MIG on; single: one resource, config.resource_name, with every
// MIG device; mixed: one resource per profile, sorted by name. Errors, each naming the GPU or the
// profiles (NVIDIA's checks): a GPU with MIG on and no MIG device (a GPU instance without compute
// instance does not count); under single, MIG devices of more than one profile, or GPUs with MIG
// on beside GPUs with MIG off; instances that cannot be listed.
StatusOr<std::vector<StaticMigResource>> BuildStaticMigResources(
    const std::vector<gpu::GpuInfo>& gpus, gpu::MigControl& mig, const PluginConfig& config);

// "nvidia.com/mig-<profile>" and its socket "nvidia-mig-<profile>.sock": a '+' of the profile name
// (NVML's media variants, "1g.10gb+me") becomes '.', as a resource name may not hold it. Error when
// the profile cannot form a resource name (empty, over 59 characters, other characters than
// letters, digits, '.', '-', '_', '+', or not starting and ending with a letter or digit).
StatusOr<std::string> MixedMigResourceName(const std::string& profile);

}  // namespace hami::deviceplugin
