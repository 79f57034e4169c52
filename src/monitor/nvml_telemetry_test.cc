// NvmlTelemetry against the fake libnvidia-ml (src/fakes): the host sensors it reads per GPU.
#include "monitor/nvml_telemetry.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gpu/nvml_discovery.h"
#include "monitor/testing/region_writer.h"

namespace hami::monitor {
namespace {

// The GPUs NvmlTelemetry reports through the NVML library `lib` (discovery and telemetry both).
StatusOr<std::vector<HostGpu>> HostGpus(const char* lib) {
  HAMI_ASSIGN_OR_RETURN(auto discovery, gpu::NvmlDiscovery::Open({.library = lib}));
  HAMI_ASSIGN_OR_RETURN(auto telemetry, NvmlTelemetry::Open(*discovery, lib));
  return telemetry->Devices();
}

// Upstream v2.11 (#2732) reads nvmlDeviceGetTemperature(GPU), nvmlDeviceGetPowerUsage (mW) and
// nvmlDeviceGetTotalEccErrors(corrected | uncorrected, AGGREGATE_ECC) per GPU; a board without ECC
// (NOT_SUPPORTED) keeps -1, so the exporter writes no ECC series for it. The fake reports 40 C,
// 70 W at idle, ECC aggregate 4 corrected / 1 uncorrected (volatile 1 / 0), GeForce without ECC.
TEST(NvmlTelemetryTest, TemperaturePowerAndAggregateEccPerGpu) {
  if (access(HAMI_FAKE_NVML, R_OK) != 0) GTEST_SKIP() << "fake NVML not built";
  testing::TempDir tmp;
  // NOLINTBEGIN(concurrency-mt-unsafe): the fake NVML reads them at init; no other thread yet
  setenv("FAKEGPU_STATE", (tmp.path() + "/fake.state").c_str(), 1);
  setenv("FAKEGPU_DEVICES", "NVIDIA A100-SXM4-80GB:81920:108;NVIDIA GeForce RTX 4090:24564:128", 1);
  // NOLINTEND(concurrency-mt-unsafe)
  auto devices = HostGpus(HAMI_FAKE_NVML);
  ASSERT_TRUE(devices.ok()) << devices.status();
  struct Want {
    int temperature_c;
    int64_t power_mw, corrected, uncorrected;
  } want[] = {
      {40, 70000, 4, 1},    // A100: aggregate counts, not the volatile 1 / 0
      {40, 70000, -1, -1},  // GeForce: no ECC
  };
  ASSERT_EQ(devices->size(), std::size(want));
  for (size_t i = 0; i < devices->size(); ++i) {
    const HostGpu& g = (*devices)[i];
    SCOPED_TRACE(g.model);
    EXPECT_EQ(g.temperature_c, want[i].temperature_c);
    EXPECT_EQ(g.power_mw, want[i].power_mw);
    EXPECT_EQ(g.ecc_corrected, want[i].corrected);
    EXPECT_EQ(g.ecc_uncorrected, want[i].uncorrected);
  }
}

// On a real GPU (device check, skipped unless HAMI_REAL_NVML names the driver's libnvidia-ml): the
// symbols resolve with the argument conventions above and give plausible values; a data-centre GPU
// (ECC on) gives both ECC counts.
TEST(NvmlTelemetryTest, RealDriverGivesTemperaturePowerAndEcc) {
  const char* lib = getenv("HAMI_REAL_NVML");  // NOLINT(concurrency-mt-unsafe): no other thread
  if (lib == nullptr || *lib == '\0') GTEST_SKIP() << "HAMI_REAL_NVML not set";
  auto devices = HostGpus(lib);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_FALSE(devices->empty());
  for (const HostGpu& g : *devices) {
    SCOPED_TRACE(g.model);
    printf("%s: %d C, %lld mW, ECC corrected %lld, uncorrected %lld\n", g.model.c_str(),
           g.temperature_c, static_cast<long long>(g.power_mw),
           static_cast<long long>(g.ecc_corrected), static_cast<long long>(g.ecc_uncorrected));
    EXPECT_GT(g.temperature_c, 0);
    EXPECT_LT(g.temperature_c, 120);
    EXPECT_GT(g.power_mw, 1000);     // more than 1 W
    EXPECT_LT(g.power_mw, 2000000);  // less than 2 kW: not read as watts or microwatts
    EXPECT_GE(g.ecc_corrected, 0);
    EXPECT_GE(g.ecc_uncorrected, 0);
  }
}

}  // namespace
}  // namespace hami::monitor
