#include "extender/device_config.h"

#include <gtest/gtest.h>

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
      {"deploy default", "nvidia:\n  resourceCountName: nvidia.com/gpu\n  memoryFactor: 1\n  gpuCorePolicy: default\n  deviceSplitCount: 10\n",
       true, "", "nvidia.com/gpu", 1, "default"},
      {"renamed + factor", "nvidia:\n  resourceCountName: example.com/vgpu\n  memoryFactor: 1024\n  disableCoreLimit: true\n", true, "",
       "example.com/vgpu", 1024, "disable"},
      {"empty file", "", true, "", "nvidia.com/gpu", 1, "default"},
      {"chart's empty values keep defaults",
       "nvidia:\n  resourceCountName: \"\"\n  defaultMemory: ''\n  runtimeClassName: \"\"\n  memoryFactor:\n", true, "",
       "nvidia.com/gpu", 1, "default"},
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
      EXPECT_NE(std::string(r.status().message()).find(c.error_part), std::string::npos) << r.status();
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
}  // namespace hami::extender
