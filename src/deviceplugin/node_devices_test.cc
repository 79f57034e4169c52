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
  std::vector<gpu::GpuInfo> gpus = {MakeGpu(0, "GPU-a", "T4", 15360),
                                    MakeGpu(1, "GPU-b", "T4", 15360),
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

TEST(NodeDevicesTest, LinkScores) {
  struct Case {
    gpu::GpuLink link;
    int want;
  };
  const Case cases[] = {
      {{0, 1, 0, gpu::PcieLevel::kSystem}, 10},     {{0, 1, 0, gpu::PcieLevel::kNode}, 20},
      {{0, 1, 0, gpu::PcieLevel::kHostBridge}, 30}, {{0, 1, 0, gpu::PcieLevel::kMultiple}, 40},
      {{0, 1, 0, gpu::PcieLevel::kSingle}, 50},     {{0, 1, 0, gpu::PcieLevel::kInternal}, 60},
      {{0, 1, 12, gpu::PcieLevel::kSingle}, 1250},  {{0, 1, 2, gpu::PcieLevel::kUnknown}, 200},
  };
  for (const auto& tc : cases)
    EXPECT_EQ(PairScore(tc.link), tc.want) << gpu::PcieLevelName(tc.link.pcie);

  std::vector<gpu::GpuInfo> gpus = {MakeGpu(0, "GPU-a", "A100", 1), MakeGpu(1, "GPU-b", "A100", 1),
                                    MakeGpu(2, "GPU-c", "A100", 1)};
  std::vector<gpu::GpuLink> links = {{0, 1, 12, gpu::PcieLevel::kSingle},
                                     {0, 2, 0, gpu::PcieLevel::kSystem},
                                     {1, 2, 0, gpu::PcieLevel::kSystem}};
  PluginConfig c;
  c.exclude_indices = {2};
  core::LinkScores s = BuildLinkScores(gpus, links, c);
  core::LinkScores want = {{"GPU-a", {{"GPU-b", 1250}}}, {"GPU-b", {{"GPU-a", 1250}}}};
  EXPECT_EQ(s, want);
  EXPECT_EQ(core::EncodeLinkScores(s),
            R"([{"uuid":"GPU-a","score":{"GPU-b":1250}},{"uuid":"GPU-b","score":{"GPU-a":1250}}])");
}

}  // namespace
}  // namespace hami::deviceplugin
