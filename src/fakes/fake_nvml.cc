// Fake libnvidia-ml.so.1: NVML entry points over the simulated devices of fakes/shared_state.h.
// Contract and semantics: fakes/README.md. NVML always shows all devices (no CUDA_VISIBLE_DEVICES).
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "fakes/fake_gpu.h"
#include "fakes/mig_model.h"
#include "fakes/runtime.h"
#include "gpu/nvml_abi.h"

using fakegpu::GetRuntime;

struct nvmlDevice_st {
  int index;  // NVML index of the GPU (of the parent GPU, for a MIG device)
  int gi;     // -1: the GPU itself; else the MIG device of compute instance (gi, ci)
  int ci;
};
struct nvmlGpuInstance_st {
  int dev;
  int id;
};
struct nvmlComputeInstance_st {
  int dev;
  int gi;
  int id;
};

namespace {

struct Registration {
  int dev;
  unsigned long long mask;
  uint64_t start_seq;
};

struct EventSet {
  std::mutex mu;
  std::vector<Registration> regs;
  uint64_t cursor = 0;
};

constexpr unsigned long long kSupportedEvents =
    0x1ULL | 0x2ULL | 0x4ULL | nvmlEventTypeXidCriticalError | 0x10ULL;
constexpr unsigned kPciDeviceId = 0x20B510DE;
constexpr unsigned kPciSubsystemId = 0x151610DE;

struct Globals {
  std::mutex mu;
  int init_count = 0;
  uint64_t init_mono_ns = 0;
  std::vector<bool> xid_done;  // per FAKEGPU_XID entry: already injected by this process
  nvmlDevice_st handles[fakegpu::kMaxDevices];
  // MIG handles: fixed slots per (GPU, instance id), valid while the instance lives.
  nvmlDevice_st mig_devices[fakegpu::kMaxDevices][fakegpu::kMaxGpuInstances]
                           [fakegpu::kMaxComputeInstances];
  nvmlGpuInstance_st gis[fakegpu::kMaxDevices][fakegpu::kMaxGpuInstances];
  nvmlComputeInstance_st cis[fakegpu::kMaxDevices][fakegpu::kMaxGpuInstances]
                            [fakegpu::kMaxComputeInstances];
  std::unordered_set<EventSet*> sets;
};

Globals& G() {
  static Globals* g = [] {
    auto* p = new Globals();  // leaked on purpose: usable from atexit handlers of the host
    for (int i = 0; i < fakegpu::kMaxDevices; ++i) {
      p->handles[i] = {i, -1, -1};
      for (int gi = 0; gi < fakegpu::kMaxGpuInstances; ++gi) {
        p->gis[i][gi] = {i, gi};
        for (int ci = 0; ci < fakegpu::kMaxComputeInstances; ++ci) {
          p->mig_devices[i][gi][ci] = {i, gi, ci};
          p->cis[i][gi][ci] = {i, gi, ci};
        }
      }
    }
    return p;
  }();
  return *g;
}

#define FG_ENTRY()                                                \
  do {                                                            \
    if (int fault_ = fakegpu::FaultCode(__func__)) return fault_; \
  } while (0)

#define FG_NEED_INIT()                                   \
  do {                                                   \
    if (!Initialized()) return NVML_ERROR_UNINITIALIZED; \
  } while (0)

// Exported entry points whose whole body is one call after the fault (and init) checks.
#define FG_NV(name, params, call)           \
  FAKEGPU_EXPORT nvmlReturn_t name params { \
    FG_ENTRY();                             \
    return call;                            \
  }
#define FG_NV_INIT(name, params, call)      \
  FAKEGPU_EXPORT nvmlReturn_t name params { \
    FG_ENTRY();                             \
    FG_NEED_INIT();                         \
    return call;                            \
  }

// Validates a device handle; sets *idx.
#define FG_DEVICE(handle, idx)                       \
  int idx = -1;                                      \
  do {                                               \
    idx = DeviceIndex(handle);                       \
    if (idx < 0) return NVML_ERROR_INVALID_ARGUMENT; \
  } while (0)

fakegpu::SharedState& S() {
  return *GetRuntime().state;
}

// Injects this process's due FAKEGPU_XID events.
void PumpScheduledXids() {
  Globals& g = G();
  const std::vector<fakegpu::XidSpec>& xids = GetRuntime().cfg.xids;
  if (xids.empty()) return;
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count == 0) return;
  uint64_t now = fakegpu::MonoNs();
  g.xid_done.resize(xids.size(), false);
  for (size_t i = 0; i < xids.size(); ++i) {
    if (!g.xid_done[i] && now >= g.init_mono_ns + xids[i].after_ms * 1000000ULL) {
      g.xid_done[i] = true;
      S().InjectXid(xids[i].dev, xids[i].xid);
    }
  }
}

bool Initialized() {
  Globals& g = G();
  bool init;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    init = g.init_count > 0;
  }
  if (init) PumpScheduledXids();
  return init;
}

int DeviceIndex(nvmlDevice_t h) {
  Globals& g = G();
  if (h == nullptr || h < &g.handles[0] || h >= &g.handles[S().num_devices()]) return -1;
  return h->index;
}

nvmlDevice_t Handle(int idx) {
  return &G().handles[idx];
}

const fakegpu::DeviceRec& Dev(int idx) {
  return S().dev(idx);
}

unsigned Bus(int idx) {
  return 0x18 + 8 * static_cast<unsigned>(idx);
}
int NumaNode(int idx) {
  return idx < (S().num_devices() + 1) / 2 ? 0 : 1;
}

nvmlReturn_t CopyString(const std::string& s, char* out, unsigned len) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (len < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

void FillPci(int idx, nvmlPciInfo_t* pci, bool full) {
  char legacy[16], bus_id[32];
  std::snprintf(legacy, sizeof legacy, "%04X:%02X:%02X.0", 0u, Bus(idx), 0u);
  std::snprintf(bus_id, sizeof bus_id, "%08X:%02X:%02X.0", 0u, Bus(idx), 0u);
  std::memcpy(pci->busIdLegacy, legacy, sizeof legacy);
  pci->domain = 0;
  pci->bus = Bus(idx);
  pci->device = 0;
  pci->pciDeviceId = kPciDeviceId;
  pci->pciSubSystemId = kPciSubsystemId;
  if (full) std::memcpy(pci->busId, bus_id, sizeof bus_id);
}

int TopologyLevel(int a, int b) {
  if (a == b) return NVML_TOPOLOGY_INTERNAL;
  if (a / 2 == b / 2) return NVML_TOPOLOGY_SINGLE;
  if (NumaNode(a) == NumaNode(b)) return NVML_TOPOLOGY_NODE;
  return NVML_TOPOLOGY_SYSTEM;
}

unsigned UtilPercent(int idx) {
  uint64_t now = fakegpu::MonoNs();
  uint64_t from = now > 1000000000ULL ? now - 1000000000ULL : 0;
  auto busy = S().BusyInWindow(idx, from, now);
  uint64_t window = now - from;
  return window == 0 ? 0
                     : static_cast<unsigned>(
                           std::min<uint64_t>(100, (busy[0].ns * 100 + window / 2) / window));
}

nvmlReturn_t InitImpl() {
  fakegpu::Runtime& rt = GetRuntime();
  if (rt.cfg.init_fail) return NVML_ERROR_DRIVER_NOT_LOADED;
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.init_count++ == 0) g.init_mono_ns = fakegpu::MonoNs();
  return NVML_SUCCESS;
}

