#include "cmd/config_wiring.h"

namespace hami::cmd {

void ConfigureWebhook(const vendors::DeviceConfig& file, const vendors::VendorSet* vendors,
                      webhook::WebhookOptions* webhook) {
  webhook->gpu_core_policy = file.gpu_core_policy;
  webhook->runtime_class_name = file.runtime_class_name;
  webhook->overwrite_env = file.overwrite_env;
  webhook->mig_profile_allowlist = file.mig_profile_allowlist;
  webhook->vendors = vendors;
}

void ConfigureDevicePlugin(const vendors::DeviceConfig& file,
                           const std::function<bool(std::string_view flag)>& flag_given,
                           deviceplugin::PluginConfig* plugin) {
  auto use = [&](std::string_view flag, const auto& value, auto* out) {
    if (value && !flag_given(flag)) *out = *value;
  };
  const std::optional<std::string> count = file.resources.nvidia.count;
  use("--resource-name", count, &plugin->resource_name);
  // Names only (no flag): what --report-node-capacity writes into the Node's status.
  plugin->memory_resource_name = file.resources.nvidia.memory;
  plugin->cores_resource_name = file.resources.nvidia.cores;
  plugin->core_policy = file.gpu_core_policy;
  const auto& k = file.plugin;
  use("--split-count", k.device_split_count, &plugin->split_count);
  use("--device-memory-scaling", k.device_memory_scaling, &plugin->memory_scaling);
  use("--device-cores-scaling", k.device_core_scaling, &plugin->core_scaling);
  use("--preconfigured-device-memory", k.preconfigured_memory, &plugin->preconfigured_memory_mib);
  use("--enable-numa-topology", k.enable_numa_topology, &plugin->enable_numa_topology);
  use("--libcuda-log-level", k.lib_cuda_log_level, &plugin->libcuda_log_level);
  use("--device-list-strategy", k.device_list_strategy, &plugin->device_list_strategy);
  use("--device-id-strategy", k.device_id_strategy, &plugin->device_id_strategy);
  use("--cdi-annotation-prefix", k.cdi_annotation_prefix, &plugin->cdi_annotation_prefix);
  use("--cdi-kind", k.cdi_kind, &plugin->cdi_kind);
}

}  // namespace hami::cmd
