// Issue 33, exact metering, end to end on the node without a GPU: armed containers WITHOUT an SM
// limit run a varying load under libvgpu.so with the fake driver; `hami monitor`'s exporter is
// scraped at a fixed interval and compared, per interval and container, with the fake device's
// ground truth (its per-process device time) and with NVML's sampled per-process figure over its
// last 1 s window, which is what hami_container_device_utilization_ratio showed before the meter.
// HAMI_METER_SCRAPE_S (default 2.5) and HAMI_METER_WINDOWS (default 6) set the scrape interval and
// the number of intervals (docs/metrics.md has the 30 s run). Run twice: with the fake NVML
// averaging over the interval libvgpu asks about, and sampling every 200 ms as a real driver does
// (an H200 with driver 580; libvgpu weighted those samples by its 100 ms window and metered half).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gpu/nvml_discovery.h"
#include "monitor/exporter.h"
#include "monitor/nvml_telemetry.h"
#include "monitor/region_reader.h"
#include "monitor/testing/region_writer.h"

namespace hami::monitor {
namespace {

const std::string kFakes = MONITOR_FAKES_DIR;
const std::string kNvmlLib = kFakes + "/libnvidia-ml.so.1";
const char* kGpus = "NVIDIA A100-SXM4-80GB:81920:108";
const char* kUuid = "GPU-fa4e0000-0000-4000-8000-000000000000";

int64_t Now(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double EnvOr(const char* name, double dflt) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before any thread
  return v != nullptr && *v != '\0' ? std::strtod(v, nullptr) : dflt;
}

// One armed container (limits file beside its libvgpu.so, as the device plugin mounts it) with no
// SM limit, running the test program's "cycles" load: busy_ms of 1..8-wave kernels, idle_ms, n
// times, from start_us (CLOCK_REALTIME).
pid_t StartUnlimited(const std::string& base, const std::string& name, const std::string& state,
                     uint64_t start_us, int busy_ms, int idle_ms, int n, int sample_ms) {
  namespace fs = std::filesystem;
  const std::string dir = base + "/containers/" + name, hook = base + "/hook-" + name;
  fs::create_directories(dir);
  fs::create_directories(hook);
  fs::copy_file(MONITOR_VGPU_LIB, hook + "/libvgpu.so", fs::copy_options::overwrite_existing);
  if (FILE* f = fopen((hook + "/vgpu.limits").c_str(), "w")) {
    fprintf(f,
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/vgpu.cache\nGPU_CORE_UTILIZATION_POLICY=default\n",
            dir.c_str());
    fclose(f);
  }
  std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                  "LD_LIBRARY_PATH=" + kFakes,
                                  "LD_PRELOAD=" + hook + "/libvgpu.so",
                                  std::string("FAKEGPU_DEVICES=") + kGpus,
                                  "FAKEGPU_STATE=" + state,
                                  "FAKEGPU_NVML_SAMPLE_MS=" + std::to_string(sample_ms),
                                  "LIBCUDA_LOG_LEVEL=1"};
  std::vector<std::string> argv = {MONITOR_VGPU_PROG,        "cycles",
                                   std::to_string(start_us), std::to_string(busy_ms),
                                   std::to_string(idle_ms),  std::to_string(n)};
  return testing::SpawnQuiet(std::move(argv), std::move(env));
}

class MonitorMeter : public ::testing::TestWithParam<int> {};

TEST_P(MonitorMeter, UnlimitedContainersMeteredAgainstTruthAndNvml) {
  const int sample_ms = GetParam();
  if (access(MONITOR_VGPU_PROG, X_OK) != 0 || access(kNvmlLib.c_str(), R_OK) != 0)
    GTEST_SKIP() << "libvgpu test program or fake NVML not built";
  using BusyFn = unsigned long long (*)(int, int);
  testing::TempDir tmp;
  const std::string state = tmp.path() + "/fake.state";
  // NOLINTBEGIN(concurrency-mt-unsafe): the fake NVML reads them; no other thread yet
  setenv("FAKEGPU_DEVICES", kGpus, 1);
  setenv("FAKEGPU_STATE", state.c_str(), 1);
  setenv("FAKEGPU_NVML_SAMPLE_MS", std::to_string(sample_ms).c_str(), 1);
  // NOLINTEND(concurrency-mt-unsafe)
  gpu::NvmlOptions o;
  o.library = kNvmlLib;
  auto discovery = gpu::NvmlDiscovery::Open(o);
  ASSERT_TRUE(discovery.ok()) << discovery.status();
  auto telemetry = NvmlTelemetry::Open(**discovery, kNvmlLib);
  ASSERT_TRUE(telemetry.ok()) << telemetry.status();
  void* h = dlopen(kNvmlLib.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  auto truth_ns = reinterpret_cast<BusyFn>(dlsym(h, "fakegpu_busy_ns"));
  ASSERT_NE(truth_ns, nullptr);

  const double scrape_s = EnvOr("HAMI_METER_SCRAPE_S", 2.5);
  const int windows = static_cast<int>(EnvOr("HAMI_METER_WINDOWS", 6));
  const int64_t interval_ns = static_cast<int64_t>(scrape_s * 1e9);
  // Two containers whose busy periods drift against each other and against the scrapes; both end
  // with an idle period, so that the meter's last window is closed before the process exits.
  const double run_s = scrape_s * windows + 1.0;
  const uint64_t start_us = static_cast<uint64_t>(Now(CLOCK_REALTIME) / 1000) + 300'000;
  struct Ctr {
    std::string name;
    pid_t pid;
  };
  std::vector<Ctr> ctrs = {
      {"uid-a_main", StartUnlimited(tmp.path(), "uid-a_main", state, start_us, 300, 900,
                                    static_cast<int>(std::ceil(run_s / 1.2)), sample_ms)},
      {"uid-b_main", StartUnlimited(tmp.path(), "uid-b_main", state, start_us, 1100, 700,
                                    static_cast<int>(std::ceil(run_s / 1.8)), sample_ms)}};
  for (const Ctr& c : ctrs) ASSERT_GT(c.pid, 0);

  StaticPodDirectory pods;
  pods.Set("uid-a", {"ns", "a"});
  pods.Set("uid-b", {"ns", "b"});
  RegionStore store({tmp.path() + "/containers", 300, 16}, RealClock::Get());
  Exporter exporter({"node", CurrentBuildInfo(), 1000}, store, pods, **telemetry, RealClock::Get());
  auto key = [](const std::string& metric, const std::string& pod) {
    return metric + "{zone=\"vGPU\",namespace=\"ns\",pod=\"" + pod +
           "\",container=\"main\",vdevice_index=\"0\",device_uuid=\"" + kUuid + "\"}";
  };
  // NVML's figure for one process over its last 1 s window (the fake's rows are exact per window).
  auto nvml_pct = [&](pid_t pid) {
    auto rows = (*telemetry)->ProcessUtilization(kUuid, 1000);
    double pct = 0;
    if (rows.ok())
      for (const ProcessUtil& r : *rows)
        if (r.pid == static_cast<uint32_t>(pid)) pct += r.sm_pct;
    return pct;
  };

  usleep(static_cast<useconds_t>(start_us - static_cast<uint64_t>(Now(CLOCK_REALTIME) / 1000)));
  exporter.Render();  // the first reading of every meter
  std::vector<unsigned long long> t0;
  t0.reserve(ctrs.size());
  for (const Ctr& c : ctrs) t0.push_back(truth_ns(0, c.pid));
  int64_t m0 = Now(CLOCK_MONOTONIC);
  double err_meter = 0, err_nvml = 0;
  int n = 0;
  std::printf("interval  container  truth %%  meter %%  NVML %%\n");
  for (int w = 0; w < windows; ++w) {
    const int64_t next = m0 + interval_ns;
    usleep(static_cast<useconds_t>((next - Now(CLOCK_MONOTONIC)) / 1000));
    auto m = testing::ParseExposition(exporter.Render());
    const int64_t m1 = Now(CLOCK_MONOTONIC);
    for (size_t i = 0; i < ctrs.size(); ++i) {
      const unsigned long long t1 = truth_ns(0, ctrs[i].pid);
      const double truth = 100.0 * static_cast<double>(t1 - t0[i]) / static_cast<double>(m1 - m0);
      const std::string pod = i == 0 ? "a" : "b";
      ASSERT_EQ(m.count(key("hami_container_device_busy_ratio", pod)), 1u)
          << "no busy ratio for an unlimited armed container";
      const double meter = 100.0 * m[key("hami_container_device_busy_ratio", pod)];
      const double nvml = nvml_pct(ctrs[i].pid);
      // The same reading in percent and as a fraction: each printed with 16 significant digits (as
      // prometheus-cpp prints), so the two texts can differ in the last digit after scaling.
      EXPECT_NEAR(m[key("hami_container_device_utilization_ratio", pod)], meter, 1e-11);
      std::printf("%8d  %9s  %7.1f  %7.1f  %6.1f\n", w, ctrs[i].name.c_str(), truth, meter, nvml);
      err_meter += std::fabs(meter - truth);
      err_nvml += std::fabs(nvml - truth);
      ++n;
      t0[i] = t1;
    }
    m0 = m1;
  }
  err_meter /= n;
  err_nvml /= n;
  std::printf("mean |error| over %d intervals of %.1f s: meter %.2f points, NVML %.2f points\n", n,
              scrape_s, err_meter, err_nvml);
  EXPECT_LT(err_meter, err_nvml) << "the meter should beat NVML's last-window figure";
  // A periodic sampler moves up to one 200 ms period of load across each scrape boundary (8 points
  // of a busy container's 2.5 s interval): the per-interval bound is wider, the counter's the same.
  EXPECT_LT(err_meter, sample_ms ? 5.0 : 4.0);

  // The counter over the whole run: every 100 ms window, against the fake's total.
  for (const Ctr& c : ctrs) {
    int status = 0;
    waitpid(c.pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << c.name;
    auto region = MappedRegion::Open(tmp.path() + "/containers/" + c.name + "/vgpu.cache");
    ASSERT_TRUE(region.ok()) << region.status();
    auto snap = (*region)->Snapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    ASSERT_EQ(snap->devices.size(), 1u);
    EXPECT_TRUE(snap->devices[0].metered) << c.name;
    const double meter_ms = snap->devices[0].busy_ms;
    const double truth_ms = static_cast<double>(truth_ns(0, c.pid)) / 1e6;
    std::printf("%s: busy counter %.0f ms, ground truth %.0f ms (%+.2f %%)\n", c.name.c_str(),
                meter_ms, truth_ms, 100.0 * (meter_ms - truth_ms) / truth_ms);
    EXPECT_NEAR(meter_ms, truth_ms, 0.02 * truth_ms) << c.name;
  }
  dlclose(h);
}

INSTANTIATE_TEST_SUITE_P(NvmlSampling, MonitorMeter, ::testing::Values(0, 200),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param ? "Periodic" + std::to_string(i.param) + "ms"
                                          : std::string("Averaging");
                         });

}  // namespace
}  // namespace hami::monitor
