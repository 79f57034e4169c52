// Fake libcuda.so.1: CUDA driver API entry points over the simulated devices of
// fakes/shared_state.h. Contract and semantics: fakes/README.md. Handles are process-local heap
// objects that are never freed (destroyed ones are only marked), so a stale handle is rejected
// instead of dereferenced after free.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fakes/cuda_abi.h"
#include "fakes/fake_gpu.h"
#include "fakes/runtime.h"

using fakegpu::GetRuntime;
using fakegpu::MonoNs;

namespace {

struct Ctx;
struct Graph;

struct Stream {
  Ctx* ctx = nullptr;
  uint64_t last_end = 0;
  Graph* capture = nullptr;
  bool destroyed = false;
};

struct Ctx {
  int dev = 0;  // NVML index
  bool primary = false;
  bool destroyed = false;
  unsigned flags = 0;
  uint64_t last_end = 0;
  Stream default_stream;
};

struct Event {
  unsigned flags = 0;
  bool recorded = false;
  bool destroyed = false;
  uint64_t t = 0;
};

struct Function {
  std::string name;
};

struct Module {
  bool destroyed = false;
  std::map<std::string, std::unique_ptr<Function>> funcs;
};

struct KernelNode {
  unsigned gx, gy, gz;
};

// A graph memory allocation node: `bytes` on NVML device `dev`, taken when the graph is launched
// and kept (the fake has no free nodes: like an allocation the graph does not free) until the
// process exits.
struct MemAllocNode {
  int dev;
  uint64_t bytes;
};

struct Graph {
  std::vector<KernelNode> nodes;
  std::vector<MemAllocNode> mem;
  bool destroyed = false;
};

struct GraphExec {
  std::vector<KernelNode> nodes;
  std::vector<MemAllocNode> mem;
  bool destroyed = false;
};

enum class AllocKind { kDevice, kReservation };

struct Alloc {
  int dev;
  uint64_t size;
  AllocKind kind;
  Ctx* ctx;
  uint64_t charged;  // device-resident bytes (managed memory: the rest lives in host memory)
  bool managed;      // paged managed memory: `charged` is resident managed memory (SharedState)
};

struct Phys {
  int dev;
  uint64_t size;
  bool released;  // every reference (the creation's and each retain's) released
  int maps;
  int refs = 1;
};

struct Mapping {
  uint64_t size;
  uint64_t handle;
};

struct ArrayObj {
  int dev;
  uint64_t bytes;
  Ctx* ctx;
  bool destroyed = false;
};

struct Primary {
  Ctx* ctx = nullptr;
  int refs = 0;
  unsigned flags = 0;
};

constexpr uint64_t kVaBase = 0x700000000000ULL;
constexpr uint64_t kVaWindow = 1ULL << 41;
constexpr uint64_t kGranularity = 2ULL << 20;

struct Globals {
  std::mutex mu;
  bool initialized = false;
  std::vector<int> visible;  // CUDA ordinal -> NVML index
  Primary primaries[fakegpu::kMaxDevices];
  std::vector<std::unique_ptr<Ctx>> ctx_store;
  std::vector<std::unique_ptr<Stream>> stream_store;
  // Events are freed on destroy (apps churn them); a stale handle is rejected by `live` before any
  // use.
  std::unordered_map<const Event*, std::unique_ptr<Event>> event_store;
  std::vector<std::unique_ptr<Module>> module_store;
  std::vector<std::unique_ptr<Graph>> graph_store;
  std::vector<std::unique_ptr<GraphExec>> exec_store;
  std::vector<std::unique_ptr<ArrayObj>> array_store;
  std::unordered_set<const void*> live;  // every live handle of any kind
  std::map<uint64_t, Alloc> allocs;      // device VA ranges by start
  std::map<uint64_t, Phys> phys;         // cuMemCreate handles
  std::map<uint64_t, Mapping> mappings;  // cuMemMap'ed ranges by start
  uint64_t next_phys = 1;
  uint64_t va_next[fakegpu::kMaxDevices] = {};
  char pool_tokens[fakegpu::kMaxDevices] = {};
};

Globals& G() {
  static Globals* g = new Globals();  // leaked on purpose: usable from atexit handlers of the host
  return *g;
}

thread_local std::vector<Ctx*> t_ctx_stack;

#define FG_ENTRY()                                                \
  do {                                                            \
    if (int fault_ = fakegpu::FaultCode(__func__)) return fault_; \
  } while (0)

#define FG_NEED_INIT()                                                                           \
  do {                                                                                           \
    if (!__atomic_load_n(&G().initialized, __ATOMIC_ACQUIRE)) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

// An exported entry point whose whole body is one call after the fault and init checks.
#define FG_CU(name, params, call)       \
  FAKEGPU_EXPORT CUresult name params { \
    FG_ENTRY();                         \
    FG_NEED_INIT();                     \
    return call;                        \
  }

template <typename T>
bool Live(const T* p) {
  return p != nullptr && G().live.count(p) != 0 && !p->destroyed;
}

bool ValidOrdinal(CUdevice d) {
  return d >= 0 && d < static_cast<int>(G().visible.size());
}
int NvmlIndex(CUdevice d) {
  return G().visible[d];
}
const fakegpu::DeviceRec& Dev(int nvml) {
  return GetRuntime().state->dev(nvml);
}

Ctx* CurrentCtx() {
  return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
}

// Under G().mu. Resolves the stream argument to a live stream object of a live context.
CUresult ResolveStream(CUstream h, Stream** out) {
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Ctx* c = CurrentCtx();
    if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *out = &c->default_stream;
    return CUDA_SUCCESS;
  }
  Stream* s = reinterpret_cast<Stream*>(h);
  if (!Live(s) || !Live(s->ctx)) return CUDA_ERROR_INVALID_HANDLE;
  *out = s;
  return CUDA_SUCCESS;
}

// Under G().mu: a free device VA range of `size` (aligned) in the device's window, or 0.
uint64_t AllocVa(int dev, uint64_t size, uint64_t align) {
  Globals& g = G();
  uint64_t base = kVaBase + static_cast<uint64_t>(dev) * kVaWindow, end = base + kVaWindow;
  if (size == 0 || size > kVaWindow / 2) return 0;
  if (g.va_next[dev] < base) g.va_next[dev] = base;
  auto round = [align](uint64_t v) { return (v + align - 1) / align * align; };
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t cur = round(pass == 0 ? g.va_next[dev] : base);
    while (cur + size <= end) {
      auto it = g.allocs.upper_bound(cur);
      if (it != g.allocs.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second.size > cur) {
          cur = round(prev->first + prev->second.size);
          continue;
        }
      }
      if (it != g.allocs.end() && it->first < cur + size) {
        cur = round(it->first + it->second.size);
        continue;
      }
      g.va_next[dev] = cur + size;
      return cur;
    }
  }
  return 0;
}

// Gives back what an allocation holds on the device.
void UnchargeAlloc(const Alloc& a) {
  if (a.managed) {
    GetRuntime().state->UnchargeManaged(a.dev, a.charged);
  } else {
    GetRuntime().state->Uncharge(a.dev, a.charged);
  }
}

// Allocates memory for the current context. Device memory (`managed_flags` 0) fails when it does
// not fit. Managed memory (CU_MEM_ATTACH_GLOBAL 1 / HOST 2) on a GPU that pages it (compute
// capability 6.0+): as much as fits is device-resident (GLOBAL: as if the GPU touched it first;
// HOST: nothing until then), the rest lives in host memory, and any device allocation may page it
// out again (SharedState::Charge); never out of device memory. On older GPUs managed memory is all
// on the device and fails when it does not fit. Takes G().mu.
CUresult DeviceAlloc(CUdeviceptr* dptr, uint64_t bytes, int forced_dev = -1,
                     unsigned managed_flags = 0) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  Ctx* c = CurrentCtx();
  if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  int dev = forced_dev >= 0 ? forced_dev : c->dev;
  uint64_t rounded = (bytes + 511) / 512 * 512;
  uint64_t va = AllocVa(dev, rounded, 512);
  if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  fakegpu::SharedState& s = *GetRuntime().state;
  const bool paged = managed_flags != 0 && fakegpu::PagesManagedMemory(Dev(dev).name);
  uint64_t charged = rounded;
  if (!paged) {
    if (!s.Charge(dev, rounded)) return CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    charged = managed_flags == CU_MEM_ATTACH_GLOBAL ? s.ChargeManaged(dev, rounded) : 0;
  }
  g.allocs[va] = Alloc{dev, rounded, AllocKind::kDevice, c, charged, paged};
  *dptr = va;
  return CUDA_SUCCESS;
}

