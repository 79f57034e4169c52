#include "vendors/config_file.h"

#include <algorithm>
#include <fstream>

#include "common/log.h"
#include "vendors/config.h"
#include "vendors/nvidia/device_list.h"
#include "vendors/registry.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

Status OneOf(std::string_view v, std::initializer_list<std::string_view> allowed) {
  std::string list;
  for (std::string_view a : allowed) {
    if (v == a) return OkStatus();
    list += StrCat(list.empty() ? "" : ", ", a);
  }
  return InvalidArgument("\"", v, "\" is not one of ", list);
}

Status NonNegative(int64_t v) {
  if (v < 0) return InvalidArgument("must be >= 0, got ", v);
  return OkStatus();
}

Status ResourceName(std::string_view v) {
  if (v.find('/') == std::string_view::npos || v.front() == '/' || v.back() == '/')
    return InvalidArgument("\"", v, "\" is not an extended resource name (<domain>/<name>)");
  return OkStatus();
}

// A resource-name option: stores the name in the field.
template <std::string ResourceNames::*kField>
Status SetName(const OptionValue& v, DeviceConfig* c) {
  HAMI_RETURN_IF_ERROR(ResourceName(v.text));
  c->resources.nvidia.*kField = v.text;
  return OkStatus();
}

// A YAML sequence of scalars; errors name `what`.
StatusOr<std::vector<std::string>> ReadStrings(const YAML::Node& n, std::string_view what) {
  if (!n.IsSequence()) return InvalidArgument(what, ": expected a list of strings");
  std::vector<std::string> out;
  for (const YAML::Node& e : n) {
    if (!e.IsScalar()) return InvalidArgument(what, ": expected a list of strings");
    out.push_back(e.Scalar());
  }
  return out;
}

