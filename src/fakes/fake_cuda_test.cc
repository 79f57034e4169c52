// Tests of the fake libcuda.so.1 through its exported C ABI (linked like -lcuda).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "fakes/test_util.h"

namespace fakegpu::testing {
namespace {

constexpr size_t kMiB = 1ULL << 20;

unsigned long long MonoNow() {  // the fake's device clock
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ULL +
         static_cast<unsigned long long>(ts.tv_nsec);
}

TEST(FakeCudaTest, NotInitializedBeforeCuInit) {
  FakeEnv env;
  int n = 0;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  EXPECT_EQ(cuDriverGetVersion(&version), CUDA_SUCCESS);  // allowed before cuInit
  EXPECT_EQ(version, 13000);
  EXPECT_EQ(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  EXPECT_EQ(n, 1);
}

TEST(FakeCudaTest, DeviceQueries) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES,
                "Tesla T4:15360:40;NVIDIA H100 80GB "
                "HBM3:81559:132:GPU-12345678-1234-1234-1234-123456789abc"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  struct Case {
    int ordinal;
    const char* name;
    size_t mib;
    int sms, major, minor, bus;
  };
  const Case cases[] = {{0, "Tesla T4", 15360, 40, 7, 5, 0x18},
                        {1, "NVIDIA H100 80GB HBM3", 81559, 132, 9, 0, 0x20}};
  for (const Case& c : cases) {
    CUdevice dev = -1;
    ASSERT_EQ(cuDeviceGet(&dev, c.ordinal), CUDA_SUCCESS);
    char name[96];
    ASSERT_EQ(cuDeviceGetName(name, sizeof name, dev), CUDA_SUCCESS);
    EXPECT_STREQ(name, c.name);
    size_t total = 0;
    ASSERT_EQ(cuDeviceTotalMem_v2(&total, dev), CUDA_SUCCESS);
    EXPECT_EQ(total, c.mib * kMiB);
    int v = 0;
    ASSERT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
              CUDA_SUCCESS);
    EXPECT_EQ(v, c.sms);
    ASSERT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
              CUDA_SUCCESS);
    EXPECT_EQ(v, c.major);
    ASSERT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
              CUDA_SUCCESS);
    EXPECT_EQ(v, c.minor);
    ASSERT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev), CUDA_SUCCESS);
    EXPECT_EQ(v, c.bus);
    char bus_id[32];
    ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, dev), CUDA_SUCCESS);
    char want[32];
    std::snprintf(want, sizeof want, "0000:%02X:00.0", c.bus);
    EXPECT_STREQ(bus_id, want);
  }
  CUuuid uuid;
  ASSERT_EQ(cuDeviceGetUuid_v2(&uuid, 1), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char>(uuid.bytes[0]), 0x12);
  EXPECT_EQ(static_cast<unsigned char>(uuid.bytes[15]), 0xbc);
  CUdevice dev;
  EXPECT_EQ(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
  int v;
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST(FakeCudaTest, NullOutParamsAreInvalidValue) {
  FakeEnv env;
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  size_t s = 0;
  const int rcs[] = {
      cuDeviceGetCount(nullptr),
      cuDeviceGet(nullptr, 0),
      cuDeviceGetName(nullptr, 10, 0),
      cuDeviceTotalMem_v2(nullptr, 0),
      cuDeviceGetAttribute(nullptr, 16, 0),
      cuDevicePrimaryCtxRetain(nullptr, 0),
      cuCtxGetCurrent(nullptr),
      cuCtxGetDevice(nullptr),
      cuMemAlloc_v2(nullptr, 1),
      cuMemGetInfo_v2(nullptr, &s),
      cuMemGetInfo_v2(&s, nullptr),
      cuMemAllocPitch_v2(nullptr, &s, 1, 1, 4),
      cuStreamCreate(nullptr, 0),
      cuEventCreate(nullptr, 0),
      cuModuleLoadData(nullptr, "x"),
      cuGetErrorName(0, nullptr),
      cuGetProcAddress_v2(nullptr, nullptr, 13000, 0, nullptr),
      cuDriverGetVersion(nullptr),
  };
  for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; ++i)
    EXPECT_EQ(rcs[i], CUDA_ERROR_INVALID_VALUE) << "case " << i;
  const void* table = reinterpret_cast<const void*>(1);
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(table, nullptr);
}

