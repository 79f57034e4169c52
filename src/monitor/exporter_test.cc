#include "monitor/exporter.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "monitor/testing/region_writer.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

using testing::FakeContainerProcess;
using testing::TempDir;

constexpr uint64_t kMiB = 1ull << 20;

using testing::ParseExposition;

std::string Ctr(const std::string& metric, const std::string& ns, const std::string& pod,
                const std::string& ctr, const std::string& vidx, const std::string& uuid) {
  return metric + "{zone=\"vGPU\",namespace=\"" + ns + "\",pod=\"" + pod + "\",container=\"" + ctr +
         "\",vdevice_index=\"" + vidx + "\",device_uuid=\"" + uuid + "\"}";
}

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.AdvanceSeconds(500);
    telemetry_.SetDevices({
        {0, "GPU-aaa", "NVIDIA A100-SXM4-80GB", 80ull << 30, 5000 * kMiB, 37, 12},
        {1, "GPU-bbb", "NVIDIA A100-SXM4-80GB", 80ull << 30, 0, 0, -1},
    });
    pods_.Set("uid-1", {"team-a", "train-0"});
  }
  Exporter Make() {
    ExporterOptions o;
    o.node_name = "node-7";
    o.build = DefaultBuildInfo("1.2.3", "abc123", "2026-11-30");
    return Exporter(o, store_, pods_, telemetry_, clock_);
  }

  TempDir root_;
  FakeClock clock_;
  StaticTelemetry telemetry_;
  StaticPodDirectory pods_;
  RegionStore store_{{root_.path(), 300, 16}, clock_};
};

