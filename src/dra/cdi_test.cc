#include "dra/cdi.h"

#include <gtest/gtest.h>

#include "dra/testing/builders.h"
#include "nlohmann/json.hpp"

namespace hami::dra {
namespace {

using Json = nlohmann::json;
using testing::TwoGpus;

deviceplugin::PluginConfig Vgpu() {
  deviceplugin::PluginConfig c;
  c.region_root = "/host/regions";
  c.container_hook_dir = "/usr/local/vgpu";
  c.libvgpu_host_path = "/host/vgpu/libvgpu.so";
  c.ld_preload_host_path = "/host/vgpu/ld.so.preload";
  c.device_list_strategy = "cdi-cri";  // overridden: the CDI device is the list
  return c;
}

ClaimAllocation Claim(std::vector<Share> shares) {
  return {{"ns", "c1", "uid-1"}, std::move(shares)};
}

using testing::SpecEnv;

TEST(Cdi, LimitsFollowNvmlIndexOrderAndSumShares) {
  struct Case {
    const char* name;
    std::vector<Share> shares;
    std::map<std::string, std::string> want;  // a subset of the env
    std::vector<std::string> absent;
  };
  const Case cases[] = {
      {"one share",
       {{"gpu", "gpu-0", "s1", {4096, 30}}},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "4096m"},
        {"CUDA_DEVICE_SM_LIMIT", "30"},
        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/uid-1.cache"}},
       {"CUDA_DEVICE_MEMORY_LIMIT_1"}},
      {"results in reverse order: index 0 is still gpu-0",
       {{"a", "gpu-1", "s1", {2048, 20}}, {"b", "gpu-0", "s2", {1024, 10}}},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0,GPU-1"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "1024m"},
        {"CUDA_DEVICE_MEMORY_LIMIT_1", "2048m"},
        {"CUDA_DEVICE_SM_LIMIT_0", "10"},
        {"CUDA_DEVICE_SM_LIMIT_1", "20"}},
       {}},
      {"two requests on one GPU are summed, never two variables",
       {{"a", "gpu-1", "s1", {4096, 30}}, {"b", "gpu-1", "s2", {2048, 20}}},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-1"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "6144m"},
        {"CUDA_DEVICE_SM_LIMIT", "50"}},
       {"CUDA_DEVICE_MEMORY_LIMIT_1"}},
  };
  for (const auto& c : cases) {
    auto e = BuildClaimEdits(Claim(c.shares), TwoGpus(), kDefaultDriverName, Vgpu());
    ASSERT_TRUE(e.ok()) << c.name << ": " << e.status();
    const Json spec = Json::parse(e->spec_json);
    const auto env = SpecEnv(spec);
    for (const auto& [k, v] : c.want) {
      ASSERT_TRUE(env.count(k)) << c.name << ": no " << k;
      EXPECT_EQ(env.at(k), v) << c.name << ": " << k;
    }
    for (const auto& k : c.absent) EXPECT_FALSE(env.count(k)) << c.name << ": " << k;
    EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"].size(), env.size())
        << c.name << ": a variable appears twice";
  }
}

TEST(Cdi, SpecShapeRegionAndMounts) {
  auto e = BuildClaimEdits(Claim({{"gpu", "gpu-0", "s1", {4096, 30}}}), TwoGpus(),
                           kDefaultDriverName, Vgpu());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, "k8s.hami-core-gpu.project-hami.io/claim");
  EXPECT_EQ(e->cdi_device_id, "k8s.hami-core-gpu.project-hami.io/claim=uid-1");
  EXPECT_EQ(e->spec_file_name, "k8s.hami-core-gpu.project-hami.io-claim_uid-1.json");
  EXPECT_EQ(e->edits.dirs, std::vector<std::string>{"/host/regions/uid-1_dra"});
  ASSERT_EQ(e->edits.files.size(), 1u);
  EXPECT_EQ(e->edits.files[0].first, "/host/regions/uid-1_dra.limits");
  EXPECT_NE(e->edits.files[0].second.find("CUDA_DEVICE_MEMORY_LIMIT_0=4096m"), std::string::npos);
  const Json spec = Json::parse(e->spec_json);
  EXPECT_EQ(spec["cdiVersion"], "0.6.0");
  EXPECT_EQ(spec["kind"], e->kind);
  EXPECT_EQ(spec["devices"][0]["name"], "uid-1");
  std::map<std::string, std::pair<std::string, std::string>> mounts;  // container -> host, ro|rw
  for (const auto& m : spec["devices"][0]["containerEdits"]["mounts"])
    mounts[m["containerPath"]] = {m["hostPath"], m["options"][1]};
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(mounts["/usr/local/vgpu"], (P{"/host/regions/uid-1_dra", "rw"}));
  EXPECT_EQ(mounts["/usr/local/vgpu/libvgpu.so"], (P{"/host/vgpu/libvgpu.so", "ro"}));
  EXPECT_EQ(mounts["/etc/ld.so.preload"], (P{"/host/vgpu/ld.so.preload", "ro"}));
  EXPECT_EQ(mounts["/usr/local/vgpu/vgpu.limits"], (P{"/host/regions/uid-1_dra.limits", "ro"}));
}

TEST(Cdi, Refusals) {
  struct Case {
    const char* name;
    ClaimAllocation claim;
    const char* error;
  };
  const Case cases[] = {
      {"0 MiB would be no limit", Claim({{"gpu", "gpu-0", "s1", {0, 30}}}), "0 MiB"},
      {"unknown device", Claim({{"gpu", "gpu-5", "s1", {1, 1}}}), "not on this node"},
      {"uid climbing out", {{"ns", "c1", ".."}, {{"gpu", "gpu-0", "", {1, 1}}}}, "claim uid"},
  };
  for (const auto& c : cases) {
    auto e = BuildClaimEdits(c.claim, TwoGpus(), kDefaultDriverName, Vgpu());
    ASSERT_FALSE(e.ok()) << c.name;
    EXPECT_NE(e.status().message().find(c.error), std::string::npos)
        << c.name << ": " << e.status();
  }
}

}  // namespace
}  // namespace hami::dra