TEST(FakeCudaTest, MemoryAccountingAndLimits) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Small:1024:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "100"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, kMiB), CUDA_ERROR_INVALID_CONTEXT);  // no current context yet
  ASSERT_NE(UsePrimary(0), nullptr);
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(total_b, 1024 * kMiB);
  EXPECT_EQ(free_b, (1024 - 100) * kMiB);  // context overhead
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 100 * kMiB);

  struct Step {
    const char* what;
    size_t bytes;
    int want;
  };
  const Step steps[] = {{"fits", 500 * kMiB, CUDA_SUCCESS},
                        {"exceeds", 500 * kMiB, CUDA_ERROR_OUT_OF_MEMORY},
                        {"fills exactly", 424 * kMiB, CUDA_SUCCESS},
                        {"one more byte", 1, CUDA_ERROR_OUT_OF_MEMORY},
                        {"zero bytes", 0, CUDA_ERROR_INVALID_VALUE}};
  std::set<CUdeviceptr> ptrs;
  for (const Step& s : steps) {
    CUdeviceptr q = 0;
    EXPECT_EQ(cuMemAlloc_v2(&q, s.bytes), s.want) << s.what;
    if (s.want == CUDA_SUCCESS) {
      EXPECT_NE(q, 0u) << s.what;
      EXPECT_TRUE(ptrs.insert(q).second) << s.what;
    }
  }
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(free_b, 0u);
  for (CUdeviceptr q : ptrs) EXPECT_EQ(cuMemFree_v2(q), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(*ptrs.begin()), CUDA_ERROR_INVALID_VALUE);  // double free
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(free_b, (1024 - 100) * kMiB);
}

// Managed memory on a GPU that pages it (Pascal and later): device-resident while it fits, the rest
// in host memory (never out of memory); device allocations page it out to the host.
TEST(FakeCudaTest, ManagedMemorySpillsToHostAndIsPagedOut) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Small:1024:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "100"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  int pages = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&pages, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(pages, 1);
  CUdeviceptr a = 0, m = 0, b = 0, h = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 600 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc_v2(&b, 600 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemAllocManaged(&m, kMiB, 4),
            CUDA_ERROR_INVALID_VALUE);  // ATTACH_SINGLE: streams only
  ASSERT_EQ(cuMemAllocManaged(&m, 2048 * kMiB, CU_MEM_ATTACH_GLOBAL),
            CUDA_SUCCESS);  // 324 MiB resident
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 1024 * kMiB);
  size_t free_b = 1, total_b = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(free_b, 0u);
  ASSERT_EQ(cuMemAllocManaged(&h, 512 * kMiB, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);  // on the host
  EXPECT_EQ(fakegpu_mem_used(0, 0), 1024 * kMiB);
  // Device memory pages 200 MiB of the managed memory out; more than the card still fails.
  ASSERT_EQ(cuMemAlloc_v2(&b, 200 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 1024 * kMiB);
  CUdeviceptr c = 0;
  EXPECT_EQ(cuMemAlloc_v2(&c, 200 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  // NVML attributes only the device memory to the process, not its managed pages.
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t nd;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &nd), NVML_SUCCESS);
  nvmlProcessInfo_t procs[4];
  unsigned n = 4;
  ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(nd, &n, procs), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(procs[0].usedGpuMemory, 900 * kMiB);
  nvmlMemory_t mem;
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(nd, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.used, 1024 * kMiB);
  nvmlShutdown();
  EXPECT_EQ(cuMemFree_v2(m), CUDA_SUCCESS);  // gives back what was still resident
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 900 * kMiB);
  EXPECT_EQ(cuMemFree_v2(h), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(b), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 100 * kMiB);
}

