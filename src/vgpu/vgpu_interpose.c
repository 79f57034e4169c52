/* libvgpu interposer: the hooked CUDA driver and NVML entry points (vgpu_hooks.def), dlsym and
 * cuGetProcAddress routing, lazy loading of the real libraries, and the glue between hooks and the
 * shared region / allocation table / SM limiter (vgpu_core.h).
 *
 * Rules: never crash or exit the host; return only codes the real API defines; load nothing and
 * touch no file until the application itself calls a hooked CUDA/NVML function; hot paths (alloc,
 * free, launch, cuMemGetInfo) make no system call and scan nothing (the limiter's sleep is its only
 * syscall). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "gpu/nvml_abi.h"
#include "vgpu/vgpu_core.h"

/* Names we define ourselves with their exact ABI; cuda.h maps some of them to newer variants. */
#undef cuGetProcAddress
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuCtxCreate
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemGetInfo
#undef cuDeviceTotalMem
#undef cuMemAllocPitch
#undef cuArrayCreate
#undef cuArray3DCreate
#undef cuCtxDestroy
#undef cuGraphAddNode

/* cuda.h declares the legacy (CUDA 2.x) 32-bit device pointer and array descriptors only for the
 * driver's own build. */
typedef unsigned int vgpu_devptr_v1;
typedef struct {
  unsigned int Width;
  unsigned int Height;
  CUarray_format Format;
  unsigned int NumChannels;
} vgpu_array_desc_v1;
typedef struct {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
} vgpu_array3d_desc_v1;

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- Prototypes and real-function pointers, generated from the hook list. -------------------- */
/* NOLINTBEGIN(bugprone-macro-parentheses): params and args are parenthesized lists, sym a name. */
#define VGPU_CU(sym, base, ver, pt, params, args) EXPORT CUresult sym params;
#define VGPU_NVML(sym, params, args) EXPORT nvmlReturn_t sym params;
#include "vgpu/vgpu_hooks.def"

