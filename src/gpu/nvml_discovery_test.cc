// NvmlDiscovery against the fake libnvidia-ml.so.1 (src/fakes): the real ABI, simulated devices.
#include "gpu/nvml_discovery.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "gpu/testing/fake_nvml_hooks.h"

namespace hami::gpu {
namespace {

using testing::FakeNvmlHooks;
using testing::LoadFakeNvmlHooks;

FakeNvmlHooks Hooks() {
  FakeNvmlHooks h = LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  EXPECT_TRUE(h.ok()) << h.error;
  return h;
}

class NvmlDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = "/tmp/hami-gpu-test-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name();
    setenv("FAKEGPU_STATE", state_.c_str(), 1);
    unsetenv("FAKEGPU_NVLINK");
    unsetenv("FAKEGPU_FAULTS");
    unsetenv("FAKEGPU_INIT_FAIL");
    unsetenv("FAKEGPU_XID");
    unsetenv("FAKEGPU_MIG");
    setenv("FAKEGPU_DEVICES",
           "Tesla V100-PCIE-32GB:32768:80;Tesla V100-PCIE-32GB:32768:80;"
           "NVIDIA A100-SXM4-80GB:81920:108:GPU-11111111-2222-3333-4444-555555555555;Tesla "
           "T4:15360:40",
           1);
  }
  void TearDown() override { unlink(state_.c_str()); }
  StatusOr<std::unique_ptr<NvmlDiscovery>> Open() {
    hooks_.reset();  // re-read the environment set by the test
    NvmlOptions o;
    o.library = HAMI_FAKE_NVML;
    o.event_wait_ms = 50;
    return NvmlDiscovery::Open(o);
  }
  std::string state_;
  FakeNvmlHooks hooks_ = Hooks();
};

TEST_F(NvmlDiscoveryTest, ListsDevicesWithIdentityMemoryPciAndNuma) {
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  auto devs = (*d)->ListDevices();
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 4u);
  struct Want {
    int index;
    std::string uuid, model, bus;
    int64_t mem;
    int numa;
  };
  const Want want[] = {
      {0, "GPU-fa4e0000-0000-4000-8000-000000000000", "Tesla V100-PCIE-32GB", "00000000:18:00.0",
       32768, 0},
      {1, "GPU-fa4e0000-0000-4000-8000-000000000001", "Tesla V100-PCIE-32GB", "00000000:20:00.0",
       32768, 0},
      {2, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA A100-SXM4-80GB", "00000000:28:00.0",
       81920, 1},
      {3, "GPU-fa4e0000-0000-4000-8000-000000000003", "Tesla T4", "00000000:30:00.0", 15360, 1},
  };
  for (int i = 0; i < 4; ++i) {
    const GpuInfo& g = (*devs)[i];
    EXPECT_EQ(g.index, want[i].index);
    EXPECT_EQ(g.uuid, want[i].uuid);
    EXPECT_EQ(g.model, want[i].model);
    EXPECT_EQ(g.memory_mib, want[i].mem);
    EXPECT_EQ(g.pci_bus_id, want[i].bus);
    EXPECT_EQ(g.numa_node, want[i].numa) << i;
    EXPECT_FALSE(g.mig_enabled);
  }
}

TEST_F(NvmlDiscoveryTest, TopologyCountsNvLinksAndPcieLevels) {
  setenv("FAKEGPU_NVLINK", "0-1:12,2-3:4", 1);
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  auto links = (*d)->Topology();
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_EQ(links->size(), 6u);  // C(4,2)
  const GpuLink want[] = {
      {0, 1, 12, PcieLevel::kSingle}, {0, 2, 0, PcieLevel::kSystem}, {0, 3, 0, PcieLevel::kSystem},
      {1, 2, 0, PcieLevel::kSystem},  {1, 3, 0, PcieLevel::kSystem}, {2, 3, 4, PcieLevel::kSingle},
  };
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ((*links)[i], want[i])
        << "pair " << (*links)[i].a << "-" << (*links)[i].b << " nvlinks " << (*links)[i].nvlinks
        << " pcie " << PcieLevelName((*links)[i].pcie);
  }
}

