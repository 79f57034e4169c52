/* Test program for libvgpu's end-to-end tests: a plain CUDA driver API client linked with -lcuda
 * and -lnvidia-ml (the fakes in CI). Each mode prints key=value lines that vgpu_e2e_test.cc checks.
 *   exact                 OOM exactly at the limit; cuMemGetInfo / cuDeviceTotalMem / NVML agree
 *   coverage              every counted allocation path moves the reported usage by its true size
 *   loop <start_us> <n>   random alloc/free from a common start time; counts device usage above the
 * limit crash <n_allocs>      allocations of 64 MiB (run with VGPU_TEST_CRASH_POINT to die inside
 * one) devices               per CUDA ordinal: uuid, limit seen through cuDeviceTotalMem and
 * cuMemGetInfo alloc <ord> <bytes>   one allocation on an ordinal; prints its result procaddr
 * cuGetProcAddress(_v2) routing per (symbol, version, flags) threads <n>           n threads
 * allocating and freeing concurrently in one process; usage must return procs <start_us>      holds
 * a context and 64 MiB, then lists NVML compute processes of its device launch <start_us> <ms>
 * <path>  launches kernels (path: kernel|ex|coop|graph|ptsz: 1..8 waves; one: 1 wave; mixed: 1, 8,
 * 40 or 400 waves) until ms elapsed; prints this
 * cycles <start_us> <busy_ms> <idle_ms> <n>  n times: kernels for busy_ms, drain, idle for idle_ms;
 * process's device busy time and the window tamper <flag>         holds 512 MiB, creates
 * <flag>.ready, waits for <flag>, then allocates 64 MiB chunks until refused; prints what it got
 * after the wait (the test overwrites the region) hold <flag>           holds a context (no
 * allocation), creates <flag>.ready, exits once <flag> exists
 *   nvmlinfo              NVML only (no CUDA call, like nvidia-smi): device 0's memory info
 *   virtual <chunk MiB>   virtual device memory: cuMemAlloc chunks until refused, printing this
 * process's device-resident memory (fake driver, NVML) at the end; then a second context, a managed
 * allocation and a refused one, and what each reports
 *   legacy <direct|procaddr>  legacy (CUDA 2.x) arrays of 64 MiB until refused, called directly or
 * through cuGetProcAddress(..., 2000); what they were charged, and the legacy pitched allocator
 *   contexts <api>        contexts (api: v2|legacy|v3|v4|procaddr|green) next to the primary one
 * until refused; what is left after the refusal ctxfirst              the first context of a
 * process is a created one; then the primary context and another one beyond the limit fill <flag>
 * holds a context and every free byte, creates <flag>.ready, waits for <flag> graphmem a graph with
 * three 2 GiB memory allocation nodes (cuGraphAddMemAllocNode, cuGraphAddNode_v2, cuGraphAddNode
 * through cuGetProcAddress(..., 12020)), launched vmm                   cuMemCreate chunks mapped
 * and released while mapped until refused; then a handle kept by cuMemRetainAllocationHandle past
 * its release and unmap */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/nvml_abi.h"

/* The legacy (CUDA 2.x) ABIs; cuda.h declares them only for the driver's own build. */
typedef struct {
  unsigned int Width, Height;
  CUarray_format Format;
  unsigned int NumChannels;
} array_desc_v1;
typedef struct {
  unsigned int Width, Height, Depth;
  CUarray_format Format;
  unsigned int NumChannels, Flags;
} array3d_desc_v1;
/* Linked by their exported names (cuda.h maps the plain names to the newer ABIs). */
CUresult legacy_cuArrayCreate(CUarray* h, const array_desc_v1* d) __asm__("cuArrayCreate");
CUresult legacy_cuArray3DCreate(CUarray* h, const array3d_desc_v1* d) __asm__("cuArray3DCreate");
CUresult legacy_cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch, unsigned int w,
                                unsigned int h, unsigned int elem) __asm__("cuMemAllocPitch");
CUresult legacy_cuCtxCreate(CUcontext* pctx, unsigned int flags,
                            CUdevice dev) __asm__("cuCtxCreate");
CUresult legacy_cuCtxDestroy(CUcontext ctx) __asm__("cuCtxDestroy");
/* cuda.h declares these two only for the driver's own build. */
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n, unsigned int flags,
                        CUdevice dev);

/* The legacy entry point (no status argument); cuda.h maps the name to cuGetProcAddress_v2. */
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_v2_t* infos);
unsigned long long fakegpu_busy_ns(int dev, int pid);
unsigned long long fakegpu_mem_used(int dev, int pid);

#define CHECK(call)                                \
  do {                                             \
    CUresult rc_ = (call);                         \
    if (rc_ != CUDA_SUCCESS) {                     \
      printf("error=%d at=%s\n", (int)rc_, #call); \
      exit(10);                                    \
    }                                              \
  } while (0)

static const unsigned long long kMi = 1ull << 20;

static unsigned long long now_us(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
}

static void sleep_until_realtime_us(unsigned long long t) {
  unsigned long long n = now_us(CLOCK_REALTIME);
  if (t > n) usleep((useconds_t)(t - n));
}

static void uuid_of(CUdevice d, char* out) {
  CUuuid u;
  CHECK(cuDeviceGetUuid_v2(&u, d));
  const unsigned char* b = (const unsigned char*)u.bytes;
  sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
          b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
          b[15]);
}

static nvmlDevice_t nvml_of(CUdevice d, int* index) {
  char uuid[96];
  uuid_of(d, uuid);
  nvmlDevice_t h = NULL;
  unsigned int i = 0;
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS ||
      nvmlDeviceGetIndex(h, &i) != NVML_SUCCESS) {
    printf("error=nvml\n");
    exit(11);
  }
  if (index) *index = (int)i;
  return h;
}