TEST_F(ExporterTest, ContainerAndHostSeriesWithUpstreamNamesAndLabels) {
  auto p = FakeContainerProcess::Attach(root_.path(), "uid-1", "main", VGPU_POLICY_DEFAULT, 1);
  ASSERT_TRUE(p.ok());
  int e0 = (*p)->Device({"GPU-bbb", 3000 * kMiB, 30, 0});
  int e1 = (*p)->Device({"GPU-aaa", 0, 100, 1});
  (*p)->ChargeContext(e0, 300 * kMiB);
  ASSERT_EQ((*p)->Reserve(e0, 934 * kMiB), 0);
  ASSERT_EQ((*p)->Reserve(e1, 10 * kMiB), 0);
  (*p)->StampLaunch(e0, static_cast<uint64_t>(clock_.MonotonicNanos()) - 2'500'000'000, 750'000'000,
                    4'294'967'295u);  // busy: the largest value before the wrap
  telemetry_.SetProcessUtil("GPU-bbb", {{static_cast<uint32_t>(getpid()), 40}, {999999, 50}});

  std::string text = Make().Render();
  auto m = ParseExposition(text);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_used_bytes", "team-a", "train-0", "main", "0", "GPU-bbb")],
            1234.0 * kMiB);
  EXPECT_EQ(
      m[Ctr("hami_container_device_memory_bytes", "team-a", "train-0", "main", "0", "GPU-bbb")],
      1234.0 * kMiB);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_limit_bytes", "team-a", "train-0", "main", "0", "GPU-bbb")],
            3000.0 * kMiB);
  // Upstream's split of the usage: contexts, modules (not counted), the rest.
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_context_bytes", "team-a", "train-0", "main", "0", "GPU-bbb")],
            300.0 * kMiB);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_module_bytes", "team-a", "train-0", "main", "0", "GPU-bbb")],
            0.0);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_buffer_bytes", "team-a", "train-0", "main", "0", "GPU-bbb")],
            934.0 * kMiB);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_context_bytes", "team-a", "train-0", "main", "1", "GPU-aaa")],
            0.0);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_used_bytes", "team-a", "train-0", "main", "1", "GPU-aaa")],
            10.0 * kMiB);
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_limit_bytes", "team-a", "train-0", "main", "1", "GPU-aaa")],
            0.0);
  // Only this container's process counts (pid 999999 is someone else's).
  EXPECT_EQ(m[Ctr("hami_container_device_utilization_ratio", "team-a", "train-0", "main", "0",
                  "GPU-bbb")],
            40.0);
  EXPECT_EQ(m[Ctr("hami_container_device_utilization_ratio", "team-a", "train-0", "main", "1",
                  "GPU-aaa")],
            0.0);
  EXPECT_DOUBLE_EQ(m[Ctr("hami_container_last_kernel_elapsed_seconds", "team-a", "train-0", "main",
                         "0", "GPU-bbb")],
                   2.5);
  EXPECT_EQ(m.count(Ctr("hami_container_last_kernel_elapsed_seconds", "team-a", "train-0", "main",
                        "1", "GPU-aaa")),
            0u);  // never launched there
  EXPECT_EQ(
      m[Ctr("hami_container_device_sm_limit_ratio", "team-a", "train-0", "main", "0", "GPU-bbb")],
      30.0);
  EXPECT_DOUBLE_EQ(m[Ctr("hami_container_device_throttled_seconds_total", "team-a", "train-0",
                         "main", "0", "GPU-bbb")],
                   0.75);
  // libvgpu's peak: context and buffers, MiB.
  EXPECT_EQ(m[Ctr("hami_container_device_memory_peak_bytes", "team-a", "train-0", "main", "0",
                  "GPU-bbb")],
            1234.0 * kMiB);
  EXPECT_EQ(m[Ctr("hami_container_device_memory_peak_bytes", "team-a", "train-0", "main", "1",
                  "GPU-aaa")],
            10.0 * kMiB);
  // libvgpu's busy-time meter, where its controller runs (an SM limit; before layout v5 the only
  // metered devices): 2^32 - 1 ms.
  EXPECT_DOUBLE_EQ(m[Ctr("hami_container_device_busy_seconds_total", "team-a", "train-0", "main",
                         "0", "GPU-bbb")],
                   4294967.295);
  EXPECT_EQ(m.count(Ctr("hami_container_device_busy_seconds_total", "team-a", "train-0", "main",
                        "1", "GPU-aaa")),
            0u);  // no SM limit there and not metered (metered_mask 0): no measurement
  EXPECT_EQ(m["hami_container_processes{zone=\"vGPU\",namespace=\"team-a\",pod=\"train-0\","
              "container=\"main\"}"],
            1);
  EXPECT_EQ(m["hami_container_core_limit_switch{zone=\"vGPU\",namespace=\"team-a\",pod=\"train-0\","
              "container=\"main\"}"],
            1);
  EXPECT_EQ(m["hami_container_priority_blocked{zone=\"vGPU\",namespace=\"team-a\",pod=\"train-0\","
              "container=\"main\"}"],
            0);

  const std::string host0 =
      "{zone=\"vGPU\",node=\"node-7\",device_index=\"0\",device_uuid=\"GPU-aaa\",device_type="
      "\"NVIDIA A100-SXM4-80GB\"}";
  EXPECT_EQ(m["hami_host_gpu_memory_used_bytes" + host0], 5000.0 * kMiB);
  EXPECT_EQ(m["hami_host_gpu_utilization_ratio" + host0], 37);
  EXPECT_EQ(m["hami_host_gpu_memory_controller_utilization_ratio{zone=\"vGPU\",device_index=\"0\","
              "device_uuid="
              "\"GPU-aaa\",device_type=\"NVIDIA A100-SXM4-80GB\"}"],
            12);
  EXPECT_EQ(m.count("hami_host_gpu_memory_controller_utilization_ratio{zone=\"vGPU\",device_index="
                    "\"1\",device_uuid="
                    "\"GPU-bbb\",device_type=\"NVIDIA A100-SXM4-80GB\"}"),
            0u);  // not available on that device
  EXPECT_EQ(m["hami_build_info{zone=\"vGPU\",version=\"1.2.3\",revision=\"abc123\",build_date="
              "\"2026-11-30\","
              "go_version=\"\",compiler=\"" +
              DefaultBuildInfo("", "", "").compiler + "\",platform=\"" +
              DefaultBuildInfo("", "", "").platform + "\"}"],
            1);
  EXPECT_EQ(m["hami_monitor_regions{zone=\"vGPU\",state=\"exported\"}"], 1);
  EXPECT_NE(text.find("# TYPE hami_container_device_throttled_seconds_total counter"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE hami_vgpu_memory_used_bytes gauge"), std::string::npos);
}

// RenderText writes what prometheus::TextSerializer writes, byte for byte, for the exporter's
// families: escaping of label values, numbers (integers, fractions, 16 significant digits,
// large, tiny, negative, infinities, NaN), counters and gauges, series without labels, timestamps.
TEST(RenderText, SameBytesAsPrometheusTextSerializer) {
  using prometheus::ClientMetric;
  using prometheus::MetricFamily;
  using prometheus::MetricType;
  auto gauge = [](std::vector<ClientMetric::Label> l, double v, int64_t ts = 0) {
    ClientMetric m;
    m.label = std::move(l);
    m.gauge.value = v;
    m.timestamp_ms = ts;
    return m;
  };
  ClientMetric c;
  c.label = {{"zone", "vGPU"}};
  c.counter.value = 4294967.295;
  const std::vector<MetricFamily> families = {
      {"hami_a_bytes",
       "Help with \"quotes\".",
       MetricType::Gauge,
       {gauge({{"zone", "vGPU"}, {"pod", "we\"ird\\na\nme"}}, 85899345920.0),
        gauge({{"zone", "vGPU"}}, 0.75), gauge({}, 1.0 / 3), gauge({{"x", ""}}, -2.5e-300),
        gauge({{"x", "big"}}, 1.2345678901234567e21), gauge({{"x", "inf"}}, HUGE_VAL),
        gauge({{"x", "-inf"}}, -HUGE_VAL), gauge({{"x", "nan"}}, std::nan("")),
        gauge({{"x", "ts"}}, 42, 1'700'000'000'123), gauge({{"x", "zero"}}, 0.0),
        gauge({{"x", "neg0"}}, -0.0), gauge({{"x", "pct"}}, 100.0 * 0.24)}},
      {"hami_b_seconds_total", "", MetricType::Counter, {c}},
  };
  std::ostringstream os;
  prometheus::TextSerializer().Serialize(os, families);
  EXPECT_EQ(RenderText(families), os.str());
  // Where TextSerializer writes HELP text raw (a line feed would end the line), the format's
  // escaping of backslash and line feed.
  EXPECT_EQ(RenderText({{"m", "a \\ b\nc", MetricType::Gauge, {}}}),
            "# HELP m a \\\\ b\\nc\n# TYPE m gauge\n");
}

// The duty ratio between two readings of libvgpu's busy meter: over the meter's own windows, or
// the scrape interval when no window closed; none when the counter went back.
TEST(DutyRatio, Table) {
  struct Case {
    const char* name;
    BusyMark prev, cur;
    std::optional<double> want;
  };
  const Case cases[] = {
      {"over the meter's windows, not the scrapes'",
       {1000, 10'000'000, 0},
       {2000, 12'500'000, 2'600'000'000},
       0.4},
      {"idle", {1000, 10'000'000, 0}, {1000, 12'500'000, 2'500'000'000}, 0.0},
      {"fully busy", {0, 10'000'000, 0}, {2500, 12'500'000, 2'500'000'000}, 1.0},
      {"rounding above the window is clamped", {0, 10'000'000, 0}, {2540, 12'500'000, 1}, 1.0},
      {"counter wrapped", {4'294'967'000u, 10'000'000, 0}, {704, 12'500'000, 1}, 0.4},
      {"no window closed: processes gone, scrape interval",
       {500, 10'000'000, 0},
       {500, 10'000'000, 30'000'000'000},
       0.0},
      {"counter went back (a new region)",
       {900'000, 10'000'000, 0},
       {10, 12'500'000, 1},
       std::nullopt},
      {"no time passed", {5, 10'000'000, 7}, {5, 10'000'000, 7}, std::nullopt},
      {"meter clock went back", {5, 10'000'000, 0}, {6, 9'000'000, 1'000'000'000}, std::nullopt},
  };
  for (const Case& c : cases) {
    std::optional<double> got = DutyRatio(c.prev, c.cur);
    ASSERT_EQ(got.has_value(), c.want.has_value()) << c.name;
    if (got) {
      EXPECT_NEAR(*got, *c.want, 1e-9) << c.name;
    }
  }
}

// Issue 33: a device libvgpu meters (layout v5, metered_mask), with or without SM limit, exports
// the busy counter, and from the second scrape on the duty ratio (0-1) and upstream's utilisation
// (0-100) from the meter instead of NVML's sampled window; a device it does not meter and that has
// no SM limit exports no busy series.
TEST_F(ExporterTest, MeteredDeviceWithoutLimitUsesTheBusyMeter) {
  auto p = FakeContainerProcess::Attach(root_.path(), "uid-1", "main", VGPU_POLICY_DEFAULT, 1);
  ASSERT_TRUE(p.ok());
  int e0 = (*p)->Device({"GPU-aaa", 0, 100, 0});
  int e1 = (*p)->Device({"GPU-bbb", 0, 100, 1});
  vgpu_region* r = (*p)->region();
  r->hdr.metered_mask = 1u << e0;  // what libvgpu's watcher sets for an armed container
  r->devices[e0].busy_ms = 7000;
  r->devices[e0].calib_us = 50'000'000;
  r->devices[e1].busy_ms = 3000;  // not metered: a stray value is not exported
  telemetry_.SetProcessUtil("GPU-aaa", {{static_cast<uint32_t>(getpid()), 90}});
  Exporter e = Make();
  const std::string busy =
      Ctr("hami_container_device_busy_seconds_total", "team-a", "train-0", "main", "0", "GPU-aaa");
  const std::string duty =
      Ctr("hami_container_device_busy_ratio", "team-a", "train-0", "main", "0", "GPU-aaa");
  const std::string util =
      Ctr("hami_container_device_utilization_ratio", "team-a", "train-0", "main", "0", "GPU-aaa");
  auto m = ParseExposition(e.Render());
  EXPECT_DOUBLE_EQ(m[busy], 7.0);
  EXPECT_EQ(m.count(duty), 0u) << "first scrape: no window yet";
  EXPECT_EQ(m[util], 90) << "first scrape: NVML's window";
  EXPECT_EQ(m.count(Ctr("hami_container_device_busy_seconds_total", "team-a", "train-0", "main",
                        "1", "GPU-bbb")),
            0u);
  // 2.5 s later the meter closed 2.4 s of windows with 0.6 s busy: 25 %, whatever NVML says.
  r->devices[e0].busy_ms = 7600;
  r->devices[e0].calib_us = 52'400'000;
  clock_.AdvanceNanos(2'500'000'000);
  m = ParseExposition(e.Render());
  EXPECT_DOUBLE_EQ(m[busy], 7.6);
  EXPECT_DOUBLE_EQ(m[duty], 0.25);
  EXPECT_DOUBLE_EQ(m[util], 25);
}

TEST_F(ExporterTest, LastKernelFromNvmlWhenLibvgpuDidNotStamp) {
  auto p = FakeContainerProcess::Attach(root_.path(), "uid-1", "main");
  ASSERT_TRUE(p.ok());
  (*p)->Device({"GPU-aaa", 0, 100, 0});  // unlimited: libvgpu never stamps a launch
  ActivityLog activity;
  ExporterOptions o;
  o.node_name = "node-7";
  Exporter e(o, store_, pods_, telemetry_, clock_, &activity);
  const std::string key = Ctr("hami_container_last_kernel_elapsed_seconds", "team-a", "train-0",
                              "main", "0", "GPU-aaa");
  EXPECT_EQ(ParseExposition(e.Render()).count(key), 0u);  // never busy yet
  telemetry_.SetProcessUtil("GPU-aaa", {{static_cast<uint32_t>(getpid()), 20}});
  EXPECT_EQ(ParseExposition(e.Render())[key], 0);  // busy right now
  telemetry_.SetProcessUtil("GPU-aaa", {});
  clock_.AdvanceSeconds(3);
  EXPECT_EQ(ParseExposition(e.Render())[key], 3);
  activity.Retain({});  // the container is gone
  EXPECT_EQ(activity.LastSeen("uid-1_main", "GPU-aaa"), 0);
}

TEST_F(ExporterTest, RegionsOfUnknownPodsAreCountedNotLabelledWithGuesses) {
  auto p = FakeContainerProcess::Attach(root_.path(), "uid-unknown", "main");
  ASSERT_TRUE(p.ok());
  (*p)->Device({"GPU-aaa", 0, 100, 0});
  auto m = ParseExposition(Make().Render());
  EXPECT_EQ(m["hami_monitor_regions{zone=\"vGPU\",state=\"unknown_pod\"}"], 1);
  EXPECT_EQ(m["hami_monitor_regions{zone=\"vGPU\",state=\"exported\"}"], 0);
  for (const auto& [k, v] : m)
    EXPECT_EQ(k.find("hami_vgpu_memory_used_bytes"), std::string::npos) << k;
}

TEST_F(ExporterTest, LabelValuesAreEscaped) {
  pods_.Set("uid-2", {"ns", "we\"ird\\pod"});
  auto p = FakeContainerProcess::Attach(root_.path(), "uid-2", "c");
  ASSERT_TRUE(p.ok());
  (*p)->Device({"GPU-aaa", 0, 100, 0});
  std::string text = Make().Render();
  EXPECT_NE(text.find("pod=\"we\\\"ird\\\\pod\""), std::string::npos) << text;
}

// A container owns its region file and directory: whatever it writes there may cost its own series,
// never another tenant's or the node's scrape (which Prometheus rejects whole on invalid UTF-8).
TEST_F(ExporterTest, OneTenantsGarbageDropsOnlyItsSeries) {
  struct Case {
    const char* name;
    std::function<void(FakeContainerProcess&, const std::string& dir)> spoil;
    std::function<void(FakeContainerProcess&)> repair = [](FakeContainerProcess&) {
    };  // before it detaches
  };
  const Case cases[] = {
      {"invalid UTF-8 in a device UUID",
       [](FakeContainerProcess& p, const std::string&) {
         std::memcpy(p.region()->devices[0].uuid, "GPU-\xff\xfe", 7);
       }},
      {"a quote and a newline in a device UUID",
       [](FakeContainerProcess& p, const std::string&) {
         std::memcpy(p.region()->devices[0].uuid, "G\"\n}", 5);
       }},
      {"the same device twice",
       [](FakeContainerProcess& p, const std::string&) {
         p.Device({"GPU-ccc", 0, 100, 1});
         std::memcpy(p.region()->devices[1].uuid, "GPU-bbb", 8);
       }},
      {"wrong layout version",
       [](FakeContainerProcess& p, const std::string&) { p.region()->hdr.version = 99; }},
      {"truncated file",
       [](FakeContainerProcess& p, const std::string&) {
         ASSERT_EQ(truncate(p.path().c_str(), 100), 0);
       },
       [](FakeContainerProcess& p) {
         ASSERT_EQ(truncate(p.path().c_str(), sizeof(vgpu_region)), 0);
       }},
      {"region replaced by a link to another tenant's",
       [this](FakeContainerProcess& p, const std::string& dir) {
         ASSERT_EQ(unlink(p.path().c_str()), 0);
         ASSERT_EQ(symlink((root_.path() + "/uid-1_main/vgpu.cache").c_str(),
                           (dir + "/vgpu.cache").c_str()),
                   0);
       }},
      {"region replaced by a FIFO",
       [](FakeContainerProcess& p, const std::string& dir) {
         ASSERT_EQ(unlink(p.path().c_str()), 0);
         ASSERT_EQ(mkfifo((dir + "/vgpu.cache").c_str(), 0600), 0);
       }},
  };
  auto good = FakeContainerProcess::Attach(root_.path(), "uid-1", "main");
  ASSERT_TRUE(good.ok());
  ASSERT_EQ((*good)->Device({"GPU-aaa", 3000 * kMiB, 30, 0}), 0);
  ASSERT_EQ((*good)->Reserve(0, 700 * kMiB), 0);
  pods_.Set("uid-bad", {"team-b", "evil"});
  const std::string used =
      Ctr("hami_vgpu_memory_used_bytes", "team-a", "train-0", "main", "0", "GPU-aaa");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = root_.path() + "/uid-bad_c";
    {
      auto bad = FakeContainerProcess::Attach(root_.path(), "uid-bad", "c");
      ASSERT_TRUE(bad.ok());
      ASSERT_EQ((*bad)->Device({"GPU-bbb", 1000 * kMiB, 100, 0}), 0);
      EXPECT_EQ(ParseExposition(
                    Make().Render())["hami_monitor_regions{zone=\"vGPU\",state=\"exported\"}"],
                2)
          << "both tenants before the damage";
      c.spoil(**bad, dir);
      const std::string text = Make().Render();
      for (unsigned char ch : text) ASSERT_LT(ch, 0x80) << "the exposition stays ASCII";
      auto m = ParseExposition(text);
      EXPECT_EQ(m[used], 700.0 * kMiB) << text;
      EXPECT_EQ(m["hami_monitor_regions{zone=\"vGPU\",state=\"exported\"}"], 1);
      for (const auto& [k, v] : m) EXPECT_EQ(k.find("pod=\"evil\""), std::string::npos) << k;
      c.repair(**bad);
    }
    std::filesystem::remove_all(dir);
  }
}

// Upstream v2.11 (#2732): hami_host_gpu_temperature_celsius, hami_host_gpu_power_usage_watts
// (NVML's milliwatts / 1000) and the counter hami_host_gpu_ecc_errors_total{error_type}, with the
// host labels; a value NVML does not give (-1) has no series.
TEST_F(ExporterTest, HostTemperaturePowerAndEccErrors) {
  struct Case {
    const char* name;
    int temperature_c;
    int64_t power_mw, corrected, uncorrected;
    std::map<std::string, double> want;  // metric name (+ ",error_type" label) -> value
  } cases[] = {
      {"all known",
       41,
       71500,
       3,
       1,
       {{"hami_host_gpu_temperature_celsius", 41},
        {"hami_host_gpu_power_usage_watts", 71.5},
        {"hami_host_gpu_ecc_errors_total/corrected", 3},
        {"hami_host_gpu_ecc_errors_total/uncorrected", 1}}},
      {"zero is a value",
       0,
       0,
       0,
       0,
       {{"hami_host_gpu_temperature_celsius", 0},
        {"hami_host_gpu_power_usage_watts", 0},
        {"hami_host_gpu_ecc_errors_total/corrected", 0},
        {"hami_host_gpu_ecc_errors_total/uncorrected", 0}}},
      {"no ECC (NOT_SUPPORTED)",
       55,
       300000,
       -1,
       -1,
       {{"hami_host_gpu_temperature_celsius", 55}, {"hami_host_gpu_power_usage_watts", 300}}},
      {"nothing known", -1, -1, -1, -1, {}},
      {"only uncorrected", -1, -1, -1, 7, {{"hami_host_gpu_ecc_errors_total/uncorrected", 7}}},
  };
  const std::string labels =
      "zone=\"vGPU\",node=\"node-7\",device_index=\"0\",device_uuid=\"GPU-aaa\",device_type="
      "\"NVIDIA A100-SXM4-80GB\"";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    HostGpu g{0, "GPU-aaa", "NVIDIA A100-SXM4-80GB", 80ull << 30, 0, 1, 1};
    g.temperature_c = c.temperature_c;
    g.power_mw = c.power_mw;
    g.ecc_corrected = c.corrected;
    g.ecc_uncorrected = c.uncorrected;
    telemetry_.SetDevices({g});
    Exporter e = Make();
    const std::string text = e.Render();
    const bool ecc = c.corrected >= 0 || c.uncorrected >= 0;
    EXPECT_EQ(text.find("# TYPE hami_host_gpu_ecc_errors_total counter") != std::string::npos, ecc);
    std::map<std::string, double> got;
    for (const auto& [k, v] : ParseExposition(text)) {
      for (const char* name :
           {"hami_host_gpu_temperature_celsius", "hami_host_gpu_power_usage_watts"})
        if (k == StrCat(name, "{", labels, "}")) got[name] = v;
      for (const char* type : {"corrected", "uncorrected"})
        if (k == StrCat("hami_host_gpu_ecc_errors_total{", labels, ",error_type=\"", type, "\"}"))
          got[StrCat("hami_host_gpu_ecc_errors_total/", type)] = v;
    }
    EXPECT_EQ(got, c.want);
    size_t series = 0;  // nothing else under these names (no series for an unknown value)
    for (const auto& [k, v] : ParseExposition(text))
      for (const char* name :
           {"hami_host_gpu_temperature_celsius{", "hami_host_gpu_power_usage_watts{",
            "hami_host_gpu_ecc_errors_total{"})
        if (k.rfind(name, 0) == 0) ++series;
    EXPECT_EQ(series, c.want.size());
  }
}

TEST_F(ExporterTest, HostMetricsMissingWhenTelemetryFails) {
  class Broken final : public GpuTelemetry {
   public:
    StatusOr<std::vector<HostGpu>> Devices() override { return Unavailable("driver gone"); }
    StatusOr<std::vector<ProcessUtil>> ProcessUtilization(const std::string&, int64_t) override {
      return Unavailable("driver gone");
    }
  } broken;
  auto p = FakeContainerProcess::Attach(root_.path(), "uid-1", "main");
  ASSERT_TRUE(p.ok());
  (*p)->Device({"GPU-aaa", 0, 100, 0});
  Exporter e({"node-7", {}, 1000}, store_, pods_, broken, clock_);
  auto m = ParseExposition(e.Render());
  for (const auto& [k, v] : m) EXPECT_EQ(k.find("hami_host_gpu"), std::string::npos) << k;
  EXPECT_EQ(m[Ctr("hami_vgpu_memory_used_bytes", "team-a", "train-0", "main", "0", "GPU-aaa")],
            0.0);
  EXPECT_EQ(
      m.count(Ctr("hami_vgpu_memory_used_bytes", "team-a", "train-0", "main", "0", "GPU-aaa")), 1u);
}

}  // namespace
}  // namespace hami::monitor