CUresult DeviceFree(CUdeviceptr p) {
  if (p == 0) return CUDA_SUCCESS;
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.allocs.find(p);
  if (it == g.allocs.end() || it->second.kind != AllocKind::kDevice)
    return CUDA_ERROR_INVALID_VALUE;
  UnchargeAlloc(it->second);
  g.allocs.erase(it);
  return CUDA_SUCCESS;
}

// Under G().mu: frees everything owned by a context being destroyed and its overhead.
void DestroyCtxLocked(Ctx* c) {
  Globals& g = G();
  fakegpu::SharedState& s = *GetRuntime().state;
  for (auto it = g.allocs.begin(); it != g.allocs.end();) {
    if (it->second.ctx == c && it->second.kind == AllocKind::kDevice) {
      UnchargeAlloc(it->second);
      it = g.allocs.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& a : g.array_store) {
    if (a->ctx == c && !a->destroyed) {
      s.Uncharge(a->dev, a->bytes);
      a->destroyed = true;
    }
  }
  s.Uncharge(c->dev, GetRuntime().cfg.ctx_overhead_mib << 20);
  s.AddContext(c->dev, -1);
  c->destroyed = true;
}

// Under G().mu: a new context on NVML device `dev`, charged its overhead.
CUresult NewCtxLocked(int dev, bool primary, unsigned flags, Ctx** out) {
  fakegpu::SharedState& s = *GetRuntime().state;
  if (!s.Charge(dev, GetRuntime().cfg.ctx_overhead_mib << 20)) return CUDA_ERROR_OUT_OF_MEMORY;
  s.AddContext(dev, +1);
  auto c = std::make_unique<Ctx>();
  c->dev = dev;
  c->primary = primary;
  c->flags = flags;
  c->default_stream.ctx = c.get();
  Ctx* raw = c.get();
  G().live.insert(raw);
  G().live.insert(&raw->default_stream);
  G().ctx_store.push_back(std::move(c));
  *out = raw;
  return CUDA_SUCCESS;
}

uint64_t KernelNs(int dev, unsigned gx, unsigned gy, unsigned gz) {
  uint64_t blocks = static_cast<uint64_t>(gx) * gy * gz;
  uint64_t sms = Dev(dev).sms;
  uint64_t waves = (blocks + sms - 1) / sms;
  return waves * GetRuntime().cfg.wave_us * 1000;
}

CUresult LaunchImpl(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                    unsigned bz, CUstream h) {
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<uint64_t>(bx) * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  Globals& g = G();
  Stream* s = nullptr;
  int dev = 0;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (f == nullptr || g.live.count(f) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult rc = ResolveStream(h, &s)) return rc;
    if (s->capture != nullptr) {
      s->capture->nodes.push_back({gx, gy, gz});
      return CUDA_SUCCESS;
    }
    dev = s->ctx->dev;
  }
  const fakegpu::Config& cfg = GetRuntime().cfg;
  uint64_t end =
      GetRuntime().state->Launch(dev, KernelNs(dev, gx, gy, gz), cfg.max_backlog_us * 1000);
  std::lock_guard<std::mutex> lock(g.mu);
  s->last_end = std::max(s->last_end, end);
  s->ctx->last_end = std::max(s->ctx->last_end, end);
  return CUDA_SUCCESS;
}