TEST_F(NvmlDiscoveryTest, XidMarksTheDeviceUnhealthyAndApplicationXidsAreIgnored) {
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<HealthEvent> events;
  auto w = (*d)->WatchHealth([&](const HealthEvent& e) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(e);
    cv.notify_all();
  });
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(hooks_.inject_xid(1, 13), 0);  // application error: ignored
  ASSERT_EQ(hooks_.inject_xid(2, 79), 0);  // fell off the bus
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(5), [&] { return !events.empty(); }));
    EXPECT_EQ(events[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
    EXPECT_EQ(events[0].xid, 79u);
    EXPECT_FALSE(events[0].healthy);
  }
  w->reset();  // stops and joins; no callback after this
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(events.size(), 1u);
}

TEST_F(NvmlDiscoveryTest, ScheduledXidFromTheEnvironment) {
  setenv("FAKEGPU_XID", "0:48:100", 1);
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  std::mutex mu;
  std::condition_variable cv;
  std::string uuid;
  auto w = (*d)->WatchHealth([&](const HealthEvent& e) {
    std::lock_guard<std::mutex> l(mu);
    uuid = e.uuid;
    cv.notify_all();
  });
  ASSERT_TRUE(w.ok());
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(5), [&] { return !uuid.empty(); }));
  EXPECT_EQ(uuid, "GPU-fa4e0000-0000-4000-8000-000000000000");
}

TEST_F(NvmlDiscoveryTest, MemoryFallsBackToV1WhenV2Fails) {
  setenv("FAKEGPU_FAULTS", "nvmlDeviceGetMemoryInfo_v2=3", 1);
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  auto devs = (*d)->ListDevices();
  ASSERT_TRUE(devs.ok()) << devs.status();
  EXPECT_EQ((*devs)[2].memory_mib, 81920);
}

TEST_F(NvmlDiscoveryTest, ErrorsAreClear) {
  struct Case {
    const char* name;
    const char* env;
    const char* value;
    bool open_fails;
    const char* want;
  };
  const Case cases[] = {
      {"driver not loaded", "FAKEGPU_INIT_FAIL", "1", true, "nvmlInit failed"},
      {"uuid query fails", "FAKEGPU_FAULTS", "nvmlDeviceGetUUID=999@2", false,
       "device 1: nvmlDeviceGetUUID failed"},
      {"count fails", "FAKEGPU_FAULTS", "nvmlDeviceGetCount_v2=999", false,
       "nvmlDeviceGetCount failed"},
  };
  for (const auto& tc : cases) {
    unsetenv("FAKEGPU_FAULTS");
    unsetenv("FAKEGPU_INIT_FAIL");
    setenv(tc.env, tc.value, 1);
    auto d = Open();
    Status s = d.ok() ? (*d)->ListDevices().status() : d.status();
    EXPECT_EQ(!d.ok(), tc.open_fails) << tc.name;
    EXPECT_FALSE(s.ok()) << tc.name;
    EXPECT_NE(std::string(s.message()).find(tc.want), std::string::npos) << tc.name << ": " << s;
  }
}

TEST(NvmlOpenTest, MissingLibraryIsAClearError) {
  NvmlOptions o;
  o.library = "libnvidia-ml-does-not-exist.so.1";
  auto d = NvmlDiscovery::Open(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(d.status().message()).find("libnvidia-ml-does-not-exist.so.1"),
            std::string::npos);
}

