#include "dra/vendor.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "core/model.h"
#include "core/node_codec.h"
#include "deviceplugin/pending_pod.h"
#include "dra/cdi.h"
#include "dra/checkpoint.h"
#include "dra/gpu_extras.h"
#include "gpu/nvml_discovery.h"
#include "gpu/static_discovery.h"

namespace hami::dra {

namespace {

using Json = nlohmann::json;

Json StringAttr(const std::string& v) {
  return {{"string", v}};
}

// NVIDIA: NVML discovery, libvgpu armed through the device plugin's own container allocation.
class NvidiaVendor final : public DraVendor {
 public:
  std::string_view name() const override { return "nvidia"; }
  std::string_view default_driver() const override { return kDefaultDriverName; }
  std::string_view device_type() const override { return kDeviceType; }
  std::string DeviceName(const gpu::GpuInfo& d) const override { return StrCat("gpu-", d.index); }

  Json Attributes(const gpu::GpuInfo& g, const GpuExtras* x) const override {
    Json attrs = {{"uuid", StringAttr(g.uuid)},
                  {"index", {{"int", g.index}}},
                  {"productName", StringAttr(g.model.substr(0, 64))}};
    if (g.numa_node >= 0) attrs["resource.kubernetes.io/numaNode"] = {{"int", g.numa_node}};
    if (const std::string bus = NormalizePciBusId(g.pci_bus_id); !bus.empty())
      attrs["resource.kubernetes.io/pciBusID"] = StringAttr(bus);
    if (x != nullptr) {
      if (!x->architecture.empty()) attrs["architecture"] = StringAttr(x->architecture);
      if (!x->cuda_compute_capability.empty())
        attrs["cudaComputeCapability"] = {{"version", x->cuda_compute_capability + ".0"}};
      if (!x->driver_version.empty()) attrs["driverVersion"] = {{"version", x->driver_version}};
      if (!x->pcie_root.empty())
        attrs["resource.kubernetes.io/pcieRoot"] = StringAttr(x->pcie_root);
    }
    return attrs;
  }

  StatusOr<Discovered> Discover(const VendorOptions& options) const override {
    gpu::NvmlOptions nvml_opts;
    nvml_opts.library = options.nvml_library;
    HAMI_ASSIGN_OR_RETURN(auto nvml, gpu::NvmlDiscovery::Open(nvml_opts));
    Discovered out;
    HAMI_ASSIGN_OR_RETURN(out.devices, nvml->ListDevices());
    // driverVersion, cudaComputeCapability, architecture, pcieRoot.
    out.extras = ReadGpuExtras(options.nvml_library, out.devices);
    out.discovery = std::move(nvml);
    return out;
  }

  StatusOr<VendorEdits> Edits(const ClaimRef& ref, const std::vector<ClaimDevice>& devices,
                              const deviceplugin::PluginConfig& config) const override {
    deviceplugin::PendingPod pod;
    pod.uid = ref.uid;
    pod.namespace_ = ref.namespace_;
    pod.name = ref.name;
    deviceplugin::PendingContainer ctr;
    ctr.name = kRegionSuffix;
    for (const auto& [d, usage] : devices) {
      core::ContainerDevice cd;
      cd.uuid = d.uuid;
      cd.index = d.index;
      cd.usedmem_mib = usage.memory_mib;
      cd.usedcores = usage.cores;
      ctr.devices.push_back(cd);
    }
    deviceplugin::PluginConfig c = config;
    c.device_list_strategy = "envvar";
    c.device_id_strategy = "uuid";
    HAMI_ASSIGN_OR_RETURN(
        auto alloc, deviceplugin::BuildContainerAllocation(pod, ctr, c, StrCat(ref.uid, ".cache")));
    VendorEdits e;
    e.env = std::move(alloc.envs);
    e.mounts = std::move(alloc.mounts);
    e.dirs = {alloc.region_host_dir};
    e.files = {{alloc.limits_host_path, alloc.limits_file}};
    return e;
  }

  std::string ArmedMessage(const Usage& armed, const std::string& uuid) const override {
    return StrCat("libvgpu armed with ", armed.memory_mib, " MiB and ", armed.cores,
                  "% of the SMs of ", uuid);
  }
};

// Ascend in HAMi's vNPU core mode (upstream HAMi-DRA's ascend.project-hami.io driver, device type
// HAMivNPUCore): the NPUs come from a devices file (hami-cpp has no DCMI client), and the claim's
// limits arm HAMi's vNPU core library, preloaded in the container, through its environment.
class AscendVendor final : public DraVendor {
 public:
  explicit AscendVendor(VendorOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "ascend"; }
  std::string_view default_driver() const override { return "ascend.project-hami.io"; }
  std::string_view device_type() const override { return "HAMivNPUCore"; }
  // Upstream's name: npu-<id>-<slice>, slice 0 being the whole NPU.
  std::string DeviceName(const gpu::GpuInfo& d) const override {
    return StrCat("npu-", d.index, "-0");
  }

  Json Attributes(const gpu::GpuInfo& g, const GpuExtras*) const override {
    Json attrs = {{"index", {{"int", g.index}}},
                  {"physicalID", {{"int", g.index}}},
                  {"uuid", StringAttr(g.uuid)},
                  {"model", StringAttr(g.model.substr(0, 64))},
                  {"productName", StringAttr(g.model.substr(0, 64))},
                  {"brand", StringAttr("Huawei")}};
    if (g.numa_node >= 0) attrs["resource.kubernetes.io/numaNode"] = {{"int", g.numa_node}};
    return attrs;
  }

