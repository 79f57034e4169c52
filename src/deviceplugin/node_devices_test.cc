#include "deviceplugin/node_devices.h"

#include <gtest/gtest.h>

#include "gpu/static_discovery.h"

namespace hami::deviceplugin {
namespace {

using gpu::MakeGpu;

TEST(NodeDevicesTest, ReplicaIdsRoundTrip) {
  auto ids = ReplicaIds("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448-0");
  EXPECT_EQ(ids[2], "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448-2");
  for (const auto& id : ids) {
    EXPECT_LE(id.size(), 63u);  // kubelet's limit on device IDs
    EXPECT_EQ(*ReplicaUuid(id), "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448");
  }
  EXPECT_EQ(*ReplicaUuid("GPU-a-12"), "GPU-a");
  for (const char* bad : {"", "GPU", "GPU-", "-3", "GPU-a-x1", "GPU-a-"}) {
    EXPECT_FALSE(ReplicaUuid(bad).ok()) << bad;
  }
}

TEST(NodeDevicesTest, FilterByUuidAndIndex) {
  std::vector<gpu::GpuInfo> gpus = {MakeGpu(0, "GPU-a", "T4", 15360), MakeGpu(1, "GPU-b", "T4", 15360),
                                    MakeGpu(2, "GPU-c", "T4", 15360)};
  PluginConfig c;
  c.exclude_uuids = {"GPU-a"};
  c.exclude_indices = {2};
  auto kept = FilterDevices(gpus, c);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].uuid, "GPU-b");
}

TEST(NodeDevicesTest, RegistrationEntries) {
  struct Case {
    const char* name;
    double mem_scaling, core_scaling;
    int64_t preconfigured;
    int64_t gpu_mem;
    int numa;
    int64_t want_mem;
    int want_core;
    int want_numa;
  };
  const Case cases[] = {
      {"plain", 1, 1, 0, 32768, 1, 32768, 100, 1},
      {"oversubscribed", 1.5, 1, 0, 32768, 0, 49152, 100, 0},
      {"core scaling", 1, 2, 0, 16000, 0, 16000, 200, 0},
      {"unknown numa -> 0", 1, 1, 0, 16000, -1, 16000, 100, 0},
      {"uma gpu uses preconfigured", 1, 1, 120000, 0, 0, 120000, 100, 0},
  };
  for (const auto& tc : cases) {
    PluginConfig c;
    c.memory_scaling = tc.mem_scaling;
    c.core_scaling = tc.core_scaling;
    c.preconfigured_memory_mib = tc.preconfigured;
    c.split_count = 7;
    auto devs = BuildNodeDevices({MakeGpu(3, "GPU-x", "Tesla V100-PCIE-32GB", tc.gpu_mem, tc.numa)},
                                 {{"GPU-x", false}}, c);
    ASSERT_EQ(devs.size(), 1u) << tc.name;
    EXPECT_EQ(devs[0].uuid, "GPU-x");
    EXPECT_EQ(devs[0].index, 3);
    EXPECT_EQ(devs[0].count, 7);
    EXPECT_EQ(devs[0].devmem_mib, tc.want_mem) << tc.name;
    EXPECT_EQ(devs[0].devcore, tc.want_core) << tc.name;
    EXPECT_EQ(devs[0].numa, tc.want_numa) << tc.name;
    EXPECT_EQ(devs[0].type, "NVIDIA-Tesla V100-PCIE-32GB");
    EXPECT_FALSE(devs[0].health);
    EXPECT_EQ(devs[0].mode, "hami-core");
  }
}

}  // namespace
}  // namespace hami::deviceplugin