// migProfileAllowlist: [{models: [...], profiles: [...]}, ...]; any other key is an error.
StatusOr<std::vector<nvidia::MigAllowlistEntry>> ReadMigAllowlist(const YAML::Node& n) {
  if (!n.IsSequence()) return InvalidArgument("expected a list of {models, profiles} entries");
  std::vector<nvidia::MigAllowlistEntry> out;
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node& e = n[i];
    if (!e.IsMap()) return InvalidArgument("[", i, "]: expected a mapping {models, profiles}");
    nvidia::MigAllowlistEntry entry;
    for (const auto& kv : e) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string where = StrCat("[", i, "].", key);
      if (key == "models") {
        HAMI_ASSIGN_OR_RETURN(entry.models, ReadStrings(kv.second, where));
      } else if (key == "profiles") {
        HAMI_ASSIGN_OR_RETURN(entry.profiles, ReadStrings(kv.second, where));
      } else {
        return InvalidArgument(where, ": unknown key (expected models and profiles)");
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

// The `nvidia:` section. Keys are upstream's; `set` null = accepted, logged, not used.
constexpr Option kNvidia[] = {
    {"enabled", OptionType::kBool, "true", kScheduler | kWebhook,
     "false leaves NVIDIA out of the vendor set",
     [](const OptionValue&, DeviceConfig*) { return OkStatus(); }},  // the vendor set reads it
    {"resourceCountName", OptionType::kString, "nvidia.com/gpu",
     kScheduler | kWebhook | kDevicePlugin,
     "GPUs per container; the device plugin advertises it unless --resource-name is given",
     &SetName<&ResourceNames::count>},
    {"resourceMemoryName", OptionType::kString, "nvidia.com/gpumem", kScheduler | kWebhook,
     "MiB per GPU (times memoryFactor)", &SetName<&ResourceNames::memory>},
    {"resourceMemoryPercentageName", OptionType::kString, "nvidia.com/gpumem-percentage",
     kScheduler | kWebhook, "percent of the card's memory, used without the memory resource",
     &SetName<&ResourceNames::memory_percentage>},
    {"resourceCoreName", OptionType::kString, "nvidia.com/gpucores", kScheduler | kWebhook,
     "percent of the SMs per GPU; 100 = exclusive card", &SetName<&ResourceNames::cores>},
    {"resourcePriorityName", OptionType::kString, "nvidia.com/priority", kScheduler | kWebhook,
     "task priority, becomes CUDA_TASK_PRIORITY", &SetName<&ResourceNames::priority>},
    {"defaultMemory", OptionType::kInt, "0", kScheduler,
     "MiB per GPU when a pod names neither memory nor percentage (0 = whole card)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(NonNegative(v.i));
       c->resources.default_memory_mib = v.i;
       return OkStatus();
     }},
    {"defaultCores", OptionType::kInt, "0", kScheduler,
     "percent of SMs per GPU when a pod names no cores",
     [](const OptionValue& v, DeviceConfig* c) {
       if (v.i < 0 || v.i > 100) return InvalidArgument("must be in 0..100, got ", v.i);
       c->resources.default_cores = static_cast<int>(v.i);
       return OkStatus();
     }},
    {"defaultGPUNum", OptionType::kInt, "1", kScheduler | kWebhook,
     "GPU count added when a pod names only memory, percentage or cores",
     [](const OptionValue& v, DeviceConfig* c) {
       if (v.i < 0 || v.i > 1024) return InvalidArgument("must be in 0..1024, got ", v.i);
       c->resources.default_gpu_num = static_cast<int>(v.i);
       return OkStatus();
     }},
    {"memoryFactor", OptionType::kInt, "1", kScheduler,
     "multiplier of memory requests and quota limits",
     [](const OptionValue& v, DeviceConfig* c) {
       if (v.i < 1) return InvalidArgument("must be >= 1, got ", v.i);
       c->resources.memory_factor = v.i;
       return OkStatus();
     }},
    {"gpuCorePolicy", OptionType::kString, "default", kWebhook | kDevicePlugin,
     "GPU_CORE_UTILIZATION_POLICY of every GPU container: default, force or disable",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(OneOf(v.text, {"default", "force", "disable"}));
       c->gpu_core_policy = v.text;  // disableCoreLimit, read after it, may say "disable"
       return OkStatus();
     }},
    {"disableCoreLimit", OptionType::kBool, "false", kWebhook | kDevicePlugin,
     "true is gpuCorePolicy: disable",
     [](const OptionValue& v, DeviceConfig* c) {
       if (v.b) c->gpu_core_policy = "disable";
       return OkStatus();
     }},
    {"runtimeClassName", OptionType::kString, "\"\"", kWebhook,
     "spec.runtimeClassName of GPU pods (empty: left alone)",
     [](const OptionValue& v, DeviceConfig* c) {
       c->runtime_class_name = v.text;
       return OkStatus();
     }},
    {"overwriteEnv", OptionType::kBool, "false", kWebhook,
     "NVIDIA_VISIBLE_DEVICES=none in containers without NVIDIA resources",
     [](const OptionValue& v, DeviceConfig* c) {
       c->overwrite_env = v.b;
       return OkStatus();
     }},
    {"deviceSplitCount", OptionType::kInt, "10", kDevicePlugin,
     "replicas per GPU, the most containers sharing one (flag --split-count)",
     [](const OptionValue& v, DeviceConfig* c) {
       if (v.i < 1 || v.i > 1000) return InvalidArgument("must be in 1..1000, got ", v.i);
       c->plugin.device_split_count = static_cast<int>(v.i);
       return OkStatus();
     }},
    {"deviceMemoryScaling", OptionType::kNumber, "1", kDevicePlugin,
     "registered memory = physical x this; above 1 oversubscribes (--device-memory-scaling)",
     [](const OptionValue& v, DeviceConfig* c) {
       if (!(v.d > 0)) return InvalidArgument("must be > 0, got ", v.text);
       c->plugin.device_memory_scaling = v.d;
       return OkStatus();
     }},
    {"deviceCoreScaling", OptionType::kNumber, "1", kDevicePlugin,
     "registered cores = 100 x this (--device-cores-scaling)",
     [](const OptionValue& v, DeviceConfig* c) {
       if (!(v.d > 0)) return InvalidArgument("must be > 0, got ", v.text);
       c->plugin.device_core_scaling = v.d;
       return OkStatus();
     }},
    {"preConfiguredDeviceMemory", OptionType::kInt, "0", kDevicePlugin,
     "MiB per GPU for GPUs whose memory NVML cannot report (0 = from NVML)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(NonNegative(v.i));
       c->plugin.preconfigured_memory = v.i;
       return OkStatus();
     }},
    {"enableNumaTopology", OptionType::kBool, "false", kDevicePlugin,
     "report each replica's NUMA node to kubelet (--enable-numa-topology)",
     [](const OptionValue& v, DeviceConfig* c) {
       c->plugin.enable_numa_topology = v.b;
       return OkStatus();
     }},
    {"libCudaLogLevel", OptionType::kString, "(unset)", kDevicePlugin,
     "LIBCUDA_LOG_LEVEL of GPU containers: 0..4 (--libcuda-log-level)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(OneOf(v.text, {"0", "1", "2", "3", "4"}));
       c->plugin.lib_cuda_log_level = v.text;
       return OkStatus();
     }},
    {"deviceListStrategy", OptionType::kString, "envvar", kDevicePlugin,
     "how Allocate names the GPUs to the runtime: envvar, volume-mounts, cdi-annotations, "
     "cdi-cri, or several comma separated (--device-list-strategy)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_ASSIGN_OR_RETURN(nvidia::DeviceListStrategies s,
                             nvidia::ParseDeviceListStrategies(v.text));
       c->plugin.device_list_strategy = s.ToString();
       return OkStatus();
     }},
    {"deviceIDStrategy", OptionType::kString, "uuid", kDevicePlugin,
     "GPUs named by uuid or NVML index in the device list (--device-id-strategy)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(nvidia::CheckDeviceIdStrategy(v.text));
       c->plugin.device_id_strategy = v.text;
       return OkStatus();
     }},
    {"cdiAnnotationPrefix", OptionType::kString, "cdi.k8s.io/", kDevicePlugin,
     "key prefix of the cdi-annotations strategy's container annotation "
     "(--cdi-annotation-prefix)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(nvidia::CheckCdiAnnotationPrefix(v.text));
       c->plugin.cdi_annotation_prefix = v.text;
       return OkStatus();
     }},
    {"cdiKind", OptionType::kString, "nvidia.com/gpu", kDevicePlugin,
     "CDI kind (vendor/class) of the node's CDI spec that names the GPUs (--cdi-kind)",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_RETURN_IF_ERROR(nvidia::CheckCdiKind(v.text));
       c->plugin.cdi_kind = v.text;
       return OkStatus();
     }},
    {"migProfileAllowlist", OptionType::kAny, "upstream's chart list", kWebhook,
     "MIG profiles allowed per GPU model, a list of {models: [...], profiles: [...]}; the webhook "
     "denies a nvidia.com/mig-profile-preference entry that matches none",
     [](const OptionValue& v, DeviceConfig* c) {
       HAMI_ASSIGN_OR_RETURN(c->mig_profile_allowlist, ReadMigAllowlist(*v.node));
       return nvidia::ValidateMigProfileAllowlist(c->mig_profile_allowlist);
     }},
    {"knownMigGeometries", OptionType::kAny, "upstream's chart list", kNotUsed,
     "MIG geometries per model; hami-cpp takes the placements NVML reports on the node "
     "(accepted, logged)",
     nullptr},
};