static CUcontext ctx_on(int ord) {
  CUdevice d;
  CUcontext c;
  CHECK(cuDeviceGet(&d, ord));
  CHECK(cuDevicePrimaryCtxRetain(&c, d));
  CHECK(cuCtxSetCurrent(c));
  return c;
}

/* Prints what every reporting API says about the current device. */
static void report(const char* tag) {
  size_t f = 0, t = 0, tm = 0;
  CUdevice d;
  CHECK(cuCtxGetDevice(&d));
  CHECK(cuMemGetInfo(&f, &t));
  CHECK(cuDeviceTotalMem(&tm, d));
  nvmlDevice_t h = nvml_of(d, NULL);
  nvmlMemory_t m;
  nvmlMemory_v2_t m2;
  memset(&m2, 0, sizeof(m2));
  m2.version = (unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24));
  int r1 = nvmlDeviceGetMemoryInfo(h, &m), r2 = nvmlDeviceGetMemoryInfo_v2(h, &m2);
  printf(
      "%s_free=%zu %s_total=%zu %s_devtotal=%zu %s_nvml_rc=%d %s_nvml_free=%llu %s_nvml_total=%llu "
      "%s_nvml_used=%llu %s_nvml2_rc=%d %s_nvml2_free=%llu %s_nvml2_total=%llu\n",
      tag, f, tag, t, tag, tm, tag, r1, tag, m.free, tag, m.total, tag, m.used, tag, r2, tag,
      m2.free, tag, m2.total);
  /* NULL out-parameters are tolerated. */
  printf("%s_null_rc=%d %s_null_nvml_rc=%d\n", tag, (int)cuMemGetInfo(NULL, &t), tag,
         (int)nvmlDeviceGetMemoryInfo(h, NULL));
}

static int mode_exact(void) {
  CHECK(cuInit(0));
  ctx_on(0);
  report("start");
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t));
  CUdeviceptr a, b, c;
  printf("alloc_free_rc=%d\n", (int)cuMemAlloc(&a, f));     /* exactly what is free: fits */
  printf("alloc_one_more_rc=%d\n", (int)cuMemAlloc(&b, 1)); /* one byte over: OOM */
  report("full");
  CHECK(cuMemFree(a));
  printf("alloc_over_rc=%d\n", (int)cuMemAlloc(&c, f + 1));
  printf("alloc_again_rc=%d\n", (int)cuMemAlloc(&c, f));
  CHECK(cuMemFree(c));
  report("end");
  CHECK(cuDevicePrimaryCtxRelease(0));
  return 0;
}

static size_t used_now(void) {
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t));
  return t - f;
}

static int mode_coverage(void) {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  size_t base_used = 0;
  /* A created context is charged (the fake reports its overhead through NVML). */
  CUcontext own;
  ctx_on(0);
  base_used = used_now();
  CHECK(cuCtxCreate_v4(&own, NULL, 0, dev));
  printf("ctx_create_delta=%zu\n", used_now() - base_used);
  CHECK(cuCtxDestroy(own));
  ctx_on(0);
  printf("ctx_destroy_delta=%zd\n", (ssize_t)(used_now() - base_used));
  size_t u0 = used_now();
  CUdeviceptr p;
  size_t pitch = 0;
  CHECK(cuMemAllocPitch(&p, &pitch, 1000, 100, 4));
  printf("pitch=%zu pitch_delta=%zu\n", pitch, used_now() - u0);
  CHECK(cuMemFree(p));
  CHECK(cuMemAllocManaged(&p, 3 * kMi, CU_MEM_ATTACH_GLOBAL));
  printf("managed_delta=%zu\n", used_now() - u0);
  CHECK(cuMemFree(p));
  CUstream s;
  CHECK(cuStreamCreate(&s, 0));
  CHECK(cuMemAllocAsync(&p, 5 * kMi, s));
  printf("async_delta=%zu\n", used_now() - u0);
  CHECK(cuMemFreeAsync(p, s));
  CUmemoryPool pool;
  CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
  CHECK(cuMemAllocFromPoolAsync(&p, 7 * kMi, pool, s));
  printf("pool_delta=%zu\n", used_now() - u0);
  CHECK(cuMemFreeAsync(p, s));
  CHECK(cuStreamSynchronize(s));
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h;
  CHECK(cuMemCreate(&h, 8 * kMi, &prop, 0));
  printf("vmm_delta=%zu\n", used_now() - u0);
  CHECK(cuMemRelease(h));
  CUDA_ARRAY_DESCRIPTOR ad = {1024, 512, CU_AD_FORMAT_FLOAT, 2};
  CUarray arr;
  CHECK(cuArrayCreate(&arr, &ad));
  printf("array_delta=%zu\n", used_now() - u0);
  CHECK(cuArrayDestroy(arr));
  CUDA_ARRAY3D_DESCRIPTOR ad3 = {64, 64, 16, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  CHECK(cuArray3DCreate(&arr, &ad3));
  printf("array3d_delta=%zu\n", used_now() - u0);
  CHECK(cuArrayDestroy(arr));
  printf("final_delta=%zd\n", (ssize_t)(used_now() - u0));
  /* A free of a pointer we never allocated is the driver's business (no -1, no crash). */
  printf("bogus_free_rc=%d\n", (int)cuMemFree((CUdeviceptr)0x1234));
  return 0;
}

static int mode_loop(unsigned long long start_us, int n, unsigned long long limit) {
  CHECK(cuInit(0));
  ctx_on(0);
  int nvml_index = 0;
  nvml_of(0, &nvml_index);
  sleep_until_realtime_us(start_us);
  CUdeviceptr held[32] = {0};
  unsigned seed = (unsigned)getpid();
  int over = 0, ooms = 0, allocs = 0;
  for (int i = 0; i < n; i++) {
    int j = (int)(rand_r(&seed) % 32);
    if (held[j]) {
      CHECK(cuMemFree(held[j]));
      held[j] = 0;
    } else {
      size_t sz = (1 + rand_r(&seed) % 64) * kMi;
      CUresult r = cuMemAlloc(&held[j], sz);
      if (r == CUDA_SUCCESS) {
        allocs++;
      } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        ooms++;
        held[j] = 0;
      } else {
        printf("error=%d\n", (int)r);
        return 10;
      }
    }
    if (fakegpu_mem_used(nvml_index, 0) > limit) over++;
  }
  for (int j = 0; j < 32; j++) {
    if (held[j]) CHECK(cuMemFree(held[j]));
  }
  CHECK(cuDevicePrimaryCtxRelease(0));
  printf("allocs=%d ooms=%d over=%d\n", allocs, ooms, over);
  return 0;
}