// Before Pascal (Kepler, Maxwell) managed memory lives on the device: it cannot exceed it.
TEST(FakeCudaTest, ManagedMemoryOnPrePascalGpusMustFit) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Tesla K80:1024:13"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "100"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  int pages = 1;
  ASSERT_EQ(cuDeviceGetAttribute(&pages, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(pages, 0);
  CUdeviceptr m = 0, h = 0, a = 0;
  EXPECT_EQ(cuMemAllocManaged(&m, 2048 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemAllocManaged(&m, 600 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocManaged(&h, 200 * kMiB, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 900 * kMiB);
  EXPECT_EQ(cuMemAlloc_v2(&a, 200 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // nothing to page out
  EXPECT_EQ(cuMemFree_v2(m), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(h), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 100 * kMiB);
}

TEST(FakeCudaTest, AllocationKinds) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Small:1024:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "0"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  // Pitch rounds the row up to 512 bytes.
  CUdeviceptr p = 0;
  size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch_v2(&p, &pitch, 1000, 100, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 1024u * 100);
  EXPECT_EQ(cuMemAllocPitch_v2(&p, &pitch, 1000, 100, 3), CUDA_ERROR_INVALID_VALUE);
  // Managed and stream-ordered allocations are charged too.
  CUdeviceptr m = 0, a = 0;
  ASSERT_EQ(cuMemAllocManaged(&m, 10 * kMiB, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&a, 20 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 1024u * 100 + 30 * kMiB);
  ASSERT_EQ(cuMemFreeAsync(a, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(m), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 0u);
  // VMM: physical memory is charged from cuMemCreate until released and unmapped.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(cuMemCreate(&h, 3 * kMiB, &prop, 0),
            CUDA_ERROR_INVALID_VALUE);  // not a granularity multiple
  ASSERT_EQ(cuMemCreate(&h, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 4 * kMiB);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 4 * kMiB, 0, h, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // overlaps
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 4 * kMiB);  // still mapped
  ASSERT_EQ(cuMemUnmap(va, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 0u);
  ASSERT_EQ(cuMemAddressFree(va, 8 * kMiB), CUDA_SUCCESS);
  // Arrays: width * height * channels * element size.
  CUDA_ARRAY_DESCRIPTOR desc{1024, 512, CU_AD_FORMAT_FLOAT, 4};
  CUarray arr = nullptr;
  ASSERT_EQ(cuArrayCreate_v2(&arr, &desc), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 1024u * 512 * 16);
  ASSERT_EQ(cuArrayDestroy(arr), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(arr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 0u);
  // Mipmapped: every level halves each extent: 64x64 + 32x32 + 16x16 floats.
  CUDA_ARRAY3D_DESCRIPTOR d3{64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0};
  CUmipmappedArray mip = nullptr;
  ASSERT_EQ(cuMipmappedArrayCreate(&mip, &d3, 3), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), (64 * 64 + 32 * 32 + 16 * 16) * 4u);
  ASSERT_EQ(cuMipmappedArrayDestroy(mip), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, 0), 0u);
}

TEST(FakeCudaTest, ContextsChargeOverheadAndReleaseTheirMemory) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Small:1024:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "64"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxCreate_v4(&ctx, nullptr, 0, 0), CUDA_SUCCESS);
  CUcontext cur = nullptr;
  ASSERT_EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  EXPECT_EQ(cur, ctx);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 10 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 74 * kMiB);
  ASSERT_EQ(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 0u);
  EXPECT_EQ(cuCtxDestroy_v2(ctx), CUDA_ERROR_INVALID_CONTEXT);
  // Primary context: retained twice, released twice.
  CUcontext a = nullptr, b = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&a, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);
  EXPECT_EQ(a, b);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 64 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 64 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 0u);
  EXPECT_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(FakeCudaTest, MemoryIsSharedAcrossProcesses) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Small:2048:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "100"}});
  Child child([] {
    if (cuInit(0) != CUDA_SUCCESS || UsePrimary(0) == nullptr) return -1LL;
    CUdeviceptr p = 0;
    return static_cast<long long>(cuMemAlloc_v2(&p, 1000 * kMiB));
  });
  ASSERT_EQ(child.Result(), CUDA_SUCCESS);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(free_b, (2048 - 100 - 1100) * kMiB);
  EXPECT_EQ(fakegpu_mem_used(0, child.pid()), 1100 * kMiB);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 900 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // the child's memory counts
  // A child that exits normally without freeing is reclaimed like a killed one.
  EXPECT_EQ(child.Join(), 0);
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(free_b, (2048 - 100) * kMiB);
  EXPECT_EQ(cuMemAlloc_v2(&p, 900 * kMiB), CUDA_SUCCESS);
}