CUresult StreamSyncImpl(CUstream h) {
  uint64_t until = 0;
  {
    std::lock_guard<std::mutex> lock(G().mu);
    Stream* s = nullptr;
    if (CUresult rc = ResolveStream(h, &s)) return rc;
    if (s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    // The legacy default stream synchronises with all work of its context.
    until = (s == &s->ctx->default_stream) ? s->ctx->last_end : s->last_end;
  }
  fakegpu::SleepUntilMono(until);
  return CUDA_SUCCESS;
}

CUresult StreamQueryImpl(CUstream h) {
  std::lock_guard<std::mutex> lock(G().mu);
  Stream* s = nullptr;
  if (CUresult rc = ResolveStream(h, &s)) return rc;
  uint64_t until = (s == &s->ctx->default_stream) ? s->ctx->last_end : s->last_end;
  return MonoNs() >= until ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult StreamWaitEventImpl(CUstream h, CUevent e, unsigned flags) {
  std::lock_guard<std::mutex> lock(G().mu);
  Stream* s = nullptr;
  if (CUresult rc = ResolveStream(h, &s)) return rc;
  Event* ev = reinterpret_cast<Event*>(e);
  if (!Live(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->recorded) s->last_end = std::max(s->last_end, ev->t);
  return CUDA_SUCCESS;
}

CUresult EventRecordImpl(CUevent e, CUstream h) {
  std::lock_guard<std::mutex> lock(G().mu);
  Event* ev = reinterpret_cast<Event*>(e);
  if (!Live(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult rc = ResolveStream(h, &s)) return rc;
  if (s->capture != nullptr)
    return CUDA_SUCCESS;  // becomes an event node; no timing in the fake graph
  uint64_t work = (s == &s->ctx->default_stream) ? s->ctx->last_end : s->last_end;
  ev->t = std::max(work, MonoNs());
  ev->recorded = true;
  return CUDA_SUCCESS;
}

CUresult BeginCaptureImpl(CUstream h) {
  std::lock_guard<std::mutex> lock(G().mu);
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Stream* s = nullptr;
  if (CUresult rc = ResolveStream(h, &s)) return rc;
  if (s->capture != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  auto gr = std::make_unique<Graph>();
  s->capture = gr.get();
  G().live.insert(gr.get());
  G().graph_store.push_back(std::move(gr));
  return CUDA_SUCCESS;
}

CUresult EndCaptureImpl(CUstream h, CUgraph* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Stream* s = nullptr;
  if (CUresult rc = ResolveStream(h, &s)) return rc;
  if (s->capture == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  *out = reinterpret_cast<CUgraph>(s->capture);
  s->capture = nullptr;
  return CUDA_SUCCESS;
}

CUresult IsCapturingImpl(CUstream h, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Stream* s = nullptr;
  if (CUresult rc = ResolveStream(h, &s)) return rc;
  *status = s->capture != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult GraphLaunchImpl(CUgraphExec e, CUstream h) {
  std::vector<KernelNode> nodes;
  {
    std::lock_guard<std::mutex> lock(G().mu);
    GraphExec* x = reinterpret_cast<GraphExec*>(e);
    if (!Live(x)) return CUDA_ERROR_INVALID_HANDLE;
    Stream* s = nullptr;
    if (CUresult rc = ResolveStream(h, &s)) return rc;
    if (s->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    for (size_t i = 0; i < x->mem.size(); ++i) {  // the graph's allocations
      if (!GetRuntime().state->Charge(x->mem[i].dev, x->mem[i].bytes)) {
        while (i-- > 0) GetRuntime().state->Uncharge(x->mem[i].dev, x->mem[i].bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
    nodes = x->nodes;
  }
  static Function graph_fn;  // graph nodes carry their own dims; any live function handle will do
  {
    std::lock_guard<std::mutex> lock(G().mu);
    G().live.insert(&graph_fn);
  }
  for (const KernelNode& n : nodes) {
    if (CUresult rc =
            LaunchImpl(reinterpret_cast<CUfunction>(&graph_fn), n.gx, n.gy, n.gz, 1, 1, 1, h))
      return rc;
  }
  return CUDA_SUCCESS;
}

CUresult AllocAsyncImpl(CUdeviceptr* dptr, size_t bytes, CUstream h) {
  {
    std::lock_guard<std::mutex> lock(G().mu);
    Stream* s = nullptr;
    if (CUresult rc = ResolveStream(h, &s)) return rc;
  }
  return DeviceAlloc(dptr, bytes);
}

CUresult FreeAsyncImpl(CUdeviceptr p, CUstream h) {
  {
    std::lock_guard<std::mutex> lock(G().mu);
    Stream* s = nullptr;
    if (CUresult rc = ResolveStream(h, &s)) return rc;
  }
  if (p == 0) return CUDA_ERROR_INVALID_VALUE;
  return DeviceFree(p);
}

CUresult AllocFromPoolImpl(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream h) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char* tok = reinterpret_cast<const char*>(pool);
  int dev = static_cast<int>(tok - G().pool_tokens);
  if (dev < 0 || dev >= fakegpu::kMaxDevices || dev >= GetRuntime().state->num_devices()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  {
    std::lock_guard<std::mutex> lock(G().mu);
    Stream* s = nullptr;
    if (CUresult rc = ResolveStream(h, &s)) return rc;
  }
  return DeviceAlloc(dptr, bytes, dev);
}

// Validates a device address range for copies and memsets.
CUresult CheckDevicePtr(CUdeviceptr p, size_t bytes) {
  if (p == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  auto it = G().allocs.upper_bound(p);
  if (it == G().allocs.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (p + bytes > it->first + it->second.size) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CopyImpl(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  if (dst != 0 && CheckDevicePtr(dst, n) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  if (src != 0 && CheckDevicePtr(src, n) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

struct ErrorRow {
  int code;
  const char* name;
  const char* text;
};
const ErrorRow kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using external profiling tool"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "call requires newer driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
    {205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture"},
    {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
     "exclusive-thread device already in use by a different thread"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
     "the provided execution affinity is not supported"},
    {226, "CUDA_ERROR_CONTAINED", "an error was contained"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED",
     "MPS client failed to connect to the MPS control daemon or the MPS server"},
    {807, "CUDA_ERROR_MPS_SERVER_NOT_READY",
     "the MPS server is not ready to accept new MPS client requests"},
    {808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
     "the hardware resources required to create MPS client have been exhausted"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {909, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated constraints "
     "specific to instantiated graph update"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
    {913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "function not loaded"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorRow* FindError(CUresult e) {
  for (const ErrorRow& r : kErrors) {
    if (r.code == e) return &r;
  }
  return nullptr;
}

uint64_t ArrayBytes(size_t w, size_t h, size_t d, int format, unsigned channels) {
  uint64_t elem = 0;
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      elem = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      elem = 2;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      elem = 4;
      break;
    default:
      return 0;
  }
  if (w == 0 || (channels != 1 && channels != 2 && channels != 4)) return 0;
  return static_cast<uint64_t>(w) * std::max<size_t>(h, 1) * std::max<size_t>(d, 1) * elem *
         channels;
}

CUresult ArrayCreateImpl(CUarray* out, uint64_t bytes) {
  if (out == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Ctx* c = CurrentCtx();
  if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t rounded = (bytes + 511) / 512 * 512;
  if (!GetRuntime().state->Charge(c->dev, rounded)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto a = std::make_unique<ArrayObj>();
  a->dev = c->dev;
  a->bytes = rounded;
  a->ctx = c;
  *out = reinterpret_cast<CUarray>(a.get());
  G().live.insert(a.get());
  G().array_store.push_back(std::move(a));
  return CUDA_SUCCESS;
}

CUresult CtxCreateImpl(CUcontext* pctx, unsigned flags, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Ctx* c = nullptr;
  if (CUresult rc = NewCtxLocked(NvmlIndex(dev), false, flags, &c)) return rc;
  t_ctx_stack.push_back(c);
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

CUresult CtxDestroyImpl(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(G().mu);
  Ctx* c = reinterpret_cast<Ctx*>(ctx);
  if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  DestroyCtxLocked(c);
  auto& st = t_ctx_stack;
  st.erase(std::remove(st.begin(), st.end(), c), st.end());
  return CUDA_SUCCESS;
}

CUresult PrimaryReleaseImpl(CUdevice dev) {
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Primary& p = G().primaries[NvmlIndex(dev)];
  if (p.refs <= 0 || p.ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (--p.refs == 0) {
    DestroyCtxLocked(p.ctx);
    p.ctx = nullptr;
  }
  return CUDA_SUCCESS;
}

CUresult PrimaryResetImpl(CUdevice dev) {
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Primary& p = G().primaries[NvmlIndex(dev)];
  if (p.ctx != nullptr) DestroyCtxLocked(p.ctx);
  p.ctx = nullptr;
  p.refs = 0;
  return CUDA_SUCCESS;
}

CUresult PrimarySetFlagsImpl(CUdevice dev, unsigned flags) {
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~0xFFu) return CUDA_ERROR_INVALID_VALUE;
  G().primaries[NvmlIndex(dev)].flags = flags;
  return CUDA_SUCCESS;
}

CUresult CtxGetDeviceImpl(CUdevice* device, Ctx* c) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  for (size_t i = 0; i < G().visible.size(); ++i) {
    if (G().visible[i] == c->dev) {
      *device = static_cast<CUdevice>(i);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_CONTEXT;
}

CUresult CtxSyncImpl(Ctx* c) {
  uint64_t until = 0;
  {
    std::lock_guard<std::mutex> lock(G().mu);
    if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    until = c->last_end;
  }
  fakegpu::SleepUntilMono(until);
  return CUDA_SUCCESS;
}

CUresult DeviceTotalMemImpl(uint64_t* bytes, CUdevice dev) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = Dev(NvmlIndex(dev)).total_bytes;
  return CUDA_SUCCESS;
}

CUresult MemGetInfoImpl(uint64_t* free_bytes, uint64_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  {
    std::lock_guard<std::mutex> lock(G().mu);
    Ctx* c = CurrentCtx();
    if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    dev = c->dev;
  }
  uint64_t total = Dev(dev).total_bytes;
  uint64_t used = GetRuntime().state->UsedBytes(dev, 0);
  *total_bytes = total;
  *free_bytes = used >= total ? 0 : total - used;
  return CUDA_SUCCESS;
}

CUresult UuidImpl(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  unsigned char b[16];
  fakegpu::UuidBytes(Dev(NvmlIndex(dev)).uuid, b);
  std::memcpy(uuid->bytes, b, 16);
  return CUDA_SUCCESS;
}

CUresult GetProcAddressImpl(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult* status);

}  // namespace

// ----------------------------------------------------------------------------------------------
// Exported entry points.

FAKEGPU_EXPORT CUresult cuInit(unsigned int flags) {
  FG_ENTRY();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fakegpu::Runtime& rt = GetRuntime();
  if (rt.cfg.init_fail) return CUDA_ERROR_NO_DEVICE;
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.initialized) {
    g.visible =
        fakegpu::VisibleDevices(std::getenv(FAKEGPU_ENV_CUDA_VISIBLE_DEVICES), rt.state->Uuids());
    if (g.visible.empty()) return CUDA_ERROR_NO_DEVICE;
    __atomic_store_n(&g.initialized, true, __ATOMIC_RELEASE);
  }
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDriverGetVersion(int* version) {
  FG_ENTRY();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = GetRuntime().cfg.cuda_version;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  FG_ENTRY();
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorRow* r = FindError(error);
  *str = r ? r->text : nullptr;
  return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKEGPU_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
  FG_ENTRY();
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorRow* r = FindError(error);
  *str = r ? r->name : nullptr;
  return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKEGPU_EXPORT CUresult cuGetExportTable(const void** table, const CUuuid* id) {
  FG_ENTRY();
  if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

FAKEGPU_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* status) {
  FG_ENTRY();
  return GetProcAddressImpl(symbol, pfn, cuda_version, flags, status);
}

FAKEGPU_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                         cuuint64_t flags) {
  FG_ENTRY();
  return GetProcAddressImpl(symbol, pfn, cuda_version, flags, nullptr);
}

// ---- Devices

FAKEGPU_EXPORT CUresult cuDeviceGetCount(int* count) {
  FG_ENTRY();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  *count = static_cast<int>(G().visible.size());
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FG_ENTRY();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  FG_ENTRY();
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", Dev(NvmlIndex(dev)).name);
  return CUDA_SUCCESS;
}

FG_CU(cuDeviceGetUuid, (CUuuid * uuid, CUdevice dev), UuidImpl(uuid, dev))

FG_CU(cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev), UuidImpl(uuid, dev))

FAKEGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  FG_ENTRY();
  FG_NEED_INIT();
  uint64_t b = 0;
  CUresult rc = DeviceTotalMemImpl(bytes ? &b : nullptr, dev);
  if (rc == CUDA_SUCCESS) *bytes = b;
  return rc;
}

FAKEGPU_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  FG_ENTRY();
  FG_NEED_INIT();
  uint64_t b = 0;
  CUresult rc = DeviceTotalMemImpl(bytes ? &b : nullptr, dev);
  if (rc == CUDA_SUCCESS) *bytes = static_cast<unsigned>(std::min<uint64_t>(b, 0xFFFFFFFFu));
  return rc;
}

FAKEGPU_EXPORT CUresult cuDeviceGetAttribute(int* pi, int attrib, CUdevice dev) {
  FG_ENTRY();
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  int idx = NvmlIndex(dev);
  const fakegpu::DeviceRec& d = Dev(idx);
  int major = 0, minor = 0;
  fakegpu::ComputeCapability(d.name, &major, &minor);
  int n = GetRuntime().state->num_devices();
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      v = 49152;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      v = 1410000;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      v = 1593000;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      v = static_cast<int>(d.sms);
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:  // pages managed memory on demand
      v = fakegpu::PagesManagedMemory(d.name) ? 1 : 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = 0x18 + 8 * idx;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      v = 5120;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      v = 40 << 20;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      v = 2048;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      v = 3;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      v = major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      v = minor;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      v = 167936;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      v = 166912;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      v = -1;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      v = idx < (n + 1) / 2 ? 0 : 1;
      break;
    default:
      v = 0;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  FG_ENTRY();
  if (bus_id == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus_id, static_cast<size_t>(len), "0000:%02X:00.0", 0x18 + 8 * NvmlIndex(dev));
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* bus_id) {
  FG_ENTRY();
  if (dev == nullptr || bus_id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  unsigned domain = 0, bus = 0, device = 0;
  if (std::sscanf(bus_id, "%x:%x:%x", &domain, &bus, &device) != 3) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < G().visible.size(); ++i) {
    if (domain == 0 && device == 0 && bus == static_cast<unsigned>(0x18 + 8 * G().visible[i])) {
      *dev = static_cast<CUdevice>(i);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

FAKEGPU_EXPORT CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  FG_ENTRY();
  if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(dev) || !ValidOrdinal(peer)) return CUDA_ERROR_INVALID_DEVICE;
  int a = NvmlIndex(dev), b = NvmlIndex(peer);
  bool linked = false;
  for (int p : Dev(a).nvlink_peer) linked = linked || p == b;
  *can = (a != b && (linked || a / 2 == b / 2)) ? 1 : 0;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  FG_ENTRY();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(&G().pool_tokens[NvmlIndex(dev)]);
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  FG_ENTRY();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(&G().pool_tokens[NvmlIndex(dev)]);
  return CUDA_SUCCESS;
}

// ---- Primary contexts

FAKEGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FG_ENTRY();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Primary& p = G().primaries[NvmlIndex(dev)];
  if (p.ctx == nullptr) {
    if (CUresult rc = NewCtxLocked(NvmlIndex(dev), true, p.flags, &p.ctx)) return rc;
  }
  ++p.refs;
  *pctx = reinterpret_cast<CUcontext>(p.ctx);
  return CUDA_SUCCESS;
}

FG_CU(cuDevicePrimaryCtxRelease, (CUdevice dev), PrimaryReleaseImpl(dev))

FG_CU(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), PrimaryReleaseImpl(dev))

FG_CU(cuDevicePrimaryCtxReset, (CUdevice dev), PrimaryResetImpl(dev))

FG_CU(cuDevicePrimaryCtxReset_v2, (CUdevice dev), PrimaryResetImpl(dev))

FG_CU(cuDevicePrimaryCtxSetFlags, (CUdevice dev, unsigned flags), PrimarySetFlagsImpl(dev, flags))

FG_CU(cuDevicePrimaryCtxSetFlags_v2, (CUdevice dev, unsigned flags),
      PrimarySetFlagsImpl(dev, flags))

FAKEGPU_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned* flags, int* active) {
  FG_ENTRY();
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const Primary& p = G().primaries[NvmlIndex(dev)];
  *flags = p.flags;
  *active = p.ctx != nullptr ? 1 : 0;
  return CUDA_SUCCESS;
}

// ---- Contexts

FG_CU(cuCtxCreate, (CUcontext * pctx, unsigned flags, CUdevice dev),
      CtxCreateImpl(pctx, flags, dev))

FG_CU(cuCtxCreate_v2, (CUcontext * pctx, unsigned flags, CUdevice dev),
      CtxCreateImpl(pctx, flags, dev))

FAKEGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int num_params,
                                       unsigned flags, CUdevice dev) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (num_params < 0 || (num_params > 0 && params == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return CtxCreateImpl(pctx, flags, dev);
}

FAKEGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned flags,
                                       CUdevice dev) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (params != nullptr && params->execAffinityParams != nullptr && params->cigParams != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CtxCreateImpl(pctx, flags, dev);
}

FG_CU(cuCtxDestroy, (CUcontext ctx), CtxDestroyImpl(ctx))

FG_CU(cuCtxDestroy_v2, (CUcontext ctx), CtxDestroyImpl(ctx))

// A green context is a context of its own (charged its overhead), never made current. Resources are
// not modelled: any descriptor is accepted; CU_GREEN_CTX_DEFAULT_STREAM (1) is required, as by the
// driver.
FAKEGPU_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx* out, CUdevResourceDesc desc, CUdevice dev,
                                         unsigned flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (out == nullptr || desc == nullptr || flags != 1) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Ctx* c = nullptr;
  if (CUresult rc = NewCtxLocked(NvmlIndex(dev), false, 0, &c)) return rc;
  *out = reinterpret_cast<CUgreenCtx>(c);
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx h) {
  FG_ENTRY();
  FG_NEED_INIT();
  return CtxDestroyImpl(reinterpret_cast<CUcontext>(h));
}

FAKEGPU_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  FG_ENTRY();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  *pctx = reinterpret_cast<CUcontext>(CurrentCtx());
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  Ctx* c = reinterpret_cast<Ctx*>(ctx);
  if (c != nullptr && !Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
  if (c != nullptr) t_ctx_stack.push_back(c);
  return CUDA_SUCCESS;
}

#define FG_PUSH_POP(push_name, pop_name)                                          \
  FAKEGPU_EXPORT CUresult push_name(CUcontext ctx) {                              \
    FG_ENTRY();                                                                   \
    FG_NEED_INIT();                                                               \
    std::lock_guard<std::mutex> lock(G().mu);                                     \
    Ctx* c = reinterpret_cast<Ctx*>(ctx);                                         \
    if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;                              \
    t_ctx_stack.push_back(c);                                                     \
    return CUDA_SUCCESS;                                                          \
  }                                                                               \
  FAKEGPU_EXPORT CUresult pop_name(CUcontext* pctx) {                             \
    FG_ENTRY();                                                                   \
    FG_NEED_INIT();                                                               \
    if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;                   \
    if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(t_ctx_stack.back()); \
    t_ctx_stack.pop_back();                                                       \
    return CUDA_SUCCESS;                                                          \
  }
FG_PUSH_POP(cuCtxPushCurrent, cuCtxPopCurrent)
FG_PUSH_POP(cuCtxPushCurrent_v2, cuCtxPopCurrent_v2)

FG_CU(cuCtxGetDevice, (CUdevice * device), CtxGetDeviceImpl(device, CurrentCtx()))

FG_CU(cuCtxGetDevice_v2, (CUdevice * device, CUcontext ctx),
      CtxGetDeviceImpl(device, ctx ? reinterpret_cast<Ctx*>(ctx) : CurrentCtx()))

FG_CU(cuCtxSynchronize, (void), CtxSyncImpl(CurrentCtx()))

FG_CU(cuCtxSynchronize_v2, (CUcontext ctx),
      CtxSyncImpl(ctx ? reinterpret_cast<Ctx*>(ctx) : CurrentCtx()))

FAKEGPU_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned* version) {
  FG_ENTRY();
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  *version = 3020;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuCtxGetFlags(unsigned* flags) {
  FG_ENTRY();
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  Ctx* c = CurrentCtx();
  if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

// ---- Memory

FG_CU(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytes), DeviceAlloc(dptr, bytes))

FAKEGPU_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytes) {
  FG_ENTRY();
  FG_NEED_INIT();
  // 32-bit pointers cannot hold our addresses: the legacy ABI is reported as unsupported.
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

FAKEGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                           size_t height, unsigned elem) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + 511) / 512 * 512;
  if (height > SIZE_MAX / p) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = DeviceAlloc(dptr, p * height);
  if (rc == CUDA_SUCCESS) *pitch = p;
  return rc;
}

FAKEGPU_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned* pitch, unsigned width,
                                        unsigned height, unsigned elem) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (dptr == nullptr || pitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

FAKEGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return DeviceAlloc(dptr, bytes, -1, flags);
}

FG_CU(cuMemFree_v2, (CUdeviceptr p), DeviceFree(p))

FG_CU(cuMemFree, (CUdeviceptr_v1 p), p == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)

FAKEGPU_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  FG_ENTRY();
  FG_NEED_INIT();
  uint64_t f = 0, t = 0;
  CUresult rc = MemGetInfoImpl(free_bytes ? &f : nullptr, total_bytes ? &t : nullptr);
  if (rc == CUDA_SUCCESS) {
    *free_bytes = f;
    *total_bytes = t;
  }
  return rc;
}

FAKEGPU_EXPORT CUresult cuMemGetInfo(unsigned* free_bytes, unsigned* total_bytes) {
  FG_ENTRY();
  FG_NEED_INIT();
  uint64_t f = 0, t = 0;
  CUresult rc = MemGetInfoImpl(free_bytes ? &f : nullptr, total_bytes ? &t : nullptr);
  if (rc == CUDA_SUCCESS) {
    *free_bytes = static_cast<unsigned>(std::min<uint64_t>(f, 0xFFFFFFFFu));
    *total_bytes = static_cast<unsigned>(std::min<uint64_t>(t, 0xFFFFFFFFu));
  }
  return rc;
}

FAKEGPU_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  auto it = G().allocs.upper_bound(p);
  if (it == G().allocs.begin()) return CUDA_ERROR_NOT_FOUND;
  --it;
  if (p >= it->first + it->second.size) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = it->first;
  if (size) *size = it->second.size;
  return CUDA_SUCCESS;
}

#define FG_ASYNC_ALLOC(alloc_name, free_name, pool_name)                                \
  FAKEGPU_EXPORT CUresult alloc_name(CUdeviceptr* dptr, size_t bytes, CUstream h) {     \
    FG_ENTRY();                                                                         \
    FG_NEED_INIT();                                                                     \
    return AllocAsyncImpl(dptr, bytes, h);                                              \
  }                                                                                     \
  FAKEGPU_EXPORT CUresult free_name(CUdeviceptr p, CUstream h) {                        \
    FG_ENTRY();                                                                         \
    FG_NEED_INIT();                                                                     \
    return FreeAsyncImpl(p, h);                                                         \
  }                                                                                     \
  FAKEGPU_EXPORT CUresult pool_name(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, \
                                    CUstream h) {                                       \
    FG_ENTRY();                                                                         \
    FG_NEED_INIT();                                                                     \
    return AllocFromPoolImpl(dptr, bytes, pool, h);                                     \
  }
FG_ASYNC_ALLOC(cuMemAllocAsync, cuMemFreeAsync, cuMemAllocFromPoolAsync)
FG_ASYNC_ALLOC(cuMemAllocAsync_ptsz, cuMemFreeAsync_ptsz, cuMemAllocFromPoolAsync_ptsz)

FAKEGPU_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytes) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  *pp = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKEGPU_EXPORT CUresult cuMemAllocHost(void** pp, unsigned int bytes) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  *pp = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKEGPU_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (pp == nullptr || bytes == 0 || (flags & ~0xFu)) return CUDA_ERROR_INVALID_VALUE;
  *pp = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKEGPU_EXPORT CUresult cuMemFreeHost(void* p) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::free(p);
  return CUDA_SUCCESS;
}

// ---- Virtual memory management

FAKEGPU_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                      const CUmemAllocationProp* prop, int option) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (granularity == nullptr || prop == nullptr || (option != 0 && option != 1))
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                    const CUmemAllocationProp* prop, unsigned long long flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranularity != 0 || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(G().mu);
  if (!ValidOrdinal(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  int dev = NvmlIndex(prop->location.id);
  if (!GetRuntime().state->Charge(dev, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t h = G().next_phys++;
  G().phys[h] = Phys{dev, size, false, 0, 1};
  *handle = h;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  auto it = G().phys.find(handle);
  if (it == G().phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.refs > 0) return CUDA_SUCCESS;  // a retained reference remains
  it->second.released = true;
  if (it->second.maps == 0) {  // memory goes away once released and unmapped
    GetRuntime().state->Uncharge(it->second.dev, it->second.size);
    G().phys.erase(it);
  }
  return CUDA_SUCCESS;
}

// Another reference to the handle mapped at `addr` (one more cuMemRelease before it goes away).
FAKEGPU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                    void* addr) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  uint64_t a = reinterpret_cast<uint64_t>(addr);
  auto it = G().mappings.upper_bound(a);
  if (it == G().mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (a >= it->first + it->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto ph = G().phys.find(it->second.handle);
  if (ph == G().phys.end() || ph->second.released) return CUDA_ERROR_INVALID_VALUE;
  ++ph->second.refs;
  *handle = it->second.handle;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                            CUdeviceptr addr, unsigned long long flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (ptr == nullptr || size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  // Reservations live in the last device window, shared by all devices (unified addressing).
  int window = fakegpu::kMaxDevices - 1;
  uint64_t va = AllocVa(window, size, std::max<uint64_t>(alignment, kGranularity));
  if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
  G().allocs[va] = Alloc{window, size, AllocKind::kReservation, nullptr, 0, false};
  *ptr = va;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  auto it = G().allocs.find(ptr);
  if (it == G().allocs.end() || it->second.kind != AllocKind::kReservation ||
      it->second.size != size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  G().allocs.erase(it);
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle handle, unsigned long long flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (ptr == 0 || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  auto ph = G().phys.find(handle);
  if (ph == G().phys.end() || ph->second.released) return CUDA_ERROR_INVALID_HANDLE;
  if (offset + size > ph->second.size) return CUDA_ERROR_INVALID_VALUE;
  auto it = G().allocs.upper_bound(ptr);
  if (it == G().allocs.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (it->second.kind != AllocKind::kReservation || ptr + size > it->first + it->second.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto next = G().mappings.lower_bound(ptr);
  if (next != G().mappings.end() && next->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != G().mappings.begin() && std::prev(next)->first + std::prev(next)->second.size > ptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  G().mappings[ptr] = Mapping{size, handle};
  ++ph->second.maps;
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  auto it = G().mappings.find(ptr);
  if (it == G().mappings.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  auto ph = G().phys.find(it->second.handle);
  G().mappings.erase(it);
  if (ph != G().phys.end() && --ph->second.maps == 0 && ph->second.released) {
    GetRuntime().state->Uncharge(ph->second.dev, ph->second.size);
    G().phys.erase(ph);
  }
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                       size_t count) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (ptr == 0 || size == 0 || desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// ---- Arrays

FAKEGPU_EXPORT CUresult cuArrayCreate_v2(CUarray* h, const CUDA_ARRAY_DESCRIPTOR* d) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreateImpl(h, ArrayBytes(d->Width, d->Height, 0, d->Format, d->NumChannels));
}

FAKEGPU_EXPORT CUresult cuArrayCreate(CUarray* h, const CUDA_ARRAY_DESCRIPTOR_v1* d) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreateImpl(h, ArrayBytes(d->Width, d->Height, 0, d->Format, d->NumChannels));
}

FAKEGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray* h, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreateImpl(h, ArrayBytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels));
}

FAKEGPU_EXPORT CUresult cuArray3DCreate(CUarray* h, const CUDA_ARRAY3D_DESCRIPTOR_v1* d) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return ArrayCreateImpl(h, ArrayBytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels));
}

static CUresult ArrayDestroyImpl(void* h) {
  std::lock_guard<std::mutex> lock(G().mu);
  ArrayObj* a = static_cast<ArrayObj*>(h);
  if (!Live(a)) return CUDA_ERROR_INVALID_HANDLE;
  GetRuntime().state->Uncharge(a->dev, a->bytes);
  a->destroyed = true;
  return CUDA_SUCCESS;
}

FG_CU(cuArrayDestroy, (CUarray h), ArrayDestroyImpl(h))

FAKEGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* h,
                                               const CUDA_ARRAY3D_DESCRIPTOR* d,
                                               unsigned int levels) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (h == nullptr || d == nullptr || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t total = 0;
  size_t w = d->Width, ht = d->Height, dp = d->Depth;
  for (unsigned i = 0; i < levels; ++i) {  // each level halves every extent (at least 1)
    uint64_t b = ArrayBytes(w, ht, dp, d->Format, d->NumChannels);
    if (b == 0) return CUDA_ERROR_INVALID_VALUE;
    total += b;
    w = std::max<size_t>(1, w / 2);
    ht = ht ? std::max<size_t>(1, ht / 2) : 0;
    dp = dp ? std::max<size_t>(1, dp / 2) : 0;
  }
  CUarray a = nullptr;
  CUresult rc = ArrayCreateImpl(&a, total);
  if (rc == CUDA_SUCCESS) *h = reinterpret_cast<CUmipmappedArray>(a);
  return rc;
}

FG_CU(cuMipmappedArrayDestroy, (CUmipmappedArray h), ArrayDestroyImpl(h))

// ---- Copies and memsets (validate addresses; take no device time)

#define FG_COPY_SYNC(name)                                                   \
  FAKEGPU_EXPORT CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t n) { \
    FG_ENTRY();                                                              \
    FG_NEED_INIT();                                                          \
    return CopyImpl(dst, src, n);                                            \
  }
FG_COPY_SYNC(cuMemcpyDtoD_v2)
FG_COPY_SYNC(cuMemcpyDtoD_v2_ptds)

#define FG_COPY_ASYNC(name)                                                              \
  FAKEGPU_EXPORT CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { \
    FG_ENTRY();                                                                          \
    FG_NEED_INIT();                                                                      \
    return CopyImpl(dst, src, n);                                                        \
  }
FG_COPY_ASYNC(cuMemcpyDtoDAsync_v2)
FG_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz)

// Unified addressing: cuMemcpy accepts host or device pointers; device ones must be valid.
static CUresult UnifiedCopy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  auto is_dev = [](CUdeviceptr p) {
    return p >= kVaBase && p < kVaBase + fakegpu::kMaxDevices * kVaWindow;
  };
  return CopyImpl(is_dev(dst) ? dst : 0, is_dev(src) ? src : 0, n);
}
FG_CU(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), UnifiedCopy(dst, src, n))
FG_CU(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), UnifiedCopy(dst, src, n))
FG_CU(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
      UnifiedCopy(dst, src, n))
FG_CU(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h),
      UnifiedCopy(dst, src, n))

#define FG_HTOD(name, ...)                                                               \
  FAKEGPU_EXPORT CUresult name(CUdeviceptr dst, const void* src, size_t n __VA_ARGS__) { \
    FG_ENTRY();                                                                          \
    FG_NEED_INIT();                                                                      \
    if (src == nullptr && n > 0) return CUDA_ERROR_INVALID_VALUE;                        \
    return CopyImpl(dst, 0, n);                                                          \
  }
FG_HTOD(cuMemcpyHtoD_v2)
FG_HTOD(cuMemcpyHtoD_v2_ptds)
FG_HTOD(cuMemcpyHtoDAsync_v2, , CUstream)
FG_HTOD(cuMemcpyHtoDAsync_v2_ptsz, , CUstream)

#define FG_DTOH(name, ...)                                                                     \
  FAKEGPU_EXPORT CUresult name(void* dst, CUdeviceptr src, size_t n __VA_ARGS__) {             \
    FG_ENTRY();                                                                                \
    FG_NEED_INIT();                                                                            \
    if (dst == nullptr && n > 0) return CUDA_ERROR_INVALID_VALUE;                              \
    CUresult rc = CopyImpl(0, src, n);                                                         \
    if (rc == CUDA_SUCCESS && n > 0) std::memset(dst, 0, n); /* device memory reads as zero */ \
    return rc;                                                                                 \
  }
FG_DTOH(cuMemcpyDtoH_v2)
FG_DTOH(cuMemcpyDtoH_v2_ptds)
FG_DTOH(cuMemcpyDtoHAsync_v2, , CUstream)
FG_DTOH(cuMemcpyDtoHAsync_v2_ptsz, , CUstream)

#define FG_MEMSET(name, type, width, ...)                                           \
  FAKEGPU_EXPORT CUresult name(CUdeviceptr dst, type value, size_t n __VA_ARGS__) { \
    FG_ENTRY();                                                                     \
    FG_NEED_INIT();                                                                 \
    return CopyImpl(dst, 0, n * (width));                                           \
  }
FG_MEMSET(cuMemsetD8_v2, unsigned char, 1)
FG_MEMSET(cuMemsetD8_v2_ptds, unsigned char, 1)
FG_MEMSET(cuMemsetD32_v2, unsigned int, 4)
FG_MEMSET(cuMemsetD32_v2_ptds, unsigned int, 4)
FG_MEMSET(cuMemsetD8Async, unsigned char, 1, , CUstream)
FG_MEMSET(cuMemsetD8Async_ptsz, unsigned char, 1, , CUstream)
FG_MEMSET(cuMemsetD32Async, unsigned int, 4, , CUstream)
FG_MEMSET(cuMemsetD32Async_ptsz, unsigned int, 4, , CUstream)

// ---- Modules

static CUresult NewModule(CUmodule* mod) {
  if (mod == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  if (!Live(CurrentCtx())) return CUDA_ERROR_INVALID_CONTEXT;
  auto m = std::make_unique<Module>();
  *mod = reinterpret_cast<CUmodule>(m.get());
  G().live.insert(m.get());
  G().module_store.push_back(std::move(m));
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuModuleLoad(CUmodule* mod, const char* path) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (mod == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  struct stat st;
  if (stat(path, &st) != 0) return 301;  // CUDA_ERROR_FILE_NOT_FOUND
  return NewModule(mod);
}

FAKEGPU_EXPORT CUresult cuModuleLoadData(CUmodule* mod, const void* image) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return NewModule(mod);
}

FAKEGPU_EXPORT CUresult cuModuleLoadDataEx(CUmodule* mod, const void* image, unsigned n,
                                           int* options, void** values) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (image == nullptr || (n > 0 && (options == nullptr || values == nullptr)))
    return CUDA_ERROR_INVALID_VALUE;
  return NewModule(mod);
}

FAKEGPU_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* mod, const void* image) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return NewModule(mod);
}

FAKEGPU_EXPORT CUresult cuModuleUnload(CUmodule mod) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  Module* m = reinterpret_cast<Module*>(mod);
  if (!Live(m)) return CUDA_ERROR_INVALID_HANDLE;
  m->destroyed = true;
  for (auto& [name, f] : m->funcs) G().live.erase(f.get());
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuModuleGetFunction(CUfunction* fn, CUmodule mod, const char* name) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (fn == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Module* m = reinterpret_cast<Module*>(mod);
  if (!Live(m)) return CUDA_ERROR_INVALID_HANDLE;
  auto& slot = m->funcs[name];
  if (!slot) {
    slot = std::make_unique<Function>();
    slot->name = name;
    G().live.insert(slot.get());
  }
  *fn = reinterpret_cast<CUfunction>(slot.get());
  return CUDA_SUCCESS;
}

// ---- Streams

static CUresult StreamCreateImpl(CUstream* out, unsigned flags) {
  if (out == nullptr || (flags & ~0x1u)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Ctx* c = CurrentCtx();
  if (!Live(c)) return CUDA_ERROR_INVALID_CONTEXT;
  auto s = std::make_unique<Stream>();
  s->ctx = c;
  *out = reinterpret_cast<CUstream>(s.get());
  G().live.insert(s.get());
  G().stream_store.push_back(std::move(s));
  return CUDA_SUCCESS;
}

FG_CU(cuStreamCreate, (CUstream * out, unsigned flags), StreamCreateImpl(out, flags))

FG_CU(cuStreamCreateWithPriority, (CUstream * out, unsigned flags, int priority),
      StreamCreateImpl(out, flags))

static CUresult StreamDestroyImpl(CUstream h) {
  std::lock_guard<std::mutex> lock(G().mu);
  Stream* s = reinterpret_cast<Stream*>(h);
  if (!Live(s) || s == &s->ctx->default_stream) return CUDA_ERROR_INVALID_HANDLE;
  s->destroyed = true;
  return CUDA_SUCCESS;
}

FG_CU(cuStreamDestroy, (CUstream h), StreamDestroyImpl(h))

FG_CU(cuStreamDestroy_v2, (CUstream h), StreamDestroyImpl(h))

#define FG_STREAM_FNS(sfx)                                                                         \
  FAKEGPU_EXPORT CUresult cuStreamSynchronize##sfx(CUstream h) {                                   \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return StreamSyncImpl(h);                                                                      \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuStreamQuery##sfx(CUstream h) {                                         \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return StreamQueryImpl(h);                                                                     \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuStreamWaitEvent##sfx(CUstream h, CUevent e, unsigned flags) {          \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return StreamWaitEventImpl(h, e, flags);                                                       \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuStreamBeginCapture##sfx(CUstream h) {                                  \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return BeginCaptureImpl(h);                                                                    \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuStreamBeginCapture_v2##sfx(CUstream h, CUstreamCaptureMode mode) {     \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    if (mode < 0 || mode > 2) return CUDA_ERROR_INVALID_VALUE;                                     \
    return BeginCaptureImpl(h);                                                                    \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuStreamEndCapture##sfx(CUstream h, CUgraph* g) {                        \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return EndCaptureImpl(h, g);                                                                   \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuStreamIsCapturing##sfx(CUstream h, CUstreamCaptureStatus* st) {        \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return IsCapturingImpl(h, st);                                                                 \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuEventRecord##sfx(CUevent e, CUstream h) {                              \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return EventRecordImpl(e, h);                                                                  \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuLaunchKernel##sfx(CUfunction f, unsigned gx, unsigned gy, unsigned gz, \
                                              unsigned bx, unsigned by, unsigned bz, unsigned shm, \
                                              CUstream h, void** params, void** extra) {           \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return LaunchImpl(f, gx, gy, gz, bx, by, bz, h);                                               \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuLaunchKernelEx##sfx(const CUlaunchConfig* cfg, CUfunction f,           \
                                                void** params, void** extra) {                     \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    if (cfg == nullptr || (cfg->numAttrs > 0 && cfg->attrs == nullptr))                            \
      return CUDA_ERROR_INVALID_VALUE;                                                             \
    return LaunchImpl(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,              \
                      cfg->blockDimY, cfg->blockDimZ, cfg->hStream);                               \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuLaunchCooperativeKernel##sfx(                                          \
      CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,  \
      unsigned shm, CUstream h, void** params) {                                                   \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return LaunchImpl(f, gx, gy, gz, bx, by, bz, h);                                               \
  }                                                                                                \
  FAKEGPU_EXPORT CUresult cuGraphLaunch##sfx(CUgraphExec e, CUstream h) {                          \
    FG_ENTRY();                                                                                    \
    FG_NEED_INIT();                                                                                \
    return GraphLaunchImpl(e, h);                                                                  \
  }
FG_STREAM_FNS()
FG_STREAM_FNS(_ptsz)

// ---- Events

FAKEGPU_EXPORT CUresult cuEventCreate(CUevent* out, unsigned flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (out == nullptr || (flags & ~0x7u)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  if (!Live(CurrentCtx())) return CUDA_ERROR_INVALID_CONTEXT;
  auto e = std::make_unique<Event>();
  e->flags = flags;
  *out = reinterpret_cast<CUevent>(e.get());
  G().live.insert(e.get());
  const Event* key = e.get();
  G().event_store[key] = std::move(e);
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuEventQuery(CUevent e) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  Event* ev = reinterpret_cast<Event*>(e);
  if (!Live(ev)) return CUDA_ERROR_INVALID_HANDLE;
  return (!ev->recorded || MonoNs() >= ev->t) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FAKEGPU_EXPORT CUresult cuEventSynchronize(CUevent e) {
  FG_ENTRY();
  FG_NEED_INIT();
  uint64_t t = 0;
  {
    std::lock_guard<std::mutex> lock(G().mu);
    Event* ev = reinterpret_cast<Event*>(e);
    if (!Live(ev)) return CUDA_ERROR_INVALID_HANDLE;
    t = ev->recorded ? ev->t : 0;
  }
  fakegpu::SleepUntilMono(t);
  return CUDA_SUCCESS;
}

static CUresult ElapsedImpl(float* ms, CUevent a, CUevent b) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Event* s = reinterpret_cast<Event*>(a);
  Event* e = reinterpret_cast<Event*>(b);
  if (!Live(s) || !Live(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (!s->recorded || !e->recorded || ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  uint64_t now = MonoNs();
  if (now < s->t || now < e->t) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((static_cast<double>(e->t) - static_cast<double>(s->t)) / 1e6);
  return CUDA_SUCCESS;
}

FG_CU(cuEventElapsedTime, (float* ms, CUevent a, CUevent b), ElapsedImpl(ms, a, b))

FG_CU(cuEventElapsedTime_v2, (float* ms, CUevent a, CUevent b), ElapsedImpl(ms, a, b))

static CUresult EventDestroyImpl(CUevent e) {
  std::lock_guard<std::mutex> lock(G().mu);
  Event* ev = reinterpret_cast<Event*>(e);
  if (!Live(ev)) return CUDA_ERROR_INVALID_HANDLE;
  G().live.erase(ev);
  G().event_store.erase(ev);
  return CUDA_SUCCESS;
}

FG_CU(cuEventDestroy, (CUevent e), EventDestroyImpl(e))

FG_CU(cuEventDestroy_v2, (CUevent e), EventDestroyImpl(e))

// ---- Graphs

FAKEGPU_EXPORT CUresult cuGraphCreate(CUgraph* out, unsigned flags) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  auto gr = std::make_unique<Graph>();
  *out = reinterpret_cast<CUgraph>(gr.get());
  G().live.insert(gr.get());
  G().graph_store.push_back(std::move(gr));
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuGraphDestroy(CUgraph h) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  Graph* gr = reinterpret_cast<Graph*>(h);
  if (!Live(gr)) return CUDA_ERROR_INVALID_VALUE;
  gr->destroyed = true;
  return CUDA_SUCCESS;
}

static CUresult AddKernelNodeImpl(CUgraphNode* node, CUgraph h, const CUgraphNode* deps,
                                  size_t ndeps, CUfunction f, unsigned gx, unsigned gy,
                                  unsigned gz) {
  if (node == nullptr || (ndeps > 0 && deps == nullptr) || gx == 0 || gy == 0 || gz == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(G().mu);
  Graph* gr = reinterpret_cast<Graph*>(h);
  if (!Live(gr)) return CUDA_ERROR_INVALID_VALUE;
  if (f == nullptr || G().live.count(f) == 0) return CUDA_ERROR_INVALID_VALUE;
  gr->nodes.push_back({gx, gy, gz});
  // Node handles are opaque tokens: index + 1 within the graph.
  *node = reinterpret_cast<CUgraphNode>(static_cast<uintptr_t>(gr->nodes.size()));
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph h, const CUgraphNode* deps,
                                             size_t ndeps, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddKernelNodeImpl(node, h, deps, ndeps, p->func, p->gridDimX, p->gridDimY, p->gridDimZ);
}

FAKEGPU_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph h,
                                                const CUgraphNode* deps, size_t ndeps,
                                                const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddKernelNodeImpl(node, h, deps, ndeps, p->func, p->gridDimX, p->gridDimY, p->gridDimZ);
}

static CUresult AddMemAllocNodeImpl(CUgraphNode* node, CUgraph h, const CUgraphNode* deps,
                                    size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  if (node == nullptr || p == nullptr || (ndeps > 0 && deps == nullptr) || p->bytesize == 0 ||
      p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(G().mu);
  Graph* gr = reinterpret_cast<Graph*>(h);
  if (!Live(gr)) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidOrdinal(p->poolProps.location.id)) return CUDA_ERROR_INVALID_DEVICE;
  gr->mem.push_back({NvmlIndex(p->poolProps.location.id), p->bytesize});
  // The address the graph's launches will use (not backed here: nothing copies into it).
  p->dptr = kVaBase + (static_cast<uint64_t>(fakegpu::kMaxDevices) + gr->mem.size()) * kVaWindow;
  *node = reinterpret_cast<CUgraphNode>(static_cast<uintptr_t>(gr->nodes.size() + gr->mem.size()));
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph h,
                                               const CUgraphNode* deps, size_t ndeps,
                                               CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  FG_ENTRY();
  FG_NEED_INIT();
  return AddMemAllocNodeImpl(node, h, deps, ndeps, p);
}

// The generic node API: memory allocation nodes only (anything else: CUDA_ERROR_NOT_SUPPORTED).
FAKEGPU_EXPORT CUresult cuGraphAddNode(CUgraphNode* node, CUgraph h, const CUgraphNode* deps,
                                       size_t ndeps, CUgraphNodeParams* p) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_NOT_SUPPORTED;
  return AddMemAllocNodeImpl(node, h, deps, ndeps, &p->alloc);
}

FAKEGPU_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* node, CUgraph h, const CUgraphNode* deps,
                                          const CUgraphEdgeData* edges, size_t ndeps,
                                          CUgraphNodeParams* p) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_NOT_SUPPORTED;
  return AddMemAllocNodeImpl(node, h, deps, ndeps, &p->alloc);
}

static CUresult InstantiateImpl(CUgraphExec* out, CUgraph h) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(G().mu);
  Graph* gr = reinterpret_cast<Graph*>(h);
  if (!Live(gr)) return CUDA_ERROR_INVALID_VALUE;
  auto x = std::make_unique<GraphExec>();
  x->nodes = gr->nodes;
  x->mem = gr->mem;
  *out = reinterpret_cast<CUgraphExec>(x.get());
  G().live.insert(x.get());
  G().exec_store.push_back(std::move(x));
  return CUDA_SUCCESS;
}

