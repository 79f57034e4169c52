#pragma once
// The control plane's view of device-config.yaml (upstream's keys,
// docs/upstream-contract.md#resource-model): the `nvidia:`
// section's resource names and defaulting values, and the webhook knobs that live there.
// Unknown keys are ignored (the node agent reads the rest); wrong types fail naming the key.
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "core/pod_request.h"

namespace hami::extender {

struct DeviceConfig {
  core::ResourceConfig resources;
  std::string gpu_core_policy = "default";  // default | force | disable
  std::string runtime_class_name;
  bool overwrite_env = false;
  // The device plugin's knobs in the nvidia section (upstream's keys); unset when the file does not
  // name them. `hami device-plugin` uses each where its flag is not given (flag > file > default),
  // and a node's entry in the node config (config.json) overrides both.
  struct PluginKnobs {
    std::optional<int> device_split_count;        // deviceSplitCount
    std::optional<double> device_memory_scaling;  // deviceMemoryScaling
    std::optional<double> device_core_scaling;    // deviceCoreScaling
    std::optional<int64_t> preconfigured_memory;  // preConfiguredDeviceMemory (MiB, 0 = from NVML)
    std::optional<bool> enable_numa_topology;     // enableNumaTopology
    std::optional<std::string> lib_cuda_log_level;  // libCudaLogLevel
  } plugin;
};

// Parses the YAML text; `source` names the file in errors ("device-config.yaml:
// nvidia.defaultCores: ...").
StatusOr<DeviceConfig> ParseDeviceConfig(std::string_view yaml, std::string_view source);
StatusOr<DeviceConfig> LoadDeviceConfig(const std::string& path);

}  // namespace hami::extender
