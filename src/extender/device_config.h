#pragma once
// The control plane's view of device-config.yaml (upstream's keys,
// docs/upstream-contract.md#resource-model): the `nvidia:`
// section's resource names and defaulting values, and the webhook knobs that live there.
// Unknown keys are ignored (the node agent reads the rest); wrong types fail naming the key.
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
};

// Parses the YAML text; `source` names the file in errors ("device-config.yaml: nvidia.defaultCores: ...").
StatusOr<DeviceConfig> ParseDeviceConfig(std::string_view yaml, std::string_view source);
StatusOr<DeviceConfig> LoadDeviceConfig(const std::string& path);

}  // namespace hami::extender
