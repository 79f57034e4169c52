#include "deviceplugin/node_devices.h"

#include <gtest/gtest.h>

#include "core/annotations.h"
#include "core/mig.h"
#include "core/node_codec.h"
#include "gpu/static_discovery.h"
#include "vendors/nvidia/annotations.h"
#include "vendors/vendor_set.h"

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

// Upstream's RegisterInAnnotation with ReportNodeCapacity (PR #2874): the sums of Devmem and
// Devcore over the healthy devices, under resourceMemoryName and resourceCoreName; nothing when
// the option is off.
TEST(NodeDevicesTest, NodeCapacitySumsHealthyDevices) {
  const std::vector<gpu::GpuInfo> gpus = {MakeGpu(0, "GPU-a", "A100", 40960),
                                          MakeGpu(1, "GPU-b", "A100", 40960),
                                          MakeGpu(2, "GPU-c", "A100", 40960)};
  struct Case {
    const char* name;
    bool on;
    double mem_scaling;
    double core_scaling;
    std::map<std::string, bool> healthy;
    const char* mem_name;
    std::map<std::string, int64_t> want;
  };
  const Case cases[] = {
      {"off: nothing", false, 1.0, 1.0, {}, "nvidia.com/gpumem", {}},
      {"three healthy",
       true,
       1.0,
       1.0,
       {},
       "nvidia.com/gpumem",
       {{"nvidia.com/gpumem", 122880}, {"nvidia.com/gpucores", 300}}},
      {"an unhealthy GPU is left out",
       true,
       1.0,
       1.0,
       {{"GPU-b", false}},
       "nvidia.com/gpumem",
       {{"nvidia.com/gpumem", 81920}, {"nvidia.com/gpucores", 200}}},
      {"scaled memory and cores, as registered",
       true,
       1.5,
       2.0,
       {},
       "nvidia.com/gpumem",
       {{"nvidia.com/gpumem", 184320}, {"nvidia.com/gpucores", 600}}},
      {"renamed memory resource",
       true,
       1.0,
       1.0,
       {{"GPU-a", false}, {"GPU-c", false}},
       "example.com/vmem",
       {{"example.com/vmem", 40960}, {"nvidia.com/gpucores", 100}}},
  };
  for (const auto& tc : cases) {
    deviceplugin::PluginConfig cfg;
    cfg.report_node_capacity = tc.on;
    cfg.memory_scaling = tc.mem_scaling;
    cfg.core_scaling = tc.core_scaling;
    cfg.memory_resource_name = tc.mem_name;
    EXPECT_EQ(NodeCapacity(BuildNodeDevices(gpus, tc.healthy, cfg), cfg), tc.want) << tc.name;
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

// An A100-SXM4-40GB in MIG mode as NvmlDiscovery reports it (gpu_nvml_test checks that against the
// fake driver).
gpu::GpuInfo MigA100(int index, std::string uuid) {
  gpu::GpuInfo g = MakeGpu(index, std::move(uuid), "NVIDIA A100-SXM4-40GB", 40960);
  g.mig_enabled = true;
  auto starts = [](std::initializer_list<int> s, int size) {
    std::vector<gpu::MigPlacement> out;
    for (int x : s) out.push_back({x, size});
    return out;
  };
  g.mig_profiles = {
      {"1g.5gb", 0, 19, 1, 7, 14, 4864, starts({0, 1, 2, 3, 4, 5, 6}, 1)},
      {"2g.10gb", 1, 14, 2, 3, 28, 9984, starts({0, 2, 4}, 2)},
      {"3g.20gb", 2, 9, 3, 2, 42, 20096, starts({0, 4}, 4)},
      {"4g.20gb", 3, 5, 4, 1, 56, 20096, starts({0}, 4)},
      {"7g.40gb", 4, 0, 7, 1, 98, 40448, starts({0}, 8)},
  };
  return g;
}

TEST(NodeDevicesTest, MigGpusRegisterTheirProfilesOnlyInMigMode) {
  const std::vector<gpu::GpuInfo> gpus = {MigA100(0, "GPU-mig"), MakeGpu(1, "GPU-t4", "T4", 15360)};
  PluginConfig c;
  c.memory_scaling = 2.0;
  c.core_scaling = 1.5;
  // hami-core: every GPU is a shared card, whatever its MIG mode.
  for (const auto& d : BuildNodeDevices(gpus, {}, c)) {
    EXPECT_EQ(d.mode, core::kModeHamiCore) << d.uuid;
    EXPECT_TRUE(d.mig_profiles.empty());
  }
  c.mode = "mig";
  const auto devs = BuildNodeDevices(gpus, {}, c);
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].mode, core::kModeMig);
  EXPECT_EQ(devs[0].devmem_mib, 40960);  // no scaling on instances
  EXPECT_EQ(devs[0].devcore, 100);
  const std::vector<core::MigProfile> want = {
      {"1g.5gb", 4864, 14, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
      {"2g.10gb", 9984, 28, 2, {{0, 2}, {2, 2}, {4, 2}}},
      {"3g.20gb", 20096, 42, 3, {{0, 4}, {4, 4}}},
      {"4g.20gb", 20096, 57, 4, {{0, 4}}},
      {"7g.40gb", 40448, 100, 7, {{0, 8}}},
  };
  EXPECT_EQ(devs[0].mig_profiles, want);
  // The T4 (MIG off) stays a shared card, scaled as configured.
  EXPECT_EQ(devs[1].mode, core::kModeHamiCore);
  EXPECT_EQ(devs[1].devmem_mib, 30720);
  EXPECT_EQ(devs[1].devcore, 150);
  // A GPU with MIG on but no profile reported is not offered as MIG either.
  gpu::GpuInfo bare = MigA100(2, "GPU-bare");
  bare.mig_profiles.clear();
  EXPECT_EQ(BuildNodeDevices({bare}, {}, c)[0].mode, core::kModeHamiCore);
}

TEST(NodeDevicesTest, MigRegistrationRoundTripsThroughTheSchedulersDecoder) {
  PluginConfig c;
  c.mode = "mig";
  c.split_count = 7;
  const auto devs =
      BuildNodeDevices({MigA100(0, "GPU-mig"), MakeGpu(1, "GPU-t4", "T4", 15360)}, {}, c);
  vendors::NodeView node;
  node.name = "n1";
  node.annotations[vendors::nvidia::kNodeNvidiaRegister] = core::EncodeNodeDevicesJson(devs);
  const auto decoded = vendors::VendorSet::NvidiaOnly().DecodeNode(node, 1000);
  EXPECT_EQ(decoded.errors, "");
  ASSERT_EQ(decoded.devices.size(), 2u);
  EXPECT_EQ(decoded.devices[0].mode, core::kModeMig);
  EXPECT_EQ(decoded.devices[0].mig_profiles, devs[0].mig_profiles);
  for (const auto& d : decoded.devices)
    EXPECT_TRUE(core::ValidateMigRegistration(d).ok()) << d.uuid;
  // The scheduler's rule then picks from what the node reported: 4000 MiB -> 1g.5gb at the highest
  // free start, 5000 MiB -> 2g.10gb (1g.5gb's 4864 MiB is too small).
  const core::DeviceInfo& mig = decoded.devices[0];
  auto a = core::ChooseMigInstance(mig, 4000, 0, 0, 40960, 100);
  ASSERT_TRUE(a.choice.has_value());
  EXPECT_EQ(mig.mig_profiles[a.choice->profile].name, "1g.5gb");
  EXPECT_EQ(a.choice->placement, (core::MigPlacement{6, 1}));
  auto b = core::ChooseMigInstance(mig, 5000, 0, 0, 40960, 100);
  ASSERT_TRUE(b.choice.has_value());
  EXPECT_EQ(mig.mig_profiles[b.choice->profile].name, "2g.10gb");
}

// Upstream's getAPIDevices: every device carries the node's operating mode; in mode mps the split
// count and core scaling apply as in hami-core.
TEST(NodeDevicesTest, OperatingModeMpsRegistersEveryGpuAsMps) {
  PluginConfig c;
  c.mode = "mps";
  c.split_count = 5;
  c.core_scaling = 2;
  auto devs =
      BuildNodeDevices({MakeGpu(0, "GPU-a", "Tesla T4", 15360), MigA100(1, "GPU-m")}, {}, c);
  ASSERT_EQ(devs.size(), 2u);
  for (const auto& d : devs) {
    EXPECT_EQ(d.mode, "mps") << d.uuid;
    EXPECT_EQ(d.count, 5) << d.uuid;
    EXPECT_EQ(d.devcore, 200) << d.uuid;
    EXPECT_TRUE(d.mig_profiles.empty()) << d.uuid;
  }
  EXPECT_EQ(devs[0].devmem_mib, 15360);
  auto text = core::EncodeNodeDevicesJson(devs);
  EXPECT_NE(text.find(R"("mode":"mps")"), std::string::npos) << text;
  // The scheduler's side reads it back (core/mig.h accepts mps without profiles).
  auto back = core::DecodeNodeDevices(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[1].mode, "mps");
}

}  // namespace
}  // namespace hami::deviceplugin