FAKEGPU_EXPORT CUresult cuGraphInstantiate(CUgraphExec* out, CUgraph h, CUgraphNode* err_node,
                                           char* log, size_t log_size) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return InstantiateImpl(out, h);
}

FAKEGPU_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* out, CUgraph h, CUgraphNode* err_node,
                                              char* log, size_t log_size) {
  FG_ENTRY();
  FG_NEED_INIT();
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return InstantiateImpl(out, h);
}

FG_CU(cuGraphInstantiateWithFlags, (CUgraphExec * out, CUgraph h, unsigned long long flags),
      InstantiateImpl(out, h))

FAKEGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
  FG_ENTRY();
  FG_NEED_INIT();
  std::lock_guard<std::mutex> lock(G().mu);
  GraphExec* x = reinterpret_cast<GraphExec*>(e);
  if (!Live(x)) return CUDA_ERROR_INVALID_VALUE;
  x->destroyed = true;
  return CUDA_SUCCESS;
}

// ---- Test hook

FAKEGPU_EXPORT void fakegpu_cuda_reset(void) {
  Globals& g = G();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    GetRuntime().state->ReleaseSelf();
    for (auto& c : g.ctx_store) c->destroyed = true;
    for (auto& s : g.stream_store) s->destroyed = true;
    g.event_store.clear();
    for (auto& a : g.array_store) a->destroyed = true;
    g.live.clear();
    g.allocs.clear();
    g.phys.clear();
    g.mappings.clear();
    for (auto& p : g.primaries) p = Primary{};
    for (auto& v : g.va_next) v = 0;
    g.visible.clear();
    __atomic_store_n(&g.initialized, false, __ATOMIC_RELEASE);
  }
  t_ctx_stack.clear();
  fakegpu::ResetRuntime();
}