static int mode_crash(int n) {
  CHECK(cuInit(0));
  ctx_on(0);
  for (int i = 0; i < n; i++) {
    CUdeviceptr p;
    printf("alloc_%d_rc=%d\n", i, (int)cuMemAlloc(&p, 64 * kMi));
    fflush(stdout);
  }
  return 0;
}

static int mode_devices(void) {
  CHECK(cuInit(0));
  int n;
  CHECK(cuDeviceGetCount(&n));
  for (int i = 0; i < n; i++) {
    CUdevice d;
    CHECK(cuDeviceGet(&d, i));
    char uuid[96];
    uuid_of(d, uuid);
    size_t tm, f, t;
    CHECK(cuDeviceTotalMem(&tm, d));
    ctx_on(i);
    CHECK(cuMemGetInfo(&f, &t));
    printf("ord%d_uuid=%s ord%d_devtotal=%zu ord%d_total=%zu\n", i, uuid, i, tm, i, t);
  }
  return 0;
}

static int mode_alloc(int ord, unsigned long long bytes) {
  CHECK(cuInit(0));
  ctx_on(ord);
  CUdeviceptr p;
  printf("alloc_rc=%d\n", (int)cuMemAlloc(&p, bytes));
  return 0;
}

/* Reports for each case whether the routed pointer is libvgpu's hook for the exact variant. */
static int mode_procaddr(void) {
  CHECK(cuInit(0));
  struct {
    const char* base;
    int version;
    unsigned long long flags;
    const char* want; /* exported symbol whose hook we expect, or NULL for "the real driver's" */
  } cases[] = {
      {"cuCtxCreate", 2000, 0, "cuCtxCreate"},
      {"cuCtxCreate", 3020, 0, "cuCtxCreate_v2"},
      {"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
      {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
      {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
      {"cuMemAlloc", 2000, 0, "cuMemAlloc"},
      {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
      {"cuMemGetInfo", 3010, 0, "cuMemGetInfo"},
      {"cuMemGetInfo", 12000, 0, "cuMemGetInfo_v2"},
      {"cuDevicePrimaryCtxRelease", 10000, 0, "cuDevicePrimaryCtxRelease"},
      {"cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2"},
      {"cuLaunchKernel", 12000, 0, "cuLaunchKernel"},
      {"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
       "cuLaunchKernel_ptsz"},
      {"cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
       "cuMemAllocAsync_ptsz"},
      {"cuGraphLaunch", 12000, 0, "cuGraphLaunch"},
      {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
      {"cuArrayCreate", 2000, 0, "cuArrayCreate"},
      {"cuArrayCreate", 3020, 0, "cuArrayCreate_v2"},
      {"cuArray3DCreate", 2000, 0, "cuArray3DCreate"},
      {"cuArray3DCreate", 12000, 0, "cuArray3DCreate_v2"},
      {"cuMemAllocPitch", 2000, 0, "cuMemAllocPitch"},
      {"cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2"},
      {"cuCtxDestroy", 2000, 0, "cuCtxDestroy"},
      {"cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2"},
      {"cuStreamCreate", 12000, 0, NULL},
      {"cuMemcpyHtoD", 12000, 0, NULL},
  };
  void* self = dlopen(NULL, RTLD_NOW);
  void* real = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  int bad = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    void* p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cuGetProcAddress_v2(cases[i].base, &p, cases[i].version, cases[i].flags, &st);
    Dl_info info;
    const char* where = (p && dladdr(p, &info) && info.dli_fname) ? info.dli_fname : "?";
    int ok;
    if (cases[i].want) {
      /* Under LD_PRELOAD the global lookup finds libvgpu's definition of the exact variant. */
      void* hook = dlsym(self, cases[i].want);
      ok = r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS && p == hook &&
           strstr(where, "libvgpu");
    } else {
      ok = r == CUDA_SUCCESS && p != NULL && strstr(where, "libvgpu") == NULL;
    }
    (void)real;
    printf("case%zu_%s_%d_%llu=%s\n", i, cases[i].base, cases[i].version, cases[i].flags,
           ok ? "ok" : where);
    bad += !ok;
  }
  /* Every hook of vgpu_hooks.def is what cuGetProcAddress returns for its base name, at its first
   * cudaVersion and stream flag (entry points this driver lacks are counted apart). */
  static const struct {
    const char* sym;
    const char* base;
    int version;
    int pt;
  } hooks[] = {
#define VGPU_CU(sym, base, ver, pt, params, args) {#sym, #base, ver, pt},
#include "vgpu/vgpu_hooks.def"
  };
  int checked = 0, absent = 0;
  for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
    void* p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r =
        cuGetProcAddress_v2(hooks[i].base, &p, hooks[i].version,
                            hooks[i].pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st);
    if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS) {
      absent++;
      continue;
    }
    checked++;
    if (p != dlsym(self, hooks[i].sym)) {
      printf("hook_not_routed=%s\n", hooks[i].sym);
      bad++;
    }
  }
  printf("hooks_checked=%d hooks_absent=%d\n", checked, absent);
  /* The legacy entry point (no status argument) routes the same way. */
  void* p = NULL;
  CHECK(cuGetProcAddress("cuCtxCreate", &p, 11040, 0));
  int legacy_ok = p == dlsym(self, "cuCtxCreate_v3");
  printf("legacy=%s\n", legacy_ok ? "ok" : "bad");
  bad += !legacy_ok;
  /* Calling through the routed v4 pointer works and is accounted. */
  CUresult (*create4)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice) = NULL;
  CHECK(cuGetProcAddress_v2("cuCtxCreate", (void**)&create4, 12050, 0, NULL));
  CUcontext c;
  printf("create_v4_rc=%d\n", (int)create4(&c, NULL, 0, 0));
  /* The legacy 32-bit allocator returned for cudaVersion 2000 is limited too. */
  CUresult (*alloc_v1)(unsigned int*, unsigned int) = NULL;
  CHECK(cuGetProcAddress_v2("cuMemAlloc", (void**)&alloc_v1, 2000, 0, NULL));
  CHECK(cuCtxSetCurrent(c));
  size_t f, t;
  CHECK(cuMemGetInfo_v2(&f, &t));
  unsigned int small;
  printf("legacy_over_rc=%d legacy_fit_rc=%d\n", (int)alloc_v1(&small, (unsigned int)(f + 1)),
         (int)alloc_v1(&small, 4096));
  printf("mismatches=%d\n", bad);
  return 0;
}

static CUcontext g_ctx;
static int g_thread_errors, g_thread_ooms;
static pthread_barrier_t g_barrier;

static void* thread_loop(void* arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS)
    __atomic_add_fetch(&g_thread_errors, 1, __ATOMIC_RELAXED);
  pthread_barrier_wait(&g_barrier);
  CUdeviceptr held[8] = {0};
  for (int i = 0; i < 3000; i++) {
    int j = (int)(rand_r(&seed) % 8);
    if (held[j]) {
      if (cuMemFree(held[j]) != CUDA_SUCCESS)
        __atomic_add_fetch(&g_thread_errors, 1, __ATOMIC_RELAXED);
      held[j] = 0;
    } else {
      CUresult r = cuMemAlloc(&held[j], (1 + rand_r(&seed) % 32) * kMi);
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        __atomic_add_fetch(&g_thread_ooms, 1, __ATOMIC_RELAXED);
        held[j] = 0;
      } else if (r != CUDA_SUCCESS) {
        __atomic_add_fetch(&g_thread_errors, 1, __ATOMIC_RELAXED);
      }
    }
  }
  for (int j = 0; j < 8; j++) {
    if (held[j]) cuMemFree(held[j]);
  }
  return NULL;
}