TEST(FakeCudaTest, SigkilledProcessIsReclaimed) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Small:2048:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "0"}});
  for (int round = 0; round < 3; ++round) {
    Child child([] {
      if (cuInit(0) != CUDA_SUCCESS || UsePrimary(0) == nullptr) return -1LL;
      CUdeviceptr p = 0;
      return static_cast<long long>(cuMemAlloc_v2(&p, 1500 * kMiB));
    });
    ASSERT_EQ(child.Result(), CUDA_SUCCESS)
        << "round " << round;  // fits only if the last child was reclaimed
    EXPECT_EQ(fakegpu_mem_used(0, 0), 1500 * kMiB);
    child.Kill();
    EXPECT_EQ(fakegpu_mem_used(0, 0), 0u);
  }
}

// Launches `n` kernels of `blocks` blocks on `stream` through `fn`.
void Launch(CUfunction fn, int n, unsigned blocks, CUstream stream = nullptr) {
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(cuLaunchKernel(fn, blocks, 1, 1, 128, 1, 1, 0, stream, nullptr, nullptr),
              CUDA_SUCCESS);
  }
}

TEST(FakeCudaTest, KernelDurationIsWavesTimesWaveTime) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Ten:1024:10"}, {FAKEGPU_ENV_WAVE_US, "200"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  CUfunction fn = AnyFunction();
  ASSERT_NE(fn, nullptr);
  struct Case {
    unsigned blocks;
    int kernels;
    unsigned long long want_ns;
  };
  const Case cases[] = {{1, 3, 3 * 200000ULL},
                        {10, 2, 2 * 200000ULL},
                        {11, 2, 2 * 400000ULL},
                        {95, 1, 10 * 200000ULL}};
  for (const Case& c : cases) {
    unsigned long long before = fakegpu_busy_ns(0, getpid());
    Launch(fn, c.kernels, c.blocks);
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(fakegpu_busy_ns(0, getpid()) - before, c.want_ns) << c.blocks << " blocks";
  }
  EXPECT_EQ(fakegpu_busy_ns(0, 0), fakegpu_busy_ns(0, getpid()));
  // Grid dims multiply; launches through cuLaunchKernelEx count the same.
  CUlaunchConfig cfg{};
  cfg.gridDimX = 5;
  cfg.gridDimY = 2;
  cfg.gridDimZ = 3;  // 30 blocks = 3 waves
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  unsigned long long before = fakegpu_busy_ns(0, 0);
  ASSERT_EQ(cuLaunchKernelEx(&cfg, fn, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_busy_ns(0, 0) - before, 3 * 200000ULL);
  EXPECT_EQ(cuLaunchKernel(fn, 0, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST(FakeCudaTest, LaunchesBlockWhileBacklogIsFull) {
  // 1 ms kernels, 5 ms backlog: after the k-th launch returns, at least (k - 6) ms of work must
  // have completed on the device, or the launch would not have been admitted.
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "One:1024:1"},
               {FAKEGPU_ENV_WAVE_US, "1000"},
               {FAKEGPU_ENV_MAX_BACKLOG_US, "5000"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  CUfunction fn = AnyFunction();
  const unsigned long long kKernel = 1000000ULL;
  for (int k = 1; k <= 20; ++k) {
    Launch(fn, 1, 1);
    unsigned long long done = fakegpu_busy_ns(0, 0);
    unsigned long long must = k > 6 ? (k - 6) * kKernel : 0;
    EXPECT_GE(done, must) << "launch " << k;
  }
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(s), CUDA_SUCCESS);  // nothing queued on this stream
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_busy_ns(0, 0), 20 * kKernel);
}

TEST(FakeCudaTest, DeviceIsFifoAcrossProcesses) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "One:1024:1"}, {FAKEGPU_ENV_WAVE_US, "500"}});
  auto work = [] {
    if (cuInit(0) != CUDA_SUCCESS || UsePrimary(0) == nullptr) return -1LL;
    CUfunction fn = AnyFunction();
    for (int i = 0; i < 40; ++i) {
      if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS)
        return -2LL;
    }
    return static_cast<long long>(cuCtxSynchronize());
  };
  Child a(work), b(work);
  ASSERT_EQ(a.Result(), CUDA_SUCCESS);
  ASSERT_EQ(b.Result(), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_busy_ns(0, a.pid()), 40 * 500000ULL);
  EXPECT_EQ(fakegpu_busy_ns(0, b.pid()), 40 * 500000ULL);
  EXPECT_EQ(fakegpu_busy_ns(0, 0), 80 * 500000ULL);
  EXPECT_EQ(a.Join(), 0);
  EXPECT_EQ(b.Join(), 0);
  EXPECT_EQ(fakegpu_busy_ns(0, a.pid()), 40 * 500000ULL);  // history outlives the process
}