/* Hidden, not static: the assembly launch hooks (vgpu_dlsym.S) jump through them too. */
#define VGPU_CU(sym, base, ver, pt, params, args) \
  __attribute__((visibility("hidden"))) CUresult(*real_##sym) params;
#define VGPU_NVML(sym, params, args) \
  __attribute__((visibility("hidden"))) nvmlReturn_t(*real_##sym) params;
#include "vgpu/vgpu_hooks.def"

typedef struct hook_entry {
  const char* name;
  const char* base;
  int version;
  int per_thread;
  int is_cuda;
  void* hook;
  void** real;
} hook_entry;

static const hook_entry kHooks[] = {
#define VGPU_CU(sym, base, ver, pt, params, args) \
  {#sym, #base, ver, pt, 1, (void*)&sym, (void**)&real_##sym},
#define VGPU_NVML(sym, params, args) {#sym, #sym, 0, 0, 0, (void*)&sym, (void**)&real_##sym},
#include "vgpu/vgpu_hooks.def"
};
/* NOLINTEND(bugprone-macro-parentheses) */
enum { kNumHooks = sizeof(kHooks) / sizeof(kHooks[0]) };

/* Real driver functions used internally but not hooked. */
static CUresult (*drv_cuCtxGetDevice)(CUdevice*);
static CUresult (*drv_cuDeviceGetCount)(int*);
static CUresult (*drv_cuDeviceGet)(CUdevice*, int);
static CUresult (*drv_cuDeviceGetUuid)(CUuuid*, CUdevice);
static CUresult (*drv_cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
static nvmlReturn_t (*nvml_Init)(void);
static nvmlReturn_t (*nvml_DeviceGetCount)(unsigned int*);
static nvmlReturn_t (*nvml_DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t*);
static nvmlReturn_t (*nvml_DeviceGetHandleByUUID)(const char*, nvmlDevice_t*);
static nvmlReturn_t (*nvml_DeviceGetIndex)(nvmlDevice_t, unsigned int*);
static nvmlReturn_t (*nvml_DeviceGetUUID)(nvmlDevice_t, char*, unsigned int);
static nvmlReturn_t (*nvml_DeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned int*,
                                                             nvmlProcessInfo_v2_t*);
static nvmlReturn_t (*nvml_DeviceGetProcessUtilization)(nvmlDevice_t,
                                                        nvmlProcessUtilizationSample_t*,
                                                        unsigned int*, unsigned long long);
static nvmlReturn_t (*nvml_DeviceGetSamples)(nvmlDevice_t, int, unsigned long long, int*,
                                             unsigned int*, nvmlSample_t*);

/* The real dlsym (glibc); used by the assembly dlsym entry for its tail jump. */
__attribute__((visibility("hidden"))) void* (*vgpu_real_dlsym)(void*, const char*);

/* ---- Process state. ----------------------------------------------------------------------- */
#define MAX_ORD 64
enum { ST_NONE = 0, ST_READY = 2, ST_FAILED = 3 };

static struct {
  int state;      /* ST_*; read without lock on hot paths */
  int nvml_state; /* region attached for NVML-only use */
  pthread_mutex_t init_mu;
  void* cuda;
  void* nvml;
  int nvml_ok;
  vgpu_region_ctx rc;
  vgpu_alloc_table at;
  int ndev;
  int single;       /* exactly one device: skip the current-device query */
  int ent[MAX_ORD]; /* CUDA ordinal -> region entry */
  nvmlDevice_t nvml_dev[MAX_ORD];
  uint32_t sm_pct[VGPU_MAX_DEVICES]; /* per entry: 1..99 limited, 0 not limited */
  /* Work-conserving shares (armed containers): per entry the rate the bucket refills at (sm_pct
   * times the node monitor's factor, or sm_pct), and whether the limit applies (0 = the rate
   * reached 100 %: not limited); the block word (-1 = a higher-priority container is busy). All
   * written by the watcher from the read-only limits file, never from the region. Unarmed
   * processes keep upstream's fields in the region: switch_word and block_word point there. */
  uint32_t rate_pct[VGPU_MAX_DEVICES];
  int32_t wc_on[VGPU_MAX_DEVICES];
  int32_t wc_block;
  const int32_t* switch_word[VGPU_MAX_DEVICES];
  const int32_t* block_word;
  char uuid[VGPU_MAX_DEVICES][VGPU_UUID_LEN];
  uint32_t sms[VGPU_MAX_DEVICES];
  int sm_active;     /* some entry has an SM limit and the policy is not "disable" */
  int oversubscribe; /* CUDA_OVERSUBSCRIBE: limits may exceed the device; the excess is managed
                        memory */
  uint32_t scaling;  /* CUDA_DEVICE_MEMORY_SCALING in thousandths, 0 = not given */
  /* Per entry, with oversubscription: the physical share (limit / scaling; 0 = the whole card)
   * beyond which this process's cuMemAlloc_v2 allocations become managed memory, and the managed
   * bytes this process holds (atomic; outside the share). */
  uint64_t share[VGPU_MAX_DEVICES];
  uint64_t managed[VGPU_MAX_DEVICES];
  int spill_logged;
  uint32_t policy;
  int watcher_started;
  volatile int primary_refs[MAX_ORD];
  uint64_t primary_bytes[MAX_ORD];
  int table_full_logged;
  pid_t pid;
} g = {.init_mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
/* Copy of g.sm_active for the assembly launch hooks. */
__attribute__((visibility("hidden"))) int vgpu_sm_active;

static void* find_real_dlsym(void) {
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (size_t i = 0; i < sizeof(kVersions) / sizeof(kVersions[0]); i++) {
    void* p = dlvsym(RTLD_NEXT, "dlsym", kVersions[i]);
    if (p) return p;
  }
  return NULL;
}

__attribute__((visibility("hidden"))) void vgpu_ensure_real_dlsym(void) {
  if (!__atomic_load_n(&vgpu_real_dlsym, __ATOMIC_ACQUIRE)) {
    void* p = find_real_dlsym();
    __atomic_store_n(&vgpu_real_dlsym, (void* (*)(void*, const char*))p, __ATOMIC_RELEASE);
  }
}

static void* sym(void* handle, const char* name) {
  vgpu_ensure_real_dlsym();
  return vgpu_real_dlsym && handle ? vgpu_real_dlsym(handle, name) : NULL;
}

/* ---- The device plugin's limits file (see vgpu_core.h): authoritative over the environment. ----
 */
static vgpu_cfg g_cfg;
static int g_armed;
static char g_limits_path[512];

static int read_limits_file(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    /* It exists but cannot be read: its values are unknown, the environment's are not trusted
     * either. */
    char eb[128];
    VGPU_LOG(VGPU_LOG_ERROR, "limits file %s unreadable (%s); using the environment's limits", path,
             strerror_r(errno, eb, sizeof eb));
    return 0;
  }
  static char buf[VGPU_CFG_MAX * 256];
  size_t n = 0;
  ssize_t k;
  while (n < sizeof(buf) && (k = read(fd, buf + n, sizeof(buf) - n)) > 0) n += (size_t)k;
  struct statvfs sv;
  int writable = fstatvfs(fd, &sv) == 0 && !(sv.f_flag & ST_RDONLY) && access(path, W_OK) == 0;
  close(fd);
  int first_bad = 0;
  int bad = vgpu_parse_limits(buf, n, &g_cfg, &first_bad);
  snprintf(g_limits_path, sizeof(g_limits_path), "%s", path);
  if (bad) {
    VGPU_LOG(VGPU_LOG_ERROR,
             "limits file %s: %d line(s) not understood (first: line %d); they are ignored", path,
             bad, first_bad);
  }
  if (writable)
    VGPU_LOG(VGPU_LOG_WARN, "limits file %s is writable by this process: mount it read-only", path);
  return 1;
}

static void load_limits(void) {
  Dl_info info;
  char path[512];
  if (dladdr((void*)&cuInit, &info) && info.dli_fname && info.dli_fname[0] == '/') {
    const char* slash = strrchr(info.dli_fname, '/');
    int dir_len = (int)(slash - info.dli_fname);
    snprintf(path, sizeof(path), "%.*s/%s", dir_len, info.dli_fname, VGPU_LIMITS_FILE_NAME);
    if (read_limits_file(path)) {
      g_armed = 1;
      return;
    }
  }
  snprintf(path, sizeof(path), "%s/%s", VGPU_LIMITS_DEFAULT_DIR, VGPU_LIMITS_FILE_NAME);
  g_armed = read_limits_file(path);
}

/* libc has no thread-safe getenv and libvgpu cannot do without one. It reads variables the host
 * sets before it starts; a host that changes its environment while its threads call CUDA races with
 * its own getenv calls as much as with ours. */
static const char* env_get(const char* name) {
  return getenv(name); /* NOLINT(concurrency-mt-unsafe): no thread-safe form exists (above) */
}

/* A governed variable: from the limits file when armed (the environment is then only compared, once
 * per key, to say it is ignored), else from the environment. */
static const char* cfg_get(const char* name) {
  if (!g_armed) return env_get(name);
  const char* v = vgpu_cfg_get(&g_cfg, name);
  const char* env = env_get(name);
  if (env && (!v || strcmp(env, v) != 0)) {
    static uint64_t warned; /* bit per hashed key: a warning at most once per variable */
    uint64_t bit = 1ull << (strlen(name) * 7 + (unsigned char)name[strlen(name) - 1]) % 64;
    if (!(__atomic_fetch_or(&warned, bit, __ATOMIC_RELAXED) & bit)) {
      VGPU_LOG(VGPU_LOG_WARN,
               "%s=\"%s\" in the environment is ignored: the device plugin's %s%s%s applies", name,
               env, v ? "value \"" : "limits file does not set it", v ? v : "", v ? "\"" : "");
    }
  }
  return v;
}

static void load_real(void) {
  const char* lvl = env_get("LIBCUDA_LOG_LEVEL");
  int32_t v;
  if (lvl && vgpu_parse_int(lvl, &v) == 0) vgpu_log_level = v;
  load_limits();
  /* RTLD_LOCAL: we only use the handles; the application's own symbol lookup stays as it was. */
  g.cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  g.nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  for (int i = 0; i < kNumHooks; i++) {
    *kHooks[i].real = sym(kHooks[i].is_cuda ? g.cuda : g.nvml, kHooks[i].name);
  }
  drv_cuCtxGetDevice = (CUresult(*)(CUdevice*))sym(g.cuda, "cuCtxGetDevice");
  drv_cuDeviceGetCount = (CUresult(*)(int*))sym(g.cuda, "cuDeviceGetCount");
  drv_cuDeviceGet = (CUresult(*)(CUdevice*, int))sym(g.cuda, "cuDeviceGet");
  drv_cuDeviceGetUuid = (CUresult(*)(CUuuid*, CUdevice))sym(g.cuda, "cuDeviceGetUuid_v2");
  if (!drv_cuDeviceGetUuid)
    drv_cuDeviceGetUuid = (CUresult(*)(CUuuid*, CUdevice))sym(g.cuda, "cuDeviceGetUuid");
  drv_cuDeviceGetAttribute =
      (CUresult(*)(int*, CUdevice_attribute, CUdevice))sym(g.cuda, "cuDeviceGetAttribute");
  nvml_Init = (nvmlReturn_t(*)(void))sym(g.nvml, "nvmlInit_v2");
  nvml_DeviceGetCount = (nvmlReturn_t(*)(unsigned int*))sym(g.nvml, "nvmlDeviceGetCount_v2");
  nvml_DeviceGetHandleByIndex =
      (nvmlReturn_t(*)(unsigned int, nvmlDevice_t*))sym(g.nvml, "nvmlDeviceGetHandleByIndex_v2");
  nvml_DeviceGetHandleByUUID =
      (nvmlReturn_t(*)(const char*, nvmlDevice_t*))sym(g.nvml, "nvmlDeviceGetHandleByUUID");
  nvml_DeviceGetIndex =
      (nvmlReturn_t(*)(nvmlDevice_t, unsigned int*))sym(g.nvml, "nvmlDeviceGetIndex");
  nvml_DeviceGetUUID =
      (nvmlReturn_t(*)(nvmlDevice_t, char*, unsigned int))sym(g.nvml, "nvmlDeviceGetUUID");
  nvml_DeviceGetComputeRunningProcesses =
      (nvmlReturn_t(*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v2_t*))sym(
          g.nvml, "nvmlDeviceGetComputeRunningProcesses_v3");
  nvml_DeviceGetProcessUtilization =
      (nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                       unsigned long long))sym(g.nvml, "nvmlDeviceGetProcessUtilization");
  nvml_DeviceGetSamples =
      (nvmlReturn_t(*)(nvmlDevice_t, int, unsigned long long, int*, unsigned int*,
                       nvmlSample_t*))sym(g.nvml, "nvmlDeviceGetSamples");
}

static inline void ensure_loaded(void) {
  pthread_once(&g_load_once, load_real);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Configuration from the environment (upstream's contract). ------------------------------ */

/* Memory limit of device index `index`: CUDA_DEVICE_MEMORY_LIMIT_<i>, else (unset, 0, malformed: as
 * upstream, 0 there is not "unlimited") CUDA_DEVICE_MEMORY_LIMIT (0 = none). */
static uint64_t env_mem_limit(int index) {
  char name[64];
  uint64_t v;
  snprintf(name, sizeof(name), "CUDA_DEVICE_MEMORY_LIMIT_%d", index);
  const char* s = index >= 0 ? cfg_get(name) : NULL;
  if (s) {
    if (vgpu_parse_mem_size(s, &v) == 0) {
      if (v) return v;
    } else {
      VGPU_LOG(VGPU_LOG_ERROR,
               "%s=\"%s\" is not a size (e.g. 3000m, 1Gi); ignored, falling back to "
               "CUDA_DEVICE_MEMORY_LIMIT",
               name, s);
    }
  }
  s = cfg_get("CUDA_DEVICE_MEMORY_LIMIT");
  if (s) {
    if (vgpu_parse_mem_size(s, &v) == 0) return v;
    VGPU_LOG(VGPU_LOG_ERROR,
             "CUDA_DEVICE_MEMORY_LIMIT=\"%s\" is not a size (e.g. 3000m, 1Gi); ignored: no "
             "memory limit",
             s);
  }
  return 0;
}

static uint32_t env_sm_limit(int index) {
  char name[64];
  uint32_t v;
  snprintf(name, sizeof(name), "CUDA_DEVICE_SM_LIMIT_%d", index);
  const char* s = index >= 0 ? cfg_get(name) : NULL;
  if (s) {
    if (vgpu_parse_percent(s, &v) == 0 && v > 0) return v;
    if (vgpu_parse_percent(s, &v) != 0)
      VGPU_LOG(VGPU_LOG_ERROR, "%s=\"%s\" is not a percent 0..100; ignored", name, s);
  }
  s = cfg_get("CUDA_DEVICE_SM_LIMIT");
  if (s) {
    if (vgpu_parse_percent(s, &v) == 0) return v == 0 ? 100 : v;
    VGPU_LOG(VGPU_LOG_ERROR,
             "CUDA_DEVICE_SM_LIMIT=\"%s\" is not a percent 0..100; ignored: no SM limit", s);
  }
  return 100;
}

static void format_uuid(const CUuuid* u, char* out) {
  const unsigned char* b = (const unsigned char*)u->bytes;
  snprintf(out, VGPU_UUID_LEN,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

/* Index i of CUDA_DEVICE_MEMORY_LIMIT_<i> for CUDA ordinal `ord` with identity `uuid`: the device's
 * position in the container's unfiltered device list, so that a process with its own
 * CUDA_VISIBLE_DEVICES (reordered or narrowed) applies each limit to the same card as everybody
 * else. */
static int container_index(int ord, const char* uuid, nvmlDevice_t* nvml_out) {
  *nvml_out = NULL;
  nvmlDevice_t h;
  unsigned int idx;
  if (g.nvml_ok && nvml_DeviceGetHandleByUUID &&
      nvml_DeviceGetHandleByUUID(uuid, &h) == NVML_SUCCESS) {
    *nvml_out = h;
  }
  const char* cvd = env_get("CUDA_VISIBLE_DEVICES");
  if (cvd) {
    vgpu_visible_entry e[MAX_ORD];
    int n = vgpu_parse_visible_devices(cvd, e, MAX_ORD);
    if (ord < n && e[ord].index >= 0) return e[ord].index;
    if (*nvml_out && nvml_DeviceGetIndex && nvml_DeviceGetIndex(*nvml_out, &idx) == NVML_SUCCESS)
      return (int)idx;
    VGPU_LOG(VGPU_LOG_WARN,
             "cannot place CUDA device %d (%s) in the container's device list; using its ordinal",
             ord, uuid);
  }
  return ord;
}

static void ctx_notes_reset(void);

static void atfork_child(void) {
  ctx_notes_reset(); /* contexts do not survive fork */
  /* The child must not share the parent's slot: drop the inherited descriptor (the parent keeps its
   * liveness lock) and register afresh on first use. The parent's allocations are not the child's.
   */
  if (g.rc.fd >= 0) close(g.rc.fd);
  if (g.rc.liveness_fd >= 0) close(g.rc.liveness_fd);
  memset(&g.rc, 0, sizeof(g.rc));
  g.rc.fd = -1;
  g.rc.liveness_fd = -1;
  g.rc.slot = -1;
  vgpu_at_destroy(&g.at);
  memset(&g.at, 0, sizeof(g.at));
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  g.init_mu = m;
  g.watcher_started = 0;
  for (int i = 0; i < MAX_ORD; i++) g.primary_refs[i] = 0, g.primary_bytes[i] = 0;
  __atomic_store_n(&g.nvml_state, ST_NONE, __ATOMIC_RELEASE);
  __atomic_store_n(&g.state, ST_NONE, __ATOMIC_RELEASE);
}

/* Strictness of a policy: disable < default < force. */
static int policy_rank(uint32_t p) {
  return p == VGPU_POLICY_DISABLE ? 0 : p == VGPU_POLICY_FORCE ? 2 : 1;
}

static int attach_region_locked(void) {
  if (g.rc.r) return 0;
  vgpu_region_params p = {VGPU_POLICY_DEFAULT, 1, NULL};
  vgpu_region_armed = g_armed;
  /* The device plugin's gate (upstream's name and value): only "1" turns the broker on. */
  const char* broker = env_get("LIBVGPU_HOSTPID_BROKER");
  if (broker && strcmp(broker, "1") == 0) p.host_pid_broker = VGPU_HOSTPID_BROKER_SOCKET;
  const char* s = cfg_get("GPU_CORE_UTILIZATION_POLICY");
  if (s && vgpu_parse_policy(s, &p.policy) != 0) {
    VGPU_LOG(VGPU_LOG_ERROR,
             "GPU_CORE_UTILIZATION_POLICY=\"%s\" is not default/force/disable; using default", s);
  }
  /* Armed: the environment may make the policy stricter (force), never looser. */
  uint32_t env_policy;
  s = env_get("GPU_CORE_UTILIZATION_POLICY");
  if (g_armed && s && vgpu_parse_policy(s, &env_policy) == 0 &&
      policy_rank(env_policy) > policy_rank(p.policy)) {
    p.policy = env_policy;
  }
  s = cfg_get("CUDA_TASK_PRIORITY");
  if (s && vgpu_parse_int(s, &p.priority) != 0) {
    VGPU_LOG(VGPU_LOG_ERROR, "CUDA_TASK_PRIORITY=\"%s\" is not an integer; using 1", s);
    p.priority = 1;
  }
  g.policy = p.policy;
  s = cfg_get("CUDA_OVERSUBSCRIBE");
  g.oversubscribe = 0;
  if (s && vgpu_parse_bool(s, &g.oversubscribe) != 0) {
    VGPU_LOG(VGPU_LOG_ERROR, "CUDA_OVERSUBSCRIBE=\"%s\" is not true/false; no oversubscription", s);
    g.oversubscribe = 0;
  }
  s = cfg_get("CUDA_DEVICE_MEMORY_SCALING");
  g.scaling = 0;
  if (s && *s && vgpu_parse_scaling(s, &g.scaling) != 0) {
    VGPU_LOG(VGPU_LOG_ERROR,
             "CUDA_DEVICE_MEMORY_SCALING=\"%s\" is not a positive decimal; the physical share is "
             "the whole card",
             s);
    g.scaling = 0;
  }
  s = env_get("VGPU_TEST_CRASH_POINT"); /* "point[:n]", tests only */
  if (s) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%s", s);
    char* colon = strchr(buf, ':');
    int32_t point = 0, after = 0;
    if (colon) *colon = 0;
    if (vgpu_parse_int(buf, &point) == 0 && (!colon || vgpu_parse_int(colon + 1, &after) == 0)) {
      vgpu_region_crash_point = point;
      vgpu_region_crash_after = after;
    }
  }
  const char* path = cfg_get("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  if (!path || !*path) path = "/tmp/cudevshr.cache";
  vgpu_region_attach(&g.rc, path, &p);
  if (g.rc.r && g.rc.slot >= 0) { /* a claimed slot may hold a dead predecessor's split */
    for (int i = 0; i < VGPU_MAX_DEVICES; i++)
      __atomic_store_n(&g.rc.r->slots[g.rc.slot].context_kib[i], 0, __ATOMIC_RELAXED);
  }
  static int atfork_done;
  if (!atfork_done) {
    pthread_atfork(NULL, NULL, atfork_child);
    atfork_done = 1;
  }
  g.pid = getpid();
  return g.rc.r ? 0 : -1;
}

static void init_nvml_locked(void) {
  if (g.nvml_ok || !nvml_Init) return;
  g.nvml_ok = nvml_Init() == NVML_SUCCESS;
}

/* Virtual device memory of entry e (CUDA_OVERSUBSCRIBE): the physical share, and a warning on GPUs
 * that cannot page managed memory (before Pascal), where allocations beyond the card fail. */
static void init_share(int e, CUdevice dev, uint64_t total) {
  g.share[e] = 0;
  g.managed[e] = 0;
  if (!g.oversubscribe) return;
  uint64_t limit = g.rc.limit[e];
  if (limit && g.scaling > 1000) {
    uint64_t share = limit / g.scaling * 1000 + limit % g.scaling * 1000 / g.scaling;
    g.share[e] = total && share > total ? total : share;
  }
  int pages = 1;
  if (drv_cuDeviceGetAttribute &&
      drv_cuDeviceGetAttribute(&pages, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev) ==
          CUDA_SUCCESS &&
      !pages) {
    VGPU_LOG(VGPU_LOG_WARN,
             "CUDA device %d cannot page managed memory (before Pascal): allocations beyond its "
             "memory fail although the limit allows them",
             (int)dev);
  }
  VGPU_LOG(VGPU_LOG_INFO, "CUDA device %d: virtual device memory %llu B, physical share %llu B%s",
           (int)dev, (unsigned long long)limit, (unsigned long long)g.share[e],
           g.share[e] ? "" : " (the card)");
}

static void start_watcher_locked(void);

/* Entry e has an SM limit that applies (policy default or force). */
static inline int limited(int e) {
  return g.sm_pct[e] && g.policy != VGPU_POLICY_DISABLE;
}

/* Full initialisation after the driver is initialised: region, device identities, limits. */
static void init_locked(void) {
  if (g.state == ST_READY) return;
  if (attach_region_locked() != 0) {
    g.state = ST_FAILED;
    return;
  }
  if (vgpu_at_init(&g.at, 17) != 0) VGPU_LOG(VGPU_LOG_ERROR, "cannot reserve the allocation table");
  init_nvml_locked();
  int n = 0;
  if (!drv_cuDeviceGetCount || drv_cuDeviceGetCount(&n) != CUDA_SUCCESS) n = 0;
  if (n > MAX_ORD) n = MAX_ORD;
  g.ndev = n;
  g.single = n == 1;
  g.sm_active = 0;
  for (int ord = 0; ord < n; ord++) {
    g.ent[ord] = -1;
    CUdevice dev;
    CUuuid u;
    char uuid[VGPU_UUID_LEN];
    if (drv_cuDeviceGet(&dev, ord) != CUDA_SUCCESS || !drv_cuDeviceGetUuid ||
        drv_cuDeviceGetUuid(&u, dev) != CUDA_SUCCESS) {
      VGPU_LOG(VGPU_LOG_ERROR, "cannot identify CUDA device %d; it is not limited", ord);
      continue;
    }
    format_uuid(&u, uuid);
    int ci = container_index(ord, uuid, &g.nvml_dev[ord]);
    size_t total = 0;
    if (real_cuDeviceTotalMem_v2) real_cuDeviceTotalMem_v2(&total, dev);
    int sms = 0;
    if (drv_cuDeviceGetAttribute)
      drv_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (sms <= 0) sms = 1;
    uint64_t limit = env_mem_limit(ci);
    uint32_t sm = env_sm_limit(ci);
    int e = vgpu_region_device(&g.rc, uuid, limit, sm, total, ci, (uint32_t)sms);
    if (e < 0) {
      VGPU_LOG(VGPU_LOG_ERROR, "no region entry for %s; device %d is not limited", uuid, ord);
      continue;
    }
    g.ent[ord] = e;
    init_share(e, dev, total);
    uint32_t pct = g.rc.sm_pct[e];
    g.sms[e] = g.rc.r->devices[e].sm_count ? g.rc.r->devices[e].sm_count : (uint32_t)sms;
    g.sm_pct[e] = (pct > 0 && pct < 100) ? pct : 0;
    g.rate_pct[e] = g.sm_pct[e];
    g.wc_on[e] = 1;
    g.switch_word[e] = g_armed ? &g.wc_on[e] : &g.rc.r->hdr.utilization_switch;
    snprintf(g.uuid[e], sizeof g.uuid[e], "%s", uuid);
    if (limited(e)) g.sm_active = vgpu_sm_active = 1;
    VGPU_LOG(VGPU_LOG_INFO,
             "CUDA device %d = %s (limit index %d): memory limit %llu B, SM limit %u%%%s", ord,
             uuid, ci, (unsigned long long)g.rc.limit[e], pct,
             g_armed ? " (device plugin's limits file)" : "");
  }
  g.block_word = g_armed ? &g.wc_block : &g.rc.r->hdr.recent_kernel;
  __atomic_store_n(&g.state, ST_READY, __ATOMIC_RELEASE);
  /* Armed: every device is metered from now on, with or without SM limit (issue 33). */
  if (g_armed) start_watcher_locked();
}

/* Makes sure the process is registered; returns 1 when accounting is active. */
static int ensure_init_slow(void) {
  ensure_loaded();
  if (!g.cuda) return 0;
  pthread_mutex_lock(&g.init_mu);
  if (g.state == ST_NONE && real_cuInit) {
    if (real_cuInit(0) == CUDA_SUCCESS) init_locked();
  }
  pthread_mutex_unlock(&g.init_mu);
  return __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == ST_READY;
}

static inline int ready(void) {
  if (LIKELY(__atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == ST_READY)) return 1;
  if (g.state == ST_FAILED) return 0;
  return ensure_init_slow();
}

/* Region entry of the current context's device, -1 when unknown (then nothing is accounted). */
static inline int current_entry(void) {
  if (LIKELY(g.single)) return g.ent[0];
  CUdevice d;
  if (!drv_cuCtxGetDevice || drv_cuCtxGetDevice(&d) != CUDA_SUCCESS || d < 0 || d >= g.ndev)
    return -1;
  return g.ent[d];
}

static inline int entry_of(CUdevice d) {
  return (d >= 0 && d < g.ndev) ? g.ent[d] : -1;
}

/* After a failed first reservation (rc): one retry after reclaiming dead processes, then the
 * out-of-memory log. Out of line, so that the allocation hooks inline only the first attempt. */
static __attribute__((noinline, cold)) CUresult reserve_retry(int e, uint64_t bytes, int rc) {
  if (rc == 1 && vgpu_region_sweep(&g.rc) > 0) rc = vgpu_region_reserve(&g.rc, e, bytes, 0);
  if (rc == 0) return CUDA_SUCCESS;
  /* Frameworks probe with failing allocations: log the first few, then every 1000th. */
  static unsigned oom_count;
  unsigned n = __atomic_add_fetch(&oom_count, 1, __ATOMIC_RELAXED);
  if (n <= 5 || n % 1000 == 0) {
    const vgpu_device_entry* d = &g.rc.r->devices[e];
    VGPU_LOG(VGPU_LOG_WARN,
             "%s: out of memory (#%u in this process): %llu B requested, %llu of %llu B in use",
             d->uuid, n, (unsigned long long)bytes, (unsigned long long)vgpu_region_used(&g.rc, e),
             (unsigned long long)g.rc.limit[e]);
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Reserve with one retry after reclaiming dead processes. 0 ok, else CUDA_ERROR_OUT_OF_MEMORY. */
static inline CUresult reserve(int e, uint64_t bytes) {
  int rc = vgpu_region_reserve(&g.rc, e, bytes, 0);
  if (LIKELY(rc == 0)) return CUDA_SUCCESS;
  return reserve_retry(e, bytes, rc);
}

static inline void track(uint64_t key, int kind, int e, uint64_t bytes) {
  if (UNLIKELY(vgpu_at_insert(&g.at, key, kind, e, bytes) != 0) && !g.table_full_logged) {
    g.table_full_logged = 1;
    VGPU_LOG(VGPU_LOG_ERROR,
             "allocation table full: further frees are not credited (usage stays charged)");
  }
}

/* Keeps this process's slot's context_kib[e] (the exporter's context/buffer split) in step with
 * the context charges of entry e. */
static void note_context(int e, uint64_t bytes, int add) {
  vgpu_region* r = g.rc.r;
  if (!r || g.rc.slot < 0 || e < 0 || e >= VGPU_MAX_DEVICES) return;
  uint32_t* p = &r->slots[g.rc.slot].context_kib[e];
  uint32_t kib = (uint32_t)((bytes + 1023) >> 10), old = __atomic_load_n(p, __ATOMIC_RELAXED);
  uint32_t now;
  do {
    now = add ? old + kib : (old > kib ? old - kib : 0);
  } while (!__atomic_compare_exchange_n(p, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static inline void untrack(uint64_t key, int kind) {
  int e;
  uint64_t bytes;
  if (!vgpu_at_remove(&g.at, key, kind, &e, &bytes)) return;
  if (UNLIKELY(bytes & VGPU_AT_MANAGED)) { /* managed memory under oversubscription */
    bytes &= ~VGPU_AT_MANAGED;
    __atomic_sub_fetch(&g.managed[e], bytes, __ATOMIC_RELAXED);
  }
  vgpu_region_release(&g.rc, e, bytes);
}

/* ---- Allocation hooks. ----------------------------------------------------------------------- */

/* Reserve `bytes` on entry e, make the driver call, then record `key` on success or roll back. */
#define CHARGED_CALL(e, bytes, call, key, kind) \
  do {                                          \
    CUresult r_ = reserve(e, bytes);            \
    if (r_ != CUDA_SUCCESS) return r_;          \
    r_ = call;                                  \
    if (r_ != CUDA_SUCCESS) {                   \
      vgpu_region_release(&g.rc, e, bytes);     \
      return r_;                                \
    }                                           \
    track(key, kind, e, bytes);                 \
    return r_;                                  \
  } while (0)

static inline CUresult alloc_common(CUresult r, int e, CUdeviceptr* dptr, uint64_t bytes) {
  if (r != CUDA_SUCCESS) {
    vgpu_region_release(&g.rc, e, bytes);
    return r;
  }
  track(*dptr, VGPU_KIND_DPTR, e, bytes);
  return r;
}

/* Virtual device memory (CUDA_OVERSUBSCRIBE; `bytes` already reserved against the virtual limit):
 * device memory while this process's resident usage (its charges minus its managed memory) stays
 * within the physical share and the driver has room, else managed memory, which the driver pages
 * between device and host (*managed set). */
static CUresult alloc_virtual(int e, CUdeviceptr* dptr, size_t bytesize, int* managed) {
  uint64_t mine = __atomic_load_n(&g.rc.mine[e], __ATOMIC_RELAXED);
  uint64_t held = __atomic_load_n(&g.managed[e], __ATOMIC_RELAXED);
  uint64_t resident = mine > held ? mine - held : 0;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  if (!g.share[e] || resident <= g.share[e]) r = real_cuMemAlloc_v2(dptr, bytesize);
  if (r != CUDA_ERROR_OUT_OF_MEMORY || !real_cuMemAllocManaged) return r;
  r = real_cuMemAllocManaged(dptr, bytesize, CU_MEM_ATTACH_GLOBAL);
  if (r != CUDA_SUCCESS) return r;
  *managed = 1;
  if (!__atomic_exchange_n(&g.spill_logged, 1, __ATOMIC_RELAXED)) {
    VGPU_LOG(VGPU_LOG_INFO,
             "virtual device memory: allocations beyond %s (%llu B resident) are managed memory",
             g.share[e] ? "the physical share" : "the card", (unsigned long long)resident);
  }
  return r;
}

/* cuMemAlloc_v2 (app_managed 0) or the application's cuMemAllocManaged (1, with its flags) under
 * oversubscription: charged like any allocation; managed memory is counted apart (outside the
 * physical share) and flagged in the table so that its free gives it back there too. Out of line:
 * the allocation paths without oversubscription stay as they were. */
static __attribute__((noinline)) CUresult alloc_virtual_charged(int e, CUdeviceptr* dptr,
                                                                size_t bytesize, int app_managed,
                                                                unsigned flags) {
  if (bytesize >= VGPU_AT_MANAGED) return CUDA_ERROR_OUT_OF_MEMORY; /* 128 TiB: no such device */
  CUresult r = reserve(e, bytesize);
  if (r != CUDA_SUCCESS) return r;
  int managed = app_managed;
  r = app_managed ? real_cuMemAllocManaged(dptr, bytesize, flags)
                  : alloc_virtual(e, dptr, bytesize, &managed);
  if (r != CUDA_SUCCESS) {
    vgpu_region_release(&g.rc, e, bytesize);
    return r;
  }
  if (managed) __atomic_add_fetch(&g.managed[e], bytesize, __ATOMIC_RELAXED);
  track(*dptr, VGPU_KIND_DPTR, e, managed ? bytesize | VGPU_AT_MANAGED : bytesize);
  return r;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  int e;
  if (UNLIKELY(!ready()) || (e = current_entry()) < 0 || bytesize == 0) {
    ensure_loaded();
    return real_cuMemAlloc_v2 ? real_cuMemAlloc_v2(dptr, bytesize) : CUDA_ERROR_NOT_INITIALIZED;
  }
  if (UNLIKELY(g.oversubscribe)) return alloc_virtual_charged(e, dptr, bytesize, 0, 0);
  CHARGED_CALL(e, bytesize, real_cuMemAlloc_v2(dptr, bytesize), *dptr, VGPU_KIND_DPTR);
}

/* The application's managed memory is charged like device memory; with oversubscription it lies
 * outside the physical share (the driver pages it). */
EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  int e;
  if (UNLIKELY(!ready()) || (e = current_entry()) < 0 || bytesize == 0) {
    ensure_loaded();
    return real_cuMemAllocManaged ? real_cuMemAllocManaged(dptr, bytesize, flags)
                                  : CUDA_ERROR_NOT_INITIALIZED;
  }
  if (UNLIKELY(g.oversubscribe)) return alloc_virtual_charged(e, dptr, bytesize, 1, flags);
  CHARGED_CALL(e, bytesize, real_cuMemAllocManaged(dptr, bytesize, flags), *dptr, VGPU_KIND_DPTR);
}

/* After a pitched allocation of `want` bytes (reserved) returned `r`, with rows of `pitch` bytes:
 * settles the charge on the `height` rows actually returned; frees the allocation through `undo`
 * when the padding does not fit. */
static CUresult pitch_settle(CUresult r, int e, CUdeviceptr* key, uint64_t want, uint64_t pitch,
                             uint64_t height, void (*undo)(CUdeviceptr)) {
  if (r != CUDA_SUCCESS || !pitch) return alloc_common(r, e, key, want);
  uint64_t actual = pitch * height;
  if (actual > want) {
    if (reserve(e, actual - want) != CUDA_SUCCESS) {
      undo(*key);
      vgpu_region_release(&g.rc, e, want);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  } else if (actual < want) {
    vgpu_region_release(&g.rc, e, want - actual);
  }
  return alloc_common(r, e, key, actual);
}

static void undo_pitch_v2(CUdeviceptr p) {
  if (real_cuMemFree_v2) real_cuMemFree_v2(p);
}
static void undo_pitch_v1(CUdeviceptr p) {
  if (real_cuMemFree) real_cuMemFree((vgpu_devptr_v1)p);
}

/* A pitched allocation is first charged its unpadded size, then settled on the pitch the driver
 * actually returned (pitch_settle). */
/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name. */
#define PITCH_BODY(realfn, too_big, undo)                                              \
  int e;                                                                               \
  if (UNLIKELY(!ready()) || !dptr || (e = current_entry()) < 0 || WidthInBytes == 0 || \
      Height == 0 || (too_big)) {                                                      \
    ensure_loaded();                                                                   \
    return realfn ? realfn(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes)       \
                  : CUDA_ERROR_NOT_INITIALIZED;                                        \
  }                                                                                    \
  uint64_t want = (uint64_t)WidthInBytes * Height;                                     \
  CUresult r = reserve(e, want);                                                       \
  if (r != CUDA_SUCCESS) return r;                                                     \
  r = realfn(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);                    \
  CUdeviceptr key = r == CUDA_SUCCESS ? (CUdeviceptr)*dptr : 0;                        \
  return pitch_settle(r, e, &key, want, r == CUDA_SUCCESS && pPitch ? *pPitch : 0, Height, undo);
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                   size_t Height, unsigned int ElementSizeBytes) {
  PITCH_BODY(real_cuMemAllocPitch_v2,
             WidthInBytes > ((uint64_t)1 << 40) || Height > ((uint64_t)1 << 40), undo_pitch_v2);
}

/* The legacy (CUDA 2.x) pitched allocation: 32-bit sizes and pointer, charged the same way. */
EXPORT CUresult cuMemAllocPitch(vgpu_devptr_v1* dptr, unsigned int* pPitch,
                                unsigned int WidthInBytes, unsigned int Height,
                                unsigned int ElementSizeBytes) {
  PITCH_BODY(real_cuMemAllocPitch, 0, undo_pitch_v1);
}

/* The free hooks. Accounting is active (ST_READY) only after load_real ran (ensure_init_slow), so
 * the fast path skips ensure_loaded's pthread_once; the state stays ST_READY for the rest of the
 * process (only a fork's child resets it, single-threaded). An allocation made before the state
 * was ST_READY is not in the table, so a free that finds the state otherwise before the driver
 * call and ST_READY after it has nothing to credit either (the slow path still looks). */
/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name and call its
 * parenthesized argument list. */
#define FREE_BODY(realfn, call, key, kind)                                                 \
  if (LIKELY(__atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == ST_READY && realfn != NULL)) { \
    CUresult r = realfn call;                                                              \
    if (r == CUDA_SUCCESS) untrack(key, kind);                                             \
    return r;                                                                              \
  }                                                                                        \
  ensure_loaded();                                                                         \
  if (!realfn) return CUDA_ERROR_NOT_INITIALIZED;                                          \
  CUresult r = realfn call;                                                                \
  if (r == CUDA_SUCCESS && g.state == ST_READY) untrack(key, kind);                        \
  return r;
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  FREE_BODY(real_cuMemFree_v2, (dptr), dptr, VGPU_KIND_DPTR);
}

EXPORT CUresult cuMemAlloc(vgpu_devptr_v1* dptr, unsigned int bytesize) {
  int e;
  if (UNLIKELY(!ready()) || (e = current_entry()) < 0 || bytesize == 0) {
    ensure_loaded();
    return real_cuMemAlloc ? real_cuMemAlloc(dptr, bytesize) : CUDA_ERROR_NOT_INITIALIZED;
  }
  CHARGED_CALL(e, bytesize, real_cuMemAlloc(dptr, bytesize), *dptr, VGPU_KIND_DPTR);
}

EXPORT CUresult cuMemFree(vgpu_devptr_v1 dptr) {
  FREE_BODY(real_cuMemFree, (dptr), dptr, VGPU_KIND_DPTR);
}

/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name and call its
 * parenthesized argument list. */
#define ALLOC_ASYNC_BODY(realfn, call)                                    \
  int e;                                                                  \
  if (UNLIKELY(!ready()) || (e = current_entry()) < 0 || bytesize == 0) { \
    ensure_loaded();                                                      \
    return realfn ? realfn call : CUDA_ERROR_NOT_INITIALIZED;             \
  }                                                                       \
  CHARGED_CALL(e, bytesize, realfn call, *dptr, VGPU_KIND_DPTR);
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  ALLOC_ASYNC_BODY(real_cuMemAllocAsync, (dptr, bytesize, hStream));
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  ALLOC_ASYNC_BODY(real_cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream) {
  ALLOC_ASYNC_BODY(real_cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream));
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
  ALLOC_ASYNC_BODY(real_cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream));
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  FREE_BODY(real_cuMemFreeAsync, (dptr, hStream), dptr, VGPU_KIND_DPTR);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  FREE_BODY(real_cuMemFreeAsync_ptsz, (dptr, hStream), dptr, VGPU_KIND_DPTR);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop, unsigned long long flags) {
  int e;
  if (UNLIKELY(!ready()) || !prop || !handle ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || (e = entry_of(prop->location.id)) < 0 ||
      size == 0) {
    ensure_loaded();
    return real_cuMemCreate ? real_cuMemCreate(handle, size, prop, flags)
                            : CUDA_ERROR_NOT_INITIALIZED;
  }
  CHARGED_CALL(e, size, real_cuMemCreate(handle, size, prop, flags), *handle, VGPU_KIND_HANDLE);
}

/* Physical memory of cuMemCreate lives while a handle or a mapping of it does: cuMemRelease while
 * mapped (the usual pattern: create, map, release, ... unmap) and references taken with
 * cuMemRetainAllocationHandle keep it. So the charge is credited only once the handle is released
 * as often as it was retained and its last mapping is gone. Per handle the table holds its mapping
 * and extra reference counts (KIND_VMM_REFS, size = maps | refs << 24), each mapping's handle
 * (KIND_VMM_MAP, key = address, size = handle) and a handle released while still referenced
 * (KIND_VMM_HELD, its charge). A handle of 47 bits or more, or an unmap of a range holding several
 * mappings, is not followed: its charge stays until the process exits (never an escape). */
enum { KIND_VMM_REFS = 16, KIND_VMM_MAP = 17, KIND_VMM_HELD = 18 };
static pthread_mutex_t g_vmm_mu = PTHREAD_MUTEX_INITIALIZER;
#define VMM_MAPS(v) ((v)&0xffffffull)
#define VMM_REFS(v) ((v) >> 24)

/* Removes and returns the counts of `handle` (0 when none). Caller holds g_vmm_mu. */
static uint64_t vmm_take_refs(uint64_t handle) {
  int e;
  uint64_t v = 0;
  if (!vgpu_at_remove(&g.at, handle, KIND_VMM_REFS, &e, &v)) return 0;
  return v;
}
static void vmm_put_refs(uint64_t handle, uint64_t v) {
  if (v) track(handle, KIND_VMM_REFS, 0, v);
}

/* Credits a handle released while referenced once nothing references it any more. */
static void vmm_settle(uint64_t handle, uint64_t v) {
  int e;
  uint64_t bytes;
  if (v == 0 && vgpu_at_remove(&g.at, handle, KIND_VMM_HELD, &e, &bytes))
    vgpu_region_release(&g.rc, e, bytes);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  ensure_loaded();
  if (!real_cuMemRelease) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real_cuMemRelease(handle);
  if (r != CUDA_SUCCESS || __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) != ST_READY) return r;
  pthread_mutex_lock(&g_vmm_mu);
  uint64_t v = vmm_take_refs(handle);
  int e;
  uint64_t bytes;
  if (VMM_REFS(v)) {
    v -= 1ull << 24; /* one of the retained references */
  } else if (vgpu_at_remove(&g.at, handle, VGPU_KIND_HANDLE, &e, &bytes)) {
    if (VMM_MAPS(v)) {
      track(handle, KIND_VMM_HELD, e, bytes); /* still mapped: credited at the last unmap */
    } else {
      vgpu_region_release(&g.rc, e, bytes);
    }
  }
  vmm_put_refs(handle, v);
  pthread_mutex_unlock(&g_vmm_mu);
  return r;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  ensure_loaded();
  if (!real_cuMemMap) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real_cuMemMap(ptr, size, offset, handle, flags);
  if (r != CUDA_SUCCESS || __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) != ST_READY ||
      handle >= (1ull << 47)) {
    return r;
  }
  pthread_mutex_lock(&g_vmm_mu);
  vmm_put_refs(handle, vmm_take_refs(handle) + 1);
  track(ptr, KIND_VMM_MAP, 0, handle);
  pthread_mutex_unlock(&g_vmm_mu);
  return r;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  ensure_loaded();
  if (!real_cuMemUnmap) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real_cuMemUnmap(ptr, size);
  if (r != CUDA_SUCCESS || __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) != ST_READY) return r;
  int e;
  uint64_t handle;
  pthread_mutex_lock(&g_vmm_mu);
  if (vgpu_at_remove(&g.at, ptr, KIND_VMM_MAP, &e, &handle)) {
    uint64_t v = vmm_take_refs(handle);
    if (VMM_MAPS(v)) v--;
    vmm_put_refs(handle, v);
    vmm_settle(handle, v);
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return r;
}

/* A retained reference keeps the memory as the handle does: one more cuMemRelease before the
 * charge is credited. */
EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  ensure_loaded();
  if (!real_cuMemRetainAllocationHandle) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real_cuMemRetainAllocationHandle(handle, addr);
  if (r != CUDA_SUCCESS || !handle || __atomic_load_n(&g.state, __ATOMIC_ACQUIRE) != ST_READY)
    return r;
  pthread_mutex_lock(&g_vmm_mu);
  vmm_put_refs(*handle, vmm_take_refs(*handle) + (1ull << 24));
  pthread_mutex_unlock(&g_vmm_mu);
  return r;
}

static uint64_t format_bytes(CUarray_format f) {
  switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
    default: /* compressed/planar formats: 4 is an upper bound per element */
      return 4;
  }
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned ch) {
  uint64_t n = (w ? w : 1) * (h ? h : 1);
  if (n > (1ull << 44)) return 1ull << 47;
  n *= (d ? d : 1);
  if (n > (1ull << 44)) return 1ull << 47;
  return n * format_bytes(f) * (ch ? ch : 1);
}

/* An array of w x h x d elements, charged before the driver call (every descriptor ABI). */
/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name. */
#define ARRAY_CREATE_BODY(realfn, depth)                                               \
  int e;                                                                               \
  if (UNLIKELY(!ready()) || !a || !pHandle || (e = current_entry()) < 0) {             \
    ensure_loaded();                                                                   \
    return realfn ? realfn(pHandle, a) : CUDA_ERROR_NOT_INITIALIZED;                   \
  }                                                                                    \
  uint64_t bytes = array_bytes(a->Width, a->Height, depth, a->Format, a->NumChannels); \
  CHARGED_CALL(e, bytes, realfn(pHandle, a), (uint64_t)(uintptr_t)*pHandle, VGPU_KIND_ARRAY);
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* a) {
  ARRAY_CREATE_BODY(real_cuArrayCreate_v2, 1);
}
EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* a) {
  ARRAY_CREATE_BODY(real_cuArray3DCreate_v2, a->Depth);
}
/* The legacy (CUDA 2.x) descriptors: 32-bit extents, the same 64-bit array handles. */
EXPORT CUresult cuArrayCreate(CUarray* pHandle, const vgpu_array_desc_v1* a) {
  ARRAY_CREATE_BODY(real_cuArrayCreate, 1);
}
EXPORT CUresult cuArray3DCreate(CUarray* pHandle, const vgpu_array3d_desc_v1* a) {
  ARRAY_CREATE_BODY(real_cuArray3DCreate, a->Depth);
}

EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  FREE_BODY(real_cuArrayDestroy, (hArray), (uint64_t)(uintptr_t)hArray, VGPU_KIND_ARRAY);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* a,
                                       unsigned int numMipmapLevels) {
  int e;
  if (UNLIKELY(!ready()) || !a || !pHandle || (e = current_entry()) < 0) {
    ensure_loaded();
    return real_cuMipmappedArrayCreate ? real_cuMipmappedArrayCreate(pHandle, a, numMipmapLevels)
                                       : CUDA_ERROR_NOT_INITIALIZED;
  }
  /* All levels together are at most 4/3 (2D) or 8/7 (3D) of level 0: charge the 2D bound. */
  uint64_t base = array_bytes(a->Width, a->Height, a->Depth, a->Format, a->NumChannels);
  uint64_t bytes = numMipmapLevels > 1 ? base + base / 3 + 1 : base;
  CHARGED_CALL(e, bytes, real_cuMipmappedArrayCreate(pHandle, a, numMipmapLevels),
               (uint64_t)(uintptr_t)*pHandle, VGPU_KIND_MIPMAP);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
  FREE_BODY(real_cuMipmappedArrayDestroy, (h), (uint64_t)(uintptr_t)h, VGPU_KIND_MIPMAP);
}

/* ---- Graph memory nodes: refused on a limited device. ----------------------------------------
 * A graph's memory allocation node takes device memory from the device's graph memory pool when
 * the graph is launched, and the pool keeps it after the graph frees it (until
 * cuDeviceGraphMemTrim) with no call that libvgpu could charge or credit in step. So adding one
 * whose memory would live on a device with a memory limit fails with CUDA_ERROR_NOT_SUPPORTED (a
 * code the call defines); a framework then falls back to ordinary (charged) allocations. Nodes
 * cannot be changed into allocations later (cuGraphNodeSetParams / cuGraphExecNodeSetParams do not
 * support them). */
static CUresult graph_alloc_refused(const CUmemLocation* where) {
  int e;
  if (!where || where->type != CU_MEM_LOCATION_TYPE_DEVICE || !ready() ||
      (e = entry_of(where->id)) < 0 || !g.rc.limit[e]) {
    return CUDA_SUCCESS;
  }
  static int logged;
  if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED)) {
    VGPU_LOG(VGPU_LOG_WARN,
             "graph memory allocation nodes are not supported under a device memory limit (their "
             "memory cannot be accounted); refused");
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name, args its argument
 * list. */
#define GRAPH_ADD_BODY(realfn, where, args) \
  ensure_loaded();                          \
  if (!realfn) return CUDA_ERROR_NOT_FOUND; \
  CUresult r = graph_alloc_refused(where);  \
  return r != CUDA_SUCCESS ? r : realfn args;
/* NOLINTEND(bugprone-macro-parentheses) */

static const CUmemLocation* node_alloc_location(const CUgraphNodeParams* p) {
  return p && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? &p->alloc.poolProps.location : NULL;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                       const CUgraphNode* dependencies, size_t numDependencies,
                                       CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  GRAPH_ADD_BODY(real_cuGraphAddMemAllocNode, nodeParams ? &nodeParams->poolProps.location : NULL,
                 (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}
EXPORT CUresult cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                               const CUgraphNode* dependencies, size_t numDependencies,
                               CUgraphNodeParams* nodeParams) {
  GRAPH_ADD_BODY(real_cuGraphAddNode, node_alloc_location(nodeParams),
                 (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}
EXPORT CUresult cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                  const CUgraphNode* dependencies,
                                  const CUgraphEdgeData* dependencyData, size_t numDependencies,
                                  CUgraphNodeParams* nodeParams) {
  GRAPH_ADD_BODY(real_cuGraphAddNode_v2, node_alloc_location(nodeParams),
                 (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams));
}

/* ---- Contexts: charge the device memory a context takes. ------------------------------------ */

/* Device memory the driver attributes to this process on `ord` beyond what we have charged: after a
 * context is created this is the context's overhead. Uses NVML's per-process usage; 0 if
 * unavailable. */
static uint64_t uncharged_bytes(int ord, int e) {
  if (!g.nvml_ok || !nvml_DeviceGetComputeRunningProcesses || !g.nvml_dev[ord]) return 0;
  /* As many entries as NVML has processes (a busy node can have more than any fixed array holds).
   */
  nvmlProcessInfo_v2_t small[64];
  nvmlProcessInfo_v2_t* procs = small;
  unsigned int cap = 64, n = cap;
  nvmlReturn_t r;
  for (int tries = 0; (r = nvml_DeviceGetComputeRunningProcesses(g.nvml_dev[ord], &n, procs)) ==
                          NVML_ERROR_INSUFFICIENT_SIZE &&
                      tries < 4;
       tries++) {
    if (procs != small) free(procs);
    cap = n + 16;
    procs = (nvmlProcessInfo_v2_t*)malloc(cap * sizeof(*procs));
    if (!procs) return 0;
    n = cap;
  }
  uint64_t out = 0;
  if (r == NVML_SUCCESS) {
    vgpu_proc_slot* s = &g.rc.r->slots[g.rc.slot];
    for (unsigned int i = 0; i < n && i < cap; i++) {
      if (procs[i].pid == (unsigned)getpid() || (s->host_pid && procs[i].pid == s->host_pid)) {
        /* NVML attributes no managed memory to a process: compare with what is resident. */
        uint64_t managed = __atomic_load_n(&g.managed[e], __ATOMIC_RELAXED);
        uint64_t charged = g.rc.mine[e] > managed ? g.rc.mine[e] - managed : 0;
        out = procs[i].usedGpuMemory > charged ? procs[i].usedGpuMemory - charged : 0;
        break;
      }
    }
  } else {
    VGPU_LOG(VGPU_LOG_WARN,
             "NVML process list unavailable (%d): this context's memory is not charged", (int)r);
  }
  if (procs != small) free(procs);
  return out;
}

/* Contexts. Each context the driver creates for the process (the primary context's first retain,
 * cuCtxCreate in every ABI, a green context) is charged the device memory NVML then attributes to
 * the process beyond what is charged. The process's first context on a device is always admitted
 * (charged even past the limit: without it the process can do nothing, not even free); any further
 * one that would take the container past its limit is destroyed again and the call fails with
 * CUDA_ERROR_OUT_OF_MEMORY, leaving nothing behind. g_ctx_mu serialises the driver call with its
 * measurement, so that concurrent creations do not measure (and charge) each other. */
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_ctx_live[VGPU_MAX_DEVICES]; /* per entry: created contexts alive (under g_ctx_mu) */

/* No context of this process on `dev` (entry e) but the one just created (a primary context that is
 * retained counts; `creating_primary`: the new one is the primary context). */
static int first_context(CUdevice dev, int e, int creating_primary) {
  return g_ctx_live[e] == 0 && (creating_primary || g.primary_refs[dev] == 0);
}

/* Charges the context just created on `dev`: *bytes is what was charged. CUDA_ERROR_OUT_OF_MEMORY
 * (nothing charged) when it is not the process's first context there and does not fit. */
static CUresult charge_context(CUdevice dev, int first, uint64_t* bytes) {
  *bytes = 0;
  int e = entry_of(dev);
  if (e < 0) return CUDA_SUCCESS;
  uint64_t b = uncharged_bytes(dev, e);
  if (!b) return CUDA_SUCCESS;
  if (first) {
    vgpu_region_reserve(&g.rc, e, b, 1);
  } else if (reserve(e, b) != CUDA_SUCCESS) {
    VGPU_LOG(VGPU_LOG_WARN,
             "CUDA device %d: a further context (%llu B) does not fit in the memory limit; refused",
             (int)dev, (unsigned long long)b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *bytes = b;
  return CUDA_SUCCESS;
}

/* Created contexts whose charge is noted in the slot's context_kib (a few; contexts are rare and
 * cuCtxDestroy must give back exactly what was noted). A context that finds the list full is
 * charged but not noted (the exporter then counts it as buffers). */
static struct {
  uint64_t key;
  int e;
  uint64_t bytes;
} g_ctx_notes[32];
static pthread_mutex_t g_ctx_notes_mu = PTHREAD_MUTEX_INITIALIZER;

static void ctx_note_add(uint64_t key, int e, uint64_t bytes) {
  pthread_mutex_lock(&g_ctx_notes_mu);
  for (size_t i = 0; i < sizeof(g_ctx_notes) / sizeof(g_ctx_notes[0]); i++) {
    if (g_ctx_notes[i].key == 0) {
      g_ctx_notes[i].key = key;
      g_ctx_notes[i].e = e;
      g_ctx_notes[i].bytes = bytes;
      note_context(e, bytes, 1);
      break;
    }
  }
  pthread_mutex_unlock(&g_ctx_notes_mu);
}

static void ctx_notes_reset(void) {
  memset(g_ctx_notes, 0, sizeof(g_ctx_notes));
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  g_ctx_notes_mu = m;
  g_ctx_mu = m;
  g_vmm_mu = m;
  memset(g_ctx_live, 0, sizeof(g_ctx_live));
}

static void ctx_note_drop(uint64_t key) {
  pthread_mutex_lock(&g_ctx_notes_mu);
  for (size_t i = 0; i < sizeof(g_ctx_notes) / sizeof(g_ctx_notes[0]); i++) {
    if (g_ctx_notes[i].key == key) {
      note_context(g_ctx_notes[i].e, g_ctx_notes[i].bytes, 0);
      g_ctx_notes[i].key = 0;
      break;
    }
  }
  pthread_mutex_unlock(&g_ctx_notes_mu);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  ensure_loaded();
  if (!real_cuDevicePrimaryCtxRetain) return CUDA_ERROR_NOT_INITIALIZED;
  pthread_mutex_lock(&g_ctx_mu);
  CUresult r = real_cuDevicePrimaryCtxRetain(pctx, dev);
  int e;
  if (r == CUDA_SUCCESS && ready() && dev >= 0 && dev < g.ndev && (e = entry_of(dev)) >= 0 &&
      g.primary_refs[dev]++ == 0) {
    uint64_t bytes = 0;
    if (charge_context(dev, first_context(dev, e, 1), &bytes) != CUDA_SUCCESS) {
      /* Undo the retain: the driver destroys the primary context with its last release. */
      g.primary_refs[dev] = 0;
      if (real_cuDevicePrimaryCtxRelease_v2) {
        real_cuDevicePrimaryCtxRelease_v2(dev);
      } else if (real_cuDevicePrimaryCtxRelease) {
        real_cuDevicePrimaryCtxRelease(dev);
      }
      if (pctx) *pctx = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      g.primary_bytes[dev] = bytes;
      if (bytes) note_context(e, bytes, 1);
    }
  }
  pthread_mutex_unlock(&g_ctx_mu);
  return r;
}

static void primary_release(CUdevice dev, int reset) {
  if (g.state != ST_READY || dev < 0 || dev >= g.ndev) return;
  pthread_mutex_lock(&g_ctx_mu);
  int refs = g.primary_refs[dev];
  if (refs > 0 && (reset || --g.primary_refs[dev] == 0)) {
    g.primary_refs[dev] = 0;
    int e = entry_of(dev);
    if (e >= 0 && g.primary_bytes[dev]) {
      vgpu_region_release(&g.rc, e, g.primary_bytes[dev]);
      note_context(e, g.primary_bytes[dev], 0);
    }
    g.primary_bytes[dev] = 0;
  }
  pthread_mutex_unlock(&g_ctx_mu);
}

/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name, called by it. */
#define PRIMARY_RELEASE_BODY(realfn, reset)           \
  ensure_loaded();                                    \
  if (!realfn) return CUDA_ERROR_NOT_INITIALIZED;     \
  CUresult r = realfn(dev);                           \
  if (r == CUDA_SUCCESS) primary_release(dev, reset); \
  return r;
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  PRIMARY_RELEASE_BODY(real_cuDevicePrimaryCtxRelease, 0);
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  PRIMARY_RELEASE_BODY(real_cuDevicePrimaryCtxRelease_v2, 0);
}
EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  PRIMARY_RELEASE_BODY(real_cuDevicePrimaryCtxReset, 1);
}
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  PRIMARY_RELEASE_BODY(real_cuDevicePrimaryCtxReset_v2, 1);
}

/* Destroys a context the driver created (cuCtxDestroy_v2 or the legacy entry). */
static void destroy_plain_ctx(void* ctx) {
  if (real_cuCtxDestroy_v2) {
    real_cuCtxDestroy_v2((CUcontext)ctx);
  } else if (real_cuCtxDestroy) {
    real_cuCtxDestroy((CUcontext)ctx);
  }
}
static void destroy_green_ctx(void* ctx) {
  if (real_cuGreenCtxDestroy) real_cuGreenCtxDestroy((CUgreenCtx)ctx);
}

/* After the driver created context *pctx on `dev` (r = its result; g_ctx_mu held): charged, or
 * destroyed again through `destroy` and refused (see "Contexts" above). */
static CUresult after_ctx_create(CUresult r, void** pctx, CUdevice dev, void (*destroy)(void*)) {
  int e;
  if (r != CUDA_SUCCESS || !pctx || !ready() || (e = entry_of(dev)) < 0) return r;
  uint64_t bytes = 0;
  if (charge_context(dev, first_context(dev, e, 0), &bytes) != CUDA_SUCCESS) {
    destroy(*pctx);
    *pctx = NULL;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* Tracked even when nothing was charged: its destruction ends it as one of the process's
   * contexts. */
  g_ctx_live[e]++;
  track((uint64_t)(uintptr_t)*pctx, VGPU_KIND_CTX, e, bytes);
  if (bytes) ctx_note_add((uint64_t)(uintptr_t)*pctx, e, bytes);
  return r;
}

/* After the driver destroyed `ctx` (r = its result): its charge is given back. */
static CUresult after_ctx_destroy(CUresult r, void* ctx) {
  if (r != CUDA_SUCCESS || g.state != ST_READY) return r;
  int e;
  uint64_t bytes;
  pthread_mutex_lock(&g_ctx_mu);
  if (vgpu_at_remove(&g.at, (uint64_t)(uintptr_t)ctx, VGPU_KIND_CTX, &e, &bytes)) {
    if (e >= 0 && e < VGPU_MAX_DEVICES && g_ctx_live[e] > 0) g_ctx_live[e]--;
    if (bytes) vgpu_region_release(&g.rc, e, bytes);
    ctx_note_drop((uint64_t)(uintptr_t)ctx);
  }
  pthread_mutex_unlock(&g_ctx_mu);
  return r;
}

/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name, args its argument
 * list. */
#define CTX_CREATE_BODY(realfn, args, out, destroy)                        \
  ensure_loaded();                                                         \
  if (!realfn) return CUDA_ERROR_NOT_INITIALIZED;                          \
  pthread_mutex_lock(&g_ctx_mu);                                           \
  CUresult r = after_ctx_create(realfn args, (void**)(out), dev, destroy); \
  pthread_mutex_unlock(&g_ctx_mu);                                         \
  return r;
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  CTX_CREATE_BODY(real_cuCtxCreate_v2, (pctx, flags, dev), pctx, destroy_plain_ctx);
}
EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  CTX_CREATE_BODY(real_cuCtxCreate, (pctx, flags, dev), pctx, destroy_plain_ctx);
}
EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                               unsigned int flags, CUdevice dev) {
  CTX_CREATE_BODY(real_cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev), pctx,
                  destroy_plain_ctx);
}
EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                               unsigned int flags, CUdevice dev) {
  CTX_CREATE_BODY(real_cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev), pctx,
                  destroy_plain_ctx);
}
/* A green context (CUDA 12.4) is a context of its own: the same rule. */
EXPORT CUresult cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev,
                                 unsigned int flags) {
  ensure_loaded();
  if (!real_cuGreenCtxCreate) return CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&g_ctx_mu);
  CUresult r = after_ctx_create(real_cuGreenCtxCreate(phCtx, desc, dev, flags), (void**)phCtx, dev,
                                destroy_green_ctx);
  pthread_mutex_unlock(&g_ctx_mu);
  return r;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  ensure_loaded();
  if (!real_cuCtxDestroy_v2) return CUDA_ERROR_NOT_INITIALIZED;
  return after_ctx_destroy(real_cuCtxDestroy_v2(ctx), ctx);
}
EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  ensure_loaded();
  if (!real_cuCtxDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  return after_ctx_destroy(real_cuCtxDestroy(ctx), ctx);
}
EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
  ensure_loaded();
  if (!real_cuGreenCtxDestroy) return CUDA_ERROR_NOT_FOUND;
  return after_ctx_destroy(real_cuGreenCtxDestroy(hCtx), hCtx);
}