static int mode_threads(int n) {
  CHECK(cuInit(0));
  g_ctx = ctx_on(0);
  size_t f0, t0, f1, t1;
  CHECK(cuMemGetInfo(&f0, &t0));
  pthread_t th[32];
  if (n > 32) n = 32;
  pthread_barrier_init(&g_barrier, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, thread_loop, (void*)(uintptr_t)(i + 1));
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  CHECK(cuMemGetInfo(&f1, &t1));
  printf("thread_errors=%d thread_ooms=%d free_before=%zu free_after=%zu\n", g_thread_errors,
         g_thread_ooms, f0, f1);
  return 0;
}

static int mode_procs(unsigned long long start_us) {
  CHECK(cuInit(0));
  ctx_on(0);
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 64 * kMi));
  nvmlDevice_t h = nvml_of(0, NULL);
  sleep_until_realtime_us(start_us);
  nvmlProcessInfo_v2_t infos[16];
  unsigned int n = 16;
  int rc = nvmlDeviceGetComputeRunningProcesses_v3(h, &n, infos);
  int self = 0;
  for (unsigned int i = 0; i < n; i++) self += infos[i].pid == (unsigned)getpid();
  printf("procs_rc=%d procs=%u self_listed=%d\n", rc, n, self);
  usleep(500000); /* stay alive while the others list */
  return 0;
}

/* Reads this process's device busy time at exactly `end_us` (CLOCK_MONOTONIC), while the launching
 * thread may be blocked in a launch behind a long kernel. */
struct window_end {
  int nvml_index;
  unsigned long long end_us, busy;
};
static void* read_busy_at_end(void* arg) {
  struct window_end* w = (struct window_end*)arg;
  struct timespec ts = {(time_t)(w->end_us / 1000000ull), (long)(w->end_us % 1000000ull) * 1000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
  }
  w->busy = fakegpu_busy_ns(w->nvml_index, getpid());
  return NULL;
}

