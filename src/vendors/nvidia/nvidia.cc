// NVIDIA (docs/upstream-contract.md#resource-model, #nvidia-device-plugin) behind the Vendor
// interface, like every other backend: its request parsing, defaulting and selectors are
// request.h's upstream-exact rules, its keys annotations.h's; the registration and decision
// codecs are the ones every vendor shares (core/node_codec.h, core/pod_codec.h, through
// GenericVendor). Adds the quota unit (memoryFactor) and the Allocate environment of our device
// plugin.
#include "vendors/nvidia/nvidia.h"

#include "core/annotations.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "vendors/nvidia/annotations.h"
#include "vendors/nvidia/mig.h"
#include "vendors/nvidia/request.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

class NvidiaVendor : public GenericVendor {
 public:
  NvidiaVendor(Spec spec, nvidia::ResourceConfig config)
      : GenericVendor(std::move(spec)), config_(std::move(config)) {}

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    return nvidia::ParseContainerRequest(resources, config_);
  }
  // Upstream's NVIDIA MutateAdmission, for every container (the webhook calls it whether or not the
  // pod asks for devices): the defaulting made explicit in the limits (count, exclusive cores;
  // gpumem-percentage outside 0..100 is an error here, where the scheduler would only clamp or
  // ignore it) and CUDA_TASK_PRIORITY for a container that asks for NVIDIA devices with a priority.
  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>&) const override {
    Mutation m;
    HAMI_ASSIGN_OR_RETURN(m.add_limits, nvidia::ComputeAdmissionDefaults(resources, config_));
    HAMI_ASSIGN_OR_RETURN(auto req, nvidia::ParseContainerRequest(resources, config_));
    if (req && req->priority >= 0) m.env["CUDA_TASK_PRIORITY"] = std::to_string(req->priority);
    return m;
  }
  StatusOr<core::DeviceSelectors> ParseSelectors(
      const std::map<std::string, std::string>& a) const override {
    return nvidia::ParseDeviceSelectors(a);
  }
  // A card the plugin registers in mode "remote" belongs to the lupine fleet (the remote-GPU
  // backend, vendors/remotegpu), not to the node: it is never offered here.
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(std::vector<core::DeviceInfo> devs, GenericVendor::DecodeNode(node));
    std::erase_if(devs, [](const core::DeviceInfo& d) { return d.mode == core::kModeRemote; });
    return devs;
  }
  std::vector<std::string> IgnoredAnnotations(
      const std::map<std::string, std::string>& a) const override {
    return nvidia::IgnoredAnnotations(a);
  }
  // gpumem is multiplied by memoryFactor, so one unit of a limits.<gpumem> quota is memoryFactor
  // MiB (upstream's quota manager).
  std::vector<QuotaKey> QuotaKeys() const override {
    return {{config_.nvidia.memory, true, config_.memory_factor}, {config_.nvidia.cores, false, 1}};
  }
  std::optional<Refusal> CheckDevice(const core::DeviceRequest& r, const core::DeviceInfo& d,
                                     const core::DeviceUsage& u,
                                     const core::DeviceSelectors& s) const override {
    // nvidia.com/vgpu-mode is a substring match against the device mode ("" = hami-core).
    const std::string mode = d.mode.empty() ? core::kModeHamiCore : d.mode;
    if (!s.vgpu_mode.empty() && mode.find(s.vgpu_mode) == std::string::npos)
      return Refusal{scheduler::Reason::kCardTypeMismatch,
                     StrCat(d.uuid, ": mode ", mode, ", pod asks ", s.vgpu_mode), true};
    return GenericVendor::CheckDevice(r, d, u, s);
  }
  // docs/upstream-contract.md#nvidia-device-plugin: per-device memory limits, the first device's SM
  // limit (and per-device ones when the devices' limits differ), visible devices. The device
  // plugin's Allocate takes the decision's part of the container environment from here.
  std::map<std::string, std::string> AllocateEnv(
      const std::vector<core::ContainerDevice>& devices) const override {
    std::map<std::string, std::string> env;
    if (devices.empty()) return env;
    std::string visible;
    bool differ = false;
    for (size_t i = 0; i < devices.size(); ++i) {
      visible += (i ? "," : "") + devices[i].uuid;
      env[StrCat("CUDA_DEVICE_MEMORY_LIMIT_", i)] = StrCat(devices[i].usedmem_mib, "m");
      differ |= devices[i].usedcores != devices.front().usedcores;
    }
    env["NVIDIA_VISIBLE_DEVICES"] = visible;
    env["CUDA_DEVICE_SM_LIMIT"] = std::to_string(devices.front().usedcores);
    // Upstream passes one SM limit for all devices; when they differ, per-device values too.
    if (differ)
      for (size_t i = 0; i < devices.size(); ++i)
        env[StrCat("CUDA_DEVICE_SM_LIMIT_", i)] = std::to_string(devices[i].usedcores);
    return env;
  }

  // Dynamic MIG: hami.io/vgpu-mig-allocations beside the two records (vendors/nvidia/mig.h).
  StatusOr<core::PodAllocation> DecodeDecision(
      const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(core::PodAllocation alloc, GenericVendor::DecodeDecision(a));
    HAMI_RETURN_IF_ERROR(nvidia::AttachMigDecision(a, &alloc));
    return alloc;
  }

 protected:
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t,
                           std::map<std::string, std::string>* out) const override {
    return nvidia::AddMigDecision(a, out);
  }

 private:
  nvidia::ResourceConfig config_;
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeNvidia(const YAML::Node& section) {
  nvidia::ResourceConfig config;
  SectionReader r(section, "nvidia");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &config.nvidia));
  int64_t v = config.default_memory_mib;
  HAMI_RETURN_IF_ERROR(r.Int("defaultMemory", &v));
  config.default_memory_mib = v;
  v = config.default_cores;
  HAMI_RETURN_IF_ERROR(r.Int("defaultCores", &v));
  config.default_cores = static_cast<int>(v);
  v = config.default_gpu_num;
  HAMI_RETURN_IF_ERROR(r.Int("defaultGPUNum", &v));
  config.default_gpu_num = static_cast<int>(v);
  HAMI_RETURN_IF_ERROR(r.Int("memoryFactor", &config.memory_factor));
  // Upstream keys read by the device plugin or webhook, not by the vendor backend.
  r.Ignore({"overwriteEnv", "disableCoreLimit", "gpuCorePolicy", "runtimeClassName",
            "libCudaLogLevel", "deviceSplitCount", "deviceMemoryScaling", "deviceCoreScaling",
            "preConfiguredDeviceMemory", "enableNumaTopology", "migProfileAllowlist",
            "knownMigGeometries", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix",
            "cdiKind"});
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  HAMI_RETURN_IF_ERROR(config.Validate());
  Spec s;
  s.name = "nvidia";
  s.common_word = core::kNvidiaVendor;
  s.resources = config.nvidia;
  s.keys = {nvidia::kNodeNvidiaRegister,
            nvidia::kNodeHandshake,
            nvidia::kNvidiaDevicesToAllocate,
            nvidia::kNvidiaDevicesAllocated,
            nvidia::kUseGpuType,
            nvidia::kNoUseGpuType,
            nvidia::kUseGpuUuid,
            nvidia::kNoUseGpuUuid};
  return One<NvidiaVendor>(std::move(s), std::move(config));
}

}  // namespace hami::vendors
