// Tests of the fake libnvidia-ml.so.1 through its exported C ABI, and its agreement with the fake
// libcuda.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "fakes/test_util.h"

namespace fakegpu::testing {
namespace {

constexpr unsigned long long kMiB = 1ULL << 20;

nvmlDevice_t Handle(unsigned i) {
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(i, &h), NVML_SUCCESS);
  return h;
}

TEST(FakeNvmlTest, InitIsReferenceCounted) {
  FakeEnv env;
  unsigned n = 0;
  EXPECT_EQ(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
  ASSERT_EQ(nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
  FakeEnv fail({{FAKEGPU_ENV_INIT_FAIL, "1"}});
  EXPECT_EQ(nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
}

TEST(FakeNvmlTest, EnumerationAndIdentity) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES,
                "Tesla T4:15360:40;NVIDIA "
                "A100-SXM4-80GB:81920:108:GPU-abcdef01-0000-0000-0000-000000000001"},
               {FAKEGPU_ENV_DRIVER_VERSION, "550.1.2"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  unsigned n = 0;
  ASSERT_EQ(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
  ASSERT_EQ(n, 2u);
  struct Case {
    unsigned index;
    const char* name;
    const char* uuid;
    const char* bus_id;
    unsigned long long total;
  };
  const Case cases[] = {
      {0, "Tesla T4", "GPU-fa4e0000-0000-4000-8000-000000000000", "00000000:18:00.0", 15360 * kMiB},
      {1, "NVIDIA A100-SXM4-80GB", "GPU-abcdef01-0000-0000-0000-000000000001", "00000000:20:00.0",
       81920 * kMiB},
  };
  for (const Case& c : cases) {
    nvmlDevice_t h = Handle(c.index);
    char buf[96];
    ASSERT_EQ(nvmlDeviceGetName(h, buf, sizeof buf), NVML_SUCCESS);
    EXPECT_STREQ(buf, c.name);
    ASSERT_EQ(nvmlDeviceGetUUID(h, buf, sizeof buf), NVML_SUCCESS);
    EXPECT_STREQ(buf, c.uuid);
    EXPECT_EQ(nvmlDeviceGetUUID(h, buf, 10), NVML_ERROR_INSUFFICIENT_SIZE);
    nvmlPciInfo_t pci;
    ASSERT_EQ(nvmlDeviceGetPciInfo_v3(h, &pci), NVML_SUCCESS);
    EXPECT_STREQ(pci.busId, c.bus_id);
    EXPECT_STREQ(pci.busIdLegacy, c.bus_id + 4);
    unsigned idx = 99;
    ASSERT_EQ(nvmlDeviceGetIndex(h, &idx), NVML_SUCCESS);
    EXPECT_EQ(idx, c.index);
    nvmlDevice_t by = nullptr;
    ASSERT_EQ(nvmlDeviceGetHandleByUUID(c.uuid, &by), NVML_SUCCESS);
    EXPECT_EQ(by, h);
    ASSERT_EQ(nvmlDeviceGetHandleByPciBusId_v2(c.bus_id, &by), NVML_SUCCESS);
    EXPECT_EQ(by, h);
    ASSERT_EQ(nvmlDeviceGetHandleByPciBusId_v2(c.bus_id + 4, &by), NVML_SUCCESS);  // legacy form
    EXPECT_EQ(by, h);
    nvmlMemory_t mem;
    ASSERT_EQ(nvmlDeviceGetMemoryInfo(h, &mem), NVML_SUCCESS);
    EXPECT_EQ(mem.total, c.total);
    unsigned cur = 9, pend = 9;
    // A T4 cannot run MIG at all; the A100 can and has it off.
    if (c.index == 0) {
      EXPECT_EQ(nvmlDeviceGetMigMode(h, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    } else {
      ASSERT_EQ(nvmlDeviceGetMigMode(h, &cur, &pend), NVML_SUCCESS);
      EXPECT_EQ(cur, 0u);
    }
  }
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(nvmlDeviceGetHandleByUUID("GPU-nope", &h), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(2, &h), NVML_ERROR_INVALID_ARGUMENT);
  char version[80];
  ASSERT_EQ(nvmlSystemGetDriverVersion(version, sizeof version), NVML_SUCCESS);
  EXPECT_STREQ(version, "550.1.2");
  int cuda = 0;
  ASSERT_EQ(nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, 13000);
}

TEST(FakeNvmlTest, NullArgumentsAndBadHandles) {
  FakeEnv env;
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t h = Handle(0);
  nvmlDevice_t bogus = reinterpret_cast<nvmlDevice_t>(&env);
  unsigned u = 0;
  const int rcs[] = {
      nvmlDeviceGetCount_v2(nullptr),
      nvmlDeviceGetHandleByIndex_v2(0, nullptr),
      nvmlDeviceGetName(h, nullptr, 10),
      nvmlDeviceGetMemoryInfo(h, nullptr),
      nvmlDeviceGetMemoryInfo(bogus, reinterpret_cast<nvmlMemory_t*>(&u)),
      nvmlDeviceGetPciInfo_v3(nullptr, nullptr),
      nvmlDeviceGetComputeRunningProcesses_v3(h, nullptr, nullptr),
      nvmlDeviceGetUtilizationRates(h, nullptr),
      nvmlDeviceGetTemperature(h, 0, nullptr),
      nvmlDeviceGetIndex(bogus, &u),
      nvmlEventSetCreate(nullptr),
  };
  for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; ++i)
    EXPECT_EQ(rcs[i], NVML_ERROR_INVALID_ARGUMENT) << "case " << i;
}

TEST(FakeNvmlTest, MemoryAndProcessesAgreeWithCuda) {
  FakeEnv env(
      {{FAKEGPU_ENV_DEVICES, "A:4096:10;B:4096:10"}, {FAKEGPU_ENV_CTX_OVERHEAD_MIB, "300"}});
  Child child([] {
    if (cuInit(0) != CUDA_SUCCESS || UsePrimary(1) == nullptr) return -1LL;
    CUdeviceptr p = 0;
    return static_cast<long long>(cuMemAlloc_v2(&p, 1000 * kMiB));
  });
  ASSERT_EQ(child.Result(), CUDA_SUCCESS);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(1), nullptr);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 200 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  size_t cu_free = 0, cu_total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&cu_free, &cu_total), CUDA_SUCCESS);
  nvmlMemory_t m1;
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(Handle(1), &m1), NVML_SUCCESS);
  EXPECT_EQ(m1.total, cu_total);
  EXPECT_EQ(m1.free, cu_free);
  EXPECT_EQ(m1.used, (300 + 1000 + 300 + 200) * kMiB);
  nvmlMemory_v2_t m2{};
  EXPECT_EQ(nvmlDeviceGetMemoryInfo_v2(Handle(1), &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(nvmlDeviceGetMemoryInfo_v2(Handle(1), &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.used, m1.used);
  EXPECT_EQ(m2.free, m1.free);
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(Handle(0), &m1), NVML_SUCCESS);
  EXPECT_EQ(m1.used, 0u);

  // Process list protocol: size query, then fill; v1 struct has no instance ids.
  unsigned count = 0;
  EXPECT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(Handle(1), &count, nullptr),
            NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(count, 2u);
  std::vector<nvmlProcessInfo_t> infos(count + 2);
  count = static_cast<unsigned>(infos.size());
  ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(Handle(1), &count, infos.data()), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  std::map<unsigned, unsigned long long> by_pid;
  for (unsigned i = 0; i < count; ++i) {
    by_pid[infos[i].pid] = infos[i].usedGpuMemory;
    EXPECT_EQ(infos[i].gpuInstanceId, 0xFFFFFFFFu);
  }
  EXPECT_EQ(by_pid[static_cast<unsigned>(getpid())], 500 * kMiB);
  EXPECT_EQ(by_pid[static_cast<unsigned>(child.pid())], 1300 * kMiB);
  std::vector<nvmlProcessInfo_v1_t> v1(4);
  count = 4;
  ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses(Handle(1), &count, v1.data()), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(v1[0].usedGpuMemory + v1[1].usedGpuMemory, 1800 * kMiB);
  count = 0;
  EXPECT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), &count, nullptr), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  // After the child dies its memory and process entry are gone.
  child.Kill();
  count = 4;
  ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(Handle(1), &count, infos.data()), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(infos[0].pid, static_cast<unsigned>(getpid()));
}

TEST(FakeNvmlTest, UtilisationFollowsTheKernelClock) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Ten:1024:10"}, {FAKEGPU_ENV_WAVE_US, "1000"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t h = Handle(0);
  unsigned n = 8;
  std::vector<nvmlProcessUtilizationSample_t> samples(8);
  EXPECT_EQ(nvmlDeviceGetProcessUtilization(h, samples.data(), &n, 0),
            NVML_ERROR_NOT_FOUND);  // idle device
  nvmlUtilization_t u{};
  ASSERT_EQ(nvmlDeviceGetUtilizationRates(h, &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 0u);

  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  CUfunction fn = AnyFunction();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(cuLaunchKernel(fn, 10, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetUtilizationRates(h, &u), NVML_SUCCESS);
  EXPECT_GT(u.gpu, 0u);
  EXPECT_LE(u.gpu, 100u);
  n = 0;
  EXPECT_EQ(nvmlDeviceGetProcessUtilization(h, nullptr, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(n, 1u);
  n = static_cast<unsigned>(samples.size());
  ASSERT_EQ(nvmlDeviceGetProcessUtilization(h, samples.data(), &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(samples[0].pid, static_cast<unsigned>(getpid()));
  EXPECT_GT(samples[0].smUtil, 0u);
  // Nothing ran after the returned timestamp.
  n = static_cast<unsigned>(samples.size());
  EXPECT_EQ(nvmlDeviceGetProcessUtilization(h, samples.data(), &n, samples[0].timeStamp),
            NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(fakegpu_busy_ns(0, getpid()), 20 * 1000000ULL);
}

// FAKEGPU_NVML_SAMPLE_MS: NVML's per-process samples as a real driver hands them out (an H200 with
// driver 580 samples every 200 ms): stamped with the end of a closed period, the newest one per pid
// newer than lastSeen, 0 for a context without work; device samples one per period.
TEST(FakeNvmlTest, PeriodicSamplerAsARealDriver) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Ten:1024:10"},
               {FAKEGPU_ENV_WAVE_US, "1000"},
               {FAKEGPU_ENV_NVML_SAMPLE_MS, "50"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t h = Handle(0);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_NE(UsePrimary(0), nullptr);
  std::vector<nvmlProcessUtilizationSample_t> samples(8);
  unsigned n = 8;
  // A context and no work: a sample of 0 for each closed period.
  usleep(60000);
  ASSERT_EQ(nvmlDeviceGetProcessUtilization(h, samples.data(), &n, 0), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(samples[0].pid, static_cast<unsigned>(getpid()));
  EXPECT_EQ(samples[0].smUtil, 0u);
  EXPECT_EQ(samples[0].timeStamp % 50000, 0u) << "stamped with the period's end";
  const unsigned long long first = samples[0].timeStamp;
  // Until the next period closes, nothing newer.
  n = 8;
  nvmlReturn_t again = nvmlDeviceGetProcessUtilization(h, samples.data(), &n, first);
  if (again == NVML_SUCCESS) {
    EXPECT_EQ(samples[0].timeStamp, first + 50000);  // a period closed meanwhile
  }
  // 20 ms of kernels (one wave of 1 ms each), inside one period or across two.
  CUfunction fn = AnyFunction();
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(cuLaunchKernel(fn, 10, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  usleep(120000);  // two periods close after the work
  unsigned long long seen = first, pct_sum = 0;
  for (int k = 0; k < 5; ++k) {
    n = 8;
    if (nvmlDeviceGetProcessUtilization(h, samples.data(), &n, seen) != NVML_SUCCESS) break;
    ASSERT_EQ(n, 1u);
    EXPECT_GT(samples[0].timeStamp, seen);
    EXPECT_EQ(samples[0].timeStamp % 50000, 0u);
    // Only the newest period is handed out: asked from the start, earlier periods are gone.
    if (k == 0) {
      EXPECT_GE(samples[0].timeStamp, first + 100000);
    }
    pct_sum += samples[0].smUtil;
    seen = samples[0].timeStamp;
  }
  EXPECT_LE(pct_sum, 40u) << "20 ms of work is at most 40 % of one 50 ms period";
  // Device samples: one per closed period, 50 ms apart, oldest first.
  std::vector<nvmlSample_t> dev(128);
  unsigned count = 128;
  int type = -1;
  ASSERT_EQ(nvmlDeviceGetSamples(h, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &count, dev.data()),
            NVML_SUCCESS);
  EXPECT_EQ(type, NVML_VALUE_TYPE_UNSIGNED_INT);
  ASSERT_GE(count, 2u);
  for (unsigned i = 1; i < count; ++i) EXPECT_EQ(dev[i].timeStamp - dev[i - 1].timeStamp, 50000u);
  unsigned long long dev_busy = 0;
  for (unsigned i = 0; i < count; ++i) dev_busy += dev[i].sampleValue.uiVal;
  EXPECT_NEAR(static_cast<double>(dev_busy), 40.0, 2.0) << "20 ms of 50 ms periods";
  EXPECT_EQ(nvmlDeviceGetSamples(h, 0 /* power */, 0, &type, &count, dev.data()),
            NVML_ERROR_NOT_SUPPORTED);
}

// The default (averaging) model keeps no device samples.
TEST(FakeNvmlTest, DeviceSamplesNeedAPeriod) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "Ten:1024:10"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  std::vector<nvmlSample_t> dev(8);
  unsigned count = 8;
  int type = -1;
  EXPECT_EQ(
      nvmlDeviceGetSamples(Handle(0), NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &count, dev.data()),
      NVML_ERROR_NOT_SUPPORTED);
}

TEST(FakeNvmlTest, TopologyAndNvLink) {
  FakeEnv env(
      {{FAKEGPU_ENV_DEVICES, "G:1:1;G:1:1;G:1:1;G:1:1"}, {FAKEGPU_ENV_NVLINK, "0-1:2,1-3:1"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  struct Level {
    unsigned a, b;
    int want;
  };
  const Level levels[] = {{0, 0, NVML_TOPOLOGY_INTERNAL},
                          {0, 1, NVML_TOPOLOGY_SINGLE},
                          {2, 3, NVML_TOPOLOGY_SINGLE},
                          {1, 2, NVML_TOPOLOGY_SYSTEM},
                          {0, 3, NVML_TOPOLOGY_SYSTEM}};
  for (const Level& l : levels) {
    nvmlGpuTopologyLevel_t got = -1;
    ASSERT_EQ(nvmlDeviceGetTopologyCommonAncestor(Handle(l.a), Handle(l.b), &got), NVML_SUCCESS);
    EXPECT_EQ(got, l.want) << l.a << "-" << l.b;
  }
  struct Link {
    unsigned dev, link;
    int want_rc;
    int peer_bus;
  };
  const Link links[] = {{0, 0, NVML_SUCCESS, 0x20},
                        {0, 1, NVML_SUCCESS, 0x20},
                        {0, 2, NVML_ERROR_NOT_SUPPORTED, 0},
                        {1, 0, NVML_SUCCESS, 0x18},
                        {1, 2, NVML_SUCCESS, 0x30},
                        {2, 0, NVML_ERROR_NOT_SUPPORTED, 0},
                        {0, 36, NVML_ERROR_INVALID_ARGUMENT, 0}};
  for (const Link& l : links) {
    nvmlEnableState_t st = -1;
    EXPECT_EQ(nvmlDeviceGetNvLinkState(Handle(l.dev), l.link, &st), l.want_rc)
        << l.dev << "/" << l.link;
    if (l.want_rc != NVML_SUCCESS) continue;
    EXPECT_EQ(st, NVML_FEATURE_ENABLED);
    nvmlPciInfo_t pci;
    ASSERT_EQ(nvmlDeviceGetNvLinkRemotePciInfo_v2(Handle(l.dev), l.link, &pci), NVML_SUCCESS);
    EXPECT_EQ(static_cast<int>(pci.bus), l.peer_bus) << l.dev << "/" << l.link;
  }
}

TEST(FakeNvmlTest, XidEventsReachRegisteredSets) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "A:1:1;B:1:1"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(fakegpu_inject_xid(0, 13), 0);  // before registration: not delivered
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(nvmlEventSetCreate(&set), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceRegisterEvents(Handle(0), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceRegisterEvents(Handle(0), 1ULL << 40, set), NVML_ERROR_NOT_SUPPORTED);
  nvmlEventData_t data{};
  EXPECT_EQ(nvmlEventSetWait_v2(set, &data, 5), NVML_ERROR_TIMEOUT);
  ASSERT_EQ(fakegpu_inject_xid(1, 31), 0);  // another device: not delivered
  // Injected by another process through the shared state.
  Child child([] { return static_cast<long long>(fakegpu_inject_xid(0, 79)); });
  ASSERT_EQ(child.Result(), 0);
  ASSERT_EQ(nvmlEventSetWait_v2(set, &data, 1000), NVML_SUCCESS);
  EXPECT_EQ(data.device, Handle(0));
  EXPECT_EQ(data.eventType, nvmlEventTypeXidCriticalError);
  EXPECT_EQ(data.eventData, 79u);
  EXPECT_EQ(nvmlEventSetWait_v2(set, &data, 5), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(fakegpu_inject_xid(7, 1), -1);
  ASSERT_EQ(nvmlEventSetFree(set), NVML_SUCCESS);
  EXPECT_EQ(nvmlEventSetFree(set), NVML_ERROR_INVALID_ARGUMENT);
}

TEST(FakeNvmlTest, ScheduledXidFromEnvironment) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, "A:1:1;B:1:1"}, {FAKEGPU_ENV_XID, "1:48:20"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(nvmlEventSetCreate(&set), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceRegisterEvents(Handle(1), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
  nvmlEventData_t data{};
  ASSERT_EQ(nvmlEventSetWait_v2(set, &data, 5000), NVML_SUCCESS);
  EXPECT_EQ(data.eventData, 48u);
  EXPECT_EQ(nvmlEventSetWait_v2(set, &data, 50), NVML_ERROR_TIMEOUT);  // injected once
  ASSERT_EQ(nvmlEventSetFree(set), NVML_SUCCESS);
}

TEST(FakeNvmlTest, FaultInjection) {
  FakeEnv env({{FAKEGPU_ENV_FAULTS, "nvmlDeviceGetMemoryInfo=999,nvmlDeviceGetCount_v2=15@2"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlMemory_t m;
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(Handle(0), &m), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(Handle(0), &m), NVML_ERROR_UNKNOWN);
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  EXPECT_EQ(nvmlDeviceGetMemoryInfo_v2(Handle(0), &m2), NVML_SUCCESS);  // a different symbol
  unsigned n = 0;
  EXPECT_EQ(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceGetCount_v2(&n), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
}

TEST(FakeNvmlTest, ExportsVersionedAndLegacySymbols) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  for (const char* sym : {"nvmlInit",
                          "nvmlInit_v2",
                          "nvmlInitWithFlags",
                          "nvmlDeviceGetCount",
                          "nvmlDeviceGetCount_v2",
                          "nvmlDeviceGetHandleByIndex",
                          "nvmlDeviceGetHandleByIndex_v2",
                          "nvmlDeviceGetHandleByPciBusId_v2",
                          "nvmlDeviceGetPciInfo",
                          "nvmlDeviceGetPciInfo_v2",
                          "nvmlDeviceGetPciInfo_v3",
                          "nvmlDeviceGetMemoryInfo",
                          "nvmlDeviceGetMemoryInfo_v2",
                          "nvmlDeviceGetComputeRunningProcesses",
                          "nvmlDeviceGetComputeRunningProcesses_v2",
                          "nvmlDeviceGetComputeRunningProcesses_v3",
                          "nvmlDeviceGetGraphicsRunningProcesses_v3",
                          "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                          "nvmlEventSetWait",
                          "nvmlEventSetWait_v2",
                          "nvmlSystemGetCudaDriverVersion_v2",
                          "nvmlErrorString",
                          "fakegpu_busy_ns",
                          "fakegpu_inject_xid",
                          "fakegpu_mem_used",
                          "fakegpu_nvml_reset"}) {
    EXPECT_NE(dlsym(lib, sym), nullptr) << sym;
  }
  dlclose(lib);
}

// ---- MIG ----

constexpr const char* kMigDevices =
    "NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40;NVIDIA H100 80GB HBM3:81559:132;"
    "NVIDIA A100-SXM4-80GB:81920:108";

std::vector<nvmlGpuInstancePlacement_t> Placements(nvmlDevice_t h, unsigned profile_id) {
  unsigned n = 0;
  EXPECT_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(h, profile_id, nullptr, &n),
            NVML_SUCCESS);
  std::vector<nvmlGpuInstancePlacement_t> out(n);
  unsigned small = n - 1;
  if (n > 0) {
    EXPECT_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(h, profile_id, out.data(), &small),
              NVML_ERROR_INSUFFICIENT_SIZE);
    EXPECT_EQ(small, n);
  }
  EXPECT_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(h, profile_id, out.data(), &n),
            NVML_SUCCESS);
  return out;
}

std::string Starts(const std::vector<nvmlGpuInstancePlacement_t>& ps) {
  std::string s;
  for (const auto& p : ps) s += std::to_string(p.start) + "+" + std::to_string(p.size) + " ";
  return s;
}

nvmlGpuInstance_t CreateAt(nvmlDevice_t h, unsigned profile_id, unsigned start, unsigned size,
                           nvmlReturn_t want = NVML_SUCCESS) {
  nvmlGpuInstancePlacement_t p{start, size};
  nvmlGpuInstance_t gi = nullptr;
  EXPECT_EQ(nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, &p, &gi), want)
      << "profile " << profile_id << " at " << start;
  return gi;
}

TEST(FakeNvmlMigTest, ModesFollowTheModelAndFakegpuMig) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, kMigDevices}, {FAKEGPU_ENV_MIG, "0,2"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  const struct {
    unsigned index;
    nvmlReturn_t rc;
    unsigned mode, max;
  } cases[] = {{0, NVML_SUCCESS, 1, 7},
               {1, NVML_ERROR_NOT_SUPPORTED, 0, 0},
               {2, NVML_SUCCESS, 1, 7},
               {3, NVML_SUCCESS, 0, 7}};
  for (const auto& c : cases) {
    unsigned cur = 9, pend = 9, max = 9;
    EXPECT_EQ(nvmlDeviceGetMigMode(Handle(c.index), &cur, &pend), c.rc) << c.index;
    if (c.rc == NVML_SUCCESS) {
      EXPECT_EQ(cur, c.mode) << c.index;
    }
    EXPECT_EQ(nvmlDeviceGetMaxMigDeviceCount(Handle(c.index), &max), NVML_SUCCESS);
    EXPECT_EQ(max, c.max) << c.index;
  }
  // Profiles answer only while MIG is on; turning it on takes effect at once in the fake.
  nvmlGpuInstanceProfileInfo_t info;
  EXPECT_EQ(
      nvmlDeviceGetGpuInstanceProfileInfo(Handle(3), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info),
      NVML_ERROR_NOT_SUPPORTED);
  nvmlReturn_t activation = NVML_ERROR_UNKNOWN;
  EXPECT_EQ(nvmlDeviceSetMigMode(Handle(1), 1, &activation), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvmlDeviceSetMigMode(Handle(3), 1, &activation), NVML_SUCCESS);
  EXPECT_EQ(activation, NVML_SUCCESS);
  ASSERT_EQ(
      nvmlDeviceGetGpuInstanceProfileInfo(Handle(3), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info),
      NVML_SUCCESS);
  EXPECT_EQ(info.memorySizeMB, 9728u);
  // Disabling with an instance alive is refused, as the driver does.
  nvmlGpuInstance_t gi = CreateAt(Handle(3), 19, 0, 1);
  EXPECT_EQ(nvmlDeviceSetMigMode(Handle(3), 0, &activation), NVML_ERROR_IN_USE);
  ASSERT_EQ(nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceSetMigMode(Handle(3), 0, &activation), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceSetMigMode(Handle(3), 2, &activation), NVML_ERROR_INVALID_ARGUMENT);
}

TEST(FakeNvmlMigTest, ProfilesHaveTheRealSizesAndPlacements) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, kMigDevices}, {FAKEGPU_ENV_MIG, "0,2,3"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  struct Case {
    unsigned dev, profile, id;
    const char* name;
    unsigned slices, instances, sms;
    unsigned long long mem;
    const char* placements;
  };
  const Case cases[] = {
      {0, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "MIG 1g.5gb", 1, 7, 14, 4864,
       "0+1 1+1 2+1 3+1 4+1 5+1 6+1 "},
      {0, NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "MIG 2g.10gb", 2, 3, 28, 9984, "0+2 2+2 4+2 "},
      {0, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "MIG 3g.20gb", 3, 2, 42, 20096, "0+4 4+4 "},
      {0, NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "MIG 4g.20gb", 4, 1, 56, 20096, "0+4 "},
      {0, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "MIG 7g.40gb", 7, 1, 98, 40448, "0+8 "},
      {3, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "MIG 1g.10gb", 1, 7, 14, 9728,
       "0+1 1+1 2+1 3+1 4+1 5+1 6+1 "},
      {3, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "MIG 1g.20gb", 1, 4, 14, 19968,
       "0+2 2+2 4+2 6+2 "},
      {3, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "MIG 7g.80gb", 7, 1, 98, 81152, "0+8 "},
      {2, NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "MIG 1g.10gb", 1, 7, 16, 9984,
       "0+1 1+1 2+1 3+1 4+1 5+1 6+1 "},
      {2, NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "MIG 3g.40gb", 3, 2, 60, 40448, "0+4 4+4 "},
      {2, NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "MIG 7g.80gb", 7, 1, 132, 81152, "0+8 "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    nvmlGpuInstanceProfileInfo_t v1;
    ASSERT_EQ(nvmlDeviceGetGpuInstanceProfileInfo(Handle(c.dev), c.profile, &v1), NVML_SUCCESS);
    nvmlGpuInstanceProfileInfo_v2_t v2{};
    EXPECT_EQ(nvmlDeviceGetGpuInstanceProfileInfoV(Handle(c.dev), c.profile, &v2),
              NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    v2.version = nvmlGpuInstanceProfileInfo_v2;
    ASSERT_EQ(nvmlDeviceGetGpuInstanceProfileInfoV(Handle(c.dev), c.profile, &v2), NVML_SUCCESS);
    for (const auto& [id, slices, instances, sms, mem] :
         {std::tuple{v1.id, v1.sliceCount, v1.instanceCount, v1.multiprocessorCount,
                     v1.memorySizeMB},
          std::tuple{v2.id, v2.sliceCount, v2.instanceCount, v2.multiprocessorCount,
                     v2.memorySizeMB}}) {
      EXPECT_EQ(id, c.id);
      EXPECT_EQ(slices, c.slices);
      EXPECT_EQ(instances, c.instances);
      EXPECT_EQ(sms, c.sms);
      EXPECT_EQ(mem, c.mem);
    }
    EXPECT_STREQ(v2.name, c.name);
    EXPECT_EQ(Starts(Placements(Handle(c.dev), c.id)), c.placements);
  }
  nvmlGpuInstanceProfileInfo_t info;
  // The A100-40GB has no 1g.20gb; no modelled GPU has 8 slices; 10 is past the enum.
  EXPECT_EQ(
      nvmlDeviceGetGpuInstanceProfileInfo(Handle(0), NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, &info),
      NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(
      nvmlDeviceGetGpuInstanceProfileInfo(Handle(0), NVML_GPU_INSTANCE_PROFILE_8_SLICE, &info),
      NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvmlDeviceGetGpuInstanceProfileInfo(Handle(0), 10, &info), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlDeviceGetGpuInstanceProfileInfo(Handle(1), 0, &info), NVML_ERROR_NOT_SUPPORTED);
  unsigned n = 0;
  EXPECT_EQ(nvmlDeviceGetGpuInstancePossiblePlacements_v2(Handle(0), 15, nullptr, &n),
            NVML_ERROR_INVALID_ARGUMENT);  // 1g.20gb's id, not an A100-40GB profile
}

TEST(FakeNvmlMigTest, InstancesRefuseOverlapAndExposeMigDevices) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, kMigDevices}, {FAKEGPU_ENV_MIG, "0"}});
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t gpu = Handle(0);
  nvmlGpuInstance_t g3 = CreateAt(gpu, 9, 4, 4);  // 3g.20gb on slices 4-7
  ASSERT_NE(g3, nullptr);
  CreateAt(gpu, 19, 4, 1, NVML_ERROR_INSUFFICIENT_RESOURCES);  // 1g inside it
  CreateAt(gpu, 5, 0, 4);                                      // 4g.20gb fits at 0 ...
  nvmlGpuInstance_t g4 = nullptr;
  {
    unsigned n = 1;
    ASSERT_EQ(nvmlDeviceGetGpuInstances(gpu, 5, &g4, &n), NVML_SUCCESS);
    ASSERT_EQ(n, 1u);
  }
  ASSERT_EQ(nvmlGpuInstanceDestroy(g4), NVML_SUCCESS);   // ... and goes again
  CreateAt(gpu, 14, 6, 2, NVML_ERROR_INVALID_ARGUMENT);  // 2g has no placement at 6
  CreateAt(gpu, 14, 0, 1, NVML_ERROR_INVALID_ARGUMENT);  // wrong size
  nvmlGpuInstance_t g2 = CreateAt(gpu, 14, 0, 2);
  nvmlGpuInstance_t g1 = CreateAt(gpu, 19, 3, 1);
  unsigned left = 9;
  ASSERT_EQ(nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19, &left), NVML_SUCCESS);
  EXPECT_EQ(left, 1u);  // only slice 2 is free
  ASSERT_EQ(nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 9, &left), NVML_SUCCESS);
  EXPECT_EQ(left, 0u);

  // Ids follow the placement; GetInfo and GetGpuInstanceById agree.
  const struct {
    nvmlGpuInstance_t gi;
    unsigned id, profile, start, size;
  } live[] = {{g3, 2, 9, 4, 4}, {g2, 3, 14, 0, 2}, {g1, 10, 19, 3, 1}};
  for (const auto& l : live) {
    nvmlGpuInstanceInfo_t info;
    ASSERT_EQ(nvmlGpuInstanceGetInfo(l.gi, &info), NVML_SUCCESS);
    EXPECT_EQ(info.device, gpu);
    EXPECT_EQ(info.id, l.id);
    EXPECT_EQ(info.profileId, l.profile);
    EXPECT_EQ(info.placement.start, l.start);
    EXPECT_EQ(info.placement.size, l.size);
    nvmlGpuInstance_t by = nullptr;
    ASSERT_EQ(nvmlDeviceGetGpuInstanceById(gpu, l.id, &by), NVML_SUCCESS);
    EXPECT_EQ(by, l.gi);
  }
  nvmlGpuInstance_t none = nullptr;
  EXPECT_EQ(nvmlDeviceGetGpuInstanceById(gpu, 7, &none), NVML_ERROR_NOT_FOUND);

  // No MIG device until a compute instance exists.
  nvmlDevice_t mig = nullptr;
  EXPECT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig), NVML_ERROR_NOT_FOUND);
  nvmlComputeInstanceProfileInfo_t cip;
  EXPECT_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(g3, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
                                                         0, &cip),
            NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvmlGpuInstanceGetComputeInstanceProfileInfo(
                g3, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cip),
            NVML_SUCCESS);
  EXPECT_EQ(cip.sliceCount, 3u);
  EXPECT_EQ(cip.multiprocessorCount, 42u);
  nvmlComputeInstance_t ci = nullptr, ci2 = nullptr;
  ASSERT_EQ(nvmlGpuInstanceCreateComputeInstance(g3, cip.id, &ci), NVML_SUCCESS);
  EXPECT_EQ(nvmlGpuInstanceCreateComputeInstance(g3, cip.id, &ci2),
            NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(nvmlGpuInstanceDestroy(g3), NVML_ERROR_IN_USE);
  nvmlComputeInstanceInfo_t cinfo;
  ASSERT_EQ(nvmlComputeInstanceGetInfo_v2(ci, &cinfo), NVML_SUCCESS);
  EXPECT_EQ(cinfo.gpuInstance, g3);
  EXPECT_EQ(cinfo.id, 0u);

  ASSERT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig), NVML_SUCCESS);
  nvmlDevice_t other = nullptr;
  EXPECT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1, &other), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 7, &other), NVML_ERROR_INVALID_ARGUMENT);
  unsigned is_mig = 9, id = 9;
  ASSERT_EQ(nvmlDeviceIsMigDeviceHandle(mig, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 1u);
  ASSERT_EQ(nvmlDeviceIsMigDeviceHandle(gpu, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 0u);
  ASSERT_EQ(nvmlDeviceGetGpuInstanceId(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 2u);
  ASSERT_EQ(nvmlDeviceGetComputeInstanceId(mig, &id), NVML_SUCCESS);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(nvmlDeviceGetGpuInstanceId(gpu, &id), NVML_ERROR_NOT_SUPPORTED);
  nvmlDevice_t parent = nullptr;
  ASSERT_EQ(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent), NVML_SUCCESS);
  EXPECT_EQ(parent, gpu);
  char uuid[96], name[96];
  ASSERT_EQ(nvmlDeviceGetUUID(mig, uuid, sizeof uuid), NVML_SUCCESS);
  EXPECT_EQ(std::string(uuid).rfind("MIG-", 0), 0u) << uuid;
  EXPECT_EQ(std::strlen(uuid), 40u) << uuid;
  ASSERT_EQ(nvmlDeviceGetName(mig, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "NVIDIA A100-SXM4-40GB MIG 3g.20gb");
  nvmlMemory_t mem;
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(mig, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.total, 20096 * kMiB);
  nvmlDeviceAttributes_t attr;
  ASSERT_EQ(nvmlDeviceGetAttributes_v2(mig, &attr), NVML_SUCCESS);
  EXPECT_EQ(attr.multiprocessorCount, 42u);
  EXPECT_EQ(attr.gpuInstanceSliceCount, 3u);
  unsigned procs = 5;
  EXPECT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(mig, &procs, nullptr), NVML_SUCCESS);
  EXPECT_EQ(procs, 0u);

  // Destroyed: the handles go stale, and a new instance at the same place has another UUID.
  ASSERT_EQ(nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceGetUUID(mig, uuid, sizeof uuid), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlComputeInstanceDestroy(ci), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvmlGpuInstanceCreateComputeInstance(g3, cip.id, &ci), NVML_SUCCESS);
  char uuid2[96];
  ASSERT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0, &mig), NVML_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetUUID(mig, uuid2, sizeof uuid2), NVML_SUCCESS);
  EXPECT_STRNE(uuid, uuid2);
  ASSERT_EQ(nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
  ASSERT_EQ(nvmlGpuInstanceDestroy(g3), NVML_SUCCESS);
  EXPECT_EQ(nvmlGpuInstanceDestroy(g3), NVML_ERROR_INVALID_ARGUMENT);
  nvmlGpuInstanceInfo_t info;
  EXPECT_EQ(nvmlGpuInstanceGetInfo(g3, &info), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvmlGpuInstanceGetInfo(reinterpret_cast<nvmlGpuInstance_t>(&info), &info),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST(FakeNvmlMigTest, InstancesAreSharedAcrossProcesses) {
  FakeEnv env({{FAKEGPU_ENV_DEVICES, kMigDevices}, {FAKEGPU_ENV_MIG, "0"}});
  Child child([] {
    if (nvmlInit_v2() != NVML_SUCCESS) return -1LL;
    nvmlDevice_t gpu = nullptr;
    nvmlDeviceGetHandleByIndex_v2(0, &gpu);
    nvmlGpuInstancePlacement_t p{6, 1};
    nvmlGpuInstance_t gi = nullptr;
    nvmlComputeInstance_t ci = nullptr;
    if (nvmlDeviceCreateGpuInstanceWithPlacement(gpu, 19, &p, &gi) != NVML_SUCCESS) return -2LL;
    if (nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci) != NVML_SUCCESS) return -3LL;
    nvmlGpuInstanceInfo_t info;
    nvmlGpuInstanceGetInfo(gi, &info);
    return static_cast<long long>(info.id);
  });
  ASSERT_EQ(child.Result(), 13);
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlGpuInstance_t gi = nullptr;
  ASSERT_EQ(nvmlDeviceGetGpuInstanceById(Handle(0), 13, &gi), NVML_SUCCESS);
  CreateAt(Handle(0), 19, 6, 1, NVML_ERROR_INSUFFICIENT_RESOURCES);
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(nvmlDeviceGetMigDeviceHandleByIndex(Handle(0), 0, &mig), NVML_SUCCESS);
  child.Release();
  EXPECT_EQ(child.Join(), 0);
  // Instances outlive the process that made them, as on a real GPU.
  EXPECT_EQ(nvmlDeviceGetGpuInstanceById(Handle(0), 13, &gi), NVML_SUCCESS);
}

}  // namespace
}  // namespace fakegpu::testing