/* Device 0's context, its SM count, the fake's "spin" kernel and a stream. */
static void launch_setup(int* sms, CUfunction* fn, CUstream* s) {
  CHECK(cuInit(0));
  ctx_on(0);
  CUdevice d;
  CHECK(cuCtxGetDevice(&d));
  *sms = 1;
  CHECK(cuDeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
  CUmodule mod;
  CHECK(cuModuleLoadData(&mod, "fake-image"));
  CHECK(cuModuleGetFunction(fn, mod, "spin"));
  CHECK(cuStreamCreate(s, 0));
}

static int mode_launch(unsigned long long start_us, int ms, const char* path) {
  int sms;
  CUfunction fn;
  CUstream s;
  launch_setup(&sms, &fn, &s);
  int nvml_index = 0;
  nvml_of(0, &nvml_index);
  CUgraphExec exec = NULL;
  if (strcmp(path, "graph") == 0) {
    CUgraph graph;
    CHECK(cuGraphCreate(&graph, 0));
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof(kp));
    kp.func = fn;
    kp.gridDimX = (unsigned)(4 * sms);
    kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    CUgraphNode node;
    CHECK(cuGraphAddKernelNode(&node, graph, NULL, 0, &kp));
    CHECK(cuGraphInstantiate(&exec, graph, 0));
  }
  /* VGPU_E2E_QUEUE_WAVES=<w>: at most w waves of this process's kernels in flight (an event per
   * launch; the oldest are awaited before a launch that would exceed w; at most 64 kernels), as
   * the real driver queues per context. The fake otherwise blocks every process's launch on the
   * device-wide backlog, so that a process keeping it full decides by a wake-up race whether a
   * neighbour gets to launch at all. */
  CUevent queue[64];
  unsigned queue_waves[64];
  const long queue_max = getenv("VGPU_E2E_QUEUE_WAVES") ? atol(getenv("VGPU_E2E_QUEUE_WAVES")) : 0;
  long in_flight = 0, queued = 0, oldest = 0;
  if (queue_max > 0)
    for (int i = 0; i < 64; i++) CHECK(cuEventCreate(&queue[i], 0));
  unsigned seed = (unsigned)getpid();
  sleep_until_realtime_us(start_us);
  unsigned long long busy0 = fakegpu_busy_ns(nvml_index, getpid());
  unsigned long long t0 = now_us(CLOCK_MONOTONIC);
  unsigned long long end = t0 + (unsigned long long)ms * 1000ull;
  struct window_end at_end = {nvml_index, end, 0};
  pthread_t reader;
  if (pthread_create(&reader, NULL, read_busy_at_end, &at_end) != 0) return 11;
  long launches = 0;
  while (now_us(CLOCK_MONOTONIC) < end) {
    unsigned blocks = 1 + rand_r(&seed) % (unsigned)(8 * sms);
    if (strcmp(path, "one") == 0) {
      blocks = (unsigned)sms; /* kernels of exactly one wave: FAKEGPU_WAVE_US sets their length */
    } else if (strcmp(path, "mixed") == 0) {
      static const unsigned kWaves[] = {1, 8, 40, 400};
      blocks = kWaves[rand_r(&seed) % 4] * (unsigned)sms;
    }
    const unsigned waves = (blocks + (unsigned)sms - 1) / (unsigned)sms;
    while (queue_max > 0 && queued > 0 && (queued == 64 || in_flight + waves > queue_max)) {
      CHECK(cuEventSynchronize(queue[oldest % 64]));
      in_flight -= queue_waves[oldest % 64];
      oldest++;
      queued--;
    }
    CUresult r;
    if (strcmp(path, "ex") == 0) {
      CUlaunchConfig cfg;
      memset(&cfg, 0, sizeof(cfg));
      cfg.gridDimX = blocks;
      cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = s;
      r = cuLaunchKernelEx(&cfg, fn, NULL, NULL);
    } else if (strcmp(path, "coop") == 0) {
      r = cuLaunchCooperativeKernel(fn, blocks, 1, 1, 1, 1, 1, 0, s, NULL);
    } else if (strcmp(path, "graph") == 0) {
      r = cuGraphLaunch(exec, s);
    } else {
      r = cuLaunchKernel(fn, blocks, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
    }
    if (r != CUDA_SUCCESS) {
      printf("error=%d\n", (int)r);
      return 10;
    }
    if (queue_max > 0) {
      const long k = (oldest + queued) % 64;
      CHECK(cuEventRecord(queue[k], s));
      queue_waves[k] = strcmp(path, "graph") == 0 ? 4 : waves; /* the graph: one 4 x SMs kernel */
      in_flight += queue_waves[k];
      queued++;
    }
    launches++;
  }
  /* Count only device time inside the window (read at `end` by the reader thread; the last launch
   * may return later, blocked behind a long kernel), then drain the queue. */
  pthread_join(reader, NULL);
  unsigned long long busy_end = at_end.busy;
  CHECK(cuStreamSynchronize(s));
  unsigned long long busy_all = fakegpu_busy_ns(nvml_index, getpid());
  unsigned long long t1 = now_us(CLOCK_MONOTONIC);
  printf("launches=%ld busy_ns=%llu busy_window_ns=%llu window_ns=%llu drained_at_ns=%llu\n",
         launches, busy_all - busy0, busy_end - busy0, (end - t0) * 1000ull, (t1 - t0) * 1000ull);
  return 0;
}

/* Busy/idle cycles: from start_us (CLOCK_REALTIME), `n` times: kernels of 1..8 waves for busy_ms,
 * drain, then nothing for idle_ms (a container that goes idle and comes back). */
static int mode_cycles(unsigned long long start_us, int busy_ms, int idle_ms, int n) {
  int sms;
  CUfunction fn;
  CUstream s;
  launch_setup(&sms, &fn, &s);
  unsigned seed = (unsigned)getpid();
  sleep_until_realtime_us(start_us);
  for (int c = 0; c < n; c++) {
    unsigned long long end = now_us(CLOCK_MONOTONIC) + (unsigned long long)busy_ms * 1000ull;
    while (now_us(CLOCK_MONOTONIC) < end) {
      unsigned blocks = 1 + rand_r(&seed) % (unsigned)(8 * sms);
      CHECK(cuLaunchKernel(fn, blocks, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    }
    CHECK(cuStreamSynchronize(s));
    struct timespec ts = {idle_ms / 1000, (long)(idle_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* Waits (bounded: 30 s) until `path` exists. */
static int wait_for_file(const char* path) {
  for (int i = 0; i < 3000; i++) {
    if (access(path, F_OK) == 0) return 0;
    usleep(10000);
  }
  return -1;
}

static void touch(const char* path) {
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
}

static int mode_tamper(const char* flag) {
  CHECK(cuInit(0));
  ctx_on(0);
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 512 * kMi));
  char ready[4096];
  snprintf(ready, sizeof(ready), "%s.ready", flag);
  touch(ready);
  if (wait_for_file(flag) != 0) return 12;
  unsigned long long got = 0;
  int chunks = 0;
  for (; chunks < 256; chunks++) {
    if (cuMemAlloc(&p, 64 * kMi) != CUDA_SUCCESS) break;
    got += 64 * kMi;
  }
  size_t f = 0, t = 0;
  CHECK(cuMemGetInfo(&f, &t));
  printf("after_bytes=%llu after_free=%zu after_total=%zu\n", got, f, t);
  return 0;
}

static int mode_hold(const char* flag) {
  CHECK(cuInit(0));
  ctx_on(0);
  char ready[4096];
  snprintf(ready, sizeof(ready), "%s.ready", flag);
  touch(ready);
  return wait_for_file(flag) == 0 ? 0 : 12;
}

static int mode_virtual(unsigned long long chunk) {
  CHECK(cuInit(0));
  CUdevice d;
  CHECK(cuDeviceGet(&d, 0));
  ctx_on(0);
  int nvml_index = 0;
  nvmlDevice_t h = nvml_of(d, &nvml_index);
  report("start");
  static CUdeviceptr p[4096];
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  unsigned long long resident_max = 0;
  for (; n < 4096; n++) {
    rc = cuMemAlloc(&p[n], chunk);
    if (rc != CUDA_SUCCESS) break;
    unsigned long long r = fakegpu_mem_used(nvml_index, getpid());
    if (r > resident_max) resident_max = r;
  }
  printf("chunks=%d last_rc=%d resident_max=%llu\n", n, (int)rc, resident_max);
  nvmlProcessInfo_v2_t procs[64];
  unsigned int count = 64;
  unsigned long long nvml_proc = 0;
  if (nvmlDeviceGetComputeRunningProcesses_v3(h, &count, procs) == NVML_SUCCESS) {
    for (unsigned int i = 0; i < count; i++)
      if (procs[i].pid == (unsigned)getpid()) nvml_proc = procs[i].usedGpuMemory;
  }
  printf("nvml_proc=%llu\n", nvml_proc);
  report("full");
  /* Make room for a context, then check that it is charged although this process holds managed
   * memory the driver does not attribute to it. */
  n--;
  CHECK(cuMemFree(p[n]));
  n--;
  CHECK(cuMemFree(p[n]));
  size_t f0, t0, f1, t1;
  CHECK(cuMemGetInfo(&f0, &t0));
  CUcontext own;
  CUresult crc = cuCtxCreate_v4(&own, NULL, 0, d);
  printf("ctx_rc=%d\n", (int)crc);
  if (crc == CUDA_SUCCESS) {
    CHECK(cuMemGetInfo(&f1, &t1));
    printf("ctx_charged=%lld\n", (long long)f0 - (long long)f1);
    CHECK(cuCtxDestroy(own));
  }
  ctx_on(0);
  CUdeviceptr m = 0, big = 0;
  CHECK(cuMemGetInfo(&f0, &t0));
  printf("managed_rc=%d\n", (int)cuMemAllocManaged(&m, chunk, CU_MEM_ATTACH_GLOBAL));
  printf("managed_over_rc=%d\n", (int)cuMemAllocManaged(&big, t0, CU_MEM_ATTACH_GLOBAL));
  CHECK(cuMemGetInfo(&f1, &t1));
  printf("managed_charged=%lld\n", (long long)f0 - (long long)f1);
  CHECK(cuMemFree(m));
  for (int i = 0; i < n; i++) CHECK(cuMemFree(p[i]));
  report("end");
  CHECK(cuDevicePrimaryCtxRelease(0));
  return 0;
}

/* cuInit, device 0's primary context made current; returns the device's NVML index. */
static int start_on_device0(CUdevice* d) {
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(d, 0));
  ctx_on(0);
  int idx = 0;
  nvml_of(*d, &idx);
  return idx;
}

typedef CUresult (*array_fn)(CUarray*, const array_desc_v1*);
typedef CUresult (*array3d_fn)(CUarray*, const array3d_desc_v1*);

static int mode_legacy(const char* via) {
  CUdevice d;
  int idx = start_on_device0(&d);
  array_fn create = legacy_cuArrayCreate;
  array3d_fn create3d = legacy_cuArray3DCreate;
  if (!strcmp(via, "procaddr")) {
    CHECK(cuGetProcAddress_v2("cuArrayCreate", (void**)&create, 2000, 0, NULL));
    CHECK(cuGetProcAddress_v2("cuArray3DCreate", (void**)&create3d, 2000, 0, NULL));
  }
  size_t f0, t0, f, t;
  CHECK(cuMemGetInfo(&f0, &t0));
  /* 64 MiB each, 2D (4096 x 4096 floats) and 3D (1024 x 1024 x 16 of 4 x 8 bits) in turn. */
  const array_desc_v1 d2 = {4096, 4096, CU_AD_FORMAT_FLOAT, 1};
  const array3d_desc_v1 d3 = {1024, 1024, 16, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  static CUarray a[512];
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  for (; n < 512; n++) {
    rc = n % 2 ? create3d(&a[n], &d3) : create(&a[n], &d2);
    if (rc != CUDA_SUCCESS) break;
  }
  CHECK(cuMemGetInfo(&f, &t));
  printf("start_free=%zu arrays=%d last_rc=%d charged=%zu held=%llu\n", f0, n, (int)rc, f0 - f,
         fakegpu_mem_used(idx, getpid()));
  /* The legacy pitched allocator: refused beyond the limit, the driver's business within it. */
  unsigned int p32 = 0, pitch = 0;
  CUresult over = legacy_cuMemAllocPitch(&p32, &pitch, 4096, (unsigned int)(f / 4096 + 1), 4);
  CUresult fit = legacy_cuMemAllocPitch(&p32, &pitch, 512, 2, 4);
  printf("pitch_over_rc=%d pitch_fit_rc=%d\n", (int)over, (int)fit);
  if (fit == CUDA_SUCCESS) CHECK(cuMemFree_v2(p32));
  for (int i = 0; i < n; i++) CHECK(cuArrayDestroy(a[i]));
  CHECK(cuMemGetInfo(&f, &t));
  printf("end_free=%zu\n", f);
  return 0;
}

static int mode_contexts(const char* api) {
  CUdevice d;
  int idx = start_on_device0(&d);
  CUcontext primary;
  CHECK(cuCtxGetCurrent(&primary));
  size_t f0, t0, f, t;
  CHECK(cuMemGetInfo(&f0, &t0));
  CUresult (*create)(CUcontext*, unsigned int, CUdevice) = cuCtxCreate_v2;
  if (!strcmp(api, "legacy")) create = legacy_cuCtxCreate;
  if (!strcmp(api, "procaddr")) {
    CHECK(cuGetProcAddress_v2("cuCtxCreate", (void**)&create, 2000, 0, NULL));
  }
  static CUcontext c[64];
  int n = 0, kept = -1;
  CUresult rc = CUDA_SUCCESS;
  for (; n < 64; n++) {
    CUcontext before = NULL, after = NULL;
    CHECK(cuCtxGetCurrent(&before));
    if (!strcmp(api, "green")) { /* the fake accepts any resource descriptor */
      rc = cuGreenCtxCreate((CUgreenCtx*)&c[n], (CUdevResourceDesc)&c[n], d,
                            CU_GREEN_CTX_DEFAULT_STREAM);
    } else if (!strcmp(api, "v3")) {
      rc = cuCtxCreate_v3(&c[n], NULL, 0, 0, d);
    } else if (!strcmp(api, "v4")) {
      rc = cuCtxCreate_v4(&c[n], NULL, 0, d);
    } else {
      rc = create(&c[n], 0, d);
    }
    if (rc != CUDA_SUCCESS) { /* nothing left behind: the thread's current context is unchanged */
      CHECK(cuCtxGetCurrent(&after));
      kept = after == before;
      break;
    }
  }
  CHECK(cuMemGetInfo(&f, &t));
  printf("start_free=%zu created=%d last_rc=%d current_kept=%d charged=%zu held=%llu\n", f0, n,
         (int)rc, kept, f0 - f, fakegpu_mem_used(idx, getpid()));
  for (int i = n - 1; i >= 0; i--) {
    CHECK(!strcmp(api, "legacy")  ? legacy_cuCtxDestroy(c[i])
          : !strcmp(api, "green") ? cuGreenCtxDestroy((CUgreenCtx)c[i])
                                  : cuCtxDestroy_v2(c[i]));
  }
  CHECK(cuCtxSetCurrent(primary));
  CHECK(cuMemGetInfo(&f, &t));
  printf("end_free=%zu\n", f);
  CHECK(cuDevicePrimaryCtxRelease(0));
  return 0;
}

/* The process's first context is a created one (always admitted); then the primary context and a
 * further created one, which must fit in the limit. */
static int mode_ctxfirst(void) {
  CHECK(cuInit(0));
  CUdevice d;
  CHECK(cuDeviceGet(&d, 0));
  int idx = 0;
  nvml_of(d, &idx);
  CUcontext own = NULL, other = NULL, pc = (CUcontext)&pc;
  CUresult first = cuCtxCreate_v2(&own, 0, d);
  printf("first_rc=%d\n", (int)first);
  if (first != CUDA_SUCCESS) return 0;
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t));
  CUdeviceptr rest = 0;
  if (f) CHECK(cuMemAlloc(&rest, f)); /* the rest of the limit */
  unsigned long long held = fakegpu_mem_used(idx, getpid());
  CUresult pr = cuDevicePrimaryCtxRetain(&pc, d);
  unsigned int flags = 0;
  int active = -1;
  CHECK(cuDevicePrimaryCtxGetState(d, &flags, &active));
  CUresult cr = cuCtxCreate_v4(&other, NULL, 0, d);
  printf(
      "start_free=%zu primary_rc=%d primary_active=%d primary_null=%d create_rc=%d "
      "held_delta=%lld\n",
      f, (int)pr, active, pc == NULL, (int)cr, (long long)(fakegpu_mem_used(idx, getpid()) - held));
  if (rest) CHECK(cuMemFree(rest));
  pr = cuDevicePrimaryCtxRetain(&pc, d);
  printf("primary_after_free_rc=%d\n", (int)pr);
  if (pr == CUDA_SUCCESS) CHECK(cuDevicePrimaryCtxRelease(d));
  CHECK(cuCtxDestroy_v2(own));
  return 0;
}

static int mode_fill(const char* flag) {
  CHECK(cuInit(0));
  ctx_on(0);
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t));
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, f));
  char ready[4096];
  snprintf(ready, sizeof(ready), "%s.ready", flag);
  touch(ready);
  return wait_for_file(flag) == 0 ? 0 : 12;
}