// Two processes that each keep the device full get half of it each, whatever their kernels' length:
// each launch waits only while its own process has more than the backlog bound (20 ms) queued, so
// both always hold 20 ms of the FIFO's work and the device alternates between them, as a real
// driver time-slices between contexts. With admission on the device-wide backlog both slept until
// the same instant and whichever woke first launched: one kernel each per race, so the process of
// 8-wave kernels took about 8 times the other's time (and who won each race was the scheduler's
// choice).
TEST(FakeCudaTest, ProcessesKeepingTheDeviceFullShareItEqually) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "One:1024:1"}, {FAKEGPU_ENV_WAVE_US, "100"}});
  struct Case {
    unsigned waves_a, waves_b;
  };
  for (const Case& c : {Case{1, 8}, Case{8, 1}, Case{2, 2}}) {
    auto work = [](unsigned waves) {
      return [waves] {
        if (cuInit(0) != CUDA_SUCCESS || UsePrimary(0) == nullptr) return -1LL;
        CUfunction fn = AnyFunction();
        const unsigned long long end = MonoNow() + 600000000ULL;
        while (MonoNow() < end) {
          if (cuLaunchKernel(fn, waves, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) !=
              CUDA_SUCCESS)
            return -2LL;
        }
        return static_cast<long long>(cuCtxSynchronize());
      };
    };
    Child a(work(c.waves_a)), b(work(c.waves_b));
    usleep(200000);
    const unsigned long long a0 = fakegpu_busy_ns(0, a.pid()), b0 = fakegpu_busy_ns(0, b.pid());
    const unsigned long long t0 = MonoNow();
    usleep(300000);
    const double dt = static_cast<double>(MonoNow() - t0);
    const double share_a = 100.0 * static_cast<double>(fakegpu_busy_ns(0, a.pid()) - a0) / dt;
    const double share_b = 100.0 * static_cast<double>(fakegpu_busy_ns(0, b.pid()) - b0) / dt;
    std::printf("%u vs %u waves: %.1f %% / %.1f %%\n", c.waves_a, c.waves_b, share_a, share_b);
    EXPECT_NEAR(share_a, 50.0, 8.0) << c.waves_a << " vs " << c.waves_b << " waves";
    EXPECT_NEAR(share_b, 50.0, 8.0) << c.waves_a << " vs " << c.waves_b << " waves";
    EXPECT_EQ(a.Result(), CUDA_SUCCESS);
    EXPECT_EQ(b.Result(), CUDA_SUCCESS);
    EXPECT_EQ(a.Join(), 0);
    EXPECT_EQ(b.Join(), 0);
  }
}