/* ---- Memory reporting: cuMemGetInfo, cuDeviceTotalMem and NVML agree. -------------------------
 */

/* Applies the container view of entry e to a driver (free, total) pair. */
static inline void clamp_info(int e, uint64_t* free, uint64_t* total) {
  const vgpu_device_entry* d = &g.rc.r->devices[e];
  uint64_t limit = g.rc.limit[e];
  if (!limit) return;
  uint64_t used = __atomic_load_n(&d->used_bytes, __ATOMIC_ACQUIRE);
  if (UNLIKELY(g.oversubscribe)) { /* the virtual device: the limit, whatever the card holds */
    *total = limit;
    *free = limit > used ? limit - used : 0;
    return;
  }
  uint64_t t = *total < limit ? *total : limit;
  uint64_t avail = t > used ? t - used : 0;
  *total = t;
  if (*free > avail) *free = avail;
}

EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  ensure_loaded();
  if (!real_cuMemGetInfo_v2) return CUDA_ERROR_NOT_INITIALIZED;
  size_t f = 0, t = 0;
  CUresult r = real_cuMemGetInfo_v2(&f, &t);
  if (r != CUDA_SUCCESS) return r;
  uint64_t ff = f, tt = t;
  int e;
  if (LIKELY(ready()) && (e = current_entry()) >= 0) clamp_info(e, &ff, &tt);
  if (free) *free = (size_t)ff;
  if (total) *total = (size_t)tt;
  return r;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  ensure_loaded();
  if (!real_cuDeviceTotalMem_v2) return CUDA_ERROR_NOT_INITIALIZED;
  size_t t = 0;
  CUresult r = real_cuDeviceTotalMem_v2(&t, dev);
  if (r != CUDA_SUCCESS) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  int e;
  if (ready() && (e = entry_of(dev)) >= 0) {
    uint64_t limit = g.rc.limit[e];
    if (limit && (limit < t || g.oversubscribe)) t = (size_t)limit;
  }
  *bytes = t;
  return r;
}

EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  ensure_loaded();
  if (!real_cuMemGetInfo) return CUDA_ERROR_NOT_INITIALIZED;
  unsigned int f = 0, t = 0;
  CUresult r = real_cuMemGetInfo(&f, &t);
  if (r != CUDA_SUCCESS) return r;
  uint64_t ff = f, tt = t;
  int e;
  if (LIKELY(g.state == ST_READY) && (e = current_entry()) >= 0) clamp_info(e, &ff, &tt);
  if (free) *free = (unsigned int)ff;
  if (total) *total = (unsigned int)tt;
  return r;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  ensure_loaded();
  if (!real_cuDeviceTotalMem) return CUDA_ERROR_NOT_INITIALIZED;
  unsigned int t = 0;
  CUresult r = real_cuDeviceTotalMem(&t, dev);
  if (r != CUDA_SUCCESS) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  int e;
  if (g.state == ST_READY && (e = entry_of(dev)) >= 0) {
    uint64_t limit = g.rc.limit[e];
    if (limit && limit < t) t = (unsigned int)limit;
  }
  *bytes = t;
  return r;
}

/* NVML handle -> region entry (small direct-mapped cache; filled by UUID lookups). */
static struct {
  nvmlDevice_t h;
  int e;
} g_nvml_map[32];

