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

}  // namespace
}  // namespace hami::gpu