// MIG devices (defined with the MIG entry points below): true when `h` is a live MIG device, with
// its UUID ("MIG-...") or name, or its memory.
bool MigDeviceString(nvmlDevice_t h, bool uuid, std::string* out);
bool MigDeviceMemory(nvmlDevice_t h, uint64_t* total_bytes);

struct ProcRow {
  unsigned pid;
  unsigned long long mem;
};

// Shared body of the *RunningProcesses variants: `write(i, row)` stores entry i.
template <typename Write>
nvmlReturn_t RunningProcesses(nvmlDevice_t device, unsigned* count, bool have_buffer, bool graphics,
                              Write write) {
  FG_NEED_INIT();
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (uint64_t mig_total = 0; MigDeviceMemory(device, &mig_total)) {
    *count = 0;  // processes are not attributed to MIG devices
    return NVML_SUCCESS;
  }
  FG_DEVICE(device, idx);
  std::vector<ProcRow> rows;
  if (!graphics) {
    for (const auto& p : S().Processes(idx))
      rows.push_back({static_cast<unsigned>(p.pid), p.bytes});
  }
  unsigned n = static_cast<unsigned>(rows.size());
  if (*count < n || (!have_buffer && n > 0)) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) write(i, rows[i]);
  *count = n;
  return NVML_SUCCESS;
}

struct Sample {
  unsigned pid;
  unsigned sm;
};

// What each pid (pid 0: the whole device) ran in the sampling period of period_us ending at end_us
// (CLOCK_REALTIME, at most now_us), on the device clock (now_mono is now_us there).
std::vector<fakegpu::SharedState::PidBusy> PeriodBusy(int idx, unsigned long long end_us,
                                                      uint64_t period_us, unsigned long long now_us,
                                                      uint64_t now_mono) {
  const uint64_t to_mono = now_mono - (now_us - end_us) * 1000ULL;
  const uint64_t from_mono = to_mono > period_us * 1000ULL ? to_mono - period_us * 1000ULL : 0;
  return S().BusyInWindow(idx, from_mono, to_mono);
}

// Busy ns as a whole percentage of a period, rounded, at most 100.
unsigned PeriodPct(uint64_t ns, uint64_t period_us) {
  return static_cast<unsigned>(
      std::min<uint64_t>((ns * 100 + period_us * 500) / (period_us * 1000), 100));
}

// Per-pid busy % in (last_seen_us, now], clipped to the last second. Returns the sample timestamp.
// With FAKEGPU_NVML_SAMPLE_MS = P > 0, as a real driver: per-pid busy % of the newest closed
// period of P ms (CLOCK_REALTIME multiples of P), stamped with its end, if that is newer than
// last_seen_us.
unsigned long long ProcessSamples(int idx, unsigned long long last_seen_us,
                                  std::vector<Sample>* out) {
  uint64_t now_mono = fakegpu::MonoNs();
  unsigned long long now_us = fakegpu::RealUs();
  if (const uint64_t period_us = GetRuntime().cfg.nvml_sample_ms * 1000; period_us > 0) {
    const unsigned long long end_us = now_us / period_us * period_us;
    if (end_us <= last_seen_us || end_us < period_us) return end_us;
    for (const auto& b : PeriodBusy(idx, end_us, period_us, now_us, now_mono)) {
      if (b.pid == 0 || b.ns == 0) continue;
      out->push_back({static_cast<unsigned>(b.pid), PeriodPct(b.ns, period_us)});
    }
    // A process with a context and no work in the period gets a sample of 0, as from a driver.
    for (const auto& p : S().Processes(idx)) {
      const auto pid = static_cast<unsigned>(p.pid);
      if (std::none_of(out->begin(), out->end(), [&](const Sample& s) { return s.pid == pid; }))
        out->push_back({pid, 0});
    }
    return end_us;
  }
  unsigned long long from_us = now_us > 1000000ULL ? now_us - 1000000ULL : 0;
  if (last_seen_us > from_us) from_us = last_seen_us;
  if (from_us >= now_us) return now_us;
  uint64_t window_ns = (now_us - from_us) * 1000ULL;
  uint64_t from_mono = now_mono > window_ns ? now_mono - window_ns : 0;
  for (const auto& b : S().BusyInWindow(idx, from_mono, now_mono)) {
    if (b.pid == 0 || b.ns == 0) continue;
    uint64_t pct64 = (b.ns * 100 + window_ns / 2) / window_ns;
    unsigned pct = static_cast<unsigned>(pct64 > 100 ? 100 : pct64);
    out->push_back({static_cast<unsigned>(b.pid), pct});
  }
  return now_us;
}

nvmlReturn_t EventWaitImpl(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms,
                           bool v2) {
  FG_NEED_INIT();
  if (data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  EventSet* es = reinterpret_cast<EventSet*>(set);
  {
    std::lock_guard<std::mutex> lock(G().mu);
    if (es == nullptr || G().sets.count(es) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  }
  uint64_t deadline = fakegpu::MonoNs() + static_cast<uint64_t>(timeout_ms) * 1000000ULL;
  while (true) {
    PumpScheduledXids();
    {
      std::lock_guard<std::mutex> lock(es->mu);
      fakegpu::XidRec rec;
      while (S().NextXid(es->cursor, &rec)) {
        es->cursor = rec.seq;
        for (const Registration& r : es->regs) {
          if (r.dev == rec.dev && (r.mask & nvmlEventTypeXidCriticalError) &&
              rec.seq > r.start_seq) {
            data->device = Handle(rec.dev);
            data->eventType = nvmlEventTypeXidCriticalError;
            data->eventData = rec.xid;
            if (v2) {
              data->gpuInstanceId = 0xFFFFFFFFu;
              data->computeInstanceId = 0xFFFFFFFFu;
            }
            return NVML_SUCCESS;
          }
        }
      }
    }
    uint64_t now = fakegpu::MonoNs();
    if (now >= deadline) return NVML_ERROR_TIMEOUT;
    fakegpu::SleepUntilMono(std::min<uint64_t>(deadline, now + 1000000ULL));
  }
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// Init, system

FG_NV(nvmlInit_v2, (void), InitImpl())

FG_NV(nvmlInit, (void), InitImpl())

FAKEGPU_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  FG_ENTRY();
  if (flags & ~0x7u) return NVML_ERROR_INVALID_ARGUMENT;
  return InitImpl();
}

FAKEGPU_EXPORT nvmlReturn_t nvmlShutdown(void) {
  FG_ENTRY();
  std::lock_guard<std::mutex> lock(G().mu);
  if (G().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --G().init_count;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires reset";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "Not supported with vGPU ECC";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
      return "Deprecated";
    case NVML_ERROR_NOT_READY:
      return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
      return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
      return "Reset type not supported";
    default:
      return "Unknown Error";
  }
}

FG_NV_INIT(nvmlSystemGetDriverVersion, (char* version, unsigned int length),
           CopyString(GetRuntime().cfg.driver_version, version, length))

FG_NV(nvmlSystemGetNVMLVersion, (char* version, unsigned int length),
      CopyString("13." + GetRuntime().cfg.driver_version, version, length))

FAKEGPU_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  FG_ENTRY();
  if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FG_NEED_INIT();
  *v = GetRuntime().cfg.cuda_version;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  FG_ENTRY();
  if (v == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FG_NEED_INIT();
  *v = GetRuntime().cfg.cuda_version;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name,
                                                     unsigned int length) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  if (!in || !std::getline(in, comm)) return NVML_ERROR_NOT_FOUND;
  std::snprintf(name, length, "%s", comm.c_str());
  return NVML_SUCCESS;
}

// ----------------------------------------------------------------------------------------------
// Device enumeration and identity

static nvmlReturn_t GetCount(unsigned* count) {
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(S().num_devices());
  return NVML_SUCCESS;
}

FG_NV_INIT(nvmlDeviceGetCount_v2, (unsigned int* count), GetCount(count))

FG_NV_INIT(nvmlDeviceGetCount, (unsigned int* count), GetCount(count))

static nvmlReturn_t ByIndex(unsigned index, nvmlDevice_t* device) {
  if (device == nullptr || index >= static_cast<unsigned>(S().num_devices()))
    return NVML_ERROR_INVALID_ARGUMENT;
  *device = Handle(static_cast<int>(index));
  return NVML_SUCCESS;
}

FG_NV_INIT(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvmlDevice_t* device),
           ByIndex(index, device))