const char* TypeWord(OptionType t) {
  switch (t) {
    case OptionType::kString:
      return "string";
    case OptionType::kInt:
      return "integer";
    case OptionType::kNumber:
      return "number";
    case OptionType::kBool:
      return "bool";
    case OptionType::kAny:
      return "any";
  }
  return "?";
}

const char* Article(OptionType t) {
  return t == OptionType::kInt ? "an " : "a ";
}

// Absent, null, or the empty string the upstream chart renders for unset values.
bool Unset(const YAML::Node& v) {
  return !v.IsDefined() || v.IsNull() || (v.IsScalar() && v.Scalar().empty());
}

Status ReadOption(const Option& o, const YAML::Node& v, DeviceConfig* c) {
  if (o.set == nullptr || Unset(v)) return OkStatus();
  OptionValue val;
  if (o.type == OptionType::kAny) {
    val.node = &v;
    return o.set(val, c);
  }
  if (!v.IsScalar()) return InvalidArgument("expected ", Article(o.type), TypeWord(o.type));
  val.text = v.Scalar();
  try {
    switch (o.type) {
      case OptionType::kInt:
        val.i = v.as<int64_t>();
        break;
      case OptionType::kNumber:
        val.d = v.as<double>();
        break;
      case OptionType::kBool:
        val.b = v.as<bool>();
        break;
      case OptionType::kString:
      case OptionType::kAny:
        break;
    }
  } catch (const YAML::Exception&) {
    return InvalidArgument("expected ", Article(o.type), TypeWord(o.type), ", got \"", val.text,
                           "\"");
  }
  return o.set(val, c);
}