static int nvml_entry(nvmlDevice_t h) {
  unsigned k = (unsigned)(((uintptr_t)h >> 4) & 31);
  if (g_nvml_map[k].h == h && h) return g_nvml_map[k].e;
  if (!nvml_DeviceGetUUID || !h) return -1;
  /* NVML-only processes (nvidia-smi) attach the region without initialising CUDA. */
  if (g.state != ST_READY && __atomic_load_n(&g.nvml_state, __ATOMIC_ACQUIRE) != ST_READY) {
    pthread_mutex_lock(&g.init_mu);
    if (attach_region_locked() == 0) __atomic_store_n(&g.nvml_state, ST_READY, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g.init_mu);
    if (!g.rc.r) return -1;
  }
  char uuid[VGPU_UUID_LEN];
  if (nvml_DeviceGetUUID(h, uuid, sizeof(uuid)) != NVML_SUCCESS) return -1;
  vgpu_region* r = g.rc.r;
  int e = -1;
  uint32_t n = __atomic_load_n(&r->hdr.device_count, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n && i < VGPU_MAX_DEVICES; i++) {
    if (strncmp(r->devices[i].uuid + 4, uuid + 4, VGPU_UUID_LEN - 4) == 0) e = (int)i;
  }
  if (e < 0) {
    /* No CUDA process registered this card yet: its limit index is its NVML index. */
    unsigned int idx = 0;
    int ci = (nvml_DeviceGetIndex && nvml_DeviceGetIndex(h, &idx) == NVML_SUCCESS) ? (int)idx : -1;
    e = vgpu_region_device(&g.rc, uuid, env_mem_limit(ci), env_sm_limit(ci), 0, ci, 0);
  }
  g_nvml_map[k].h = h;
  g_nvml_map[k].e = e;
  return e;
}

