#include "extender/device_config.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace hami::extender {
namespace {

TEST(DeviceConfig, Table) {
  struct Case {
    const char* name;
    const char* yaml;
    bool ok;
    const char* error_part;
    std::string count_name;
    int64_t factor;
    std::string policy;
  };
  const Case cases[] = {
      {"deploy default",
       "nvidia:\n  resourceCountName: nvidia.com/gpu\n  memoryFactor: 1\n  gpuCorePolicy: "
       "default\n  deviceSplitCount: 10\n",
       true, "", "nvidia.com/gpu", 1, "default"},
      {"renamed + factor",
       "nvidia:\n  resourceCountName: example.com/vgpu\n  memoryFactor: 1024\n  disableCoreLimit: "
       "true\n",
       true, "", "example.com/vgpu", 1024, "disable"},
      {"empty file", "", true, "", "nvidia.com/gpu", 1, "default"},
      {"chart's empty values keep defaults",
       "nvidia:\n  resourceCountName: \"\"\n  defaultMemory: ''\n  runtimeClassName: \"\"\n  "
       "memoryFactor:\n",
       true, "", "nvidia.com/gpu", 1, "default"},
      {"wrong type", "nvidia:\n  defaultCores: lots\n", false, "nvidia.defaultCores", "", 0, ""},
      {"bad policy", "nvidia:\n  gpuCorePolicy: sometimes\n", false, "gpuCorePolicy", "", 0, ""},
      {"invalid factor", "nvidia:\n  memoryFactor: 0\n", false, "memory", "", 0, ""},
      {"not yaml", "nvidia: [\n", false, "dc.yaml:", "", 0, ""},
      {"list at top", "- a\n", false, "top level", "", 0, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseDeviceConfig(c.yaml, "dc.yaml");
    ASSERT_EQ(r.ok(), c.ok) << r.status();
    if (!c.ok) {
      EXPECT_NE(std::string(r.status().message()).find(c.error_part), std::string::npos)
          << r.status();
      continue;
    }
    EXPECT_EQ(r->resources.nvidia.count, c.count_name);
    EXPECT_EQ(r->resources.memory_factor, c.factor);
    EXPECT_EQ(r->gpu_core_policy, c.policy);
  }
}

// The upstream chart's default device-config.yaml (vendors/testdata) loads as is.
TEST(DeviceConfig, UpstreamDefaultFileParses) {
  auto r = LoadDeviceConfig("src/vendors/testdata/upstream-device-config.yaml");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resources.nvidia.count, "nvidia.com/gpu");
  EXPECT_EQ(r->resources.nvidia.memory, "nvidia.com/gpumem");
}

TEST(DeviceConfig, DeployManifestParses) {
  auto r = LoadDeviceConfig("/nonexistent/device-config.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("--device-config-file"), std::string::npos);
}

}  // namespace
TEST(DeviceConfig, DevicePluginKnobs) {
  auto c = ParseDeviceConfig(
      "nvidia:\n  deviceSplitCount: 7\n  deviceMemoryScaling: 1.5\n  deviceCoreScaling: 2\n"
      "  preConfiguredDeviceMemory: 0\n  enableNumaTopology: true\n  libCudaLogLevel: 3\n",
      "dc.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->plugin.device_split_count, 7);
  EXPECT_EQ(c->plugin.device_memory_scaling, 1.5);
  EXPECT_EQ(c->plugin.device_core_scaling, 2.0);
  EXPECT_EQ(c->plugin.preconfigured_memory, 0);
  EXPECT_EQ(c->plugin.enable_numa_topology, true);
  EXPECT_EQ(c->plugin.lib_cuda_log_level, "3");
  // Absent or rendered empty: unset, so the device plugin keeps its flag or default.
  auto none = ParseDeviceConfig(
      "nvidia:\n  deviceSplitCount: \"\"\n  resourceCountName: nvidia.com/gpu\n", "dc.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->plugin.device_split_count.has_value());
  EXPECT_FALSE(none->plugin.device_memory_scaling.has_value());
  EXPECT_FALSE(none->plugin.lib_cuda_log_level.has_value());
  auto bad = ParseDeviceConfig("nvidia:\n  deviceSplitCount: many\n", "dc.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("nvidia.deviceSplitCount"), std::string::npos)
      << bad.status();
}

TEST(DeviceConfig, OversizedFileIsRefused) {
  const std::string path = ::testing::TempDir() + "/hami-big-device-config.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string line = "# " + std::string(1000, 'x') + "\n";
    for (int i = 0; i < 3000; ++i) std::fputs(line.c_str(), f);  // ~3 MB of comments
    std::fclose(f);
  }
  auto c = LoadDeviceConfig(path);
  std::remove(path.c_str());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("larger than"), std::string::npos) << c.status();
}

}  // namespace hami::extender
