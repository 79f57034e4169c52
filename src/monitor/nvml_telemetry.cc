#include "monitor/nvml_telemetry.h"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "common/libc.h"
#include "gpu/nvml_api.h"

namespace hami::monitor {
namespace {

namespace nvml = gpu::nvml;

using nvml::ProcessUtilizationSample;
using nvml::Utilization;
constexpr nvml::Return kErrorInsufficientSize = nvml::kErrorInsufficientSize;

extern "C" {
using GetHandleByUuidFn = nvml::Return (*)(const char*, nvml::Device*);
using GetUtilizationRatesFn = nvml::Return (*)(nvml::Device, Utilization*);
using GetProcessUtilizationFn = nvml::Return (*)(nvml::Device, ProcessUtilizationSample*,
                                                 unsigned int*, unsigned long long);
// nvmlDeviceGetTemperature(device, sensor, °C), nvmlDeviceGetPowerUsage(device, mW),
// nvmlDeviceGetTotalEccErrors(device, errorType, counterType, count); the enums are C ints.
using GetTemperatureFn = nvml::Return (*)(nvml::Device, int, unsigned int*);
using GetPowerUsageFn = nvml::Return (*)(nvml::Device, unsigned int*);
using GetTotalEccErrorsFn = nvml::Return (*)(nvml::Device, int, int, unsigned long long*);
}

// nvml.h: NVML_TEMPERATURE_GPU, NVML_MEMORY_ERROR_TYPE_{CORRECTED,UNCORRECTED},
// NVML_AGGREGATE_ECC (lifetime counts; NVML_VOLATILE_ECC = 0 would reset with the driver).
constexpr int kTemperatureGpu = 0;
constexpr int kEccCorrected = 0;
constexpr int kEccUncorrected = 1;
constexpr int kAggregateEcc = 1;

uint64_t RealtimeMicros() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

}  // namespace

struct NvmlTelemetry::Api {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  GetHandleByUuidFn handle_by_uuid = nullptr;
  nvml::DeviceGetMemoryInfoFn memory_info = nullptr;
  GetUtilizationRatesFn utilization = nullptr;
  GetProcessUtilizationFn process_utilization = nullptr;
  GetTemperatureFn temperature = nullptr;  // optional, as are the two below
  GetPowerUsageFn power_usage = nullptr;
  GetTotalEccErrorsFn total_ecc_errors = nullptr;

