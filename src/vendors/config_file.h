#pragma once
// The one reader of device-config.yaml (docs/install.md#device-configyaml-options). One parse of
// the file yields the enabled vendors (every vendor section, built by the registry: LoadVendors'
// rules) and the `nvidia:` section's knobs that the scheduler, the webhook and the device plugin
// take from it, read through one typed option table (NvidiaOptions: key, type, default, the
// binaries that use it, one doc line, validator).
//
// One strictness rule for every section: upstream keys we do not use are accepted and logged; any
// other key is an error naming the file, the section and the key
// ("/device-config/device-config.yaml: nvidia.gpuCorePolcy: unknown option"). A top-level section
// that is no vendor's (every upstream vendor's section has a registry row) is an error.
// An empty value (`key:`, `key: ""`, as upstream's chart renders unset values) keeps the default.
// Values that name a mode hami-cpp does not implement fail here, naming the option.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "vendors/nvidia/mig.h"
#include "vendors/nvidia/request.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {

// The `nvidia:` knobs of the control plane and the node agent.
struct DeviceConfig {
  nvidia::ResourceConfig resources;  // resource names and defaulting (NvidiaVendor reads the same)
  // GPU_CORE_UTILIZATION_POLICY, one source for the whole cluster: the webhook puts it in the pod's
  // environment and the device plugin into the container's environment and limits file.
  // disableCoreLimit: true means "disable".
  std::string gpu_core_policy = "default";  // default | force | disable
  std::string runtime_class_name;           // webhook: spec.runtimeClassName ("" = leave it)
  bool overwrite_env = false;               // webhook: NVIDIA_VISIBLE_DEVICES=none elsewhere
  // migProfileAllowlist: the MIG profiles the cluster allows per GPU model; the webhook checks a
  // pod's nvidia.com/mig-profile-preference against it. Upstream's chart list unless the file
  // names the key.
  std::vector<nvidia::MigAllowlistEntry> mig_profile_allowlist =
      nvidia::DefaultMigProfileAllowlist();
  // The device plugin's knobs; unset when the file does not name them. `hami device-plugin` uses
  // each where its flag is not given (flag > file > default), and a node's entry in the node config
  // (config.json) overrides both.
  struct PluginKnobs {
    std::optional<int> device_split_count;          // deviceSplitCount
    std::optional<double> device_memory_scaling;    // deviceMemoryScaling
    std::optional<double> device_core_scaling;      // deviceCoreScaling
    std::optional<int64_t> preconfigured_memory;    // preConfiguredDeviceMemory (MiB, 0 = NVML)
    std::optional<bool> enable_numa_topology;       // enableNumaTopology
    std::optional<std::string> lib_cuda_log_level;  // libCudaLogLevel
    // How Allocate names the GPUs to the container runtime (vendors/nvidia/device_list.h); the
    // strategy list in its canonical spelling ("envvar", "cdi-annotations,cdi-cri", ...).
    std::optional<std::string> device_list_strategy;   // deviceListStrategy
    std::optional<std::string> device_id_strategy;     // deviceIDStrategy: uuid | index
    std::optional<std::string> cdi_annotation_prefix;  // cdiAnnotationPrefix
    std::optional<std::string> cdi_kind;               // cdiKind
  } plugin;
};

// The binaries an option configures (bit set).
enum ConfiguredBinary : unsigned {
  kScheduler = 1,     // hami scheduler, extender side (and hami sim)
  kWebhook = 2,       // hami scheduler, admission webhook
  kDevicePlugin = 4,  // hami device-plugin
  kNotUsed = 0,       // an upstream key that hami-cpp accepts and logs
};

enum class OptionType { kString, kInt, kNumber, kBool, kAny };  // kAny: a YAML value of any shape

// One option of a section. `set` validates the value and stores it; errors say what is wrong, the
// reader adds file, section and key.
struct OptionValue {
  std::string text;  // kString (also kInt/kNumber/kBool as written)
  int64_t i = 0;
  double d = 0;
  bool b = false;
  const YAML::Node* node = nullptr;  // kAny: the value as written (a scalar, list or mapping)
};
struct Option {
  const char* key;
  OptionType type;
  const char* default_text;                              // as the docs show it
  unsigned binaries;                                     // ConfiguredBinary bits
  const char* doc;                                       // one line
  Status (*set)(const OptionValue& v, DeviceConfig* c);  // null: accepted, not used
};

// The `nvidia:` section's option table (docs/install.md lists it; a test keeps the two equal).
std::span<const Option> NvidiaOptions();
// The doc table of NvidiaOptions (Markdown), as docs/install.md carries it.
std::string RenderOptionTable();

// One parsed device-config.yaml.
struct ConfigFile {
  DeviceConfig nvidia;
  std::vector<std::unique_ptr<Vendor>> vendors;  // the enabled ones, registry order
};

// Parses the text (empty: upstream's defaults, NVIDIA only). `source` names the file in errors.
StatusOr<ConfigFile> ParseConfigFile(std::string_view yaml, std::string_view source);
// Reads and parses a file (at most 2 MiB: a ConfigMap holds at most 1 MiB). `flag` names the
// option that gave the path in errors about reading it ("--device-config-file").
StatusOr<ConfigFile> LoadConfigFile(const std::string& path, std::string_view flag);

}  // namespace hami::vendors
