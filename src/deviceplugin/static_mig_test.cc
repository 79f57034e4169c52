#include "deviceplugin/static_mig.h"

#include <gtest/gtest.h>

#include <map>

#include "gpu/static_discovery.h"

namespace hami::deviceplugin {
namespace {

// MIG instances per GPU as an administrator left them; ListMigInstances fails for `broken`.
class FakeMig final : public gpu::MigControl {
 public:
  std::map<std::string, std::vector<gpu::MigInstance>> instances;
  std::string broken;

  StatusOr<std::vector<gpu::MigInstance>> ListMigInstances(const std::string& gpu) override {
    if (gpu == broken) return Unavailable("NVML_ERROR_UNKNOWN");
    return instances[gpu];
  }
  StatusOr<gpu::MigInstance> CreateMigInstance(const std::string&, const std::string&,
                                               gpu::MigPlacement) override {
    return Internal("static MIG never creates instances");
  }
  Status DestroyMigInstance(const std::string&, unsigned) override {
    return Internal("static MIG never destroys instances");
  }
};

gpu::GpuInfo MigGpu(int index, const std::string& uuid, bool mig_on) {
  gpu::GpuInfo g = gpu::MakeGpu(index, uuid, "NVIDIA A100-SXM4-40GB", 40960, index);
  g.mig_enabled = mig_on;
  return g;
}

gpu::MigInstance Inst(const std::string& profile, unsigned gi, const std::string& uuid) {
  return {profile, {static_cast<int>(gi), 1}, gi, 0, uuid};
}

PluginConfig Strategy(const std::string& s) {
  PluginConfig c;
  c.mig_strategy = s;
  return c;
}

TEST(StaticMigTest, NoneOffersNothingEvenWithMigDevices) {
  FakeMig mig;
  mig.instances["GPU-a"] = {Inst("1g.5gb", 1, "MIG-a1")};
  auto r = BuildStaticMigResources({MigGpu(0, "GPU-a", true)}, mig, Strategy("none"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
}

TEST(StaticMigTest, SingleOffersEveryMigDeviceAsTheGpuResource) {
  FakeMig mig;
  mig.instances["GPU-a"] = {Inst("1g.5gb", 1, "MIG-a1"), Inst("1g.5gb", 2, "MIG-a2"),
                            Inst("1g.5gb", 3, "")};  // no compute instance: no device
  mig.instances["GPU-b"] = {Inst("1g.5gb", 1, "MIG-b1")};
  auto r = BuildStaticMigResources({MigGpu(0, "GPU-a", true), MigGpu(1, "GPU-b", true)}, mig,
                                   Strategy("single"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].resource_name, "nvidia.com/gpu");
  EXPECT_EQ((*r)[0].socket_name, "nvidia-gpu.sock");
  EXPECT_EQ((*r)[0].devices, (std::vector<StaticMigDevice>{{"MIG-a1", "GPU-a", "1g.5gb", 0},
                                                           {"MIG-a2", "GPU-a", "1g.5gb", 0},
                                                           {"MIG-b1", "GPU-b", "1g.5gb", 1}}));
}

TEST(StaticMigTest, WithoutAnyMigGpuBothStrategiesOfferNothing) {
  FakeMig mig;
  for (const char* s : {"single", "mixed"}) {
    auto r = BuildStaticMigResources({MigGpu(0, "GPU-a", false)}, mig, Strategy(s));
    ASSERT_TRUE(r.ok()) << s << ": " << r.status();
    EXPECT_TRUE(r->empty()) << s;
  }
}

TEST(StaticMigTest, MixedOffersOneResourcePerProfileBesideSharedGpus) {
  FakeMig mig;
  mig.instances["GPU-a"] = {Inst("3g.20gb", 1, "MIG-a1"), Inst("1g.5gb", 2, "MIG-a2"),
                            Inst("1g.5gb+me", 3, "MIG-a3")};
  mig.instances["GPU-c"] = {Inst("1g.5gb", 1, "MIG-c1")};
  auto r = BuildStaticMigResources(
      {MigGpu(0, "GPU-a", true), MigGpu(1, "GPU-b", false), MigGpu(2, "GPU-c", true)}, mig,
      Strategy("mixed"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].resource_name, "nvidia.com/mig-1g.5gb");
  EXPECT_EQ((*r)[0].socket_name, "nvidia-mig-1g.5gb.sock");
  EXPECT_EQ((*r)[0].devices, (std::vector<StaticMigDevice>{{"MIG-a2", "GPU-a", "1g.5gb", 0},
                                                           {"MIG-c1", "GPU-c", "1g.5gb", 2}}));
  EXPECT_EQ((*r)[1].resource_name, "nvidia.com/mig-1g.5gb.me");
  EXPECT_EQ((*r)[1].socket_name, "nvidia-mig-1g.5gb.me.sock");
  EXPECT_EQ((*r)[2].resource_name, "nvidia.com/mig-3g.20gb");
  EXPECT_EQ((*r)[2].devices, (std::vector<StaticMigDevice>{{"MIG-a1", "GPU-a", "3g.20gb", 0}}));
}

TEST(StaticMigTest, RefusesLayoutsTheStrategyCannotOffer) {
  struct Case {
    const char* name;
    std::string strategy;
    std::vector<gpu::GpuInfo> gpus;
    std::map<std::string, std::vector<gpu::MigInstance>> instances;
    std::string broken;
    const char* want;
  };
  const Case cases[] = {
      {"MIG on, no device",
       "mixed",
       {MigGpu(0, "GPU-a", true)},
       {{"GPU-a", {Inst("1g.5gb", 1, "")}}},
       "",
       "MIG strategy mixed: GPU 0 (GPU-a) has MIG on but no MIG device: create its instances "
       "(nvidia-smi mig -i 0 -cgi <profiles> -C) or turn MIG off (nvidia-smi -i 0 -mig 0)"},
      {"single, two profiles",
       "single",
       {MigGpu(0, "GPU-a", true)},
       {{"GPU-a", {Inst("1g.5gb", 1, "MIG-1"), Inst("2g.10gb", 2, "MIG-2")}}},
       "",
       "MIG strategy single: MIG devices of more than one profile (1g.5gb, 2g.10gb) on the "
       "node; single needs one profile (use mixed)"},
      {"single, MIG off beside MIG on",
       "single",
       {MigGpu(0, "GPU-a", false), MigGpu(1, "GPU-b", true)},
       {{"GPU-b", {Inst("1g.5gb", 1, "MIG-1")}}},
       "",
       "MIG strategy single: GPU GPU-a has MIG off while other GPUs of the node have MIG on"},
      {"instances cannot be listed",
       "single",
       {MigGpu(0, "GPU-a", true)},
       {},
       "GPU-a",
       "MIG strategy single: GPU GPU-a: cannot list its MIG devices: NVML_ERROR_UNKNOWN"},
      {"profile that cannot name a resource",
       "mixed",
       {MigGpu(0, "GPU-a", true)},
       {{"GPU-a", {Inst("1g 5gb", 1, "MIG-1")}}},
       "",
       "MIG profile '1g 5gb' cannot name a resource (character ' ')"},
  };
  for (const Case& tc : cases) {
    FakeMig mig;
    mig.instances = tc.instances;
    mig.broken = tc.broken;
    auto r = BuildStaticMigResources(tc.gpus, mig, Strategy(tc.strategy));
    ASSERT_FALSE(r.ok()) << tc.name;
    EXPECT_NE(std::string(r.status().message()).find(tc.want), std::string::npos)
        << tc.name << ": " << r.status().message();
  }
}

TEST(StaticMigTest, MixedResourceNames) {
  struct Case {
    const char* profile;
    const char* want;  // resource name, or the error's text
    bool ok;
  };
  const Case cases[] = {
      {"1g.10gb", "nvidia.com/mig-1g.10gb", true},
      {"1g.10gb+me", "nvidia.com/mig-1g.10gb.me", true},
      {"7g.80gb", "nvidia.com/mig-7g.80gb", true},
      {"", "1..59 characters", false},
      {"1g/10gb", "character '/'", false},
      {"1g.10gb-", "must start and end with a letter or digit", false},
      {".1g", "must start and end with a letter or digit", false},
  };
  for (const Case& tc : cases) {
    auto r = MixedMigResourceName(tc.profile);
    ASSERT_EQ(r.ok(), tc.ok) << tc.profile;
    if (tc.ok) {
      EXPECT_EQ(*r, tc.want);
    } else {
      EXPECT_NE(std::string(r.status().message()).find(tc.want), std::string::npos)
          << tc.profile << ": " << r.status().message();
    }
  }
  EXPECT_FALSE(MixedMigResourceName(std::string(60, 'a')).ok());
  EXPECT_TRUE(MixedMigResourceName(std::string(59, 'a')).ok());
}

}  // namespace
}  // namespace hami::deviceplugin