TEST(NvmlOpenTest, LibraryThatIsNotNvmlIsRejected) {
  NvmlOptions o;
  o.library = "libc.so.6";
  auto d = NvmlDiscovery::Open(o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(std::string(d.status().message()).find("does not export nvmlInit_v2"),
            std::string::npos)
      << d.status();
}

std::string Placements(const MigProfileInfo& p) {
  std::string s;
  for (const auto& pl : p.placements) s += StrCat(pl.start, "+", pl.size, " ");
  return s;
}

TEST_F(NvmlDiscoveryTest, MigGpuReportsItsProfilesAndPlacements) {
  setenv("FAKEGPU_DEVICES", "NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40", 1);
  setenv("FAKEGPU_MIG", "0", 1);
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  auto devs = (*d)->ListDevices();
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_FALSE((*devs)[1].mig_enabled);
  EXPECT_TRUE((*devs)[1].mig_profiles.empty());
  const GpuInfo& g = (*devs)[0];
  ASSERT_TRUE(g.mig_enabled);
  struct Want {
    const char* name;
    unsigned index, id;
    int slices, instances, sms;
    int64_t mem;
    const char* placements;
  };
  // NVML's order; no "+me" variant (one per GPU, which a placement list cannot express).
  const Want want[] = {
      {"1g.5gb", NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 7, 14, 4864,
       "0+1 1+1 2+1 3+1 4+1 5+1 6+1 "},
      {"2g.10gb", NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 3, 28, 9984, "0+2 2+2 4+2 "},
      {"3g.20gb", NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 2, 42, 20096, "0+4 4+4 "},
      {"4g.20gb", NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 1, 56, 20096, "0+4 "},
      {"7g.40gb", NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 1, 98, 40448, "0+8 "},
  };
  ASSERT_EQ(g.mig_profiles.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    const MigProfileInfo& p = g.mig_profiles[i];
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(p.name, want[i].name);
    EXPECT_EQ(p.nvml_index, want[i].index);
    EXPECT_EQ(p.nvml_id, want[i].id);
    EXPECT_EQ(p.slices, want[i].slices);
    EXPECT_EQ(p.instances, want[i].instances);
    EXPECT_EQ(p.sms, want[i].sms);
    EXPECT_EQ(p.memory_mib, want[i].mem);
    EXPECT_EQ(Placements(p), want[i].placements);
  }
}

TEST_F(NvmlDiscoveryTest, MigInstancesAreCreatedAtThePlacementListedAndDestroyed) {
  setenv("FAKEGPU_DEVICES", "NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40", 1);
  setenv("FAKEGPU_MIG", "0", 1);
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  MigControl& mig = **d;
  const std::string gpu = "GPU-fa4e0000-0000-4000-8000-000000000000";
  auto a = mig.CreateMigInstance(gpu, "3g.20gb", {4, 4});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->profile, "3g.20gb");
  EXPECT_EQ(a->placement, (MigPlacement{4, 4}));
  EXPECT_EQ(a->gpu_instance_id, 2u);
  EXPECT_EQ(a->compute_instance_id, 0u);
  EXPECT_EQ(a->uuid.rfind("MIG-", 0), 0u) << a->uuid;

  struct Bad {
    const char* profile;
    MigPlacement at;
    absl::StatusCode code;
  };
  const Bad bad[] = {
      {"3g.20gb", {4, 4}, absl::StatusCode::kResourceExhausted},  // taken
      {"1g.5gb", {5, 1}, absl::StatusCode::kResourceExhausted},   // inside it
      {"2g.10gb", {6, 2}, absl::StatusCode::kInvalidArgument},    // not a 2g placement
      {"1g.5gb", {0, 2}, absl::StatusCode::kInvalidArgument},     // wrong size
      {"9g.90gb", {0, 1}, absl::StatusCode::kInvalidArgument},    // no such profile
  };
  for (const Bad& b : bad) {
    auto r = mig.CreateMigInstance(gpu, b.profile, b.at);
    EXPECT_EQ(r.status().code(), b.code) << b.profile << " " << r.status();
  }
  EXPECT_FALSE(mig.CreateMigInstance("GPU-fa4e0000-0000-4000-8000-000000000001", "1g.5gb", {0, 1})
                   .ok());  // the T4 runs no MIG
  auto b = mig.CreateMigInstance(gpu, "1g.5gb", {3, 1});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->uuid, a->uuid);

  auto listed = mig.ListMigInstances(gpu);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0], *a);
  EXPECT_EQ((*listed)[1], *b);

  ASSERT_TRUE(mig.DestroyMigInstance(gpu, a->gpu_instance_id).ok());
  EXPECT_EQ(mig.DestroyMigInstance(gpu, a->gpu_instance_id).code(), absl::StatusCode::kNotFound);
  listed = mig.ListMigInstances(gpu);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].profile, "1g.5gb");
  // The freed slices take a 4g now.
  EXPECT_TRUE(mig.CreateMigInstance(gpu, "3g.20gb", {4, 4}).ok());
}

TEST_F(NvmlDiscoveryTest, MigCreationLeavesNothingBehindWhenTheComputeInstanceFails) {
  setenv("FAKEGPU_DEVICES", "NVIDIA A100-SXM4-40GB:40960:108", 1);
  setenv("FAKEGPU_MIG", "0", 1);
  setenv("FAKEGPU_FAULTS", "nvmlGpuInstanceCreateComputeInstance=23", 1);
  auto d = Open();
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string gpu = "GPU-fa4e0000-0000-4000-8000-000000000000";
  auto r = (*d)->CreateMigInstance(gpu, "1g.5gb", {6, 1});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("nvmlGpuInstanceCreateComputeInstance"),
            std::string::npos)
      << r.status();
  auto listed = (*d)->ListMigInstances(gpu);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
}

}  // namespace
}  // namespace hami::gpu