static int mode_graphmem(void) {
  CUdevice d;
  int idx = start_on_device0(&d);
  CUgraph g;
  CHECK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof(p));
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = 0;
  p.bytesize = 2048 * kMi;
  CUgraphNodeParams np;
  memset(&np, 0, sizeof(np));
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  np.alloc.poolProps = p.poolProps;
  np.alloc.bytesize = p.bytesize;
  CUgraphNode n;
  CUresult r1 = cuGraphAddMemAllocNode(&n, g, NULL, 0, &p);
  CUresult r2 = cuGraphAddNode(&n, g, NULL, NULL, 0, &np); /* cuGraphAddNode_v2 */
  CUresult (*add_v1)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUgraphNodeParams*) = NULL;
  CHECK(cuGetProcAddress_v2("cuGraphAddNode", (void**)&add_v1, 12020, 0, NULL));
  CUresult r3 = add_v1(&n, g, NULL, 0, &np);
  CUgraphExec x;
  CHECK(cuGraphInstantiate(&x, g, 0));
  CUresult lr = cuGraphLaunch(x, NULL);
  CHECK(cuCtxSynchronize());
  printf("alloc_node_rc=%d add_node_rc=%d add_node_v1_rc=%d launch_rc=%d held=%llu\n", (int)r1,
         (int)r2, (int)r3, (int)lr, fakegpu_mem_used(idx, getpid()));
  return 0;
}