  std::string Error(nvml::Return r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? StrCat(s, " (", r, ")") : StrCat("NVML error ", r);
  }
};

namespace {

// Each value only where NVML answers for this board (a GPU without ECC, or without a power
// sensor, says NOT_SUPPORTED): the exporter then leaves its series out, as upstream does.
void ReadSensors(const NvmlTelemetry::Api& api, nvml::Device dev, HostGpu* h) {
  unsigned int temp = 0, mw = 0;
  if (api.temperature != nullptr && api.temperature(dev, kTemperatureGpu, &temp) == nvml::kSuccess)
    h->temperature_c = static_cast<int>(temp);
  if (api.power_usage != nullptr && api.power_usage(dev, &mw) == nvml::kSuccess) h->power_mw = mw;
  if (api.total_ecc_errors == nullptr) return;
  unsigned long long n = 0;
  if (api.total_ecc_errors(dev, kEccCorrected, kAggregateEcc, &n) == nvml::kSuccess)
    h->ecc_corrected = static_cast<int64_t>(std::min<unsigned long long>(n, INT64_MAX));
  if (api.total_ecc_errors(dev, kEccUncorrected, kAggregateEcc, &n) == nvml::kSuccess)
    h->ecc_uncorrected = static_cast<int64_t>(std::min<unsigned long long>(n, INT64_MAX));
}

}  // namespace

NvmlTelemetry::NvmlTelemetry(gpu::DeviceDiscovery& inventory, void* handle,
                             std::unique_ptr<Api> api)
    : inventory_(inventory), handle_(handle), api_(std::move(api)) {}

NvmlTelemetry::~NvmlTelemetry() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

StatusOr<std::unique_ptr<NvmlTelemetry>> NvmlTelemetry::Open(gpu::DeviceDiscovery& inventory,
                                                             const std::string& library) {
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    return Unavailable(StrCat("cannot load ", library, ": ", DlErrorText()));
  }
  auto api = std::make_unique<Api>();
  auto sym = [&](const char* name, const char* fallback) -> void* {
    void* p = dlsym(h, name);
    if (p == nullptr && fallback != nullptr) p = dlsym(h, fallback);
    return p;
  };
  api->init = reinterpret_cast<nvml::InitFn>(sym("nvmlInit_v2", "nvmlInit"));
  api->shutdown = reinterpret_cast<nvml::ShutdownFn>(sym("nvmlShutdown", nullptr));
  api->error_string = reinterpret_cast<nvml::ErrorStringFn>(sym("nvmlErrorString", nullptr));
  api->handle_by_uuid =
      reinterpret_cast<GetHandleByUuidFn>(sym("nvmlDeviceGetHandleByUUID", nullptr));
  api->memory_info =
      reinterpret_cast<nvml::DeviceGetMemoryInfoFn>(sym("nvmlDeviceGetMemoryInfo", nullptr));
  api->utilization =
      reinterpret_cast<GetUtilizationRatesFn>(sym("nvmlDeviceGetUtilizationRates", nullptr));
  api->process_utilization =
      reinterpret_cast<GetProcessUtilizationFn>(sym("nvmlDeviceGetProcessUtilization", nullptr));
  api->temperature = reinterpret_cast<GetTemperatureFn>(sym("nvmlDeviceGetTemperature", nullptr));
  api->power_usage = reinterpret_cast<GetPowerUsageFn>(sym("nvmlDeviceGetPowerUsage", nullptr));
  api->total_ecc_errors =
      reinterpret_cast<GetTotalEccErrorsFn>(sym("nvmlDeviceGetTotalEccErrors", nullptr));
  const std::pair<const char*, void*> required[] = {
      {"nvmlInit_v2", reinterpret_cast<void*>(api->init)},
      {"nvmlShutdown", reinterpret_cast<void*>(api->shutdown)},
      {"nvmlDeviceGetHandleByUUID", reinterpret_cast<void*>(api->handle_by_uuid)},
      {"nvmlDeviceGetMemoryInfo", reinterpret_cast<void*>(api->memory_info)},
  };
  for (const auto& [name, p] : required) {
    if (p == nullptr) {
      dlclose(h);
      return Unavailable(StrCat(library, ": missing symbol ", name));
    }
  }
  nvml::Return r = api->init();
  if (r != nvml::kSuccess) {
    std::string msg = api->Error(r);
    dlclose(h);
    return Unavailable(StrCat(library, ": nvmlInit: ", msg));
  }
  return std::unique_ptr<NvmlTelemetry>(new NvmlTelemetry(inventory, h, std::move(api)));
}

StatusOr<std::vector<gpu::GpuInfo>> NvmlTelemetry::Inventory() {
  MutexLock l(mu_);
  if (cached_.empty()) {
    HAMI_ASSIGN_OR_RETURN(cached_, inventory_.ListDevices());
  }
  return cached_;
}

