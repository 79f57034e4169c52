#include "gpu/nvml_discovery.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

#include "common/libc.h"
#include "common/log.h"

namespace hami::gpu {

struct NvmlDiscovery::Api {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::DeviceGetCountFn get_count = nullptr;
  nvml::DeviceGetHandleByIndexFn get_handle_by_index = nullptr;
  nvml::DeviceGetIndexFn get_index = nullptr;
  nvml::DeviceGetStringFn get_uuid = nullptr;
  nvml::DeviceGetStringFn get_name = nullptr;
  nvml::DeviceGetMemoryInfoV2Fn get_memory_v2 = nullptr;
  nvml::DeviceGetMemoryInfoFn get_memory = nullptr;
  nvml::DeviceGetPciInfoFn get_pci = nullptr;
  nvml::DeviceGetMemoryAffinityFn get_memory_affinity = nullptr;
  nvml::DeviceGetMigModeFn get_mig_mode = nullptr;
  nvml::DeviceGetTopologyCommonAncestorFn get_common_ancestor = nullptr;
  nvml::DeviceGetNvLinkStateFn get_nvlink_state = nullptr;
  nvml::DeviceGetNvLinkRemotePciInfoFn get_nvlink_remote_pci = nullptr;
  nvml::EventSetCreateFn event_set_create = nullptr;
  nvml::EventSetFreeFn event_set_free = nullptr;
  nvml::DeviceGetSupportedEventTypesFn get_supported_events = nullptr;
  nvml::DeviceRegisterEventsFn register_events = nullptr;
  nvml::EventSetWaitFn event_set_wait = nullptr;
  // MIG
  nvml::DeviceGetHandleByUuidFn get_handle_by_uuid = nullptr;
  nvml::DeviceGetGiProfileInfoFn gi_profile_info = nullptr;
  nvml::DeviceGetGiProfileInfoVFn gi_profile_info_v = nullptr;
  nvml::DeviceGetGiPlacementsFn gi_placements = nullptr;
  nvml::DeviceCreateGiWithPlacementFn create_gi = nullptr;
  nvml::DeviceGetGisFn get_gis = nullptr;
  nvml::DeviceGetGiByIdFn get_gi_by_id = nullptr;
  nvml::GiGetInfoFn gi_info = nullptr;
  nvml::GiDestroyFn gi_destroy = nullptr;
  nvml::GiGetCiProfileInfoFn ci_profile_info = nullptr;
  nvml::GiCreateCiFn create_ci = nullptr;
  nvml::GiGetCisFn get_cis = nullptr;
  nvml::CiGetInfoFn ci_info = nullptr;
  nvml::CiDestroyFn ci_destroy = nullptr;
  nvml::DeviceGetCountOfFn max_mig_devices = nullptr;
  nvml::DeviceGetMigHandleFn mig_handle = nullptr;
  nvml::DeviceGetCountOfFn mig_gi_id = nullptr;
  nvml::DeviceGetCountOfFn mig_ci_id = nullptr;
};

namespace {

// Resolves the first of `names` that the library exports; nullptr when none.
template <typename Fn>
Fn Resolve(void* handle, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* p = dlsym(handle, n)) return reinterpret_cast<Fn>(p);
  }
  return nullptr;
}

std::string CString(const char* buf, size_t cap) {
  return std::string(buf, strnlen(buf, cap));
}