// ----------------------------------------------------------------------------------------------
// cuGetProcAddress: (base name, version introduced, per-thread?) -> function; see
// fake_cuda_procs.inc.

namespace {

struct ProcEntry {
  const char* base;
  int version;
  bool per_thread;
  void* fn;
};

const ProcEntry kProcs[] = {
#define FG_PROC(base, version, symbol) {#base, version, false, reinterpret_cast<void*>(&symbol)},
#define FG_PROC_PT(base, version, symbol) {#base, version, true, reinterpret_cast<void*>(&symbol)},
#include "fakes/fake_cuda_procs.inc"
#undef FG_PROC
#undef FG_PROC_PT
};

CUresult GetProcAddressImpl(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                            CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags &
      ~(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cuda_version > GetRuntime().cfg.cuda_version) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const ProcEntry* best = nullptr;
  const ProcEntry* best_pt = nullptr;
  bool known = false;
  for (const ProcEntry& e : kProcs) {
    if (std::strcmp(e.base, symbol) != 0) continue;
    known = true;
    if (e.version > cuda_version) continue;
    const ProcEntry*& slot = e.per_thread ? best_pt : best;
    if (slot == nullptr || e.version > slot->version) slot = &e;
  }
  const ProcEntry* pick = (per_thread && best_pt != nullptr) ? best_pt : best;
  if (pick != nullptr) *pfn = pick->fn;
  if (status != nullptr) {
    *status = pick != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
              : known         ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

}  // namespace