static int mode_vmm(void) {
  CUdevice d;
  int idx = start_on_device0(&d);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  const size_t chunk = 256 * kMi;
  size_t f0, t0, f, t;
  CHECK(cuMemGetInfo(&f0, &t0));
  unsigned long long held0 = fakegpu_mem_used(idx, getpid());
  static CUdeviceptr va[64];
  int n = 0;
  CUresult rc = CUDA_SUCCESS;
  for (; n < 64; n++) {
    CUmemGenericAllocationHandle h;
    rc = cuMemCreate(&h, chunk, &prop, 0);
    if (rc != CUDA_SUCCESS) break;
    CHECK(cuMemAddressReserve(&va[n], chunk, 0, 0, 0));
    CHECK(cuMemMap(va[n], chunk, 0, h, 0));
    CHECK(cuMemRelease(h)); /* the usual pattern: the mapping keeps the memory */
  }
  CHECK(cuMemGetInfo(&f, &t));
  printf("start_free=%zu mapped=%d last_rc=%d charged=%zu held=%llu\n", f0, n, (int)rc, f0 - f,
         fakegpu_mem_used(idx, getpid()) - held0);
  for (int i = 0; i < n; i++) {
    CHECK(cuMemUnmap(va[i], chunk));
    CHECK(cuMemAddressFree(va[i], chunk));
  }
  CHECK(cuMemGetInfo(&f, &t));
  printf("unmapped_free=%zu\n", f);
  /* A retained reference keeps the memory past the handle's release and the unmap. */
  CUmemGenericAllocationHandle h, h2;
  CUdeviceptr v;
  CHECK(cuMemCreate(&h, chunk, &prop, 0));
  CHECK(cuMemAddressReserve(&v, chunk, 0, 0, 0));
  CHECK(cuMemMap(v, chunk, 0, h, 0));
  CHECK(cuMemRetainAllocationHandle(&h2, (void*)v));
  CHECK(cuMemRelease(h));
  CHECK(cuMemUnmap(v, chunk));
  CHECK(cuMemGetInfo(&f, &t));
  printf("retained_charged=%zu retained_held=%llu\n", f0 - f,
         fakegpu_mem_used(idx, getpid()) - held0);
  CHECK(cuMemRelease(h2));
  CHECK(cuMemAddressFree(v, chunk));
  CHECK(cuMemGetInfo(&f, &t));
  printf("end_free=%zu end_held=%llu\n", f, fakegpu_mem_used(idx, getpid()) - held0);
  return 0;
}