TEST(FakeCudaTest, EventsAndStreams) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Ten:1024:10"}, {FAKEGPU_ENV_WAVE_US, "1000"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  CUfunction fn = AnyFunction();
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&end, 0), CUDA_SUCCESS);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime_v2(&ms, start, end), CUDA_ERROR_INVALID_HANDLE);  // not recorded
  ASSERT_EQ(cuEventRecord(start, s), CUDA_SUCCESS);
  Launch(fn, 5, 10, s);  // 5 ms of work
  ASSERT_EQ(cuEventRecord(end, s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventSynchronize(end), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(end), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(s), CUDA_SUCCESS);
  ASSERT_EQ(cuEventElapsedTime_v2(&ms, start, end), CUDA_SUCCESS);
  EXPECT_GE(ms, 5.0f);
  EXPECT_EQ(fakegpu_busy_ns(0, 0), 5000000ULL);  // the event wait covered all of it
  ASSERT_EQ(cuEventDestroy_v2(start), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(start), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventDestroy_v2(start), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventQuery(end), CUDA_SUCCESS);
}

TEST(FakeCudaTest, GraphsRunTheirKernels) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Ten:1024:10"}, {FAKEGPU_ENV_WAVE_US, "100"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  CUfunction fn = AnyFunction();
  CUstream s = nullptr;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  // Captured: 3 kernels of 1, 2 and 3 waves; nothing runs while capturing.
  ASSERT_EQ(cuStreamBeginCapture_v2(s, 0), CUDA_SUCCESS);
  Launch(fn, 1, 10, s);
  Launch(fn, 1, 20, s);
  Launch(fn, 1, 30, s);
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_busy_ns(0, 0), 0u);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, s), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_busy_ns(0, 0), 2 * 6 * 100000ULL);
  // Built explicitly.
  CUgraph g2 = nullptr;
  ASSERT_EQ(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  p.func = fn;
  p.gridDimX = 40;
  p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphAddKernelNode_v2(&node, g2, nullptr, 0, &p), CUDA_SUCCESS);
  CUgraphExec e2 = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&e2, g2, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(e2, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_busy_ns(0, 0), 12 * 100000ULL + 4 * 100000ULL);
  EXPECT_EQ(cuStreamBeginCapture_v2(nullptr, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

TEST(FakeCudaTest, CudaVisibleDevicesMapsOrdinalsToNvmlIndices) {
  const char* kDevices = "A:1000:10;B:2000:20;C:3000:30";
  struct Case {
    const char* cvd;
    std::vector<std::string> names;
  };
  const Case cases[] = {{"2,0", {"C", "A"}},
                        {"1", {"B"}},
                        {"GPU-fa4e0000-0000-4000-8000-000000000002,1", {"C", "B"}},
                        {"0,9,1", {"A"}}};
  for (const Case& c : cases) {
    FakeEnv env({{FAKEGPU_ENV_DEVICES, kDevices}, {FAKEGPU_ENV_CUDA_VISIBLE_DEVICES, c.cvd}});
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS) << c.cvd;
    int n = 0;
    ASSERT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
    ASSERT_EQ(n, static_cast<int>(c.names.size())) << c.cvd;
    for (int i = 0; i < n; ++i) {
      char name[32];
      ASSERT_EQ(cuDeviceGetName(name, sizeof name, i), CUDA_SUCCESS);
      EXPECT_EQ(c.names[i], name) << c.cvd << " ordinal " << i;
    }
    // NVML still sees all three devices.
    ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
    unsigned count = 0;
    ASSERT_EQ(nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    EXPECT_EQ(count, 3u);
  }
  {
    // The UUID of each CUDA ordinal is the one of the NVML device it maps to (default UUIDs end in
    // the NVML index).
    FakeEnv env({{FAKEGPU_ENV_DEVICES, kDevices}, {FAKEGPU_ENV_CUDA_VISIBLE_DEVICES, "2,0"}});
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
    const unsigned nvml_index[] = {2, 0};
    for (int ordinal = 0; ordinal < 2; ++ordinal) {
      CUuuid u;
      ASSERT_EQ(cuDeviceGetUuid_v2(&u, ordinal), CUDA_SUCCESS);
      EXPECT_EQ(static_cast<unsigned char>(u.bytes[15]), nvml_index[ordinal]);
      nvmlDevice_t h = nullptr;
      ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(nvml_index[ordinal], &h), NVML_SUCCESS);
      char uuid[96];
      ASSERT_EQ(nvmlDeviceGetUUID(h, uuid, sizeof uuid), NVML_SUCCESS);
      char last[3];
      std::snprintf(last, sizeof last, "%02x", static_cast<unsigned char>(u.bytes[15]));
      EXPECT_EQ(std::string(uuid).substr(std::strlen(uuid) - 2), last);
    }
  }
  // Memory allocated on CUDA ordinal 0 lands on NVML device 2.
  FakeEnv env({{FAKEGPU_ENV_DEVICES, kDevices},
               {FAKEGPU_ENV_CUDA_VISIBLE_DEVICES, "2"},
               {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "0"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 7 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(fakegpu_mem_used(2, getpid()), 7 * kMiB);
  EXPECT_EQ(fakegpu_mem_used(0, getpid()), 0u);
  CUdevice d = -1;
  ASSERT_EQ(cuCtxGetDevice(&d), CUDA_SUCCESS);
  EXPECT_EQ(d, 0);
  FakeEnv none({{FAKEGPU_ENV_CUDA_VISIBLE_DEVICES, ""}});
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

TEST(FakeCudaTest, FaultInjection) {
  FakeEnv env({{FAKEGPU_ENV_FAULTS, "cuMemAlloc_v2=2@3,cuCtxSynchronize=999"},
               {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "0"}});
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  const int want[] = {CUDA_SUCCESS, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, CUDA_SUCCESS};
  for (int i = 0; i < 4; ++i) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc_v2(&p, kMiB), want[i]) << "call " << i + 1;
  }
  EXPECT_EQ(fakegpu_mem_used(0, 0), 3 * kMiB);  // the failed call had no effect
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
  FakeEnv fail({{FAKEGPU_ENV_INIT_FAIL, "1"}});
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
  int n = 0;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}

TEST(FakeCudaTest, UnusableStateFileFallsBackToPrivateState) {
  FakeEnv env({{FAKEGPU_ENV_STATE, "/nonexistent-dir/fakegpu/state"}, {FAKEGPU_ENV_WAVE_US, "x"}});
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("fakegpu: FAKEGPU_WAVE_US: 'x'"), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent-dir/fakegpu/state"), std::string::npos) << err;
  EXPECT_NE(err.find("process-private state"), std::string::npos) << err;
  ASSERT_NE(UsePrimary(0), nullptr);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, kMiB), CUDA_SUCCESS);
}

TEST(FakeCudaTest, GetProcAddressPicksTheVersionedAbi) {
  FakeEnv env;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  struct Case {
    const char* symbol;
    int version;
    cuuint64_t flags;
    const char* want;  // exported symbol expected, nullptr = none
    int want_status;
  };
  const cuuint64_t kPt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const Case cases[] = {
      {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemAlloc", 3010, 0, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxCreate", 12000, 0, "cuCtxCreate_v3", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxCreate", 11000, 0, "cuCtxCreate_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuEventElapsedTime", 12060, 0, "cuEventElapsedTime", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGetProcAddress", 11080, 0, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 12000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 12000, kPt, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel",
       CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuLaunchKernelEx", 12000, kPt, "cuLaunchKernelEx_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuGraphLaunch", 12000, kPt, "cuGraphLaunch_ptsz", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuStreamBeginCapture", 12000, kPt, "cuStreamBeginCapture_v2_ptsz",
       CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemcpyHtoD", 12000, kPt, "cuMemcpyHtoD_v2_ptds", CU_GET_PROC_ADDRESS_SUCCESS},
      {"cuMemAlloc", 12000, kPt, "cuMemAlloc_v2",
       CU_GET_PROC_ADDRESS_SUCCESS},  // no per-thread variant
      {"cuMemAllocAsync", 11010, 0, nullptr, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
      {"cuNoSuchThing", 12000, 0, nullptr, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
  };
  for (const Case& c : cases) {
    void* fn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult status = -1;
    ASSERT_EQ(cuGetProcAddress_v2(c.symbol, &fn, c.version, c.flags, &status), CUDA_SUCCESS)
        << c.symbol;
    EXPECT_EQ(status, c.want_status) << c.symbol << "@" << c.version;
    EXPECT_EQ(fn, c.want ? dlsym(lib, c.want) : nullptr)
        << c.symbol << "@" << c.version << " want " << c.want;
  }
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &fn, 13010, 0, nullptr),
            CUDA_ERROR_INVALID_VALUE);  // > driver
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 4, nullptr),
            CUDA_ERROR_INVALID_VALUE);  // bad flags
  dlclose(lib);
}