/* The container's pid for a pid as NVML reports it (the pid or host pid of an active slot), 0 if
 * the process is not one of this container's. A scan of the used slots: not on a hot path. */
static unsigned int container_pid(unsigned int pid) {
  vgpu_region* r = g.rc.r;
  if (!r) return 0;
  uint32_t hwm = __atomic_load_n(&r->hdr.slot_hwm, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < hwm && i < VGPU_MAX_SLOTS; i++) {
    if (__atomic_load_n(&r->slots[i].state, __ATOMIC_ACQUIRE) == VGPU_SLOT_FREE) continue;
    if (r->slots[i].pid == pid || (r->slots[i].host_pid && r->slots[i].host_pid == pid))
      return r->slots[i].pid;
  }
  return 0;
}

/* Process lists show this container's processes only, under the pids the container knows them by
 * (upstream shows host pids the container cannot resolve, or nothing). */
/* NOLINTBEGIN(bugprone-macro-parentheses): realfn is a function pointer's name; the others are the
 * hook's parameter names. */
#define FILTER_PROCS(realfn, device, count, infos)                               \
  ensure_loaded();                                                               \
  if (!realfn) return NVML_ERROR_FUNCTION_NOT_FOUND;                             \
  nvmlReturn_t r = realfn(device, count, infos);                                 \
  if (r != NVML_SUCCESS || !count || !infos || nvml_entry(device) < 0) return r; \
  unsigned int kept = 0;                                                         \
  for (unsigned int i = 0; i < *count; i++) {                                    \
    unsigned int cpid = container_pid(infos[i].pid);                             \
    if (!cpid) continue;                                                         \
    infos[kept] = infos[i];                                                      \
    infos[kept].pid = cpid;                                                      \
    kept++;                                                                      \
  }                                                                              \
  *count = kept;                                                                 \
  return r;
/* NOLINTEND(bugprone-macro-parentheses) */

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int* infoCount,
                                                            nvmlProcessInfo_v2_t* infos) {
  FILTER_PROCS(real_nvmlDeviceGetComputeRunningProcesses_v3, device, infoCount, infos);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                            unsigned int* infoCount,
                                                            nvmlProcessInfo_v2_t* infos) {
  FILTER_PROCS(real_nvmlDeviceGetComputeRunningProcesses_v2, device, infoCount, infos);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                         unsigned int* infoCount,
                                                         nvmlProcessInfo_v1_t* infos) {
  FILTER_PROCS(real_nvmlDeviceGetComputeRunningProcesses, device, infoCount, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  ensure_loaded();
  if (!real_nvmlDeviceGetMemoryInfo) return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlMemory_t m;
  nvmlReturn_t r = real_nvmlDeviceGetMemoryInfo(device, &m);
  if (r != NVML_SUCCESS) return r;
  int e = nvml_entry(device);
  if (e >= 0) {
    uint64_t f = m.free, t = m.total;
    clamp_info(e, &f, &t);
    m.free = f;
    m.total = t;
    m.used = t - f;
  }
  *memory = m;
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  ensure_loaded();
  if (!real_nvmlDeviceGetMemoryInfo_v2) return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlMemory_v2_t m = *memory; /* keeps the caller's version field */
  nvmlReturn_t r = real_nvmlDeviceGetMemoryInfo_v2(device, &m);
  if (r != NVML_SUCCESS) return r;
  int e = nvml_entry(device);
  if (e >= 0) {
    uint64_t f = m.free, t = m.total;
    clamp_info(e, &f, &t);
    m.free = f;
    m.total = t;
    uint64_t rest = t - f;
    if (m.reserved > rest) m.reserved = rest;
    m.used = rest - m.reserved;
  }
  *memory = m;
  return r;
}

/* ---- SM limiter glue. ------------------------------------------------------------------------ */

#define WATCH_PERIOD_NS 100000000ull
#define MAX_PRIORITY_WAIT_NS 2000000000ull
#define MIN_TICK_US 90000ull

static uint64_t realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* NVML's per-process samples as a real driver hands them out (seen on an H200, driver 580: see
 * docs/design.md, "Reading NVML's per-process samples"): the sampler closes a period every P (200
 * ms there; 1/6 s to 1 s by NVIDIA's documentation) and stamps it with the period's end;
 * nvmlDeviceGetProcessUtilization returns each process's newest sample newer than lastSeen, smUtil
 * being its share of that period. Asking for the samples since the start of a 100 ms window and
 * weighting them by the window (what this did before) saw a sample every other tick and counted
 * half the device time: the meter read -50 % and a 30 % limit let 61 % through.
 * Now a tick asks for the samples newer than its base and weights them by the time from the base
 * to the newest sample: the span the samples stand for, P for a periodic sampler, the interval
 * itself for a library that averages over the interval asked about (the fake libnvidia-ml's
 * default). The base is the newest sample already counted (device-wide, any process: under
 * time-slicing one process may get a whole period), but no older than P before the window's start
 * (a stale newest after an idle stretch must not inflate a sample), when this process also closed
 * the previous window; when another process of the container did, its own record is stale and the
 * base is the window's start (a sample may then be missed, never counted twice).
 * P comes from the driver's device utilisation samples (nvmlDeviceGetSamples: the gaps between
 * them) when it keeps them: the sampler is then known to be periodic, a span is worth at most
 * max(P, the window) (a stretch in which no process held a context is not stretched onto the next
 * sample), and a tick waits until a period has closed since the newest sample (plus 5 ms for the
 * driver to publish it), so that each controller window holds one period's sample instead of
 * none and then two. Otherwise P is learned as the shortest recent gap between newest samples
 * (gaps under 20 ms are a period re-stamped). Only the watcher thread touches this state. */
