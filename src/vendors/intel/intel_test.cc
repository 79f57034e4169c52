// Intel GPUs: no upstream HAMi tests exist (no release has the backend); these tables pin the
// contract of docs/vendors.md#intel-gpus, from Intel's device plugin (resources, shared-dev-num)
// and GPU Aware Scheduling (per-container millicores/memory.max split over the GPUs, the
// gas-container-cards hand-off).
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "vendors/testing/defaults.h"

namespace hami::vendors {
namespace {

using testing::ByWord;

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(IntelGpu, DevicesFromTheDevicePluginsCapacity) {
  struct Case {
    const char* name;
    const char* word;
    std::map<std::string, int64_t> capacity;
    size_t gpus;
    int slots;
    int64_t mem_mib;
  } cases[] = {
      {"i915, two GPUs shared 10 ways, 16 GiB each",
       "IntelI915",
       {{"gpu.intel.com/i915", 20},
        {"gpu.intel.com/millicores", 2000},
        {"gpu.intel.com/memory.max", 32 * kGiB}},
       2,
       10,
       16384},
      {"xe without resource management: one share per GPU",
       "IntelXe",
       {{"gpu.intel.com/xe", 4}},
       4,
       1,
       0},
      {"an i915 node has no xe devices", "IntelXe", {{"gpu.intel.com/i915", 2}}, 0, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView n;
    n.name = "node-a";
    n.capacity = c.capacity;
    auto devs = ByWord(c.word).DecodeNode(n);
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), c.gpus);
    for (size_t i = 0; i < devs->size(); ++i) {
      const core::DeviceInfo& d = (*devs)[i];
      EXPECT_EQ(d.uuid,
                StrCat("node-a-", std::string(c.word) == "IntelXe" ? "xe" : "i915", "-card", i));
      EXPECT_EQ(d.count, c.slots);
      EXPECT_EQ(d.devmem_mib, c.mem_mib);
      EXPECT_EQ(d.devcore, 100);
      EXPECT_EQ(d.vendor, c.word);
    }
  }
  NodeView bad;
  bad.capacity = {{"gpu.intel.com/i915", 1}, {"gpu.intel.com/millicores", 2000000}};
  EXPECT_FALSE(ByWord("IntelI915").DecodeNode(bad).ok());
}

TEST(IntelGpu, RequestsSplitPerContainerResourcesOverTheGpus) {
  struct Case {
    const char* name;
    nlohmann::json limits;
    bool has;
    int nums = 0, coresreq = 0;
    int64_t memreq_mib = 0;
  } cases[] = {
      {"one share", {{"gpu.intel.com/i915", 1}}, true, 1, 0, 0},
      {"half a GPU and 4 GiB",
       {{"gpu.intel.com/i915", 1},
        {"gpu.intel.com/millicores", 500},
        {"gpu.intel.com/memory.max", "4Gi"}},
       true,
       1,
       50,
       4096},
      {"two GPUs share 300 millicores and 1 GiB (rounded up per GPU)",
       {{"gpu.intel.com/i915", 2},
        {"gpu.intel.com/millicores", 301},
        {"gpu.intel.com/memory.max", 1073741825}},
       true,
       2,
       16,
       513},
      {"millicores without a count is not a GPU request",
       {{"gpu.intel.com/millicores", 500}},
       false},
      {"xe is the other vendor's", {{"gpu.intel.com/xe", 1}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ByWord("IntelI915").ParseRequest({{"limits", c.limits}}, {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->has_value(), c.has);
    if (!c.has) continue;
    EXPECT_EQ((*r)->nums, c.nums);
    EXPECT_EQ((*r)->coresreq, c.coresreq);
    EXPECT_EQ((*r)->memreq_mib, c.memreq_mib);
  }
  auto bad =
      ByWord("IntelI915")
          .ParseRequest(
              {{"limits", {{"gpu.intel.com/i915", 1}, {"gpu.intel.com/memory.max", "1.5"}}}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("gpu.intel.com/memory.max"),
            std::string::npos);
}

TEST(IntelGpu, WebhookDeniesMoreThanAWholeGpuOfMillicores) {
  auto m =
      ByWord("IntelI915")
          .Mutate({{"limits", {{"gpu.intel.com/i915", 1}, {"gpu.intel.com/millicores", 1500}}}},
                  {});
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->denials.size(), 1u);
  EXPECT_NE(m->denials[0].find("more than 1000 millicores per GPU"), std::string::npos);
  auto ok =
      ByWord("IntelI915")
          .Mutate({{"limits", {{"gpu.intel.com/i915", 2}, {"gpu.intel.com/millicores", 1500}}}},
                  {});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->empty());
}

TEST(IntelGpu, DecisionHandsTheCardsToIntelsPlugin) {
  core::PodAllocation a;
  a.node = "node-a";
  a.containers = {
      {{"node-a-i915-card1", "IntelI915", 4096, 50, 1}},
      {},
      {{"node-a-i915-card0", "IntelI915", 0, 0, 0}, {"node-a-i915-card1", "IntelI915", 0, 0, 1}}};
  auto ann = ByWord("IntelI915").EncodeDecision(a, 1700000000);
  ASSERT_TRUE(ann.ok()) << ann.status();
  EXPECT_EQ(ann->at("gas-container-cards"), "card1||card0,card1");
  EXPECT_EQ(ann->at("gas-ts"), "1700000000000000000");
  EXPECT_EQ(ann->at("hami.io/IntelI915-devices-allocated"),
            "node-a-i915-card1,IntelI915,4096,50:;;node-a-i915-card0,IntelI915,0,0:"
            "node-a-i915-card1,IntelI915,0,0:;");
}

TEST(IntelGpu, SharesFitUntilMillicoresOrSlotsRunOut) {
  NodeView n;
  n.name = "node-a";
  n.capacity = {{"gpu.intel.com/i915", 2}, {"gpu.intel.com/millicores", 1000}};
  const Vendor& v = ByWord("IntelI915");
  auto devs = v.DecodeNode(n);
  ASSERT_TRUE(devs.ok());
  ASSERT_EQ(devs->size(), 1u);
  auto req = v.ParseRequest(
      {{"limits", {{"gpu.intel.com/i915", 1}, {"gpu.intel.com/millicores", 600}}}}, {});
  ASSERT_TRUE(req.ok() && *req);
  std::vector<core::DeviceUsage> usage(1);
  EXPECT_TRUE(v.Fit(**req, *devs, usage, {}, n).ok());
  usage[0] = {1, 0, 60};
  const FitResult second = v.Fit(**req, *devs, usage, {}, n);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.refusals.front().reason, scheduler::Reason::kCardInsufficientCore);
  usage[0] = {2, 0, 0};
  EXPECT_EQ(v.Fit(**req, *devs, usage, {}, n).refusals.front().reason,
            scheduler::Reason::kCardTimeSlicingExhausted);
}

}  // namespace
}  // namespace hami::vendors