  StatusOr<Discovered> Discover(const VendorOptions& options) const override {
    if (options.devices_file.empty())
      return InvalidArgument(
          "--vendor ascend needs --devices-file: the node's NPUs in the registration format of "
          "HAMi's Ascend device plugin (docs/dra.md#vendors)");
    HAMI_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(options.devices_file));
    auto devices = ParseDevicesFile(text);
    if (!devices.ok()) return Annotate(devices.status(), options.devices_file);
    Discovered out;
    out.devices = *devices;
    out.discovery = std::make_unique<gpu::StaticDiscovery>(*std::move(devices));
    return out;
  }

  // Upstream's vNPU core library takes one memory quota and one core share for all NPUs of the
  // container (NPU_MEM_QUOTA, NPU_PRIORITY), so a claim whose NPUs carry different consumption
  // cannot be armed without giving one of them the other's limit: refused.
  StatusOr<VendorEdits> Edits(const ClaimRef& ref, const std::vector<ClaimDevice>& devices,
                              const deviceplugin::PluginConfig& config) const override {
    const Usage& first = devices.front().usage;
    std::vector<std::string> ids;
    for (const auto& [d, usage] : devices) {
      if (usage != first)
        return FailedPrecondition(
            "NPUs ", devices.front().device.name, " and ", d.name, " are consumed differently (",
            first.memory_mib, " MiB / ", first.cores, " cores vs ", usage.memory_mib, " MiB / ",
            usage.cores,
            " cores): the vNPU core library takes one memory quota and one core share for all "
            "NPUs of a container; ask for the same capacity on each NPU");
      ids.push_back(StrCat(d.index));
    }
    if (first.memory_mib <= 0)
      return FailedPrecondition("NPU ", devices.front().device.name,
                                " is granted no memory: the vNPU core library reads 0 as no quota");
    const std::string claim_dir =
        deviceplugin::JoinPath(config.region_root, StrCat(ref.uid, "_", kRegionSuffix));
    VendorEdits e;
    e.env = {{"ASCEND_VISIBLE_DEVICES", absl::StrJoin(ids, ",")},
             {"NPU_MEM_QUOTA", StrCat(first.memory_mib)},
             {"NPU_PRIORITY", StrCat(first.cores)},
             {"NPU_GLOBAL_SHM_PATH", StrCat("/hami-shared-region/", ids[0], "_global_registry")},
             {"NPU_LOCAL_SHM_PATH", "/hami-vnpu-shmem/vnpu_local_shmem"}};
    for (const char* p : {"/etc/ascend_install.info", "/usr/local/Ascend/driver/lib64/driver",
                          "/usr/local/Ascend/driver/version.info"})
      e.mounts.push_back({p, p, true});
    e.mounts.push_back({"/hami-vnpu-core", options_.vnpu_core_dir, true});
    e.mounts.push_back({"/etc/ld.so.preload",
                        deviceplugin::JoinPath(options_.vnpu_core_dir, "ld.so.preload"), true});
    e.mounts.push_back({"/hami-shared-region", options_.vnpu_shared_region_dir, false});
    e.mounts.push_back({"/hami-vnpu-shmem", claim_dir, false});
    e.dirs = {claim_dir};
    return e;
  }

  std::string ArmedMessage(const Usage& armed, const std::string& uuid) const override {
    return StrCat("vNPU core armed with ", armed.memory_mib, " MiB (NPU_MEM_QUOTA) and ",
                  armed.cores, "% of the AI cores (NPU_PRIORITY) of ", uuid);
  }

 private:
  const VendorOptions options_;
};

// The registry: one row per vendor.
struct VendorRow {
  const char* name;
  std::unique_ptr<DraVendor> (*make)(const VendorOptions&);
};
const VendorRow kVendors[] = {
    {"nvidia",
     [](const VendorOptions&) -> std::unique_ptr<DraVendor> {
       return std::make_unique<NvidiaVendor>();
     }},
    {"ascend",
     [](const VendorOptions& o) -> std::unique_ptr<DraVendor> {
       return std::make_unique<AscendVendor>(o);
     }},
};

}  // namespace

StatusOr<std::unique_ptr<DraVendor>> MakeDraVendor(std::string_view name,
                                                   const VendorOptions& options) {
  std::vector<std::string> names;
  for (const auto& row : kVendors) {
    if (name == row.name) return row.make(options);
    names.push_back(row.name);
  }
  return InvalidArgument("vendor '", name, "' is not one of ", absl::StrJoin(names, ", "));
}

const DraVendor& NvidiaDraVendor() {
  static const NvidiaVendor* const kNvidia = new NvidiaVendor();
  return *kNvidia;
}

StatusOr<std::vector<gpu::GpuInfo>> ParseDevicesFile(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(const std::vector<core::DeviceInfo> listed,
                        core::DecodeNodeDevices(text, "Ascend"));
  if (listed.empty()) return InvalidArgument("the devices file lists no device");
  std::vector<gpu::GpuInfo> out;
  std::set<int> indices;
  for (const auto& d : listed) {
    if (d.devmem_mib <= 0) return InvalidArgument("device ", d.uuid, ": devmem must be > 0 (MiB)");
    if (d.index < 0 || !indices.insert(d.index).second)
      return InvalidArgument("device ", d.uuid, ": index ", d.index, " is negative or taken");
    gpu::GpuInfo g;
    g.index = d.index;
    g.uuid = d.uuid;
    g.model = d.type;
    g.memory_mib = d.devmem_mib;
    g.numa_node = d.numa;
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const gpu::GpuInfo& a, const gpu::GpuInfo& b) { return a.index < b.index; });
  return out;
}

}  // namespace hami::dra