FG_NV_INIT(nvmlDeviceGetHandleByIndex, (unsigned int index, nvmlDevice_t* device),
           ByIndex(index, device))

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < S().num_devices(); ++i) {
    if (std::strcmp(Dev(i).uuid, uuid) == 0) {
      *device = Handle(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

static nvmlReturn_t ByPciBusId(const char* bus_id, nvmlDevice_t* device) {
  if (bus_id == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned domain = 0, bus = 0, dev = 0;
  if (std::sscanf(bus_id, "%x:%x:%x", &domain, &bus, &dev) != 3) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < S().num_devices(); ++i) {
    if (domain == 0 && dev == 0 && bus == Bus(i)) {
      *device = Handle(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FG_NV_INIT(nvmlDeviceGetHandleByPciBusId_v2, (const char* bus_id, nvmlDevice_t* device),
           ByPciBusId(bus_id, device))

FG_NV_INIT(nvmlDeviceGetHandleByPciBusId, (const char* bus_id, nvmlDevice_t* device),
           ByPciBusId(bus_id, device))

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned>(idx);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = static_cast<unsigned>(idx);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                              unsigned int length) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::string mig;
  if (MigDeviceString(device, false, &mig)) return CopyString(mig, name, length);
  FG_DEVICE(device, idx);
  return CopyString(Dev(idx).name, name, length);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                              unsigned int length) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::string mig;
  if (MigDeviceString(device, true, &mig)) return CopyString(mig, uuid, length);
  FG_DEVICE(device, idx);
  return CopyString(Dev(idx).uuid, uuid, length);
}

// ----------------------------------------------------------------------------------------------
// Memory

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (uint64_t mig_total = 0; MigDeviceMemory(device, &mig_total)) {
    *memory = nvmlMemory_t{mig_total, mig_total, 0};
    return NVML_SUCCESS;
  }
  FG_DEVICE(device, idx);
  uint64_t total = Dev(idx).total_bytes, used = std::min(total, S().UsedBytes(idx, 0));
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                       nvmlMemory_v2_t* memory) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (uint64_t mig_total = 0; MigDeviceMemory(device, &mig_total)) {
    memory->total = mig_total;
    memory->reserved = 0;
    memory->used = 0;
    memory->free = mig_total;
    return NVML_SUCCESS;
  }
  FG_DEVICE(device, idx);
  uint64_t total = Dev(idx).total_bytes, used = std::min(total, S().UsedBytes(idx, 0));
  memory->total = total;
  memory->reserved = 0;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device,
                                                        nvmlBAR1Memory_t* bar1) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (bar1 == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  bar1->bar1Total = 256ULL << 20;
  bar1->bar1Used = 2ULL << 20;
  bar1->bar1Free = bar1->bar1Total - bar1->bar1Used;
  return NVML_SUCCESS;
}

// ----------------------------------------------------------------------------------------------
// PCI, NUMA, topology, NVLink

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci(idx, pci, true);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci(idx, pci, true);
  return NVML_SUCCESS;
}

// The original struct ends after pciSubSystemId (+ reserved words): only that prefix is written.
FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci(idx, pci, false);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (node == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_ERROR_NOT_SUPPORTED;  // PCIe GPUs are not NUMA nodes themselves
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int size,
                                                        unsigned long* node_set,
                                                        nvmlAffinityScope_t scope) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (node_set == nullptr || size == 0 || scope > 1) return NVML_ERROR_INVALID_ARGUMENT;
  std::fill(node_set, node_set + size, 0UL);
  node_set[0] = 1UL << NumaNode(idx);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int size,
                                                     unsigned long* cpu_set) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (cpu_set == nullptr || size == 0) return NVML_ERROR_INVALID_ARGUMENT;
  std::fill(cpu_set, cpu_set + size, 0UL);
  cpu_set[0] =
      NumaNode(idx) == 0 ? 0x00000000FFFFFFFFUL : 0xFFFFFFFF00000000UL;  // 32 CPUs per node
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t d1, nvmlDevice_t d2,
                                                                nvmlGpuTopologyLevel_t* path) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(d1, a);
  FG_DEVICE(d2, b);
  if (path == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *path = TopologyLevel(a, b);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device,
                                                             nvmlGpuTopologyLevel_t level,
                                                             unsigned int* count,
                                                             nvmlDevice_t* array) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<int> near;
  for (int i = 0; i < S().num_devices(); ++i) {
    if (i != idx && TopologyLevel(idx, i) <= level) near.push_back(i);
  }
  if (*count == 0 || array == nullptr) {
    *count = static_cast<unsigned>(near.size());
    return NVML_SUCCESS;
  }
  unsigned n = std::min<unsigned>(*count, static_cast<unsigned>(near.size()));
  for (unsigned i = 0; i < n; ++i) array[i] = Handle(near[i]);
  *count = n;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2,
                                                   nvmlGpuP2PCapsIndex_t index,
                                                   nvmlGpuP2PStatus_t* status) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(d1, a);
  FG_DEVICE(d2, b);
  if (status == nullptr || index < 0 || index > 4) return NVML_ERROR_INVALID_ARGUMENT;
  bool linked = false;
  for (int p : Dev(a).nvlink_peer) linked = linked || p == b;
  if (index == NVML_P2P_CAPS_INDEX_NVLINK) {
    *status = linked ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
  } else {
    *status =
        (a != b && (linked || a / 2 == b / 2)) ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
  }
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                     nvmlEnableState_t* active) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (active == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (Dev(idx).nvlink_peer[link] < 0) return NVML_ERROR_NOT_SUPPORTED;
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

static nvmlReturn_t RemotePci(nvmlDevice_t device, unsigned link, nvmlPciInfo_t* pci, bool full) {
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (pci == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  int peer = Dev(idx).nvlink_peer[link];
  if (peer < 0) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(peer, pci, full);
  return NVML_SUCCESS;
}

FG_NV(nvmlDeviceGetNvLinkRemotePciInfo_v2,
      (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci),
      RemotePci(device, link, pci, true))

FG_NV(nvmlDeviceGetNvLinkRemotePciInfo,
      (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci),
      RemotePci(device, link, pci, false))

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device,
                                                                unsigned int link,
                                                                nvmlIntNvLinkDeviceType_t* type) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (type == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (Dev(idx).nvlink_peer[link] < 0) return NVML_ERROR_NOT_SUPPORTED;
  *type = NVML_NVLINK_DEVICE_TYPE_GPU;
  return NVML_SUCCESS;
}

// ----------------------------------------------------------------------------------------------
// Processes and utilisation

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                    unsigned int* count,
                                                                    nvmlProcessInfo_t* infos) {
  FG_ENTRY();
  return RunningProcesses(device, count, infos != nullptr, false,
                          [&](unsigned i, const ProcRow& r) {
                            infos[i] = nvmlProcessInfo_t{r.pid, r.mem, 0xFFFFFFFFu, 0xFFFFFFFFu};
                          });
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                    unsigned int* count,
                                                                    nvmlProcessInfo_t* infos) {
  FG_ENTRY();
  return RunningProcesses(device, count, infos != nullptr, false,
                          [&](unsigned i, const ProcRow& r) {
                            infos[i] = nvmlProcessInfo_t{r.pid, r.mem, 0xFFFFFFFFu, 0xFFFFFFFFu};
                          });
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                 unsigned int* count,
                                                                 nvmlProcessInfo_v1_t* infos) {
  FG_ENTRY();
  return RunningProcesses(device, count, infos != nullptr, false,
                          [&](unsigned i, const ProcRow& r) {
                            infos[i] = nvmlProcessInfo_v1_t{r.pid, r.mem};
                          });
}

