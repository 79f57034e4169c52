#include "gpu/static_discovery.h"

#include <gtest/gtest.h>

namespace hami::gpu {
namespace {

TEST(StaticDiscoveryTest, ListsWhatItWasGiven) {
  StaticDiscovery d(
      {MakeGpu(0, "GPU-a", "Tesla T4", 15360), MakeGpu(1, "GPU-b", "Tesla T4", 15360, 1)},
      {GpuLink{0, 1, 2, PcieLevel::kSingle}});
  auto devs = d.ListDevices();
  ASSERT_TRUE(devs.ok());
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[1].uuid, "GPU-b");
  EXPECT_EQ((*devs)[1].numa_node, 1);
  auto links = d.Topology();
  ASSERT_TRUE(links.ok());
  EXPECT_EQ((*links)[0].nvlinks, 2);
  d.SetListError(Unavailable("boom"));
  EXPECT_FALSE(d.ListDevices().ok());
}

TEST(StaticDiscoveryTest, HealthEventsReachOnlyLiveWatches) {
  StaticDiscovery d({MakeGpu(0, "GPU-a", "T4", 100)});
  std::vector<std::string> seen;
  auto w = d.WatchHealth([&](const HealthEvent& e) { seen.push_back(e.uuid); });
  ASSERT_TRUE(w.ok());
  d.SetHealth({"GPU-a", false, 79, "Xid 79"});
  w->reset();
  d.SetHealth({"GPU-a", true, 0, "recovered"});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "GPU-a");
}

TEST(NullDiscoveryTest, HasNothing) {
  NullDiscovery d;
  EXPECT_TRUE(d.ListDevices()->empty());
  EXPECT_TRUE(d.Topology()->empty());
  EXPECT_TRUE(d.WatchHealth([](const HealthEvent&) {}).ok());
}

TEST(PcieLevelTest, Names) {
  EXPECT_STREQ(PcieLevelName(PcieLevel::kSingle), "single");
  EXPECT_STREQ(PcieLevelName(PcieLevel::kSystem), "system");
  EXPECT_STREQ(PcieLevelName(static_cast<PcieLevel>(7)), "unknown");
}

}  // namespace
}  // namespace hami::gpu