Status ReadNvidia(const YAML::Node& n, DeviceConfig* c) {
  if (Unset(n)) return OkStatus();
  if (!n.IsMap()) return InvalidArgument("nvidia: expected a mapping");
  std::string ignored;
  for (const auto& kv : n) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    const Option* o = nullptr;
    for (const Option& row : kNvidia)
      if (key == row.key) o = &row;
    if (o == nullptr) return InvalidArgument("nvidia.", key, ": unknown option");
    if (o->set == nullptr && !Unset(kv.second)) ignored += StrCat(ignored.empty() ? "" : ", ", key);
  }
  // Table order, so that disableCoreLimit (after gpuCorePolicy) wins whatever the file's order.
  for (const Option& o : kNvidia)
    if (Status s = ReadOption(o, n[o.key], c); !s.ok())
      return Annotate(s, StrCat("nvidia.", o.key));
  if (!ignored.empty())
    spdlog::info("device config: nvidia: upstream keys hami-cpp does not use, ignored: {}",
                 ignored);
  Status v = c->resources.Validate();
  if (!v.ok()) return Annotate(v, "nvidia");
  return OkStatus();
}

Status CheckSections(const YAML::Node& root) {
  const auto rows = VendorRegistry();
  for (const auto& kv : root) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (std::none_of(rows.begin(), rows.end(), [&](const VendorRow& r) { return k == r.section; }))
      return InvalidArgument(k, ": unknown section (vendors: docs/vendors.md)");
  }
  return OkStatus();
}

StatusOr<ConfigFile> Parse(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("line ", e.mark.line + 1, ": ", e.msg);
  }
  ConfigFile out;
  if (root.IsDefined() && !root.IsNull()) {
    if (!root.IsMap())
      return InvalidArgument(
          "expected a mapping of vendor sections (nvidia: ...) at the top level");
    HAMI_RETURN_IF_ERROR(CheckSections(root));
    HAMI_RETURN_IF_ERROR(ReadNvidia(root["nvidia"], &out.nvidia));
  }
  HAMI_ASSIGN_OR_RETURN(out.vendors, BuildVendors(root));
  return out;
}

}  // namespace

std::span<const Option> NvidiaOptions() {
  return kNvidia;
}

std::string RenderOptionTable() {
  std::string out =
      "| `nvidia:` key | type | default | configures | meaning |\n|---|---|---|---|---|\n";
  for (const Option& o : kNvidia) {
    std::string who;
    for (auto [bit, word] : {std::pair{kScheduler, "scheduler"}, std::pair{kWebhook, "webhook"},
                             std::pair{kDevicePlugin, "device plugin"}})
      if (o.binaries & bit) who += StrCat(who.empty() ? "" : ", ", word);
    if (who.empty()) who = "nothing (accepted, logged)";
    out += StrCat("| `", o.key, "` | ", TypeWord(o.type), " | ", o.default_text, " | ", who, " | ",
                  o.doc, " |\n");
  }
  return out;
}

StatusOr<ConfigFile> ParseConfigFile(std::string_view yaml, std::string_view source) {
  auto parsed = Parse(yaml);
  if (!parsed.ok()) return Annotate(parsed.status(), source);
  return parsed;
}

StatusOr<ConfigFile> LoadConfigFile(const std::string& path, std::string_view flag) {
  constexpr std::streamsize kMaxBytes = 2 << 20;
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(flag, ": cannot read ", path);
  std::string text(static_cast<size_t>(kMaxBytes) + 1, '\0');
  f.read(text.data(), kMaxBytes + 1);
  text.resize(static_cast<size_t>(f.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxBytes)
    return InvalidArgument(flag, ": ", path, " is larger than ", kMaxBytes, " bytes");
  return ParseConfigFile(text, path);
}

}  // namespace hami::vendors