FG_NV(nvmlDeviceGetGraphicsRunningProcesses_v3,
      (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos),
      RunningProcesses(device, count, infos != nullptr, true, [](unsigned, const ProcRow&) {}))

FG_NV(nvmlDeviceGetGraphicsRunningProcesses_v2,
      (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos),
      RunningProcesses(device, count, infos != nullptr, true, [](unsigned, const ProcRow&) {}))

FG_NV(nvmlDeviceGetGraphicsRunningProcesses,
      (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v1_t* infos),
      RunningProcesses(device, count, infos != nullptr, true, [](unsigned, const ProcRow&) {}))

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                          nvmlUtilization_t* util) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  util->gpu = UtilPercent(idx);
  util->memory = util->gpu / 2;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                            nvmlProcessUtilizationSample_t* samples,
                                                            unsigned int* count,
                                                            unsigned long long last_seen) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<Sample> rows;
  unsigned long long ts = ProcessSamples(idx, last_seen, &rows);
  unsigned n = static_cast<unsigned>(rows.size());
  if (n == 0) {
    *count = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (samples == nullptr || *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i)
    samples[i] = nvmlProcessUtilizationSample_t{rows[i].pid, ts, rows[i].sm, 0, 0, 0};
  *count = n;
  return NVML_SUCCESS;
}

