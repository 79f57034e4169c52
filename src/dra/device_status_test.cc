// The status.devices entries of a prepared claim, and how they merge into what the claim holds.
#include "dra/device_status.h"

#include <gtest/gtest.h>

#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

using Json = nlohmann::json;

ClaimAllocation Alloc(std::vector<Share> shares) {
  ClaimAllocation c;
  c.ref = {"ns", "c1", "uid-1"};
  c.shares = std::move(shares);
  return c;
}

TEST(DeviceStatusTest, EntriesPerResult) {
  struct Case {
    std::string name;
    ClaimAllocation claim;
    // per entry: device, shareID, consumed MiB/cores, armed MiB/cores
    std::vector<std::tuple<std::string, std::string, int64_t, int, int64_t, int>> want;
  };
  const std::vector<Case> cases = {
      {"one share",
       Alloc({{"gpu", "gpu-0", "s-1", {4096, 30}}}),
       {{"gpu-0", "s-1", 4096, 30, 4096, 30}}},
      {"two requests on one GPU: armed with their sum",
       Alloc({{"a", "gpu-1", "s-1", {4096, 30}}, {"b", "gpu-1", "s-2", {2048, 20}}}),
       {{"gpu-1", "s-1", 4096, 30, 6144, 50}, {"gpu-1", "s-2", 2048, 20, 6144, 50}}},
      {"two GPUs",
       Alloc({{"gpu", "gpu-1", "s-1", {1024, 10}}, {"gpu", "gpu-0", "s-2", {1, 5}}}),
       {{"gpu-1", "s-1", 1024, 10, 1024, 10}, {"gpu-0", "s-2", 1, 5, 1, 5}}},
      {"exclusive: no shareID",
       Alloc({{"gpu", "gpu-0", "", {16384, 100}}}),
       {{"gpu-0", "", 16384, 100, 16384, 100}}},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    const Json got = DeviceStatusEntries(k.claim, testing::TwoGpus(), kDefaultDriverName,
                                         testing::kNode, "k8s.x/claim=uid-1", 1'800'000'000);
    ASSERT_EQ(got.size(), k.want.size()) << got.dump();
    for (size_t i = 0; i < k.want.size(); ++i) {
      const auto& [device, share, cm, cc, am, ac] = k.want[i];
      const Json& e = got[i];
      EXPECT_EQ(e["driver"], kDefaultDriverName);
      EXPECT_EQ(e["pool"], testing::kNode);
      EXPECT_EQ(e["device"], device);
      EXPECT_EQ(e.value("shareID", ""), share);
      EXPECT_EQ(e.contains("shareID"), !share.empty());
      EXPECT_EQ(e["data"]["consumed"], (Json{{"memoryMiB", cm}, {"cores", cc}}));
      EXPECT_EQ(e["data"]["armed"], (Json{{"memoryMiB", am}, {"cores", ac}}));
      EXPECT_EQ(e["data"]["uuid"], device == "gpu-0" ? "GPU-0" : "GPU-1");
      EXPECT_EQ(e["data"]["cdiDeviceID"], "k8s.x/claim=uid-1");
      ASSERT_EQ(e["conditions"].size(), 1u);
      EXPECT_EQ(e["conditions"][0]["type"], "Ready");
      EXPECT_EQ(e["conditions"][0]["status"], "True");
      EXPECT_EQ(e["conditions"][0]["reason"], "Prepared");
      EXPECT_EQ(e["conditions"][0]["lastTransitionTime"], "2027-01-15T08:00:00Z");
    }
  }
}

// The Ready message names the vendor's limiter and what it was armed with.
TEST(DeviceStatusTest, ReadyMessageIsTheVendors) {
  const struct {
    const char* vendor;
    const char* want;
  } cases[] = {
      {"nvidia", "libvgpu armed with 6144 MiB and 50% of the SMs of GPU-1"},
      {"ascend",
       "vNPU core armed with 6144 MiB (NPU_MEM_QUOTA) and 50% of the AI cores "
       "(NPU_PRIORITY) of GPU-1"},
  };
  for (const auto& c : cases) {
    auto v = MakeDraVendor(c.vendor);
    ASSERT_TRUE(v.ok()) << v.status();
    const Json got = DeviceStatusEntries(
        Alloc({{"a", "gpu-1", "s-1", {4096, 30}}, {"b", "gpu-1", "s-2", {2048, 20}}}),
        testing::TwoGpus(), kDefaultDriverName, testing::kNode, "k8s.x/claim=uid-1", 0, v->get());
    ASSERT_EQ(got.size(), 2u);
    for (const Json& e : got) EXPECT_EQ(e["conditions"][0]["message"], c.want) << c.vendor;
  }
}

TEST(DeviceStatusTest, MergeKeepsOthersAndStoredTimes) {
  const ClaimAllocation claim = Alloc({{"gpu", "gpu-0", "s-1", {4096, 30}}});
  const Json ours = DeviceStatusEntries(claim, testing::TwoGpus(), kDefaultDriverName,
                                        testing::kNode, "k8s.x/claim=uid-1", 1'800'000'000);
  const Json later = DeviceStatusEntries(claim, testing::TwoGpus(), kDefaultDriverName,
                                         testing::kNode, "k8s.x/claim=uid-1", 1'800'000'600);
  const Json nic = {{"driver", "nic.example.com"}, {"pool", testing::kNode}, {"device", "eth0"}};
  Json other_pool = ours[0];
  other_pool["pool"] = "node-b";
  Json stale = ours[0];
  stale["device"] = "gpu-1";
  struct Case {
    std::string name;
    Json current;
    Json entries;
    Json want;
  };
  const std::vector<Case> cases = {
      {"none yet", nullptr, ours, ours},
      {"another driver's entry kept first", Json::array({nic}), ours, Json::array({nic, ours[0]})},
      {"another pool's entry kept", Json::array({other_pool}), ours,
       Json::array({other_pool, ours[0]})},
      {"the same again later keeps the stored time", ours, later, ours},
      {"our stale entry replaced", Json::array({stale, nic}), ours, Json::array({nic, ours[0]})},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(MergeDeviceStatus(k.current, kDefaultDriverName, testing::kNode, k.entries), k.want);
  }
}

}  // namespace
}  // namespace hami::dra
