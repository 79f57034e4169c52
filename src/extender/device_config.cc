#include "extender/device_config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace hami::extender {
namespace {

// Absent, null, or the empty string the upstream chart renders for unset values (`runtimeClassName:
// ""`).
bool Unset(const YAML::Node& v) {
  return !v || v.IsNull() || (v.IsScalar() && v.Scalar().empty());
}

// Reads `key` into *out; an unset key leaves *out as it is (the default).
template <typename T>
Status Read(const YAML::Node& section, const char* key, std::string_view source, T* out) {
  const YAML::Node v = section[key];
  if (Unset(v)) return OkStatus();
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(source, ": nvidia.", key, ": value \"", v.Scalar(),
                           "\" has the wrong type");
  }
  return OkStatus();
}

// The same for a key whose absence must stay visible: an unset key leaves *out empty.
template <typename T>
Status Read(const YAML::Node& section, const char* key, std::string_view source,
            std::optional<T>* out) {
  if (Unset(section[key])) return OkStatus();
  T v{};
  HAMI_RETURN_IF_ERROR(Read(section, key, source, &v));
  *out = v;
  return OkStatus();
}

}  // namespace

StatusOr<DeviceConfig> ParseDeviceConfig(std::string_view yaml, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source, ":", e.mark.line + 1, ": ", e.msg);
  }
  DeviceConfig c;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap())
    return InvalidArgument(source, ": the top level must be a mapping with an `nvidia:` section");
  const YAML::Node n = root["nvidia"];
  if (!n || n.IsNull()) return c;
  if (!n.IsMap()) return InvalidArgument(source, ": nvidia: must be a mapping");
  auto& r = c.resources;
  HAMI_RETURN_IF_ERROR(Read(n, "resourceCountName", source, &r.nvidia.count));
  HAMI_RETURN_IF_ERROR(Read(n, "resourceMemoryName", source, &r.nvidia.memory));
  HAMI_RETURN_IF_ERROR(
      Read(n, "resourceMemoryPercentageName", source, &r.nvidia.memory_percentage));
  HAMI_RETURN_IF_ERROR(Read(n, "resourceCoreName", source, &r.nvidia.cores));
  HAMI_RETURN_IF_ERROR(Read(n, "resourcePriorityName", source, &r.nvidia.priority));
  HAMI_RETURN_IF_ERROR(Read(n, "defaultMemory", source, &r.default_memory_mib));
  HAMI_RETURN_IF_ERROR(Read(n, "defaultCores", source, &r.default_cores));
  HAMI_RETURN_IF_ERROR(Read(n, "defaultGPUNum", source, &r.default_gpu_num));
  HAMI_RETURN_IF_ERROR(Read(n, "memoryFactor", source, &r.memory_factor));
  HAMI_RETURN_IF_ERROR(Read(n, "gpuCorePolicy", source, &c.gpu_core_policy));
  HAMI_RETURN_IF_ERROR(Read(n, "runtimeClassName", source, &c.runtime_class_name));
  HAMI_RETURN_IF_ERROR(Read(n, "overwriteEnv", source, &c.overwrite_env));
  auto& k = c.plugin;
  HAMI_RETURN_IF_ERROR(Read(n, "deviceSplitCount", source, &k.device_split_count));
  HAMI_RETURN_IF_ERROR(Read(n, "deviceMemoryScaling", source, &k.device_memory_scaling));
  HAMI_RETURN_IF_ERROR(Read(n, "deviceCoreScaling", source, &k.device_core_scaling));
  HAMI_RETURN_IF_ERROR(Read(n, "preConfiguredDeviceMemory", source, &k.preconfigured_memory));
  HAMI_RETURN_IF_ERROR(Read(n, "enableNumaTopology", source, &k.enable_numa_topology));
  HAMI_RETURN_IF_ERROR(Read(n, "libCudaLogLevel", source, &k.lib_cuda_log_level));
  bool disable_core_limit = false;
  HAMI_RETURN_IF_ERROR(Read(n, "disableCoreLimit", source, &disable_core_limit));
  if (disable_core_limit) c.gpu_core_policy = "disable";
  if (c.gpu_core_policy != "default" && c.gpu_core_policy != "force" &&
      c.gpu_core_policy != "disable")
    return InvalidArgument(source, ": nvidia.gpuCorePolicy: \"", c.gpu_core_policy,
                           "\" is not one of default, force, disable");
  Status v = r.Validate();
  if (!v.ok()) return InvalidArgument(source, ": nvidia: ", std::string(v.message()));
  return c;
}

StatusOr<DeviceConfig> LoadDeviceConfig(const std::string& path) {
  // A ConfigMap holds at most 1 MiB; read a little past that and refuse the rest.
  constexpr std::streamsize kMaxBytes = 2 << 20;
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("--device-config-file: cannot read ", path);
  std::string text(static_cast<size_t>(kMaxBytes) + 1, '\0');
  f.read(text.data(), kMaxBytes + 1);
  text.resize(static_cast<size_t>(f.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxBytes)
    return InvalidArgument("--device-config-file: ", path, " is larger than ", kMaxBytes, " bytes");
  return ParseDeviceConfig(text, path);
}

}  // namespace hami::extender