StatusOr<std::vector<HostGpu>> NvmlTelemetry::Devices() {
  HAMI_ASSIGN_OR_RETURN(std::vector<gpu::GpuInfo> gpus, Inventory());
  std::vector<HostGpu> out;
  out.reserve(gpus.size());
  for (const gpu::GpuInfo& g : gpus) {
    HostGpu h;
    h.index = g.index;
    h.uuid = g.uuid;
    h.model = g.model;
    h.memory_total_bytes = static_cast<uint64_t>(g.memory_mib) << 20;
    nvml::Device dev = nullptr;
    nvml::Return r = api_->handle_by_uuid(g.uuid.c_str(), &dev);
    if (r != nvml::kSuccess) {
      return Unavailable(StrCat("nvmlDeviceGetHandleByUUID(", g.uuid, "): ", api_->Error(r)));
    }
    nvml::Memory mem{};
    if (api_->memory_info(dev, &mem) == nvml::kSuccess) {
      h.memory_total_bytes = mem.total;
      h.memory_used_bytes = mem.used;
    }
    Utilization u{};
    if (api_->utilization != nullptr && api_->utilization(dev, &u) == nvml::kSuccess) {
      h.utilization_pct = static_cast<int>(u.gpu);
      h.memory_utilization_pct = static_cast<int>(u.memory);
    }
    ReadSensors(*api_, dev, &h);
    out.push_back(std::move(h));
  }
  return out;
}

namespace {

// nvmlDeviceGetProcessUtilization(dev, ..., lastSeenTimeStamp = since_us), the buffer grown once.
StatusOr<std::vector<ProcessUtilizationSample>> RawSamples(const NvmlTelemetry::Api& api,
                                                           const std::string& uuid,
                                                           unsigned long long since_us) {
  if (api.process_utilization == nullptr) {
    return Unavailable("nvmlDeviceGetProcessUtilization is not available");
  }
  nvml::Device dev = nullptr;
  nvml::Return r = api.handle_by_uuid(uuid.c_str(), &dev);
  if (r != nvml::kSuccess)
    return Unavailable(StrCat("nvmlDeviceGetHandleByUUID(", uuid, "): ", api.Error(r)));
  std::vector<ProcessUtilizationSample> buf(64);
  unsigned int n = static_cast<unsigned int>(buf.size());
  r = api.process_utilization(dev, buf.data(), &n, since_us);
  if (r == kErrorInsufficientSize && n > buf.size() && n <= 65536) {
    buf.resize(n);
    r = api.process_utilization(dev, buf.data(), &n, since_us);
  }
  if (r == nvml::kErrorNotFound) return std::vector<ProcessUtilizationSample>{};  // none newer
  if (r != nvml::kSuccess)
    return Unavailable(StrCat("nvmlDeviceGetProcessUtilization(", uuid, "): ", api.Error(r)));
  buf.resize(std::min<size_t>(n, buf.size()));
  return buf;
}

}  // namespace

StatusOr<std::vector<ProcessUtil>> NvmlTelemetry::ProcessUtilization(const std::string& uuid,
                                                                     int64_t window_ms) {
  uint64_t now = RealtimeMicros();
  uint64_t since = now > static_cast<uint64_t>(window_ms) * 1000
                       ? now - static_cast<uint64_t>(window_ms) * 1000
                       : 0;
  HAMI_ASSIGN_OR_RETURN(std::vector<ProcessSample> samples, ProcessSamples(uuid, since, now));
  std::vector<ProcessUtil> out;
  out.reserve(samples.size());
  for (const ProcessSample& s : samples) out.push_back({s.pid, s.sm_pct});
  return out;
}

StatusOr<std::vector<ProcessSample>> NvmlTelemetry::ProcessSamples(const std::string& uuid,
                                                                   uint64_t since_us, uint64_t) {
  HAMI_ASSIGN_OR_RETURN(std::vector<ProcessUtilizationSample> buf,
                        RawSamples(*api_, uuid, since_us));
  // The driver may return several samples per process; keep each process's newest (and none not
  // newer than asked: a driver that ignores lastSeenTimeStamp).
  std::map<uint32_t, ProcessSample> newest;
  for (const ProcessUtilizationSample& s : buf) {
    if (s.timeStamp <= since_us) continue;
    ProcessSample& slot = newest[s.pid];
    if (s.timeStamp >= slot.end_us) slot = {s.pid, std::min<uint32_t>(s.smUtil, 100), s.timeStamp};
  }
  std::vector<ProcessSample> out;
  out.reserve(newest.size());
  for (const auto& [pid, s] : newest) out.push_back(s);
  return out;
}

}  // namespace hami::monitor