// Device utilisation samples (NVML_GPU_UTILIZATION_SAMPLES only), as a driver keeps them: one per
// closed period of FAKEGPU_NVML_SAMPLE_MS over the last 64 periods, newer than last_seen, oldest
// first. Without a sampling period (the default averaging model) NOT_SUPPORTED.
FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, int type,
                                                 unsigned long long last_seen, int* value_type,
                                                 unsigned int* count, nvmlSample_t* samples) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (count == nullptr || value_type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const uint64_t period_us = GetRuntime().cfg.nvml_sample_ms * 1000;
  if (type != NVML_GPU_UTILIZATION_SAMPLES || period_us == 0) return NVML_ERROR_NOT_SUPPORTED;
  const uint64_t now_mono = fakegpu::MonoNs();
  const unsigned long long now_us = fakegpu::RealUs();
  const unsigned long long last_end = now_us / period_us * period_us;
  std::vector<nvmlSample_t> rows;
  for (int k = 63; k >= 0; --k) {
    const unsigned long long end = last_end - static_cast<unsigned long long>(k) * period_us;
    if (end < period_us || end > last_end || end <= last_seen) continue;
    uint64_t busy = 0;
    for (const auto& b : PeriodBusy(idx, end, period_us, now_us, now_mono))
      if (b.pid == 0) busy = b.ns;  // the device's total
    nvmlSample_t s{};
    s.timeStamp = end;
    s.sampleValue.uiVal = PeriodPct(busy, period_us);
    rows.push_back(s);
  }
  *value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
  const auto n = static_cast<unsigned>(rows.size());
  if (samples == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (n == 0) {
    *count = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(rows.begin(), rows.end(), samples);
  *count = n;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t
nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device, nvmlProcessesUtilizationInfo_t* info) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlProcessesUtilizationInfo_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  std::vector<Sample> rows;
  unsigned long long ts = ProcessSamples(idx, info->lastSeenTimeStamp, &rows);
  unsigned n = static_cast<unsigned>(rows.size());
  if (n == 0) {
    info->processSamplesCount = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (info->procUtilArray == nullptr || info->processSamplesCount < n) {
    info->processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) {
    info->procUtilArray[i] =
        nvmlProcessUtilizationInfo_v1_t{ts, rows[i].pid, rows[i].sm, 0, 0, 0, 0, 0};
  }
  info->processSamplesCount = n;
  info->lastSeenTimeStamp = ts;
  return NVML_SUCCESS;
}

// ----------------------------------------------------------------------------------------------
// MIG (fakes/mig_model.h for the geometry; README.md, "MIG")

namespace {

using fakegpu::CiRec;
using fakegpu::GiProfile;
using fakegpu::GiRec;
using fakegpu::MigRec;

template <typename T>
bool Within(const T* p, const T* first, size_t n) {
  return p != nullptr && p >= first && p < first + n;
}

const fakegpu::MigModel* Model(int idx) {
  return fakegpu::MigModelFor(Dev(idx).name, Dev(idx).total_bytes >> 20);
}

uint32_t SliceMask(unsigned start, unsigned size) {
  return size >= 32 ? 0xFFFFFFFFu : ((1u << size) - 1u) << start;
}

uint32_t UsedComputeSlices(const GiRec& g) {
  uint32_t mask = 0;
  for (const CiRec& ci : g.cis)
    if (ci.live) mask |= SliceMask(ci.start, ci.size);
  return mask;
}

uint32_t OccupiedSlices(const MigRec& m) {
  uint32_t mask = 0;
  for (const GiRec& g : m.gis)
    if (g.live) mask |= SliceMask(g.start, g.size);
  return mask;
}

// The profile of a GPU instance call on device idx (by profile id, or by
// NVML_GPU_INSTANCE_PROFILE_* index): NOT_SUPPORTED unless the device runs MIG, INVALID_ARGUMENT
// for an id it does not have.
nvmlReturn_t GiProfileOf(int idx, unsigned key, bool by_index, const GiProfile** out) {
  const MigRec m = S().Mig(idx);
  if (!m.capable || !m.enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (by_index && key > NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfile* p = by_index ? fakegpu::GiProfileByIndex(*Model(idx), key)
                                : fakegpu::GiProfileById(*Model(idx), key);
  if (p == nullptr) return by_index ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
  *out = p;
  return NVML_SUCCESS;
}

const GiProfile& ProfileOfRec(int idx, const GiRec& g) {
  return *fakegpu::GiProfileByIndex(*Model(idx), g.profile);  // only created from the table
}

// A live GPU instance behind a handle.
bool LiveGi(nvmlGpuInstance_t h, int* dev, GiRec* rec) {
  Globals& g = G();
  if (!Within(h, &g.gis[0][0], sizeof g.gis / sizeof g.gis[0][0])) return false;
  if (h->dev >= S().num_devices()) return false;
  const MigRec m = S().Mig(h->dev);
  if (!m.enabled || !m.gis[h->id].live) return false;
  *dev = h->dev;
  *rec = m.gis[h->id];
  return true;
}

// A live compute instance behind a compute instance or MIG device handle.
struct CiView {
  int dev = 0, gi = 0, ci = 0;
  GiRec gi_rec{};
  CiRec ci_rec{};
};
bool LiveCi(int dev, int gi, int ci, CiView* v) {
  if (dev < 0 || dev >= S().num_devices()) return false;
  const MigRec m = S().Mig(dev);
  if (!m.enabled || !m.gis[gi].live || !m.gis[gi].cis[ci].live) return false;
  *v = CiView{dev, gi, ci, m.gis[gi], m.gis[gi].cis[ci]};
  return true;
}
bool LiveCi(nvmlComputeInstance_t h, CiView* v) {
  Globals& g = G();
  return Within(h, &g.cis[0][0][0], sizeof g.cis / sizeof g.cis[0][0][0]) &&
         LiveCi(h->dev, h->gi, h->id, v);
}
bool IsMigHandle(nvmlDevice_t h) {
  Globals& g = G();
  return Within(h, &g.mig_devices[0][0][0], sizeof g.mig_devices / sizeof g.mig_devices[0][0][0]);
}
bool LiveMigDevice(nvmlDevice_t h, CiView* v) {
  return IsMigHandle(h) && LiveCi(h->index, h->gi, h->ci, v);
}

// Compute instance profiles of a GPU instance of `slices` compute slices: the whole instance,
// 1 and 2 slices of larger ones, 3 and 4 slices of the 7-slice one (as NVML lists them on A100).
unsigned CiSlices(unsigned profile) {
  static const unsigned kSlices[] = {1, 2, 3, 4, 7, 8, 6, 1};
  return profile < NVML_COMPUTE_INSTANCE_PROFILE_COUNT ? kSlices[profile] : 0;
}
bool CiSupported(unsigned profile, unsigned gi_slices) {
  if (profile > NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE) return false;
  const unsigned c = CiSlices(profile);
  return c == gi_slices || (c <= 2 && c < gi_slices) || (gi_slices == 7 && (c == 3 || c == 4));
}

std::string MigProfileName(const GiProfile& gp, unsigned ci_slices) {
  if (ci_slices == gp.slices) return gp.name;
  return std::to_string(ci_slices) + "c." + gp.name;
}

// "MIG-" + a UUID derived from the parent, the instance ids and the creation serial.
std::string MigUuid(int dev, const CiView& v) {
  const std::string key = std::string(Dev(dev).uuid) + "/" + std::to_string(v.gi) + "/" +
                          std::to_string(v.ci) + "/" + std::to_string(v.ci_rec.serial);
  const uint64_t a = fakegpu::Fnv1a64(key), b = fakegpu::Fnv1a64(key + "#mig");
  char buf[64];
  std::snprintf(buf, sizeof buf, "MIG-%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | (b >> 52 & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

// NVML's list convention: with room for all `items` they are copied and *count set; otherwise
// *count = how many there are and INSUFFICIENT_SIZE (a NULL `out` only asks, when `null_asks`).
template <typename T>
nvmlReturn_t CopyList(const std::vector<T>& items, T* out, unsigned* count, bool null_asks) {
  const unsigned n = static_cast<unsigned>(items.size());
  if (out == nullptr && null_asks) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(items.begin(), items.end(), out);
  *count = n;
  return NVML_SUCCESS;
}

// Greedy count of placements of `p` (lowest start first) that fit beside `occupied`: the profiles'
// placements are aligned, so this is how many more instances fit.
unsigned FreePlacements(const GiProfile& p, uint32_t occupied) {
  unsigned n = 0;
  for (unsigned s = 0; s < fakegpu::kMigMemorySlices; ++s) {
    const uint32_t mask = SliceMask(s, p.size);
    if ((p.starts >> s & 1u) && (occupied & mask) == 0) {
      occupied |= mask;
      ++n;
    }
  }
  return n;
}

unsigned LiveOfProfile(const MigRec& m, unsigned profile) {
  unsigned n = 0;
  for (const GiRec& g : m.gis) n += (g.live && g.profile == profile) ? 1 : 0;
  return n;
}

// Creates a GPU instance of `p` at `start` (any free start when start < 0); the driver's codes:
// INVALID_ARGUMENT for a placement the profile does not have, INSUFFICIENT_RESOURCES when it
// overlaps an instance or the profile's instance count is reached.
nvmlReturn_t CreateGi(int idx, const GiProfile& p, int start, nvmlGpuInstance_t* out) {
  int id = -1;
  const int rc = S().UpdateMig(idx, [&](MigRec* m) -> int {
    if (!m->enabled) return NVML_ERROR_NOT_SUPPORTED;
    if (LiveOfProfile(*m, p.profile) >= p.instances) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    const uint32_t occupied = OccupiedSlices(*m);
    unsigned at = 0;
    if (start >= 0) {
      at = static_cast<unsigned>(start);
      if (at >= fakegpu::kMigMemorySlices || !(p.starts >> at & 1u))
        return NVML_ERROR_INVALID_ARGUMENT;
      if (occupied & SliceMask(at, p.size)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    } else {
      for (at = 0; at < fakegpu::kMigMemorySlices; ++at)
        if ((p.starts >> at & 1u) && (occupied & SliceMask(at, p.size)) == 0) break;
      if (at == fakegpu::kMigMemorySlices) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    id = fakegpu::MigGpuInstanceId(at, p.size);
    if (id < 0) return NVML_ERROR_INVALID_ARGUMENT;
    GiRec& g = m->gis[id];
    std::memset(&g, 0, sizeof g);
    g.live = 1;
    g.profile = p.profile;
    g.start = at;
    g.size = p.size;
    return NVML_SUCCESS;
  });
  if (rc == NVML_SUCCESS) *out = &G().gis[idx][id];
  return rc;
}

void FillGiProfile(const GiProfile& p, nvmlGpuInstanceProfileInfo_t* info) {
  *info = nvmlGpuInstanceProfileInfo_t{p.id,           0,          p.slices,   p.instances, p.sms,
                                       p.copy_engines, p.decoders, p.encoders, p.jpegs,     p.ofas,
                                       p.memory_mib};
}

void FillCiProfile(const GiProfile& gp, unsigned profile, nvmlComputeInstanceProfileInfo_t* info) {
  const unsigned c = CiSlices(profile);
  *info = nvmlComputeInstanceProfileInfo_t{
      profile,     c,        gp.slices / c, gp.sms * c / gp.slices, gp.copy_engines, gp.decoders,
      gp.encoders, gp.jpegs, gp.ofas};
}

// Placements of a compute instance of c slices in a GPU instance of `slices`: aligned to c.
nvmlReturn_t CreateCi(int dev, int gi, unsigned profile, nvmlComputeInstance_t* out) {
  int id = -1;
  const int rc = S().UpdateMig(dev, [&](MigRec* m) -> int {
    GiRec& g = m->gis[gi];
    if (!m->enabled || !g.live) return NVML_ERROR_INVALID_ARGUMENT;
    const GiProfile& gp = ProfileOfRec(dev, g);
    if (!CiSupported(profile, gp.slices)) return NVML_ERROR_NOT_SUPPORTED;
    const unsigned c = CiSlices(profile);
    const uint32_t used = UsedComputeSlices(g);
    unsigned start = 0;
    while (start + c <= gp.slices && (used & SliceMask(start, c)) != 0) start += c;
    if (start + c > gp.slices) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (id = 0; id < fakegpu::kMaxComputeInstances && g.cis[id].live; ++id) {
    }
    if (id == fakegpu::kMaxComputeInstances) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    g.cis[id] = CiRec{1, profile, start, c, ++m->serial};
    return NVML_SUCCESS;
  });
  if (rc == NVML_SUCCESS) *out = &G().cis[dev][gi][id];
  return rc;
}

bool MigDeviceString(nvmlDevice_t h, bool uuid, std::string* out) {
  CiView v;
  if (!LiveMigDevice(h, &v)) return false;
  *out = uuid ? MigUuid(v.dev, v)
              : std::string(Dev(v.dev).name) + " MIG " +
                    MigProfileName(ProfileOfRec(v.dev, v.gi_rec), v.ci_rec.size);
  return true;
}

bool MigDeviceMemory(nvmlDevice_t h, uint64_t* total_bytes) {
  CiView v;
  if (!LiveMigDevice(h, &v)) return false;
  *total_bytes = ProfileOfRec(v.dev, v.gi_rec).memory_mib << 20;
  return true;
}

}  // namespace

// Entry of a GPU instance call by profile id: checks the handle and the out-parameter `out`, sets
// idx (the GPU) and p (the profile).
#define FG_GI_CALL(device, profile_id, out, idx, p)         \
  FG_ENTRY();                                               \
  FG_NEED_INIT();                                           \
  FG_DEVICE(device, idx);                                   \
  if ((out) == nullptr) return NVML_ERROR_INVALID_ARGUMENT; \
  const GiProfile* p = nullptr;                             \
  if (nvmlReturn_t rc_ = GiProfileOf(idx, profile_id, false, &p); rc_ != NVML_SUCCESS) return rc_

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                 unsigned int* pending) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigRec m = S().Mig(idx);
  if (!m.capable) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = m.enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

// Takes effect at once (the real driver may need a GPU reset; the fake has none to do).
FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                                 nvmlReturn_t* activation) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (activation == nullptr || mode > NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_INVALID_ARGUMENT;
  const int rc = S().UpdateMig(idx, [&](MigRec* m) -> int {
    if (!m->capable) return NVML_ERROR_NOT_SUPPORTED;
    if (mode == NVML_DEVICE_MIG_DISABLE && OccupiedSlices(*m) != 0) return NVML_ERROR_IN_USE;
    m->enabled = mode;
    return NVML_SUCCESS;
  });
  if (rc == NVML_SUCCESS) *activation = NVML_SUCCESS;
  return rc;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                           unsigned int* count) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = S().Mig(idx).capable ? fakegpu::kMaxMigDevices : 0;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (is_mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  CiView v;
  if (LiveMigDevice(device, &v)) {
    *is_mig = 1;
    return NVML_SUCCESS;
  }
  FG_DEVICE(device, idx);
  *is_mig = 0;
  return NVML_SUCCESS;
}

// MIG devices are numbered by (GPU instance id, compute instance id); empty slots are NOT_FOUND.
FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                unsigned int index,
                                                                nvmlDevice_t* mig) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigRec m = S().Mig(idx);
  if (!m.capable || !m.enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (index >= static_cast<unsigned>(fakegpu::kMaxMigDevices)) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned k = 0;
  for (int gi = 0; gi < fakegpu::kMaxGpuInstances; ++gi) {
    if (!m.gis[gi].live) continue;
    for (int ci = 0; ci < fakegpu::kMaxComputeInstances; ++ci) {
      if (!m.gis[gi].cis[ci].live) continue;
      if (k++ == index) {
        *mig = &G().mig_devices[idx][gi][ci];
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                         nvmlDevice_t* device) {
  FG_ENTRY();
  FG_NEED_INIT();
  CiView v;
  if (device == nullptr || !LiveMigDevice(mig, &v)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = Handle(v.dev);
  return NVML_SUCCESS;
}

static nvmlReturn_t MigDeviceId(nvmlDevice_t device, unsigned* id, bool gpu_instance) {
  FG_NEED_INIT();
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  CiView v;
  if (!LiveMigDevice(device, &v)) {
    FG_DEVICE(device, idx);
    return NVML_ERROR_NOT_SUPPORTED;  // a GPU, not a MIG device
  }
  *id = static_cast<unsigned>(gpu_instance ? v.gi : v.ci);
  return NVML_SUCCESS;
}

FG_NV(nvmlDeviceGetGpuInstanceId, (nvmlDevice_t device, unsigned int* id),
      MigDeviceId(device, id, true))

FG_NV(nvmlDeviceGetComputeInstanceId, (nvmlDevice_t device, unsigned int* id),
      MigDeviceId(device, id, false))

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfile* p = nullptr;
  if (nvmlReturn_t rc = GiProfileOf(idx, profile, true, &p); rc != NVML_SUCCESS) return rc;
  FillGiProfile(*p, info);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t* info) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const GiProfile* p = nullptr;
  if (nvmlReturn_t rc = GiProfileOf(idx, profile, true, &p); rc != NVML_SUCCESS) return rc;
  nvmlGpuInstanceProfileInfo_t v1;
  FillGiProfile(*p, &v1);
  std::memcpy(&info->id, &v1, offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB));
  info->memorySizeMB = v1.memorySizeMB;
  std::snprintf(info->name, sizeof info->name, "MIG %s", p->name);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t device, unsigned int profile_id, nvmlGpuInstancePlacement_t* placements,
    unsigned int* count) {
  FG_GI_CALL(device, profile_id, count, idx, p);
  std::vector<nvmlGpuInstancePlacement_t> all;
  for (const fakegpu::GiPlacement& at : fakegpu::PossiblePlacements(*p))
    all.push_back({at.start, at.size});
  return CopyList(all, placements, count, true);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device,
                                                                      unsigned int profile_id,
                                                                      unsigned int* count) {
  FG_GI_CALL(device, profile_id, count, idx, p);
  const MigRec m = S().Mig(idx);
  const unsigned live = LiveOfProfile(m, p->profile);
  *count = live >= p->instances
               ? 0
               : std::min(p->instances - live, FreePlacements(*p, OccupiedSlices(m)));
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device,
                                                        unsigned int profile_id,
                                                        nvmlGpuInstance_t* gi) {
  FG_GI_CALL(device, profile_id, gi, idx, p);
  return CreateGi(idx, *p, -1, gi);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t device, unsigned int profile_id, const nvmlGpuInstancePlacement_t* placement,
    nvmlGpuInstance_t* gi) {
  FG_GI_CALL(device, profile_id, gi, idx, p);
  if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (placement->size != p->size || placement->start >= fakegpu::kMigMemorySlices)
    return NVML_ERROR_INVALID_ARGUMENT;
  return CreateGi(idx, *p, static_cast<int>(placement->start), gi);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) {
  FG_ENTRY();
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (!LiveGi(gi, &dev, &rec)) return NVML_ERROR_INVALID_ARGUMENT;
  return S().UpdateMig(dev, [&](MigRec* m) -> int {
    GiRec& g = m->gis[gi->id];
    if (!g.live) return NVML_ERROR_INVALID_ARGUMENT;
    for (const CiRec& ci : g.cis)
      if (ci.live) return NVML_ERROR_IN_USE;
    std::memset(&g, 0, sizeof g);
    return NVML_SUCCESS;
  });
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile_id,
                                                      nvmlGpuInstance_t* gis, unsigned int* count) {
  FG_GI_CALL(device, profile_id, count, idx, p);
  const MigRec m = S().Mig(idx);
  std::vector<nvmlGpuInstance_t> live;
  for (int id = 0; id < fakegpu::kMaxGpuInstances; ++id)
    if (m.gis[id].live && m.gis[id].profile == p->profile) live.push_back(&G().gis[idx][id]);
  return CopyList(live, gis, count, false);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                         nvmlGpuInstance_t* gi) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (gi == nullptr || id >= static_cast<unsigned>(fakegpu::kMaxGpuInstances))
    return NVML_ERROR_INVALID_ARGUMENT;
  const MigRec m = S().Mig(idx);
  if (!m.capable || !m.enabled) return NVML_ERROR_NOT_SUPPORTED;
  if (!m.gis[id].live) return NVML_ERROR_NOT_FOUND;
  *gi = &G().gis[idx][id];
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi,
                                                   nvmlGpuInstanceInfo_t* info) {
  FG_ENTRY();
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (info == nullptr || !LiveGi(gi, &dev, &rec)) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = Handle(dev);
  info->id = static_cast<unsigned>(gi->id);
  info->profileId = ProfileOfRec(dev, rec).id;
  info->placement = {rec.start, rec.size};
  return NVML_SUCCESS;
}

static nvmlReturn_t CiProfileInfo(nvmlGpuInstance_t gi, unsigned profile, unsigned engine,
                                  nvmlComputeInstanceProfileInfo_t* info, const GiProfile** gp) {
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (info == nullptr || !LiveGi(gi, &dev, &rec)) return NVML_ERROR_INVALID_ARGUMENT;
  if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
      engine != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    return NVML_ERROR_INVALID_ARGUMENT;
  *gp = &ProfileOfRec(dev, rec);
  if (!CiSupported(profile, (*gp)->slices)) return NVML_ERROR_NOT_SUPPORTED;
  FillCiProfile(**gp, profile, info);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t gi, unsigned int profile, unsigned int engine,
    nvmlComputeInstanceProfileInfo_t* info) {
  FG_ENTRY();
  const GiProfile* gp = nullptr;
  return CiProfileInfo(gi, profile, engine, info, &gp);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gi, unsigned int profile, unsigned int engine,
    nvmlComputeInstanceProfileInfo_v2_t* info) {
  FG_ENTRY();
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlComputeInstanceProfileInfo_v2)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlComputeInstanceProfileInfo_t v1;
  const GiProfile* gp = nullptr;
  if (nvmlReturn_t rc = CiProfileInfo(gi, profile, engine, &v1, &gp); rc != NVML_SUCCESS) return rc;
  std::memcpy(&info->id, &v1, sizeof v1);
  std::snprintf(info->name, sizeof info->name, "MIG %s",
                MigProfileName(*gp, CiSlices(profile)).c_str());
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    nvmlGpuInstance_t gi, unsigned int profile, unsigned int* count) {
  FG_ENTRY();
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (count == nullptr || !LiveGi(gi, &dev, &rec)) return NVML_ERROR_INVALID_ARGUMENT;
  const GiProfile& gp = ProfileOfRec(dev, rec);
  if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  if (!CiSupported(profile, gp.slices)) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned c = CiSlices(profile);
  const uint32_t used = UsedComputeSlices(rec);
  unsigned n = 0;
  for (unsigned s = 0; s + c <= gp.slices; s += c) n += (used & SliceMask(s, c)) == 0 ? 1 : 0;
  *count = n;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi,
                                                                 unsigned int profile,
                                                                 nvmlComputeInstance_t* ci) {
  FG_ENTRY();
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (ci == nullptr || !LiveGi(gi, &dev, &rec)) return NVML_ERROR_INVALID_ARGUMENT;
  if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  return CreateCi(dev, gi->id, profile, ci);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) {
  FG_ENTRY();
  FG_NEED_INIT();
  CiView v;
  if (!LiveCi(ci, &v)) return NVML_ERROR_INVALID_ARGUMENT;
  return S().UpdateMig(v.dev, [&](MigRec* m) -> int {
    CiRec& r = m->gis[v.gi].cis[v.ci];
    if (!r.live) return NVML_ERROR_INVALID_ARGUMENT;
    std::memset(&r, 0, sizeof r);
    return NVML_SUCCESS;
  });
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi,
                                                               unsigned int profile,
                                                               nvmlComputeInstance_t* cis,
                                                               unsigned int* count) {
  FG_ENTRY();
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (count == nullptr || !LiveGi(gi, &dev, &rec)) return NVML_ERROR_INVALID_ARGUMENT;
  if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  if (!CiSupported(profile, ProfileOfRec(dev, rec).slices)) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<nvmlComputeInstance_t> live;
  for (int id = 0; id < fakegpu::kMaxComputeInstances; ++id)
    if (rec.cis[id].live && rec.cis[id].profile == profile)
      live.push_back(&G().cis[dev][gi->id][id]);
  return CopyList(live, cis, count, false);
}

FAKEGPU_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi,
                                                                  unsigned int id,
                                                                  nvmlComputeInstance_t* ci) {
  FG_ENTRY();
  FG_NEED_INIT();
  int dev = 0;
  GiRec rec;
  if (ci == nullptr || !LiveGi(gi, &dev, &rec) ||
      id >= static_cast<unsigned>(fakegpu::kMaxComputeInstances))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!rec.cis[id].live) return NVML_ERROR_NOT_FOUND;
  *ci = &G().cis[dev][gi->id][id];
  return NVML_SUCCESS;
}

static nvmlReturn_t CiInfo(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t* info) {
  FG_NEED_INIT();
  CiView v;
  if (info == nullptr || !LiveCi(ci, &v)) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = Handle(v.dev);
  info->gpuInstance = &G().gis[v.dev][v.gi];
  info->id = static_cast<unsigned>(v.ci);
  info->profileId = v.ci_rec.profile;
  info->placement = {v.ci_rec.start, v.ci_rec.size};
  return NVML_SUCCESS;
}

FG_NV(nvmlComputeInstanceGetInfo_v2, (nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t* info),
      CiInfo(ci, info))

FG_NV(nvmlComputeInstanceGetInfo, (nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t* info),
      CiInfo(ci, info))

// ----------------------------------------------------------------------------------------------
// Attributes, modes

static nvmlReturn_t Attributes(nvmlDevice_t device, nvmlDeviceAttributes_t* a) {
  FG_NEED_INIT();
  if (a == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  CiView v;
  if (LiveMigDevice(device, &v)) {
    const GiProfile& gp = ProfileOfRec(v.dev, v.gi_rec);
    *a = nvmlDeviceAttributes_t{gp.sms * v.ci_rec.size / gp.slices,
                                gp.copy_engines,
                                gp.decoders,
                                gp.encoders,
                                gp.jpegs,
                                gp.ofas,
                                gp.slices,
                                v.ci_rec.size,
                                gp.memory_mib};
    return NVML_SUCCESS;
  }
  FG_DEVICE(device, idx);
  *a = nvmlDeviceAttributes_t{Dev(idx).sms, 7, 5, 0, 1, 1, 0, 0, Dev(idx).total_bytes >> 20};
  return NVML_SUCCESS;
}

FG_NV(nvmlDeviceGetAttributes_v2, (nvmlDevice_t device, nvmlDeviceAttributes_t* a),
      Attributes(device, a))

FG_NV(nvmlDeviceGetAttributes, (nvmlDevice_t device, nvmlDeviceAttributes_t* a),
      Attributes(device, a))

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                               int* minor) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  fakegpu::ComputeCapability(Dev(idx).name, major, minor);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int* multi) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (multi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *multi = 0;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetBoardId(nvmlDevice_t device, unsigned int* board) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (board == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *board = Bus(idx) << 8;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                         nvmlEnableState_t* mode) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = 0;
  return NVML_SUCCESS;
}

// ----------------------------------------------------------------------------------------------
// Sensors

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                     nvmlTemperatureSensors_t sensor,
                                                     unsigned int* temp) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (temp == nullptr || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = 40;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t* t) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (t == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (t->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (t->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  t->temperature = 40;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *power = 70000 + 2000 * UtilPercent(idx);
  return NVML_SUCCESS;
}

// ECC counters: GeForce boards have no ECC (NOT_SUPPORTED, as the real driver says); the others
// report fixed counts, different per error type (0 corrected, 1 uncorrected) and counter type
// (0 volatile, 1 aggregate), so a caller that mixes them up reads the wrong number.
FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type,
                                                        int counter_type,
                                                        unsigned long long* count) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (count == nullptr || error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (strstr(Dev(idx).name, "GeForce") != nullptr) return NVML_ERROR_NOT_SUPPORTED;
  static constexpr unsigned long long kCounts[2][2] = {{1, 0}, {4, 1}};  // [counter][error]
  *count = kCounts[counter_type][error_type];
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
                                                            unsigned int* limit) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *limit = 400000;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                              unsigned int* limit) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *limit = 400000;
  return NVML_SUCCESS;
}