// NVML's busId "00000000:3B:00.0" -> sysfs "0000:3b:00.0".
std::string SysfsBusId(const std::string& bus_id) {
  std::string s = bus_id;
  auto colon = s.find(':');
  if (colon != std::string::npos && colon > 4) s = s.substr(colon - 4);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

NvmlDiscovery::NvmlDiscovery(NvmlOptions options, std::unique_ptr<Api> api)
    : options_(std::move(options)), api_(std::move(api)) {}

NvmlDiscovery::~NvmlDiscovery() {
  if (api_ && api_->shutdown) api_->shutdown();
  // The library stays loaded: NVML may keep internal threads that outlive nvmlShutdown.
}

StatusOr<std::unique_ptr<NvmlDiscovery>> NvmlDiscovery::Open(NvmlOptions options) {
  void* h = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    return Unavailable("cannot load NVML (", options.library, "): ", DlErrorText(),
                       "; is the NVIDIA driver installed and the library on the search path?");
  }
  auto api = std::make_unique<Api>();
  api->init = Resolve<nvml::InitFn>(h, {"nvmlInit_v2", "nvmlInit"});
  api->shutdown = Resolve<nvml::ShutdownFn>(h, {"nvmlShutdown"});
  api->error_string = Resolve<nvml::ErrorStringFn>(h, {"nvmlErrorString"});
  api->get_count =
      Resolve<nvml::DeviceGetCountFn>(h, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  api->get_handle_by_index = Resolve<nvml::DeviceGetHandleByIndexFn>(
      h, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  api->get_index = Resolve<nvml::DeviceGetIndexFn>(h, {"nvmlDeviceGetIndex"});
  api->get_uuid = Resolve<nvml::DeviceGetStringFn>(h, {"nvmlDeviceGetUUID"});
  api->get_name = Resolve<nvml::DeviceGetStringFn>(h, {"nvmlDeviceGetName"});
  api->get_memory_v2 = Resolve<nvml::DeviceGetMemoryInfoV2Fn>(h, {"nvmlDeviceGetMemoryInfo_v2"});
  api->get_memory = Resolve<nvml::DeviceGetMemoryInfoFn>(h, {"nvmlDeviceGetMemoryInfo"});
  api->get_pci = Resolve<nvml::DeviceGetPciInfoFn>(
      h, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"});
  api->get_memory_affinity =
      Resolve<nvml::DeviceGetMemoryAffinityFn>(h, {"nvmlDeviceGetMemoryAffinity"});
  api->get_mig_mode = Resolve<nvml::DeviceGetMigModeFn>(h, {"nvmlDeviceGetMigMode"});
  api->get_common_ancestor =
      Resolve<nvml::DeviceGetTopologyCommonAncestorFn>(h, {"nvmlDeviceGetTopologyCommonAncestor"});
  api->get_nvlink_state = Resolve<nvml::DeviceGetNvLinkStateFn>(h, {"nvmlDeviceGetNvLinkState"});
  api->get_nvlink_remote_pci = Resolve<nvml::DeviceGetNvLinkRemotePciInfoFn>(
      h, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"});
  api->event_set_create = Resolve<nvml::EventSetCreateFn>(h, {"nvmlEventSetCreate"});
  api->event_set_free = Resolve<nvml::EventSetFreeFn>(h, {"nvmlEventSetFree"});
  api->get_supported_events =
      Resolve<nvml::DeviceGetSupportedEventTypesFn>(h, {"nvmlDeviceGetSupportedEventTypes"});
  api->register_events = Resolve<nvml::DeviceRegisterEventsFn>(h, {"nvmlDeviceRegisterEvents"});
  api->event_set_wait =
      Resolve<nvml::EventSetWaitFn>(h, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});

  api->get_handle_by_uuid =
      Resolve<nvml::DeviceGetHandleByUuidFn>(h, {"nvmlDeviceGetHandleByUUID"});
  api->gi_profile_info =
      Resolve<nvml::DeviceGetGiProfileInfoFn>(h, {"nvmlDeviceGetGpuInstanceProfileInfo"});
  api->gi_profile_info_v =
      Resolve<nvml::DeviceGetGiProfileInfoVFn>(h, {"nvmlDeviceGetGpuInstanceProfileInfoV"});
  api->gi_placements =
      Resolve<nvml::DeviceGetGiPlacementsFn>(h, {"nvmlDeviceGetGpuInstancePossiblePlacements_v2"});
  api->create_gi =
      Resolve<nvml::DeviceCreateGiWithPlacementFn>(h, {"nvmlDeviceCreateGpuInstanceWithPlacement"});
  api->get_gis = Resolve<nvml::DeviceGetGisFn>(h, {"nvmlDeviceGetGpuInstances"});
  api->get_gi_by_id = Resolve<nvml::DeviceGetGiByIdFn>(h, {"nvmlDeviceGetGpuInstanceById"});
  api->gi_info = Resolve<nvml::GiGetInfoFn>(h, {"nvmlGpuInstanceGetInfo"});
  api->gi_destroy = Resolve<nvml::GiDestroyFn>(h, {"nvmlGpuInstanceDestroy"});
  api->ci_profile_info =
      Resolve<nvml::GiGetCiProfileInfoFn>(h, {"nvmlGpuInstanceGetComputeInstanceProfileInfo"});
  api->create_ci = Resolve<nvml::GiCreateCiFn>(h, {"nvmlGpuInstanceCreateComputeInstance"});
  api->get_cis = Resolve<nvml::GiGetCisFn>(h, {"nvmlGpuInstanceGetComputeInstances"});
  api->ci_info = Resolve<nvml::CiGetInfoFn>(
      h, {"nvmlComputeInstanceGetInfo_v2", "nvmlComputeInstanceGetInfo"});
  api->ci_destroy = Resolve<nvml::CiDestroyFn>(h, {"nvmlComputeInstanceDestroy"});
  api->max_mig_devices = Resolve<nvml::DeviceGetCountOfFn>(h, {"nvmlDeviceGetMaxMigDeviceCount"});
  api->mig_handle = Resolve<nvml::DeviceGetMigHandleFn>(h, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  api->mig_gi_id = Resolve<nvml::DeviceGetCountOfFn>(h, {"nvmlDeviceGetGpuInstanceId"});
  api->mig_ci_id = Resolve<nvml::DeviceGetCountOfFn>(h, {"nvmlDeviceGetComputeInstanceId"});

  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", api->init != nullptr},
      {"nvmlShutdown", api->shutdown != nullptr},
      {"nvmlDeviceGetCount_v2", api->get_count != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", api->get_handle_by_index != nullptr},
      {"nvmlDeviceGetUUID", api->get_uuid != nullptr},
      {"nvmlDeviceGetName", api->get_name != nullptr},
      {"nvmlDeviceGetMemoryInfo", api->get_memory != nullptr || api->get_memory_v2 != nullptr},
  };
  for (const auto& [name, found] : required) {
    if (!found) {
      dlclose(h);
      return Unavailable(options.library, " does not export ", name,
                         " (nor an older version of it); NVML too old or not NVML");
    }
  }
  nvml::Return r = api->init();
  if (r != nvml::kSuccess) {
    std::string msg = api->error_string ? api->error_string(r) : "";
    dlclose(h);
    return Unavailable("nvmlInit failed: ", msg, " (code ", r, ")");
  }
  // NVML stays loaded for the life of the process (never dlclosed): api_ points into it.
  return std::unique_ptr<NvmlDiscovery>(new NvmlDiscovery(std::move(options), std::move(api)));
}

Status NvmlDiscovery::Check(nvml::Return r, const char* what) const {
  if (r == nvml::kSuccess) return OkStatus();
  const char* msg = api_->error_string ? api_->error_string(r) : nullptr;
  return Internal(what, " failed: ", msg ? msg : "error", " (NVML code ", r, ")");
}

StatusOr<std::vector<nvml::Device>> NvmlDiscovery::Handles() {
  unsigned int count = 0;
  HAMI_RETURN_IF_ERROR(Check(api_->get_count(&count), "nvmlDeviceGetCount"));
  std::vector<nvml::Device> out(count);
  for (unsigned i = 0; i < count; ++i) {
    HAMI_RETURN_IF_ERROR(
        Annotate(Check(api_->get_handle_by_index(i, &out[i]), "nvmlDeviceGetHandleByIndex"),
                 StrCat("device ", i)));
  }
  return out;
}

int NvmlDiscovery::NumaNode(nvml::Device d, const std::string& bus_id) const {
  if (api_->get_memory_affinity) {
    unsigned long set[4] = {0, 0, 0, 0};
    if (api_->get_memory_affinity(d, 4, set, nvml::kAffinityScopeNode) == nvml::kSuccess) {
      for (int w = 0; w < 4; ++w) {
        if (set[w] != 0) return w * 64 + __builtin_ctzl(set[w]);
      }
    }
  }
  if (bus_id.empty()) return -1;
  std::ifstream f(
      StrCat(options_.sysfs_root, "/bus/pci/devices/", SysfsBusId(bus_id), "/numa_node"));
  int node = -1;
  if (f >> node) return node < 0 ? -1 : node;
  return -1;
}

StatusOr<std::vector<GpuInfo>> NvmlDiscovery::ListDevices() {
  HAMI_ASSIGN_OR_RETURN(std::vector<nvml::Device> handles, Handles());
  std::vector<GpuInfo> out;
  for (unsigned i = 0; i < handles.size(); ++i) {
    nvml::Device d = handles[i];
    const std::string ctx = StrCat("device ", i);
    GpuInfo g;
    g.index = static_cast<int>(i);
    if (api_->get_index) {
      unsigned idx = 0;
      if (api_->get_index(d, &idx) == nvml::kSuccess) g.index = static_cast<int>(idx);
    }
    char buf[nvml::kUuidBufferSize] = {};
    HAMI_RETURN_IF_ERROR(
        Annotate(Check(api_->get_uuid(d, buf, sizeof buf), "nvmlDeviceGetUUID"), ctx));
    g.uuid = CString(buf, sizeof buf);
    char name[nvml::kNameBufferSize] = {};
    HAMI_RETURN_IF_ERROR(
        Annotate(Check(api_->get_name(d, name, sizeof name), "nvmlDeviceGetName"), ctx));
    g.model = CString(name, sizeof name);

    uint64_t total = 0;
    bool have_mem = false;
    if (api_->get_memory_v2) {
      nvml::MemoryV2 m{};
      m.version = nvml::kMemoryV2Version;
      if (api_->get_memory_v2(d, &m) == nvml::kSuccess) {
        total = m.total;
        have_mem = true;
      }
    }
    if (!have_mem) {
      if (!api_->get_memory) return Internal(ctx, ": nvmlDeviceGetMemoryInfo_v2 failed and no v1");
      nvml::Memory m{};
      HAMI_RETURN_IF_ERROR(
          Annotate(Check(api_->get_memory(d, &m), "nvmlDeviceGetMemoryInfo"), ctx));
      total = m.total;
    }
    g.memory_mib = static_cast<int64_t>(total / (1024ull * 1024ull));

    if (api_->get_pci) {
      nvml::PciInfo pci{};
      if (api_->get_pci(d, &pci) == nvml::kSuccess)
        g.pci_bus_id = CString(pci.busId, sizeof pci.busId);
    }
    g.numa_node = NumaNode(d, g.pci_bus_id);
    if (api_->get_mig_mode) {
      unsigned cur = 0, pending = 0;
      if (api_->get_mig_mode(d, &cur, &pending) == nvml::kSuccess)
        g.mig_enabled = cur == nvml::kMigEnable;
    }
    if (g.mig_enabled) g.mig_profiles = MigProfiles(d, /*schedulable_only=*/true);
    out.push_back(std::move(g));
  }
  return out;
}

StatusOr<std::vector<GpuLink>> NvmlDiscovery::Topology() {
  HAMI_ASSIGN_OR_RETURN(std::vector<nvml::Device> handles, Handles());
  const size_t n = handles.size();
  std::vector<std::string> bus(n);
  for (size_t i = 0; i < n; ++i) {
    nvml::PciInfo pci{};
    if (api_->get_pci && api_->get_pci(handles[i], &pci) == nvml::kSuccess)
      bus[i] = CString(pci.busId, sizeof pci.busId);
  }
  // nvlinks[i][j]: active links from i whose remote PCI bus id is j's.
  std::vector<std::vector<int>> nvlinks(n, std::vector<int>(n, 0));
  if (api_->get_nvlink_state && api_->get_nvlink_remote_pci) {
    for (size_t i = 0; i < n; ++i) {
      for (unsigned link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
        int active = 0;
        if (api_->get_nvlink_state(handles[i], link, &active) != nvml::kSuccess || !active)
          continue;
        nvml::PciInfo remote{};
        if (api_->get_nvlink_remote_pci(handles[i], link, &remote) != nvml::kSuccess) continue;
        std::string rb = CString(remote.busId, sizeof remote.busId);
        for (size_t j = 0; j < n; ++j) {
          if (j != i && !rb.empty() && SysfsBusId(rb) == SysfsBusId(bus[j])) ++nvlinks[i][j];
        }
      }
    }
  }
  std::vector<GpuLink> out;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      GpuLink l;
      l.a = static_cast<int>(a);
      l.b = static_cast<int>(b);
      // Links are symmetric; take the larger view in case one side reports fewer.
      l.nvlinks = std::max(nvlinks[a][b], nvlinks[b][a]);
      int level = -1;
      if (api_->get_common_ancestor &&
          api_->get_common_ancestor(handles[a], handles[b], &level) == nvml::kSuccess) {
        l.pcie = static_cast<PcieLevel>(level);
      }
      out.push_back(l);
    }
  }
  return out;
}

class NvmlDiscovery::Watch final : public HealthWatch {
 public:
  Watch(const Api* api, nvml::EventSet set, std::map<nvml::Device, std::string> uuids,
        std::set<uint64_t> ignored, unsigned wait_ms, HealthCallback cb)
      : api_(api),
        set_(set),
        uuids_(std::move(uuids)),
        ignored_(std::move(ignored)),
        wait_ms_(wait_ms),
        cb_(std::move(cb)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watch() override {
    stop_ = true;
    thread_.join();
    if (api_->event_set_free) api_->event_set_free(set_);
  }

 private:
  void Run() {
    while (!stop_) {
      nvml::EventData data{};
      nvml::Return r = api_->event_set_wait(set_, &data, wait_ms_);
      if (r == nvml::kErrorTimeout) continue;
      if (r != nvml::kSuccess) {
        if (r == nvml::kErrorGpuIsLost) {
          cb_(HealthEvent{"", false, 0, "NVML reports a GPU is lost"});
        }
        spdlog::warn("nvmlEventSetWait failed (code {}); health watch keeps polling", r);
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms_));
        continue;
      }
      if ((data.eventType & nvml::kEventTypeXidCriticalError) == 0) continue;
      uint64_t xid = data.eventData;
      if (ignored_.count(xid)) {
        spdlog::info("ignoring application Xid {}", xid);
        continue;
      }
      HealthEvent ev;
      ev.healthy = false;
      ev.xid = xid;
      auto it = uuids_.find(data.device);
      // An event without a known device (device == NULL) concerns every device.
      if (it != uuids_.end()) ev.uuid = it->second;
      ev.reason = StrCat("Xid ", xid, " critical error");
      cb_(ev);
    }
  }

  const Api* api_;
  nvml::EventSet set_;
  std::map<nvml::Device, std::string> uuids_;
  std::set<uint64_t> ignored_;
  unsigned wait_ms_;
  HealthCallback cb_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

StatusOr<std::unique_ptr<HealthWatch>> NvmlDiscovery::WatchHealth(HealthCallback cb) {
  if (!api_->event_set_create || !api_->register_events || !api_->event_set_wait) {
    return FailedPrecondition(options_.library, " has no event API; health checks unavailable");
  }
  HAMI_ASSIGN_OR_RETURN(std::vector<nvml::Device> handles, Handles());
  nvml::EventSet set = nullptr;
  HAMI_RETURN_IF_ERROR(Check(api_->event_set_create(&set), "nvmlEventSetCreate"));
  std::map<nvml::Device, std::string> uuids;
  for (size_t i = 0; i < handles.size(); ++i) {
    char buf[nvml::kUuidBufferSize] = {};
    if (api_->get_uuid(handles[i], buf, sizeof buf) != nvml::kSuccess) continue;
    std::string uuid = CString(buf, sizeof buf);
    uuids[handles[i]] = uuid;
    unsigned long long supported = nvml::kEventTypeXidCriticalError;
    if (api_->get_supported_events &&
        api_->get_supported_events(handles[i], &supported) != nvml::kSuccess) {
      supported = 0;
    }
    if ((supported & nvml::kEventTypeXidCriticalError) == 0) {
      spdlog::warn("{}: Xid events not supported; its health is not watched", uuid);
      continue;
    }
    nvml::Return r = api_->register_events(handles[i], nvml::kEventTypeXidCriticalError, set);
    if (r != nvml::kSuccess) {
      spdlog::warn("{}: nvmlDeviceRegisterEvents failed (code {}); marking unhealthy", uuid, r);
      cb(HealthEvent{uuid, false, 0, "cannot register for Xid events"});
    }
  }
  return std::unique_ptr<HealthWatch>(
      std::make_unique<Watch>(api_.get(), set, std::move(uuids), options_.ignored_xids,
                              options_.event_wait_ms, std::move(cb)));
}

// ---- MIG ----

namespace {

// The GPU instance profiles, in NVML's order; the "+me" variants (REV1) last.
constexpr unsigned kGiProfiles[] = {
    NVML_GPU_INSTANCE_PROFILE_1_SLICE,      NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
    NVML_GPU_INSTANCE_PROFILE_2_SLICE,      NVML_GPU_INSTANCE_PROFILE_3_SLICE,
    NVML_GPU_INSTANCE_PROFILE_4_SLICE,      NVML_GPU_INSTANCE_PROFILE_6_SLICE,
    NVML_GPU_INSTANCE_PROFILE_7_SLICE,      NVML_GPU_INSTANCE_PROFILE_8_SLICE,
    NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1,
};
bool IsMediaVariant(unsigned profile) {
  return profile == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
         profile == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
}

// A profile's name without the v2 struct ("MIG 1g.10gb"): "<slices>g.<memory in GB, rounded up>gb".
std::string DerivedProfileName(unsigned slices, unsigned long long mib) {
  return StrCat(slices, "g.", (mib + 1023) / 1024, "gb");
}

}  // namespace

bool NvmlDiscovery::HasMigApi() const {
  const Api& a = *api_;
  return a.get_handle_by_uuid && a.gi_profile_info && a.gi_placements && a.create_gi && a.get_gis &&
         a.get_gi_by_id && a.gi_info && a.gi_destroy && a.ci_profile_info && a.create_ci &&
         a.get_cis && a.ci_info && a.ci_destroy && a.max_mig_devices && a.mig_handle &&
         a.mig_gi_id && a.mig_ci_id;
}

StatusOr<nvml::Device> NvmlDiscovery::ByUuid(const std::string& gpu_uuid) const {
  if (!HasMigApi())
    return FailedPrecondition(options_.library, " has no MIG API (NVML older than R470?)");
  nvml::Device d = nullptr;
  HAMI_RETURN_IF_ERROR(
      Annotate(Check(api_->get_handle_by_uuid(gpu_uuid.c_str(), &d), "nvmlDeviceGetHandleByUUID"),
               StrCat("GPU ", gpu_uuid)));
  return d;
}

std::vector<MigProfileInfo> NvmlDiscovery::MigProfiles(nvml::Device d,
                                                       bool schedulable_only) const {
  std::vector<MigProfileInfo> out;
  if (!HasMigApi()) return out;
  for (unsigned index : kGiProfiles) {
    if (schedulable_only && IsMediaVariant(index)) continue;
    nvml::GpuInstanceProfileInfo info{};
    const nvml::Return r = api_->gi_profile_info(d, index, &info);
    if (r != nvml::kSuccess) {
      // NOT_SUPPORTED / INVALID_ARGUMENT: this GPU has no such profile.
      if (r != nvml::kErrorNotSupported && r != nvml::kErrorInvalidArgument)
        spdlog::warn("nvmlDeviceGetGpuInstanceProfileInfo({}) failed (code {}); profile skipped",
                     index, r);
      continue;
    }
    MigProfileInfo p;
    p.nvml_index = index;
    p.nvml_id = info.id;
    p.slices = static_cast<int>(info.sliceCount);
    p.instances = static_cast<int>(info.instanceCount);
    p.sms = static_cast<int>(info.multiprocessorCount);
    p.memory_mib = static_cast<int64_t>(info.memorySizeMB);
    p.name = DerivedProfileName(info.sliceCount, info.memorySizeMB);
    if (api_->gi_profile_info_v) {
      nvml::GpuInstanceProfileInfoV2 v2{};
      v2.version = nvml::kGpuInstanceProfileInfoV2Version;
      if (api_->gi_profile_info_v(d, index, &v2) == nvml::kSuccess) {
        std::string name = CString(v2.name, sizeof v2.name);
        if (name.rfind("MIG ", 0) == 0) name.erase(0, 4);
        if (!name.empty()) p.name = std::move(name);
      }
    }
    unsigned n = 0;
    if (api_->gi_placements(d, info.id, nullptr, &n) == nvml::kSuccess && n > 0) {
      std::vector<nvml::GpuInstancePlacement> ps(n);
      if (api_->gi_placements(d, info.id, ps.data(), &n) == nvml::kSuccess) {
        for (unsigned i = 0; i < n && i < ps.size(); ++i)
          p.placements.push_back({static_cast<int>(ps[i].start), static_cast<int>(ps[i].size)});
      }
    }
    if (p.placements.empty()) {
      spdlog::warn("MIG profile {} reports no placement; skipped", p.name);
      continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<nvml::GpuInstance>> NvmlDiscovery::GpuInstances(
    nvml::Device d, const MigProfileInfo& p) const {
  std::vector<nvml::GpuInstance> gis(static_cast<size_t>(std::max(p.instances, 1)));
  unsigned n = static_cast<unsigned>(gis.size());
  HAMI_RETURN_IF_ERROR(
      Annotate(Check(api_->get_gis(d, p.nvml_id, gis.data(), &n), "nvmlDeviceGetGpuInstances"),
               StrCat("profile ", p.name)));
  gis.resize(std::min<size_t>(n, gis.size()));
  return gis;
}

std::vector<nvml::ComputeInstance> NvmlDiscovery::ComputeInstances(nvml::GpuInstance gi) const {
  std::vector<nvml::ComputeInstance> out;
  for (unsigned ci_profile = 0; ci_profile < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++ci_profile) {
    nvml::ComputeInstanceProfileInfo cp{};
    if (api_->ci_profile_info(gi, ci_profile, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp) !=
        nvml::kSuccess)
      continue;  // not a profile of this GPU instance
    std::vector<nvml::ComputeInstance> cis(std::max(cp.instanceCount, 1u));
    unsigned n = static_cast<unsigned>(cis.size());
    if (api_->get_cis(gi, cp.id, cis.data(), &n) != nvml::kSuccess) continue;
    cis.resize(std::min<size_t>(n, cis.size()));
    out.insert(out.end(), cis.begin(), cis.end());
  }
  return out;
}

std::string NvmlDiscovery::MigDeviceUuid(nvml::Device d, unsigned gi_id, unsigned ci_id) const {
  unsigned max = 0;
  if (api_->max_mig_devices(d, &max) != nvml::kSuccess) return "";
  for (unsigned i = 0; i < max; ++i) {
    nvml::Device mig = nullptr;
    unsigned g = 0, c = 0;
    if (api_->mig_handle(d, i, &mig) != nvml::kSuccess) continue;  // NOT_FOUND: an empty slot
    if (api_->mig_gi_id(mig, &g) != nvml::kSuccess || api_->mig_ci_id(mig, &c) != nvml::kSuccess)
      continue;
    if (g != gi_id || c != ci_id) continue;
    char buf[nvml::kUuidBufferSize] = {};
    if (api_->get_uuid(mig, buf, sizeof buf) == nvml::kSuccess) return CString(buf, sizeof buf);
  }
  return "";
}

StatusOr<MigInstance> NvmlDiscovery::Describe(nvml::Device d, nvml::GpuInstance gi,
                                              const MigProfileInfo& p) const {
  nvml::GpuInstanceInfo info{};
  HAMI_RETURN_IF_ERROR(Check(api_->gi_info(gi, &info), "nvmlGpuInstanceGetInfo"));
  MigInstance m;
  m.profile = p.name;
  m.placement = {static_cast<int>(info.placement.start), static_cast<int>(info.placement.size)};
  m.gpu_instance_id = info.id;
  for (nvml::ComputeInstance c : ComputeInstances(gi)) {
    nvml::ComputeInstanceInfo ci{};
    if (api_->ci_info(c, &ci) != nvml::kSuccess) continue;
    m.compute_instance_id = ci.id;
    m.uuid = MigDeviceUuid(d, m.gpu_instance_id, ci.id);
    break;
  }
  return m;
}

StatusOr<std::vector<MigInstance>> NvmlDiscovery::ListMigInstances(const std::string& gpu_uuid) {
  HAMI_ASSIGN_OR_RETURN(nvml::Device d, ByUuid(gpu_uuid));
  std::vector<MigInstance> out;
  for (const MigProfileInfo& p : MigProfiles(d, /*schedulable_only=*/false)) {
    HAMI_ASSIGN_OR_RETURN(std::vector<nvml::GpuInstance> gis, GpuInstances(d, p));
    for (nvml::GpuInstance gi : gis) {
      HAMI_ASSIGN_OR_RETURN(MigInstance m, Describe(d, gi, p));
      out.push_back(std::move(m));
    }
  }
  std::sort(out.begin(), out.end(), [](const MigInstance& a, const MigInstance& b) {
    return a.gpu_instance_id < b.gpu_instance_id;
  });
  return out;
}

StatusOr<MigInstance> NvmlDiscovery::CreateMigInstance(const std::string& gpu_uuid,
                                                       const std::string& profile,
                                                       MigPlacement placement) {
  HAMI_ASSIGN_OR_RETURN(nvml::Device d, ByUuid(gpu_uuid));
  const std::string what = StrCat("GPU ", gpu_uuid, " profile ", profile, " at slice ",
                                  placement.start, "+", placement.size);
  const std::vector<MigProfileInfo> profiles = MigProfiles(d, /*schedulable_only=*/false);
  auto p = std::find_if(profiles.begin(), profiles.end(),
                        [&](const MigProfileInfo& x) { return x.name == profile; });
  if (p == profiles.end())
    return InvalidArgument(what, ": the GPU has no such MIG profile (is MIG mode on?)");
  if (std::find(p->placements.begin(), p->placements.end(), placement) == p->placements.end())
    return InvalidArgument(what, ": not a placement NVML lists for the profile");
  nvml::GpuInstancePlacement at{static_cast<unsigned>(placement.start),
                                static_cast<unsigned>(placement.size)};
  nvml::GpuInstance gi = nullptr;
  const nvml::Return r = api_->create_gi(d, p->nvml_id, &at, &gi);
  if (r == nvml::kErrorInsufficientResources)
    return ResourceExhausted(what, ": the placement overlaps a GPU instance (or the profile's ",
                             p->instances, " instances exist)");
  HAMI_RETURN_IF_ERROR(Annotate(Check(r, "nvmlDeviceCreateGpuInstanceWithPlacement"), what));
  // From here on, a failure destroys what this call created.
  auto undo = [&](const Status& s, nvml::ComputeInstance ci) -> Status {
    if (ci != nullptr) api_->ci_destroy(ci);
    api_->gi_destroy(gi);
    return Annotate(s, what);
  };
  // The compute instance that spans the whole GPU instance.
  nvml::ComputeInstanceProfileInfo cp{};
  bool found = false;
  for (unsigned ci_profile = 0; ci_profile < NVML_COMPUTE_INSTANCE_PROFILE_COUNT && !found;
       ++ci_profile) {
    found = api_->ci_profile_info(gi, ci_profile, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                  &cp) == nvml::kSuccess &&
            static_cast<int>(cp.sliceCount) == p->slices;
  }
  if (!found) return undo(Internal("no compute instance profile spans the GPU instance"), nullptr);
  nvml::ComputeInstance ci = nullptr;
  if (Status s = Check(api_->create_ci(gi, cp.id, &ci), "nvmlGpuInstanceCreateComputeInstance");
      !s.ok())
    return undo(s, nullptr);
  auto m = Describe(d, gi, *p);
  if (!m.ok()) return undo(m.status(), ci);
  if (m->uuid.empty()) return undo(Internal("the new MIG device has no UUID"), ci);
  return m;
}

Status NvmlDiscovery::DestroyMigInstance(const std::string& gpu_uuid, unsigned gpu_instance_id) {
  HAMI_ASSIGN_OR_RETURN(nvml::Device d, ByUuid(gpu_uuid));
  const std::string what = StrCat("GPU ", gpu_uuid, " GPU instance ", gpu_instance_id);
  nvml::GpuInstance gi = nullptr;
  const nvml::Return r = api_->get_gi_by_id(d, gpu_instance_id, &gi);
  if (r == nvml::kErrorNotFound) return NotFound(what, " does not exist");
  HAMI_RETURN_IF_ERROR(Annotate(Check(r, "nvmlDeviceGetGpuInstanceById"), what));
  for (nvml::ComputeInstance c : ComputeInstances(gi))
    HAMI_RETURN_IF_ERROR(Annotate(Check(api_->ci_destroy(c), "nvmlComputeInstanceDestroy"), what));
  return Annotate(Check(api_->gi_destroy(gi), "nvmlGpuInstanceDestroy"), what);
}

}  // namespace hami::gpu