#define NVML_GAP_MIN_US 20000ull
#define NVML_GAP_MAX_US 2000000ull
#define NVML_GAPS 8
static struct {
  uint64_t last_ts;    /* newest sample timestamp counted (CLOCK_REALTIME us), 0 = none */
  uint64_t closed_us;  /* end of the last window this process closed */
  uint64_t sampler_us; /* the driver's sampling period from nvmlDeviceGetSamples, 0 = unknown */
  uint32_t gap_us[NVML_GAPS]; /* recent gaps between newest sample timestamps */
  uint32_t ngaps, next;
} g_nvs[MAX_ORD];

#define NVML_PUBLISH_US 5000ull

/* A gap between two sample timestamps that can be a sampling period (shorter: a period
 * re-stamped; longer: samples missed). */
static int period_gap(uint64_t from_us, uint64_t to_us) {
  return to_us > from_us && to_us - from_us >= NVML_GAP_MIN_US &&
         to_us - from_us <= NVML_GAP_MAX_US;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return (x > y) - (x < y);
}

/* The driver's sampling period on ordinal `ord`: the median gap between its device utilisation
 * samples, 0 when it keeps none (or no NVML function for them). */
static void probe_sampler(int ord) {
  if (!nvml_DeviceGetSamples) return;
  nvmlSample_t buf[128];
  unsigned int n = 128;
  int type = 0;
  if (nvml_DeviceGetSamples(g.nvml_dev[ord], NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, buf) !=
          NVML_SUCCESS ||
      n < 3 || n > 128)
    return;
  uint64_t gaps[127];
  unsigned int k = 0;
  for (unsigned int i = 1; i < n; i++)
    if (period_gap(buf[i - 1].timeStamp, buf[i].timeStamp))
      gaps[k++] = buf[i].timeStamp - buf[i - 1].timeStamp;
  if (k < 2) return;
  qsort(gaps, k, sizeof gaps[0], cmp_u64);
  g_nvs[ord].sampler_us = gaps[k / 2];
  VGPU_LOG(VGPU_LOG_DEBUG, "NVML samples device %d every %llu us", ord,
           (unsigned long long)g_nvs[ord].sampler_us);
}

/* Whether a tick on `ord` can see a new sample: always, unless the sampler is known periodic and
 * no period has closed (and been published) since the newest sample counted. */
static int sample_due(int ord, uint64_t now_us) {
  return !g_nvs[ord].sampler_us || !g_nvs[ord].last_ts ||
         now_us >= g_nvs[ord].last_ts + g_nvs[ord].sampler_us + NVML_PUBLISH_US;
}

static uint64_t nvml_period_us(int ord) {
  if (g_nvs[ord].sampler_us) return g_nvs[ord].sampler_us;
  uint64_t p = 0;
  for (uint32_t i = 0; i < g_nvs[ord].ngaps; i++)
    if (!p || g_nvs[ord].gap_us[i] < p) p = g_nvs[ord].gap_us[i];
  return p;
}

/* Device time (ns) of this container's processes and of everybody else on ordinal `ord` in the
 * samples of the window [window_start_us, window_end_us] this process closes (the sample array
 * grows to what NVML reports). */
static nvmlReturn_t process_util(int ord, uint64_t window_start_us, uint64_t window_end_us,
                                 uint64_t* mine, uint64_t* others) {
  nvmlProcessUtilizationSample_t small[64];
  nvmlProcessUtilizationSample_t* s = small;
  unsigned int cap = 64, n = cap;
  nvmlReturn_t r;
  *mine = *others = 0;
  uint64_t since = window_start_us;
  if (g_nvs[ord].closed_us == window_start_us) {
    uint64_t period = nvml_period_us(ord);
    since = window_start_us > period ? window_start_us - period : 0;
    if (g_nvs[ord].last_ts > since) since = g_nvs[ord].last_ts;
  }
  g_nvs[ord].closed_us = window_end_us;
  for (int tries = 0; (r = nvml_DeviceGetProcessUtilization(g.nvml_dev[ord], s, &n, since)) ==
                          NVML_ERROR_INSUFFICIENT_SIZE &&
                      tries < 4;
       tries++) {
    if (s != small) free(s);
    cap = n + 16;
    s = (nvmlProcessUtilizationSample_t*)malloc(cap * sizeof(*s));
    if (!s) return NVML_ERROR_INSUFFICIENT_SIZE;
    n = cap;
  }
  if (r == NVML_SUCCESS) {
    uint64_t newest = 0, mine_pct = 0, others_pct = 0;
    for (unsigned int i = 0; i < n && i < cap; i++) {
      if (s[i].timeStamp <= since) continue; /* not newer than asked (a driver that ignores it) */
      if (s[i].timeStamp > newest) newest = s[i].timeStamp;
      *(container_pid(s[i].pid) ? &mine_pct : &others_pct) += s[i].smUtil;
    }
    if (newest) {
      uint64_t last = g_nvs[ord].last_ts;
      if (last && period_gap(last, newest)) {
        g_nvs[ord].gap_us[g_nvs[ord].next] = (uint32_t)(newest - last);
        g_nvs[ord].next = (g_nvs[ord].next + 1) % NVML_GAPS;
        if (g_nvs[ord].ngaps < NVML_GAPS) g_nvs[ord].ngaps++;
      }
      g_nvs[ord].last_ts = newest;
      uint64_t span_us = newest - since;
      if (g_nvs[ord].sampler_us) {
        uint64_t window_us = window_end_us - window_start_us;
        uint64_t cap_us = window_us > g_nvs[ord].sampler_us ? window_us : g_nvs[ord].sampler_us;
        if (span_us > cap_us) span_us = cap_us;
      }
      *mine = mine_pct * span_us * 10; /* pct/100 * us * 1000 */
      *others = others_pct * span_us * 10;
    }
  }
  if (s != small) free(s);
  return r;
}

/* Elects this process to close entry d's window ending at now_us (compare-and-swap on calib_us,
 * so that one process of the container ticks each window): 1 with the window's start in *prev and
 * the waves launched since in *dw; 0 when the window is younger than MIN_TICK_US, another process
 * won it, or it is the container's first (the window then starts now). */