TEST(FakeCudaTest, ExportsTheVersionedSymbols) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  for (const char* sym : {"cuInit",
                          "cuMemAlloc",
                          "cuMemAlloc_v2",
                          "cuMemAllocPitch_v2",
                          "cuMemFree_v2",
                          "cuMemGetInfo_v2",
                          "cuDeviceTotalMem_v2",
                          "cuCtxCreate",
                          "cuCtxCreate_v2",
                          "cuCtxCreate_v3",
                          "cuCtxCreate_v4",
                          "cuCtxDestroy_v2",
                          "cuCtxPushCurrent_v2",
                          "cuCtxPopCurrent_v2",
                          "cuDevicePrimaryCtxRelease_v2",
                          "cuDevicePrimaryCtxReset_v2",
                          "cuDeviceGetUuid",
                          "cuDeviceGetUuid_v2",
                          "cuLaunchKernel",
                          "cuLaunchKernel_ptsz",
                          "cuLaunchKernelEx",
                          "cuLaunchKernelEx_ptsz",
                          "cuLaunchCooperativeKernel",
                          "cuLaunchCooperativeKernel_ptsz",
                          "cuGraphLaunch",
                          "cuGraphLaunch_ptsz",
                          "cuStreamSynchronize_ptsz",
                          "cuEventRecord_ptsz",
                          "cuMemAllocAsync_ptsz",
                          "cuMemFreeAsync_ptsz",
                          "cuMemAllocFromPoolAsync_ptsz",
                          "cuMemcpyHtoD_v2_ptds",
                          "cuMemcpy_ptds",
                          "cuMemcpyAsync_ptsz",
                          "cuEventElapsedTime_v2",
                          "cuGetProcAddress",
                          "cuGetProcAddress_v2",
                          "cuArray3DCreate_v2",
                          "cuMemCreate",
                          "cuMemMap",
                          "fakegpu_busy_ns",
                          "fakegpu_inject_xid",
                          "fakegpu_mem_used",
                          "fakegpu_cuda_reset"}) {
    EXPECT_NE(dlsym(lib, sym), nullptr) << sym;
  }
  EXPECT_EQ(dlsym(lib, "fakegpu_nvml_reset"), nullptr);
  dlclose(lib);
}

}  // namespace
}  // namespace fakegpu::testing