static nvmlReturn_t Clock(nvmlDevice_t device, nvmlClockType_t type, unsigned* clock) {
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
      *clock = 1410;
      return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
      *clock = 1593;
      return NVML_SUCCESS;
    case NVML_CLOCK_VIDEO:
      *clock = 1275;
      return NVML_SUCCESS;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

FG_NV(nvmlDeviceGetClockInfo, (nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock),
      Clock(device, type, clock))

FG_NV(nvmlDeviceGetMaxClockInfo, (nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock),
      Clock(device, type, clock))

// ----------------------------------------------------------------------------------------------
// Events

FAKEGPU_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto* es = new EventSet();
  es->cursor = S().XidSeq();
  std::lock_guard<std::mutex> lock(G().mu);
  G().sets.insert(es);
  *set = reinterpret_cast<nvmlEventSet_t>(es);
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  FG_ENTRY();
  FG_NEED_INIT();
  EventSet* es = reinterpret_cast<EventSet*>(set);
  {
    std::lock_guard<std::mutex> lock(G().mu);
    if (es == nullptr || G().sets.erase(es) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  }
  delete es;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                             unsigned long long* types) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  if (types == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *types = kSupportedEvents;
  return NVML_SUCCESS;
}

FAKEGPU_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                                     nvmlEventSet_t set) {
  FG_ENTRY();
  FG_NEED_INIT();
  FG_DEVICE(device, idx);
  EventSet* es = reinterpret_cast<EventSet*>(set);
  {
    std::lock_guard<std::mutex> lock(G().mu);
    if (es == nullptr || G().sets.count(es) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (types & ~kSupportedEvents) return NVML_ERROR_NOT_SUPPORTED;
  uint64_t seq = S().XidSeq();
  std::lock_guard<std::mutex> lock(es->mu);
  es->regs.push_back({idx, types, seq});
  return NVML_SUCCESS;
}

FG_NV(nvmlEventSetWait_v2, (nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms),
      EventWaitImpl(set, data, timeout_ms, true))

// The original nvmlEventData_t ends after eventData: the instance ids are not written.
FG_NV(nvmlEventSetWait, (nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms),
      EventWaitImpl(set, data, timeout_ms, false))

// ---- Test hook

FAKEGPU_EXPORT void fakegpu_nvml_reset(void) {
  {
    std::lock_guard<std::mutex> lock(G().mu);
    G().init_count = 0;
    G().xid_done.clear();
    for (EventSet* es : G().sets) delete es;
    G().sets.clear();
  }
  fakegpu::ResetRuntime();
}