static int mode_nvmlinfo(void) {
  nvmlDevice_t h;
  nvmlMemory_t m;
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &h) != NVML_SUCCESS ||
      nvmlDeviceGetMemoryInfo(h, &m) != NVML_SUCCESS)
    return 11;
  printf("nvml_total=%llu nvml_free=%llu\n", m.total, m.free);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return 2;
  const char* m = argv[1];
  if (!strcmp(m, "exact")) return mode_exact();
  if (!strcmp(m, "coverage")) return mode_coverage();
  if (!strcmp(m, "loop") && argc == 5)
    return mode_loop(strtoull(argv[2], 0, 10), atoi(argv[3]), strtoull(argv[4], 0, 10));
  if (!strcmp(m, "crash") && argc == 3) return mode_crash(atoi(argv[2]));
  if (!strcmp(m, "devices")) return mode_devices();
  if (!strcmp(m, "alloc") && argc == 4) return mode_alloc(atoi(argv[2]), strtoull(argv[3], 0, 10));
  if (!strcmp(m, "procaddr")) return mode_procaddr();
  if (!strcmp(m, "threads") && argc == 3) return mode_threads(atoi(argv[2]));
  if (!strcmp(m, "procs") && argc == 3) return mode_procs(strtoull(argv[2], 0, 10));
  if (!strcmp(m, "cycles") && argc == 6)
    return mode_cycles(strtoull(argv[2], 0, 10), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  if (!strcmp(m, "launch") && argc == 5)
    return mode_launch(strtoull(argv[2], 0, 10), atoi(argv[3]), argv[4]);
  if (!strcmp(m, "tamper") && argc == 3) return mode_tamper(argv[2]);
  if (!strcmp(m, "hold") && argc == 3) return mode_hold(argv[2]);
  if (!strcmp(m, "nvmlinfo")) return mode_nvmlinfo();
  if (!strcmp(m, "legacy") && argc == 3) return mode_legacy(argv[2]);
  if (!strcmp(m, "contexts") && argc == 3) return mode_contexts(argv[2]);
  if (!strcmp(m, "ctxfirst")) return mode_ctxfirst();
  if (!strcmp(m, "fill") && argc == 3) return mode_fill(argv[2]);
  if (!strcmp(m, "graphmem")) return mode_graphmem();
  if (!strcmp(m, "vmm")) return mode_vmm();
  if (!strcmp(m, "virtual") && argc == 3) return mode_virtual(strtoull(argv[2], 0, 10) << 20);
  return 2;
}
