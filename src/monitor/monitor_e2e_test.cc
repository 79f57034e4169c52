// End to end on the node, no GPU: a CUDA program runs under libvgpu.so with the fake driver
// (src/fakes), exactly as a container would after Allocate; the exporter reads its region and the
// fake NVML, and the feedback loop writes its decision back into the region libvgpu reads.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "gpu/nvml_discovery.h"
#include "monitor/exporter.h"
#include "monitor/feedback.h"
#include "monitor/nvml_telemetry.h"
#include "monitor/region_reader.h"
#include "monitor/testing/region_writer.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
const std::string kNvml = std::string(MONITOR_FAKES_DIR) + "/libnvidia-ml.so.1";
const char* kDevices = "NVIDIA A100-SXM4-80GB:81920:108;NVIDIA L4:23034:58";

using testing::ParseExposition;

uint64_t RealtimeUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

class MonitorE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(MONITOR_VGPU_PROG, X_OK) != 0 || access(kNvml.c_str(), R_OK) != 0) {
      GTEST_SKIP() << "libvgpu test program or fake NVML not built";
    }
    state_ = tmp_.path() + "/fake.state";
    setenv("FAKEGPU_DEVICES", devices_.c_str(), 1);
    setenv("FAKEGPU_STATE", state_.c_str(), 1);
    // The fake NVML stays loaded across tests: make it drop the previous test's state file.
    if (void* h = dlopen(kNvml.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      if (auto reset = reinterpret_cast<void (*)()>(dlsym(h, "fakegpu_nvml_reset"))) reset();
      dlclose(h);
    }
    gpu::NvmlOptions o;
    o.library = kNvml;
    auto d = gpu::NvmlDiscovery::Open(o);
    ASSERT_TRUE(d.ok()) << d.status();
    discovery_ = std::move(*d);
    auto t = NvmlTelemetry::Open(*discovery_, kNvml);
    ASSERT_TRUE(t.ok()) << t.status();
    telemetry_ = std::move(*t);
  }

  // Starts the libvgpu test program as container <uid>_<ctr>; stdout goes to /dev/null.
  pid_t StartContainer(const std::string& uid, const std::string& ctr,
                       const std::vector<std::string>& extra, const std::vector<std::string>& args,
                       const std::string& preload = MONITOR_VGPU_LIB) {
    std::string dir = root_ + "/" + uid + "_" + ctr;
    std::filesystem::create_directories(
        dir);  // the device plugin creates it before the container starts
    std::vector<std::string> env = {
        "PATH=/usr/bin:/bin",      std::string("LD_LIBRARY_PATH=") + MONITOR_FAKES_DIR,
        "LD_PRELOAD=" + preload,   "FAKEGPU_DEVICES=" + devices_,
        "FAKEGPU_STATE=" + state_, "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + dir + "/vgpu.cache",
        "LIBCUDA_LOG_LEVEL=1"};
    env.insert(env.end(), extra.begin(), extra.end());
    env.insert(env.end(), env_.begin(), env_.end());
    // FAKEGPU_NVML_SAMPLE_MS from the test's environment: the fake NVML samples as a real driver
    // (the monitor in this process reads it too), e.g. FAKEGPU_NVML_SAMPLE_MS=200 ctest -R
    // MonitorE2e.
    if (const char* p = std::getenv("FAKEGPU_NVML_SAMPLE_MS"))  // NOLINT(concurrency-mt-unsafe)
      env.push_back(std::string("FAKEGPU_NVML_SAMPLE_MS=") + p);
    std::vector<std::string> argv = {MONITOR_VGPU_PROG};
    argv.insert(argv.end(), args.begin(), args.end());
    std::fflush(stdout);  // the child must not print what the parent buffered
    pid_t pid = fork();
    if (pid == 0) {
      freopen("/dev/null", "w", stdout);
      std::vector<char*> a, e;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      for (auto& s : env) e.push_back(s.data());
      e.push_back(nullptr);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
    return pid;
  }

  // As the device plugin arms a container: its limits file <root>/<uid>_<ctr>.limits (region path,
  // policy, `limits` lines), seen by libvgpu as vgpu.limits beside its copy of libvgpu.so (a hard
  // link: the file the monitor rewrites is the one libvgpu reads, as with the read-only bind
  // mount).
  pid_t StartArmed(const std::string& uid, const std::string& ctr, const std::string& limits,
                   const std::vector<std::string>& args,
                   const std::vector<std::string>& extra = {}) {
    namespace fs = std::filesystem;
    const std::string name = uid + "_" + ctr, dir = root_ + "/" + name;
    fs::create_directories(dir);
    const std::string file = root_ + "/" + name + ".limits";
    {
      FILE* f = fopen(file.c_str(), "w");
      if (f == nullptr) return -1;
      fprintf(f, "# libvgpu limits for this container, written by the hami device plugin\n%s",
              limits.c_str());
      fprintf(f, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/vgpu.cache\n", dir.c_str());
      if (limits.find("GPU_CORE_UTILIZATION_POLICY") == std::string::npos)
        fprintf(f, "GPU_CORE_UTILIZATION_POLICY=default\n");
      fclose(f);
    }
    const std::string hook = tmp_.path() + "/hook-" + name;
    fs::create_directories(hook);
    fs::copy_file(MONITOR_VGPU_LIB, hook + "/libvgpu.so", fs::copy_options::overwrite_existing);
    fs::create_hard_link(file, hook + "/vgpu.limits");
    return StartContainer(uid, ctr, extra, args, hook + "/libvgpu.so");
  }

  // The monitor's share loop at the shipped 100 ms, over this test's containers.
  struct ShareLoop {
    ShareLoop(const std::string& root, GpuTelemetry& t)
        : store({root, 300, 16}, RealClock::Get()),
          loop(store, t, RealClock::Get(), 5'000'000'000),
          thread(loop, 100) {}
    RegionStore store;
    FeedbackLoop loop;
    ShareThread thread;
  };

  // Containers uid-a and uid-b at SM limits pct_a and pct_b, both launching for `ms` (kernels of
  // the test program's launch `path`: "kernel" = 1..8 waves, "one" = one wave).
  std::pair<pid_t, pid_t> StartBusyPair(int pct_a, int pct_b, int ms,
                                        const std::string& path = "kernel") {
    const std::string at = std::to_string(RealtimeUs() + 200'000), n = std::to_string(ms);
    auto limit = [](int pct) { return "CUDA_DEVICE_SM_LIMIT=" + std::to_string(pct) + "\n"; };
    return {StartArmed("uid-a", "main", limit(pct_a), {"launch", at, n, path}),
            StartArmed("uid-b", "main", limit(pct_b), {"launch", at, n, path})};
  }

  std::string devices_ = kDevices;  // the fake's devices (set before SetUp)
  std::vector<std::string> env_;    // more variables for every container (FAKEGPU_WAVE_US)
  testing::TempDir tmp_;
  std::string root_ = tmp_.path() + "/containers";
  std::string state_;
  std::unique_ptr<gpu::DeviceDiscovery> discovery_;
  std::unique_ptr<NvmlTelemetry> telemetry_;
};

TEST_F(MonitorE2e, HostMetricsFromFakeNvml) {
  auto devs = telemetry_->Devices();
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[0].model, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ((*devs)[1].model, "NVIDIA L4");
  EXPECT_EQ((*devs)[1].index, 1);
  EXPECT_EQ((*devs)[0].uuid, "GPU-fa4e0000-0000-4000-8000-000000000000");
  EXPECT_EQ((*devs)[1].memory_total_bytes, 23034 * kMiB);
  EXPECT_EQ((*devs)[0].utilization_pct, 0);
  auto rows = telemetry_->ProcessUtilization((*devs)[0].uuid, 1000);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(rows->empty());
  EXPECT_FALSE(telemetry_->ProcessUtilization("GPU-nope", 1000).ok());
}

TEST_F(MonitorE2e, ContainerUnderLibvgpuIsExportedAndGetsFeedback) {
  const std::string uuid = "GPU-fa4e0000-0000-4000-8000-000000000000";
  pid_t pid = StartContainer("uid-e2e", "main",
                             {"CUDA_DEVICE_MEMORY_LIMIT_0=3000m", "CUDA_DEVICE_SM_LIMIT=50"},
                             {"launch", std::to_string(RealtimeUs()), "6000", "kernel"});
  ASSERT_GT(pid, 0);
  StaticPodDirectory pods;
  pods.Set("uid-e2e", {"team-a", "train-0"});
  RegionStore store({root_, 300, 16}, RealClock::Get());
  Exporter exporter({"node-1", DefaultBuildInfo("t", "t", "t"), 1000}, store, pods, *telemetry_,
                    RealClock::Get());
  const std::string labels =
      "{zone=\"vGPU\",namespace=\"team-a\",pod=\"train-0\",container=\"main\",vdevice_index=\"0\","
      "device_uuid=\"" +
      uuid + "\"}";
  const std::string pod_labels =
      "{zone=\"vGPU\",namespace=\"team-a\",pod=\"train-0\",container=\"main\"}";
  std::map<std::string, double> m;
  // Wait (bounded) until the program has registered and its kernels show up in NVML.
  for (int i = 0; i < 400; ++i) {
    m = ParseExposition(exporter.Render());
    if (m["hami_container_processes" + pod_labels] == 1 &&
        m["hami_container_device_utilization_ratio" + labels] > 0) {
      break;
    }
    usleep(25'000);
  }
  EXPECT_EQ(m["hami_container_processes" + pod_labels], 1);
  EXPECT_GT(m["hami_container_device_utilization_ratio" + labels], 0);
  EXPECT_LE(m["hami_container_device_utilization_ratio" + labels], 100);
  EXPECT_EQ(m["hami_vgpu_memory_limit_bytes" + labels], 3000.0 * kMiB);
  EXPECT_EQ(m["hami_container_device_sm_limit_ratio" + labels], 50);
  const double used = m["hami_vgpu_memory_used_bytes" + labels];
  EXPECT_GT(used, 0);  // at least the context libvgpu charges
  // Upstream's split: libvgpu notes its context charge in the slot; the rest is buffers.
  const double ctx = m["hami_vgpu_memory_context_bytes" + labels];
  EXPECT_GT(ctx, 0);
  EXPECT_EQ(ctx + m["hami_vgpu_memory_buffer_bytes" + labels], used);
  EXPECT_EQ(m["hami_vgpu_memory_module_bytes" + labels], 0);
  const std::string host = "{zone=\"vGPU\",node=\"node-1\",device_index=\"0\",device_uuid=\"" +
                           uuid + "\",device_type=\"NVIDIA A100-SXM4-80GB\"}";
  EXPECT_GE(m["hami_host_gpu_memory_used_bytes" + host], used);
  EXPECT_GT(m["hami_host_gpu_utilization_ratio" + host], 0);

  // Feedback: the container is active and alone on its GPU -> not throttled under policy default.
  FeedbackLoop loop(store, *telemetry_, RealClock::Get(), 5'000'000'000);
  FeedbackStats s = loop.Tick();
  EXPECT_EQ(s.containers, 1);
  EXPECT_EQ(s.switched_on, 0);
  m = ParseExposition(exporter.Render());
  EXPECT_EQ(m["hami_container_core_limit_switch" + pod_labels], 0);

  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  m = ParseExposition(exporter.Render());
  EXPECT_EQ(m["hami_container_processes" + pod_labels], 0);  // liveness lock gone with the process
  EXPECT_EQ(m["hami_vgpu_memory_used_bytes" + labels], 0);
  EXPECT_EQ(m["hami_vgpu_memory_context_bytes" + labels], 0);
  loop.Release();
}

// Issue 33, through libvgpu and the real feedback loop: a container at 70 % runs alone (the loop
// lifts its limit), then a 30 % neighbour comes back and the loop turns both limits on. libvgpu's
// controller kept measuring the lone container's busy time while its launches went uncharged and
// charged it as debt when the switch came back: the busy container then got nothing for about a
// second. Now it keeps its share from the moment the neighbour is back (ground truth: the fake's
// per-process device time).
TEST_F(MonitorE2e, BusyContainerKeepsItsShareWhenANeighbourComesBack) {
  using Busy = unsigned long long (*)(int, int);
  void* h = dlopen(kNvml.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  auto busy_ns = reinterpret_cast<Busy>(dlsym(h, "fakegpu_busy_ns"));
  dlclose(h);
  ASSERT_NE(busy_ns, nullptr);
  const std::string now = std::to_string(RealtimeUs());
  pid_t a = StartContainer("uid-a", "main", {"CUDA_DEVICE_SM_LIMIT=70"},
                           {"launch", now, "8000", "kernel"});
  ASSERT_GT(a, 0);
  RegionStore store({root_, 300, 16}, RealClock::Get());
  FeedbackLoop loop(store, *telemetry_, RealClock::Get(), 5'000'000'000);
  usleep(1'200'000);  // limited from its first launch (the region starts with the switch on)
  FeedbackStats s = loop.Tick();
  EXPECT_EQ(s.containers, 1);
  EXPECT_EQ(s.switched_on, 0) << "alone: the limit is lifted";
  usleep(2'500'000);  // alone and unlimited: busy all the time
  pid_t b = StartContainer("uid-b", "main", {"CUDA_DEVICE_SM_LIMIT=30"},
                           {"launch", std::to_string(RealtimeUs()), "4000", "kernel"});
  ASSERT_GT(b, 0);
  usleep(500'000);
  s = loop.Tick();
  EXPECT_EQ(s.containers, 2);
  EXPECT_EQ(s.switched_on, 2) << "the neighbour is back: both limited";
  const uint64_t a0 = busy_ns(0, a), b0 = busy_ns(0, b);
  usleep(2'000'000);
  const double share_a = static_cast<double>(busy_ns(0, a) - a0) / 2e7;
  const double share_b = static_cast<double>(busy_ns(0, b) - b0) / 2e7;
  std::printf("after the neighbour came back: 70 %% container %.1f %%, 30 %% container %.1f %%\n",
              share_a, share_b);
  EXPECT_GE(share_a, 60.0) << "the busy container stalled when its neighbour came back";
  EXPECT_GE(share_b, 20.0);
  // Metering: libvgpu's busy-time meter against the fake's ground truth, per container. The meter
  // misses the time before the controller's first window and the last window not yet ticked (each
  // under 100 ms).
  for (auto [pid, dir] : {std::pair{a, "uid-a_main"}, std::pair{b, "uid-b_main"}}) {
    auto region = MappedRegion::Open(root_ + "/" + dir + "/vgpu.cache");
    ASSERT_TRUE(region.ok()) << region.status();
    auto snap = (*region)->Snapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    double meter = -1;
    for (const RegionDevice& d : snap->devices) {
      if (d.uuid == "GPU-fa4e0000-0000-4000-8000-000000000000") meter = d.busy_ms;
    }
    const double truth = static_cast<double>(busy_ns(0, pid)) / 1e6;
    std::printf("%s: busy meter %.0f ms, fake's ground truth %.0f ms\n", dir, meter, truth);
    EXPECT_NEAR(meter, truth, 0.02 * truth + 200) << dir;
  }
  for (pid_t p : {a, b}) {
    kill(p, SIGKILL);
    int status = 0;
    waitpid(p, &status, 0);
  }
  loop.Release();
}

// ---- Work-conserving shares (issue 33), through libvgpu, the fake driver and the monitor's share
// loop (FeedbackLoop::ShareTick on its thread, at the shipped 100 ms), armed containers. Shares are
// measured on the fake device's clock (CLOCK_MONOTONIC) from its per-process ground truth.

using BusyFn = unsigned long long (*)(int, int);

BusyFn FakeBusy() {
  void* h = dlopen(kNvml.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  auto f = reinterpret_cast<BusyFn>(dlsym(h, "fakegpu_busy_ns"));
  dlclose(h);
  return f;
}

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Percent of the device each pid got over `ms` from now.
std::vector<double> Shares(BusyFn busy, const std::vector<pid_t>& pids, int ms) {
  std::vector<unsigned long long> b0;
  for (pid_t p : pids) b0.push_back(busy(0, p));
  const int64_t t0 = MonoNs();
  usleep(static_cast<useconds_t>(ms) * 1000);
  const double dt = static_cast<double>(MonoNs() - t0);
  std::vector<double> out;
  for (size_t i = 0; i < pids.size(); ++i)
    out.push_back(100.0 * static_cast<double>(busy(0, pids[i]) - b0[i]) / dt);
  return out;
}

// The fake's ground truth of two containers, sampled every ~2 ms.
struct BusySample {
  int64_t t;
  unsigned long long a, b;
};

// Percent of the device container b (or a) got between sample times t0 and t1 (-1: not sampled).
double ShareBetween(const std::vector<BusySample>& v, int64_t t0, int64_t t1, bool of_b) {
  size_t i = 0;
  while (i < v.size() && v[i].t < t0) ++i;
  size_t j = i;
  while (j < v.size() && v[j].t < t1) ++j;
  if (j >= v.size() || j <= i) return -1;
  const unsigned long long d = of_b ? v[j].b - v[i].b : v[j].a - v[i].a;
  return 100.0 * static_cast<double>(d) / static_cast<double>(v[j].t - v[i].t);
}

// One return of container b after an idle time: how long until it had 28 % of a 50 ms window,
// its share from 100 to 400 ms after, a's share from 150 to 400 ms after (printed), and a's share
// over b's idle time from 400 ms after b's last kernel (-1: not measured).
struct ReturnCycle {
  double return_ms = -1, b_after = -1, a_after = -1, a_idle = -1;
};

std::vector<ReturnCycle> ReturnCycles(const std::vector<BusySample>& v) {
  std::vector<ReturnCycle> out;
  size_t last_growth = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i].b == v[i - 1].b) continue;
    const bool start = v[i].t - v[last_growth].t > 200'000'000;
    const size_t prev = last_growth;
    last_growth = i;
    if (!start) continue;
    ReturnCycle c;
    const int64_t t = v[i - 1].t;
    if (prev > 0 && t - v[prev].t > 450'000'000)
      c.a_idle = ShareBetween(v, v[prev].t + 400'000'000, t, false);
    for (size_t k = i - 1; k < v.size(); ++k) {
      const double s = ShareBetween(v, v[k].t, v[k].t + 50'000'000, true);
      if (s < 0) break;
      if (s >= 28.0) {
        c.return_ms = static_cast<double>(v[k].t - t) / 1e6;
        break;
      }
    }
    c.b_after = ShareBetween(v, t + 100'000'000, t + 400'000'000, true);
    c.a_after = ShareBetween(v, t + 150'000'000, t + 400'000'000, false);
    out.push_back(c);
  }
  return out;
}

void Reap(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    kill(p, SIGKILL);
    int status = 0;
    waitpid(p, &status, 0);
  }
}

TEST_F(MonitorE2e, SharesBothBusyHoldTheirLimits) {
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  ShareLoop shares(root_, *telemetry_);
  auto [a, b] = StartBusyPair(30, 70, 4000);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  usleep(1'500'000);
  std::vector<double> s = Shares(busy, {a, b}, 2000);
  std::printf("30/70 both busy: %.1f %% / %.1f %%\n", s[0], s[1]);
  EXPECT_NEAR(s[0], 30.0, 2.0);
  EXPECT_NEAR(s[1], 70.0, 2.0);
  Reap({a, b});
}

TEST_F(MonitorE2e, SharesIdleNeighboursTimeGoesToTheBusyOnes) {
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  ShareLoop shares(root_, *telemetry_);
  const std::string at = std::to_string(RealtimeUs() + 200'000);
  const std::string flag = tmp_.path() + "/idle.done";
  pid_t a =
      StartArmed("uid-a", "main", "CUDA_DEVICE_SM_LIMIT=20\n", {"launch", at, "4000", "kernel"});
  pid_t b = StartArmed("uid-b", "main", "CUDA_DEVICE_SM_LIMIT=30\n", {"hold", flag});
  pid_t c =
      StartArmed("uid-c", "main", "CUDA_DEVICE_SM_LIMIT=50\n", {"launch", at, "4000", "kernel"});
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  ASSERT_GT(c, 0);
  usleep(1'500'000);
  std::vector<double> s = Shares(busy, {a, b, c}, 2000);
  std::printf("20/30/50, the 30 idle: %.1f %% / %.1f %% / %.1f %%\n", s[0], s[1], s[2]);
  EXPECT_NEAR(s[0], 100.0 * 20 / 70, 2.0);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_NEAR(s[2], 100.0 * 50 / 70, 2.0);
  Reap({a, b, c});
}

TEST_F(MonitorE2e, SharesAloneGetsTheWholeGpu) {
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  ShareLoop shares(root_, *telemetry_);
  pid_t a = StartArmed("uid-a", "main", "CUDA_DEVICE_SM_LIMIT=30\n",
                       {"launch", std::to_string(RealtimeUs()), "3000", "kernel"});
  ASSERT_GT(a, 0);
  usleep(800'000);
  std::vector<double> s = Shares(busy, {a}, 2000);
  std::printf("30 %% alone: %.1f %%\n", s[0]);
  EXPECT_GE(s[0], 97.0);
  Reap({a});
}

// A 30 % container goes idle (500 ms) and comes back (400 ms busy), 16 times, while a 70 % one
// runs. In its idle time the 70 % one gets the GPU (once the monitor sees it idle: its NVML window
// of 200 ms and a tick). Each time the 30 % one is back at its share (at least 28 % of a 50 ms
// window) within 200 ms of its first kernel (p99: the worst of the 16 returns), it keeps it (at
// least 26 % from 100 to 400 ms after its return, the 2 points of the shares and 2 of a 300 ms
// window at load 7 on 2 cores: not blocked by the monitor's policing, which gave 0-24 %), and it
// takes no more than its share plus what it may carry over its idle time: the default burst at
// 30 % (15 ms) and one share poll of refill (7.5 ms), 7.5 points of the 300 ms window, with the 2
// points the shares are held to (it took about 50 % when it banked the idle time that its
// neighbour used).
//
// It was disabled (2026-12-03: returns up to 267 ms, single 300 ms windows at 9.4-41.1 % on a quiet
// machine) while the fake admitted launches on the device-wide backlog: the 70 % one (unlimited at
// factor 1.43 while the other is idle, then at its 70 % beside the other's 30: the device exactly
// full) kept the 20 ms backlog full, and the returning container launched only when it won the
// wake-up race after the backlog sleep (that fake and test beside two busy loops: 5 returns at
// 23.8-24.5 %). The fake now queues per process (src/fakes/README.md), as the real driver does per
// context. What its FIFO does not model is the time slice: a kernel waits behind all the work
// queued before it (up to FAKEGPU_MAX_BACKLOG_US, 20 ms, per busy process), where a real GPU
// starts it within a time slice; with 20 ms the returning container's 300 ms windows moved with
// the queue (26.3-34.4 % in 32 returns of 2 runs, one beside two busy loops). Both processes here
// queue at most 3 ms (kQueueSlice, about a time slice): 26.5-35.0 % in 6 runs, 5 of them beside
// two busy loops, one of which failed with a single cycle at 24.8. The 70 % one alone at 3 ms and
// the other at 20 ms did worse beside two busy loops (4 runs failed: 18.0-25.4 % in some cycles).
// Left: a time-sliced fake device, which would need neither bound.
constexpr const char* kQueueSlice = "FAKEGPU_MAX_BACKLOG_US=3000";

TEST_F(MonitorE2e, SharesReturnOfAnIdleContainerWithin200Ms) {
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  ShareLoop shares(root_, *telemetry_);
  constexpr int kCycles = 16, kBusyMs = 400, kIdleMs = 500;
  constexpr double kCarryPoints = 100.0 * (15 + 7.5) / 300 + 2.0;
  constexpr int64_t kRunNs = int64_t{1'200 + kCycles * (kBusyMs + kIdleMs)} * 1'000'000;
  const int64_t t0 = MonoNs();
  const uint64_t at = RealtimeUs() + 200'000;
  pid_t a = StartArmed("uid-a", "main", "CUDA_DEVICE_SM_LIMIT=70\n",
                       {"launch", std::to_string(at), std::to_string(kRunNs / 1'000'000), "kernel"},
                       {kQueueSlice});
  pid_t b = StartArmed("uid-b", "main", "CUDA_DEVICE_SM_LIMIT=30\n",
                       {"cycles", std::to_string(at + 1'000'000), std::to_string(kBusyMs),
                        std::to_string(kIdleMs), std::to_string(kCycles)},
                       {kQueueSlice});
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  std::vector<BusySample> v;
  while (MonoNs() - t0 < kRunNs) {
    v.push_back({MonoNs(), busy(0, a), busy(0, b)});
    usleep(2000);
  }
  Reap({a, b});
  std::vector<ReturnCycle> cycles = ReturnCycles(v);
  std::vector<double> sorted;
  std::printf("cycle: return ms, 30 %% one kept / 70 %% one kept after it, 70 %% one while idle\n");
  for (const ReturnCycle& c : cycles) {
    std::printf("  %.0f  %.1f / %.1f  %.1f\n", c.return_ms, c.b_after, c.a_after, c.a_idle);
    sorted.push_back(c.return_ms);
  }
  std::sort(sorted.begin(), sorted.end());
  ASSERT_GE(cycles.size(), size_t{kCycles - 1});
  EXPECT_GE(sorted.front(), 0.0) << "a cycle never reached its share";
  EXPECT_LE(sorted.back(), 200.0) << "p99 (the worst of the cycles) of the return time";
  for (const ReturnCycle& c : cycles) {
    if (c.b_after >= 0) {
      EXPECT_GE(c.b_after, 26.0) << "the returning container lost its share";
      EXPECT_LE(c.b_after, 30.0 + kCarryPoints) << "the returning container took more";
    }
    if (c.a_idle >= 0) {
      EXPECT_GE(c.a_idle, 90.0) << "idle time not given to the busy container";
    }
  }
}

// A hostile 30 % container rewrites its own region every 5 ms (what any of its processes can do):
// the monitor's switch off, nobody blocked, its SM limit at 100 %, a full 4 s bucket and burst. Its
// 70 % neighbour is busy: it must not get more than its share.
TEST_F(MonitorE2e, SharesHostileRegionWritesTakeNoMore) {
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  ShareLoop shares(root_, *telemetry_);
  auto [a, b] = StartBusyPair(70, 30, 5000);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  usleep(600'000);
  const std::string path = root_ + "/uid-b_main/vgpu.cache";
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  void* m = mmap(nullptr, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(m, MAP_FAILED);
  auto* r = static_cast<vgpu_region*>(m);
  std::atomic<bool> stop{false};
  std::thread hostile([&] {
    while (!stop) {
      __atomic_store_n(&r->hdr.utilization_switch, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&r->hdr.recent_kernel, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&r->hdr.priority, 0, __ATOMIC_RELAXED);
      for (vgpu_device_entry& d : r->devices) {
        if (d.uuid[0] == 0) continue;
        __atomic_store_n(&d.sm_limit_pct, 100u, __ATOMIC_RELAXED);
        __atomic_store_n(&d.burst_ns, 4'000'000'000ull, __ATOMIC_RELAXED);
        __atomic_store_n(&d.tokens_ns, int64_t{4'000'000'000}, __ATOMIC_RELAXED);
      }
      usleep(5000);
    }
  });
  usleep(1'000'000);
  std::vector<double> s = Shares(busy, {a, b}, 2500);
  stop = true;
  hostile.join();
  munmap(m, sizeof(vgpu_region));
  std::printf("hostile 30 %% / honest 70 %%: %.1f %% / %.1f %%\n", s[1], s[0]);
  EXPECT_LE(s[1], 32.0);
  EXPECT_GE(s[0], 68.0);
  Reap({a, b});
}

// A busy process the monitor cannot attribute a share to competes as the whole GPU: an armed 30 %
// container next to it keeps factor 1 (held to its 30 %) instead of taking the GPU as if alone
// (FIFO device: about half). The competitor is libvgpu without a limits file (not armed by the
// device plugin: its region has no trusted share), or a process without libvgpu at all, outside
// any container (NVML's per-process rows that no container accounts for).
//
// While the fake admitted launches on the device-wide backlog (20 ms), the competitor held it full
// and whether the armed container could launch at all was decided by which process woke first
// after the backlog sleep: with the two on different CPUs the armed one lost almost every race for
// 300-500 ms at a time (0-15 % while it had tokens and never waited on them), banked the time (its
// burst grows to 4 s x 30 % on a device kept full) and repaid it at up to half the device, in or
// out of the window, and past 50 ms above its share the monitor's policing blocked it for 500 ms
// (19.6 / 21.9 / 30.2 % pinned to different CPUs, 24.1 and 33.2 % in earlier runs). The test
// program then bounded its own queue; now the fake queues per process (src/fakes/README.md).
TEST_F(MonitorE2e, SharesBusyProcessesWithoutLimitsCountAsTheWholeGpu) {
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  struct Case {
    const char* name;
    std::string preload;  // of the competitor
  };
  const Case cases[] = {
      {"libvgpu, no limits file (not armed)", MONITOR_VGPU_LIB},
      {"no libvgpu (outside any container)", ""},
  };
  int n = 0;
  for (const Case& c : cases) {
    ShareLoop shares(root_, *telemetry_);
    const std::string at = std::to_string(RealtimeUs() + 200'000), tag = std::to_string(n++);
    pid_t a = StartArmed("uid-a" + tag, "main", "CUDA_DEVICE_SM_LIMIT=30\n",
                         {"launch", at, "3000", "kernel"});
    pid_t b =
        StartContainer("uid-b" + tag, "main", {}, {"launch", at, "3000", "kernel"}, c.preload);
    ASSERT_GT(a, 0);
    ASSERT_GT(b, 0);
    usleep(1'200'000);
    std::vector<double> s = Shares(busy, {a, b}, 1500);
    std::printf("armed 30 %% beside %s: %.1f %% / %.1f %%\n", c.name, s[0], s[1]);
    EXPECT_NEAR(s[0], 30.0, 2.0) << c.name;
    EXPECT_GE(s[1], 68.0) << c.name;
    Reap({a, b});
  }
}

// Accuracy of the shares on fake GPUs of 20, 132 and 188 SMs and for kernels of 10 us to 10 ms
// (real time; the 10 ms row passed 2 runs in 3 while the fake admitted launches device-wide, and
// 3 in 3 since it queues per process, docs/benchmarks.md): per case, 30/70 both busy, 20/30/50 with
// the 30 idle (the busy two split the GPU 28.6/71.4) and a 30 % container alone (the whole GPU),
// each within 2 points (alone: >= 97 %).
struct AccuracyCase {
  const char* name;
  int sms;
  int wave_us;
  const char* path;  // the test program's launch path: "kernel" 1..8 waves, "one" one wave
};

class MonitorE2eShareAccuracy : public MonitorE2e,
                                public ::testing::WithParamInterface<AccuracyCase> {
 protected:
  MonitorE2eShareAccuracy() {
    devices_ = "SimGPU:16384:" + std::to_string(GetParam().sms);
    env_ = {"FAKEGPU_WAVE_US=" + std::to_string(GetParam().wave_us)};
  }
};

TEST_P(MonitorE2eShareAccuracy, WithinTwoPoints) {
  const AccuracyCase& c = GetParam();
  BusyFn busy = FakeBusy();
  ASSERT_NE(busy, nullptr);
  ShareLoop shares(root_, *telemetry_);
  auto limit = [](int pct) { return "CUDA_DEVICE_SM_LIMIT=" + std::to_string(pct) + "\n"; };
  auto launch = [&](const char* uid, int pct, int ms) {
    return StartArmed(
        uid, "main", limit(pct),
        {"launch", std::to_string(RealtimeUs() + 200'000), std::to_string(ms), c.path});
  };
  pid_t a = launch("pair-a", 30, 3500), b = launch("pair-b", 70, 3500);
  usleep(1'500'000);
  std::vector<double> pair = Shares(busy, {a, b}, 1500);
  Reap({a, b});
  const std::string flag = tmp_.path() + "/idle.done";
  pid_t x = launch("three-a", 20, 3500);
  pid_t y = StartArmed("three-b", "main", limit(30), {"hold", flag});
  pid_t z = launch("three-c", 50, 3500);
  usleep(1'500'000);
  std::vector<double> three = Shares(busy, {x, y, z}, 1500);
  Reap({x, y, z});
  pid_t o = launch("alone", 30, 2500);
  usleep(900'000);
  std::vector<double> alone = Shares(busy, {o}, 1500);
  Reap({o});
  std::printf("| %s | %d | %.1f / %.1f | %.1f / %.1f | %.1f |\n", c.name, c.sms, pair[0], pair[1],
              three[0], three[2], alone[0]);
  EXPECT_NEAR(pair[0], 30.0, 2.0);
  EXPECT_NEAR(pair[1], 70.0, 2.0);
  EXPECT_NEAR(three[0], 100.0 * 20 / 70, 2.0);
  EXPECT_EQ(three[1], 0.0);
  EXPECT_NEAR(three[2], 100.0 * 50 / 70, 2.0);
  EXPECT_GE(alone[0], 97.0);
}

INSTANTIATE_TEST_SUITE_P(SmsAndKernels, MonitorE2eShareAccuracy,
                         ::testing::Values(AccuracyCase{"1-8 waves of 100 us", 20, 100, "kernel"},
                                           AccuracyCase{"1-8 waves of 100 us", 132, 100, "kernel"},
                                           AccuracyCase{"1-8 waves of 100 us", 188, 100, "kernel"},
                                           AccuracyCase{"10 us", 132, 10, "one"},
                                           AccuracyCase{"1 ms", 20, 1000, "one"},
                                           AccuracyCase{"10 ms", 188, 10000, "one"}),
                         [](const ::testing::TestParamInfo<AccuracyCase>& i) {
                           return std::to_string(i.param.sms) + "Sms" +
                                  (std::string(i.param.path) == "kernel"
                                       ? std::string("Mixed")
                                       : std::to_string(i.param.wave_us) + "Us");
                         });

}  // namespace
}  // namespace hami::monitor
