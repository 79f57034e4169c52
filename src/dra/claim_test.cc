#include "dra/claim.h"

#include <gtest/gtest.h>

#include "dra/testing/builders.h"

namespace hami::dra {
namespace {

using testing::MakeClaim;
using testing::TwoGpus;
using Json = nlohmann::json;

const ClaimRef kRef{"ns", "c1", "uid-1"};

TEST(Claim, Accepted) {
  struct Case {
    const char* name;
    Json claim;
    std::vector<Share> shares;
    std::map<std::string, Usage> by_device;
  };
  const Case cases[] = {
      {"one fractional share",
       MakeClaim("ns", "c1", "uid-1").Result("gpu", "gpu-0", "4Gi", "30").Json(),
       {{"gpu", "gpu-0", "share-1", {4096, 30}}},
       {{"gpu-0", {4096, 30}}}},
      {"two requests on one device add up",
       MakeClaim("ns", "c1", "uid-1")
           .Result("a", "gpu-1", "4Gi", "30")
           .Result("b", "gpu-1", "2Gi", "20")
           .Json(),
       {{"a", "gpu-1", "share-1", {4096, 30}}, {"b", "gpu-1", "share-2", {2048, 20}}},
       {{"gpu-1", {6144, 50}}}},
      {"no consumedCapacity: the whole device",
       MakeClaim("ns", "c1", "uid-1").Whole("gpu", "gpu-0").Json(),
       {{"gpu", "gpu-0", "", {16384, 100}}},
       {{"gpu-0", {16384, 100}}}},
      {"capacity not named: the whole of it",
       MakeClaim("ns", "c1", "uid-1").Result("gpu", "gpu-0", "1Gi", "").Json(),
       {{"gpu", "gpu-0", "share-1", {1024, 100}}},
       {{"gpu-0", {1024, 100}}}},
      {"another driver's result is skipped, a bare number and a subrequest read",
       MakeClaim("ns", "c1", "uid-1")
           .Result("x", "gpu-0", "1Gi", "1", "node-a", "gpu.nvidia.com")
           .Result("gpu/small", "gpu-0", "1048576", "5")
           .Json(),
       {{"gpu/small", "gpu-0", "share-2", {1, 5}}},
       {{"gpu-0", {1, 5}}}},
  };
  for (const auto& c : cases) {
    auto a = ParseClaim(c.claim, kRef, kDefaultDriverName, testing::kNode, TwoGpus());
    ASSERT_TRUE(a.ok()) << c.name << ": " << a.status();
    EXPECT_EQ(a->ref, kRef) << c.name;
    EXPECT_EQ(a->shares, c.shares) << c.name;
    EXPECT_EQ(a->ByDevice(), c.by_device) << c.name;
  }
}

TEST(Claim, Refused) {
  Json not_allocated = MakeClaim("ns", "c1", "uid-1").Unallocated().Json();
  Json bad_results = MakeClaim("ns", "c1", "uid-1").Json();
  bad_results["status"]["allocation"]["devices"]["results"] = "x";
  Json no_request = MakeClaim("ns", "c1", "uid-1").Result("", "gpu-0", "1Gi", "1").Json();
  Json bad_consumed = MakeClaim("ns", "c1", "uid-1").Json();
  bad_consumed["status"]["allocation"]["devices"]["results"] =
      Json::array({{{"request", "r"},
                    {"driver", kDefaultDriverName},
                    {"pool", "node-a"},
                    {"device", "gpu-0"},
                    {"consumedCapacity", "lots"}}});
  struct Case {
    const char* name;
    Json claim;
    ClaimRef ref;
    const char* error;
  };
  const Case cases[] = {
      {"not an object", Json::array(), kRef, "not a JSON object"},
      {"uid differs", MakeClaim("ns", "c1", "uid-2").Result("g", "gpu-0", "1Gi", "1").Json(), kRef,
       "the claim was replaced"},
      {"not allocated", not_allocated, kRef, "not allocated"},
      {"results not a list", bad_results, kRef, "results is missing"},
      {"nothing for this driver",
       MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-0", "1Gi", "1", "node-a", "other.io").Json(),
       kRef, "no device allocated for driver"},
      {"another pool",
       MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-0", "1Gi", "1", "node-b").Json(), kRef,
       "pool 'node-b', this node's pool is 'node-a'"},
      {"unknown device", MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-7", "1Gi", "1").Json(),
       kRef, "device 'gpu-7' is not on this node"},
      {"malformed quantity",
       MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-0", "4 GiB", "1").Json(), kRef,
       "results[0]"},
      {"negative", MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-0", "-1Gi", "1").Json(), kRef,
       "negative"},
      {"more memory than the device",
       MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-0", "17Gi", "1").Json(), kRef,
       "exceeds the device's 16384 MiB"},
      {"more cores than the device",
       MakeClaim("ns", "c1", "uid-1").Result("g", "gpu-0", "1Gi", "101").Json(), kRef,
       "cores 101 exceeds 100"},
      {"no request name", no_request, kRef, "no request name"},
      {"consumedCapacity not an object", bad_consumed, kRef, "not an object"},
      {"uid that cannot name a file",
       MakeClaim("ns", "c1", "../x").Json(),
       {"ns", "c1", "../x"},
       "is not 1-128 characters"},
  };
  for (const auto& c : cases) {
    auto a = ParseClaim(c.claim, c.ref, kDefaultDriverName, testing::kNode, TwoGpus());
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_NE(a.status().message().find(c.error), std::string::npos)
        << c.name << ": " << a.status();
  }
}

TEST(Claim, ExclusiveNodeArmsWholeCardsWhateverConsumedCapacitySays) {
  const Json c = MakeClaim("ns", "c1", "uid-1").Result("gpu", "gpu-0", "4Gi", "30").Json();
  auto shared = ParseClaim(c, kRef, kDefaultDriverName, testing::kNode, TwoGpus(), true);
  auto whole = ParseClaim(c, kRef, kDefaultDriverName, testing::kNode, TwoGpus(), false);
  ASSERT_TRUE(shared.ok() && whole.ok());
  EXPECT_EQ(shared->ByDevice().at("gpu-0"), (Usage{4096, 30}));
  EXPECT_EQ(whole->ByDevice().at("gpu-0"), (Usage{16384, 100}));
}

TEST(Claim, GarbageTextIsAnError) {
  for (const char* text : {"", "{", "null", "[1,2]", "{\"metadata\":5}", "\xff\xfe"}) {
    auto a = ParseClaimText(text, kRef, kDefaultDriverName, testing::kNode, TwoGpus());
    EXPECT_FALSE(a.ok()) << text;
  }
}

}  // namespace
}  // namespace hami::dra