static int elect_window(vgpu_device_entry* d, uint64_t now_us, uint64_t* prev_out, uint64_t* dw) {
  uint64_t prev = __atomic_load_n(&d->calib_us, __ATOMIC_ACQUIRE);
  uint64_t waves = __atomic_load_n(&d->waves_launched, __ATOMIC_ACQUIRE);
  if (prev == 0 ||
      prev > now_us) { /* first tick of the container (or the clock went back): start a window */
    if (__atomic_compare_exchange_n(&d->calib_us, &prev, now_us, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
      __atomic_store_n(&d->calib_waves, waves, __ATOMIC_RELEASE);
    }
    return 0;
  }
  if (now_us - prev < MIN_TICK_US ||
      !__atomic_compare_exchange_n(&d->calib_us, &prev, now_us, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_RELAXED)) {
    return 0;
  }
  *dw = waves - __atomic_exchange_n(&d->calib_waves, waves, __ATOMIC_ACQ_REL);
  *prev_out = prev;
  return 1;
}

/* Metering only (issue 33), for a device of an armed container that has no SM limit or policy
 * disable: the container's device time in the window (NVML's per-process samples, as the
 * controller measures it) is added to busy_ms, and a busy window stamps last_launch_ns (launches
 * without limit are not counted in the region: the launch path is untouched). */
static void meter_tick(vgpu_device_entry* d, int ord, uint64_t now_us) {
  uint64_t prev = 0, dw = 0, busy_ns = 0, others = 0;
  if (!sample_due(ord, now_us) || !elect_window(d, now_us, &prev, &dw)) return;
  if (process_util(ord, prev, now_us, &busy_ns, &others) != NVML_SUCCESS || !busy_ns) return;
  __atomic_add_fetch(&d->busy_ms, (uint32_t)((busy_ns + 500000) / 1000000), __ATOMIC_RELAXED);
  __atomic_store_n(&d->last_launch_ns, now_ns(), __ATOMIC_RELAXED);
}

/* The container's controller tick for entry d (vgpu_limiter_tick), run by the one calibration
 * thread of the container that wins the window (elect_window). */
static void controller_tick(vgpu_device_entry* d, int ord, uint32_t pct, uint64_t now_us) {
  uint64_t prev = 0, dw = 0;
  if (!sample_due(ord, now_us) || !elect_window(d, now_us, &prev, &dw)) return;
  uint64_t busy_ns = 0, others_ns = 0;
  nvmlReturn_t ur = process_util(ord, prev, now_us, &busy_ns, &others_ns);
  if (ur != NVML_SUCCESS && ur != NVML_ERROR_NOT_FOUND) return; /* no measurement: no correction */
  vgpu_limiter_tick(d, pct, busy_ns, others_ns, dw, (now_us - prev) * 1000);
  VGPU_LOG(VGPU_LOG_DEBUG,
           "controller: busy %llu ns, %llu waves -> %llu ns/wave, outstanding %lld ns, tokens %lld",
           (unsigned long long)busy_ns, (unsigned long long)dw, (unsigned long long)d->ns_per_wave,
           (long long)d->outstanding_ns, (long long)d->tokens_ns);
}

/* ---- Work-conserving shares: the node monitor's lines in the read-only limits file. ---- */
#define SHARE_POLL_NS 25000000ull
static int g_share_fd = -1;

/* Reads the monitor's lines (vgpu_find_share) and sets each limited entry's rate and switch and the
 * block word; without a fresh line for a device its static limit applies. A rate that drops (or a
 * limit that comes back) lowers the bucket to the default burst at the new rate, so that tokens
 * gathered at the higher rate are not spent after a neighbour came back; while the monitor lends
 * the container's idle time to its neighbours or blocks it, the bucket banks none of it
 * (vgpu_limiter_share_poll). */
static void poll_shares(void) {
  static char buf[VGPU_CFG_MAX * 256 + VGPU_MAX_DEVICES * 160];
  ssize_t n = pread(g_share_fd, buf, sizeof buf, 0);
  if (n < 0) n = 0;
  uint64_t now = now_ns();
  int blocked_any = 0;
  for (int e = 0; e < VGPU_MAX_DEVICES; e++) {
    if (!g.sm_pct[e]) continue;
    uint32_t factor = VGPU_SHARE_FACTOR_ONE;
    int state = 0;
    if (!vgpu_find_share(buf, (size_t)n, g.uuid[e], now / 1000000, &factor, &state)) {
      factor = VGPU_SHARE_FACTOR_ONE;
      state = 0;
    }
    if (state == VGPU_SHARE_BLOCKED) blocked_any = 1;
    if (g.policy != VGPU_POLICY_DEFAULT) factor = VGPU_SHARE_FACTOR_ONE; /* force: the limit */
    uint32_t pct = vgpu_share_pct(g.sm_pct[e], factor);
    if (pct >= 100) {
      __atomic_store_n(&g.wc_on[e], 0, __ATOMIC_RELAXED);
      continue;
    }
    uint32_t old = __atomic_load_n(&g.rate_pct[e], __ATOMIC_RELAXED);
    int32_t was_on = __atomic_load_n(&g.wc_on[e], __ATOMIC_RELAXED);
    if (!was_on || pct < old) vgpu_limiter_lower(&g.rc.r->devices[e], pct, now);
    vgpu_limiter_share_poll(&g.rc.r->devices[e], pct, state, now);
    __atomic_store_n(&g.rate_pct[e], pct, __ATOMIC_RELAXED);
    __atomic_store_n(&g.wc_on[e], 1, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&g.wc_block, blocked_any ? -1 : 0, __ATOMIC_RELAXED);
}

/* Every 100 ms: activity stamps, the clamp of the bucket to its burst, and the controller tick;
 * armed, every 25 ms: the monitor's shares. */
static void* watcher_main(void* arg) {
  (void)arg;
  uint64_t last_waves[MAX_ORD] = {0};
  for (int ord = 0; ord < g.ndev; ord++) {
    int e = g.ent[ord];
    if (e >= 0)
      last_waves[ord] = __atomic_load_n(&g.rc.r->devices[e].waves_launched, __ATOMIC_ACQUIRE);
    if (e >= 0 && g.nvml_dev[ord]) probe_sampler(ord);
  }
  /* The first ticks come quickly (20, 40, 80 ms) so that the prior wave cost is replaced early. */
  uint64_t period = WATCH_PERIOD_NS / 5, since = 0;
  for (;;) {
    uint64_t step = g_share_fd >= 0 && period > SHARE_POLL_NS ? SHARE_POLL_NS : period;
    struct timespec ts = {0, (long)step};
    nanosleep(&ts, NULL);
    if (g_share_fd >= 0) poll_shares();
    since += step;
    if (since < period) continue;
    since = 0;
    if (period < WATCH_PERIOD_NS)
      period = period * 2 < WATCH_PERIOD_NS ? period * 2 : WATCH_PERIOD_NS;
    uint64_t now_us = realtime_us();
    for (int ord = 0; ord < g.ndev; ord++) {
      int e = g.ent[ord];
      if (e < 0 || !g.nvml_dev[ord]) continue;
      vgpu_device_entry* d = &g.rc.r->devices[e];
      if (!limited(e)) {
        if (g_armed) meter_tick(d, ord, now_us);
        continue;
      }
      uint64_t waves = __atomic_load_n(&d->waves_launched, __ATOMIC_ACQUIRE);
      /* Activity stamp for the node monitor (the hot path stamps only when it refills). */
      if (waves != last_waves[ord])
        __atomic_store_n(&d->last_launch_ns, now_ns(), __ATOMIC_RELAXED);
      last_waves[ord] = waves;
      /* Limiter off (policy default, monitor switch 0): launches go uncharged, so what the
       * controller measures is no debt (issue 33: it was charged when the switch came back on). */
      uint32_t pct = __atomic_load_n(&g.rate_pct[e], __ATOMIC_RELAXED);
      if (g.policy == VGPU_POLICY_DEFAULT &&
          __atomic_load_n(g.switch_word[e], __ATOMIC_ACQUIRE) == 0)
        vgpu_limiter_unlimited(d, pct);
      /* A tampered bucket (tokens far above the burst) is clamped; the controller does the rest. */
      vgpu_limiter_clamp(d, pct);
      controller_tick(d, ord, pct, now_us);
    }
  }
  return NULL;
}

/* Under g.init_mu. Armed containers start it when the process is initialised (init_locked), others
 * at their first limited launch. */
static void start_watcher_locked(void) {
  if (!g.watcher_started) {
    g.watcher_started = 1;
    if (g.nvml_ok && nvml_DeviceGetProcessUtilization) {
      /* Armed: the monitor's shares, read once now and then by the watcher. */
      /* (Only with a limit that applies: a container without one only meters, every 100 ms.) */
      if (g_armed && g.sm_active && g_limits_path[0])
        g_share_fd = open(g_limits_path, O_RDONLY | O_CLOEXEC);
      if (g_share_fd >= 0) poll_shares();
      pthread_t t;
      pthread_attr_t a;
      pthread_attr_init(&a);
      pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
      if (pthread_create(&t, &a, watcher_main, NULL) != 0) {
        VGPU_LOG(VGPU_LOG_WARN,
                 "cannot start the SM calibration thread; using the default wave cost");
      } else {
        /* The exporter's sign that busy_ms counts every window of these devices from now on. */
        for (int ord = 0; ord < g.ndev; ord++) {
          int e = g.ent[ord];
          if (e >= 0 && g.nvml_dev[ord] && (g_armed || limited(e)))
            __atomic_fetch_or(&g.rc.r->hdr.metered_mask, 1u << e, __ATOMIC_RELAXED);
        }
      }
      pthread_attr_destroy(&a);
    } else {
      VGPU_LOG(VGPU_LOG_WARN, "NVML unavailable: SM limiter uses the default wave cost");
    }
  }
}

static void start_watcher(void) {
  pthread_mutex_lock(&g.init_mu);
  start_watcher_locked();
  pthread_mutex_unlock(&g.init_mu);
}

static __attribute__((noinline)) void limit_launch_wait(vgpu_device_entry* d, uint32_t pct,
                                                        uint64_t waves) {
  if (UNLIKELY(!g.watcher_started)) start_watcher();
  uint64_t now = now_ns();
  uint64_t waited = 0;
  /* Priority (monitor feedback): a higher-priority container is active; yield, bounded. */
  while (UNLIKELY(__atomic_load_n(g.block_word, __ATOMIC_RELAXED) < 0) &&
         waited < MAX_PRIORITY_WAIT_NS) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
    waited += 10000000;
  }
  for (;;) {
    uint64_t w = vgpu_limiter_try(d, pct, waves, now);
    if (!w) break;
    if (waited >= VGPU_LIMITER_MAX_WAIT_NS) {
      VGPU_LOG(VGPU_LOG_DEBUG, "launch waited %llu ns; starting it anyway",
               (unsigned long long)waited);
      break;
    }
    struct timespec ts = {(time_t)(w / 1000000000ull), (long)(w % 1000000000ull)};
    nanosleep(&ts, NULL);
    uint64_t after = now_ns();
    waited += after - now;
    __atomic_add_fetch(&d->throttled_ns, after - now, __ATOMIC_RELAXED);
    now = after;
  }
}

/* Launch gate, inlined into every launch hook: loads and two atomic adds, no call, no clock, no
 * system call. Returns 1 when the launch may go (charged, or not limited), 0 when the slow path
 * must decide (bucket empty, calibration thread not started yet, priority wait, not initialised).
 */
static inline __attribute__((always_inline)) int launch_gate(uint64_t blocks) {
  if (UNLIKELY(g.state != ST_READY)) return 0;
  int e = current_entry();
  if (e < 0 || !g.sm_pct[e]) return 1;
  vgpu_region* r = g.rc.r;
  /* The default policy limits from the first launch, like upstream; only the node monitor lifts it
   * (utilization_switch 0: the container is alone at its priority on the device). */
  if (g.policy == VGPU_POLICY_DEFAULT && __atomic_load_n(g.switch_word[e], __ATOMIC_RELAXED) == 0) {
    return 1;
  }
  if (UNLIKELY(!g.watcher_started) || UNLIKELY(__atomic_load_n(g.block_word, __ATOMIC_RELAXED) < 0))
    return 0;
  uint64_t sms = g.sms[e];
  return vgpu_limiter_take(&r->devices[e], blocks ? (blocks + sms - 1) / sms : 1);
}

static __attribute__((noinline)) void launch_slow(uint64_t blocks) {
  if (!ready()) return;
  int e = current_entry();
  if (e < 0 || !g.sm_pct[e]) return;
  vgpu_region* r = g.rc.r;
  if (UNLIKELY(!g.watcher_started)) start_watcher();
  if (g.policy == VGPU_POLICY_DEFAULT && __atomic_load_n(g.switch_word[e], __ATOMIC_RELAXED) == 0) {
    return;
  }
  uint64_t sms = g.sms[e];
  limit_launch_wait(&r->devices[e], __atomic_load_n(&g.rate_pct[e], __ATOMIC_RELAXED),
                    blocks ? (blocks + sms - 1) / sms : 1);
}

/* A launch hook: the fast path ends in a tail call with the caller's arguments untouched (the
 * compiler needs no frame), everything else goes through name##_slow. */
#define LAUNCH_HOOK(name, params, args, blocks)                                     \
  static __attribute__((noinline)) CUresult name##_slow params {                    \
    ensure_loaded();                                                                \
    if (!real_##name) return CUDA_ERROR_NOT_INITIALIZED;                            \
    if (g.sm_active) launch_slow(blocks);                                           \
    return real_##name args;                                                        \
  }                                                                                 \
  EXPORT CUresult name params {                                                     \
    if (LIKELY(real_##name != NULL) && LIKELY(!g.sm_active || launch_gate(blocks))) \
      return real_##name args;                                                      \
    return name##_slow args;                                                        \
  }

#define GRID_BLOCKS ((uint64_t)gridDimX * gridDimY * gridDimZ)
#define EX_BLOCKS (config ? (uint64_t)config->gridDimX * config->gridDimY * config->gridDimZ : 1)

/* cuLaunchKernel(_ptsz) and cuLaunchCooperativeKernel(_ptsz) pass arguments on the stack; C
 * compilers copy those around any call, so on x86-64 these four hooks are assembly (vgpu_dlsym.S)
 * around vgpu_launch_check; elsewhere they are the C hooks below. */
#if !defined(__x86_64__) || defined(VGPU_NO_ASM)
#define KERNEL_PARAMS                                                                 \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,            \
   unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra)
#define KERNEL_ARGS                                                                           \
  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, \
   kernelParams, extra)
#define COOP_PARAMS                                                                   \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,            \
   unsigned int sharedMemBytes, CUstream hStream, void** kernelParams)
#define COOP_ARGS                                                                             \
  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, \
   kernelParams)
LAUNCH_HOOK(cuLaunchKernel, KERNEL_PARAMS, KERNEL_ARGS, GRID_BLOCKS)
LAUNCH_HOOK(cuLaunchKernel_ptsz, KERNEL_PARAMS, KERNEL_ARGS, GRID_BLOCKS)
LAUNCH_HOOK(cuLaunchCooperativeKernel, COOP_PARAMS, COOP_ARGS, GRID_BLOCKS)
LAUNCH_HOOK(cuLaunchCooperativeKernel_ptsz, COOP_PARAMS, COOP_ARGS, GRID_BLOCKS)
#endif
__attribute__((visibility("hidden"))) void vgpu_launch_check(uint64_t blocks) {
  if (UNLIKELY(!real_cuLaunchKernel)) ensure_loaded();
  if (g.sm_active && !launch_gate(blocks)) launch_slow(blocks);
}
LAUNCH_HOOK(cuLaunchKernelEx,
            (const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra),
            (config, f, kernelParams, extra), EX_BLOCKS)
LAUNCH_HOOK(cuLaunchKernelEx_ptsz,
            (const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra),
            (config, f, kernelParams, extra), EX_BLOCKS)
/* A graph's kernels are not known here: one graph launch is charged as one device-wide wave, and
 * the calibration scales the wave cost to what the workload's launches really take. */
LAUNCH_HOOK(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream),
            g.sms[0] ? g.sms[0] : 1)
LAUNCH_HOOK(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream),
            g.sms[0] ? g.sms[0] : 1)

/* ---- Entry points: cuInit, cuGetProcAddress, dlsym. ----------------------------------------- */

EXPORT CUresult cuInit(unsigned int flags) {
  ensure_loaded();
  if (!real_cuInit) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real_cuInit(flags);
  if (r == CUDA_SUCCESS && g.state == ST_NONE) {
    pthread_mutex_lock(&g.init_mu);
    init_locked();
    pthread_mutex_unlock(&g.init_mu);
  }
  return r;
}

/* Our hook for the function the real driver chose: first by identity of the real pointer (exact for
 * any version and per-thread flag), else by (base name, version, per-thread flag) from the hook
 * list. */
static void* route(const char* symbol, void* real, int cuda_version, cuuint64_t flags) {
  if (!real || !symbol) return real;
  for (int i = 0; i < kNumHooks; i++) {
    if (kHooks[i].is_cuda && *kHooks[i].real == real) return kHooks[i].hook;
  }
  int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  int best = -1;
  for (int i = 0; i < kNumHooks; i++) {
    const hook_entry* h = &kHooks[i];
    if (!h->is_cuda || strcmp(h->base, symbol) != 0 || h->version > cuda_version) continue;
    if (h->per_thread && !want_pt) continue;
    if (best < 0 || h->version > kHooks[best].version ||
        (h->version == kHooks[best].version && h->per_thread > kHooks[best].per_thread)) {
      best = i;
    }
  }
  if (best >= 0) {
    /* Only substitute when the real pointer is that very variant; otherwise the ABI could differ.
     */
    void* variant = *kHooks[best].real;
    if (variant == real) return kHooks[best].hook;
  }
  return real;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                 cuuint64_t flags) {
  ensure_loaded();
  if (!real_cuGetProcAddress) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult r = real_cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS && pfn) *pfn = route(symbol, *pfn, cudaVersion, flags);
  return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                    cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* symbolStatus) {
  ensure_loaded();
  if (!real_cuGetProcAddress_v2) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult r = real_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (r == CUDA_SUCCESS && pfn) *pfn = route(symbol, *pfn, cudaVersion, flags);
  return r;
}

/* Called by the assembly dlsym (vgpu_dlsym.S) before it tail-jumps to glibc's dlsym with the
 * caller's return address intact (so RTLD_NEXT keeps meaning "after the caller"). Returns our hook
 * for an exactly hooked name, else NULL. Never loads anything. */
__attribute__((visibility("hidden"))) void* vgpu_dlsym_resolve(void* handle, const char* name) {
  (void)handle;
  vgpu_ensure_real_dlsym();
  if (!name || !((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v')))
    return NULL;
  for (int i = 0; i < kNumHooks; i++) {
    if (strcmp(kHooks[i].name, name) == 0) return kHooks[i].hook;
  }
  return NULL;
}

#if !defined(__x86_64__) || defined(VGPU_NO_ASM)
/* dlsym in C for architectures without the assembly entry: hooks resolve the same way, but glibc
 * then sees libvgpu as the caller of RTLD_NEXT lookups. */
EXPORT void* dlsym(void* handle, const char* name) {
  void* hook = vgpu_dlsym_resolve(handle, name);
  if (hook) return hook;
  return vgpu_real_dlsym ? vgpu_real_dlsym(handle, name) : NULL;
}
#endif

/* No exit handler gives usage back: the driver frees a process's memory when the process is gone,
 * and so does the region (the slot's liveness lock drops at the same moment and the next sweep
 * reclaims it). Releasing earlier, in a destructor, would let others allocate memory the driver
 * still holds. */
