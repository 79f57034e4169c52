// Upstream's Enflame vGCU tests (pkg/device/enflame/device_test.go of the releases with the shared
// GCU model), one table per upstream test and named after it, through our Vendor interface; plus
// the vGCU section's options. Differences on purpose are in docs/migration.md.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/testing/defaults.h"
#include "vendors/vendor_set.h"

namespace hami::vendors {
namespace {

using testing::ByWord;

constexpr char kWord[] = "EnflameVGCU";

nlohmann::json Res(std::map<std::string, int64_t> limits, std::map<std::string, int64_t> requests) {
  return {{"limits", limits}, {"requests", requests}};
}

std::unique_ptr<Vendor> WithFactor(int factor) {
  auto v = LoadVendors(StrCat("enflamevgcu:\n  factor: ", factor, "\n"));
  EXPECT_TRUE(v.ok()) << v.status();
  for (auto& x : *v)
    if (x->common_word() == kWord) return std::move(x);
  return nullptr;
}

// TestGetNodeDevices: gcu-count 1, shared-gcu 6 -> one card `test-enflame-0`, 100 slots, memory
// and cores 100 (percent), type Enflame.
TEST(EnflameVgcuUpstream, TestGetNodeDevices) {
  struct Case {
    const char* name;
    std::map<std::string, int64_t> cap;
    size_t devices;
  } cases[] = {
      {"Test with valid node", {{"enflame.com/gcu-count", 1}, {"enflame.com/shared-gcu", 6}}, 1},
      // constructed: more cards; no gcu-count is no device (upstream: an error, no devices)
      {"two cards", {{"enflame.com/gcu-count", 2}, {"enflame.com/shared-gcu", 8}}, 2},
      {"no gcu-count", {{"enflame.com/shared-gcu", 8}}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView n;
    n.name = "test";
    n.capacity = c.cap;
    auto devs = ByWord(kWord).DecodeNode(n);
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), c.devices);
    for (size_t i = 0; i < devs->size(); ++i) {
      const core::DeviceInfo& d = (*devs)[i];
      EXPECT_EQ(d.uuid, StrCat("test-enflame-", i));
      EXPECT_EQ(d.index, static_cast<int>(i));
      EXPECT_EQ(d.count, 100);
      EXPECT_EQ(d.devmem_mib, 100);
      EXPECT_EQ(d.devcore, 100);
      EXPECT_EQ(d.type, "Enflame");
      EXPECT_EQ(d.vendor, kWord);
    }
  }
}

// TestPatchAnnotations: no devices -> no annotation; one device -> the record, gcu-assigned
// "false", gcu-assigned-time in nanoseconds, gcu-assigned-id "0".
TEST(EnflameVgcuUpstream, TestPatchAnnotations) {
  // (the scheduler encodes a vendor's decision only for pods with its devices; without any, no
  // plugin annotation is written)
  auto none = ByWord(kWord).EncodeDecision(core::PodAllocation{}, 1700000000);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->count("enflame.com/gcu-assigned"), 0u);
  EXPECT_EQ(none->count("enflame.com/gcu-assigned-id"), 0u);
  core::PodAllocation a;
  a.containers = {{{"k8s-gpu-enflame-0", kWord, 0, 0, 0}}};
  auto enc = ByWord(kWord).EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(*enc,
            (std::map<std::string, std::string>{
                {"hami.io/enflame-vgpu-devices-allocated", "k8s-gpu-enflame-0,EnflameVGCU,0,0:;"},
                {"enflame.com/gcu-assigned", "false"},
                {"enflame.com/gcu-assigned-time", "1700000000000000000"},
                {"enflame.com/gcu-assigned-id", "0"}}));
  // constructed: the ids of the first container with devices
  a.containers = {{}, {{"n-enflame-2", kWord, 50, 0, 2}, {"n-enflame-3", kWord, 50, 0, 3}}};
  enc = ByWord(kWord).EncodeDecision(a, 1);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->at("enflame.com/gcu-assigned-id"), "2,3");
  auto back = ByWord(kWord).DecodeDecision(*enc);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->containers.size(), 2u);
  EXPECT_EQ(back->containers[1].size(), 2u);
}

// Test_MutateAdmission: factor 4, vgcu 1 with percentage 15 -> 25 (one share); constructed rows
// around it.
TEST(EnflameVgcuUpstream, Test_MutateAdmission) {
  struct Case {
    const char* name;
    int factor;
    std::map<std::string, int64_t> limits;
    std::map<std::string, int64_t> added;
    bool denied;
  } cases[] = {
      {"EnflameResourceCount and EnflameResourcePercentage set to limits",
       4,
       {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 15}},
       {{"enflame.com/vgcu-percentage", 25}, {"enflame.com/shared-gcu", 1}},
       false},
      {"on a share boundary",
       4,
       {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 50}},
       {{"enflame.com/vgcu-percentage", 50}, {"enflame.com/shared-gcu", 2}},
       false},
      {"just above a boundary",
       4,
       {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 51}},
       {{"enflame.com/vgcu-percentage", 75}, {"enflame.com/shared-gcu", 3}},
       false},
      {"no percentage: the whole card",
       4,
       {{"enflame.com/vgcu", 1}},
       {{"enflame.com/vgcu-percentage", 100}, {"enflame.com/shared-gcu", 4}},
       false},
      {"0 percent is 1",
       4,
       {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 0}},
       {{"enflame.com/vgcu-percentage", 25}, {"enflame.com/shared-gcu", 1}},
       false},
      {"thirds round down",
       3,
       {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 34}},
       {{"enflame.com/vgcu-percentage", 66}, {"enflame.com/shared-gcu", 2}},
       false},
      {"several cards: whole cards",
       6,
       {{"enflame.com/vgcu", 2}, {"enflame.com/vgcu-percentage", 10}},
       {{"enflame.com/vgcu-percentage", 100}, {"enflame.com/shared-gcu", 12}},
       false},
      {"above 100: denied",
       4,
       {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 120}},
       {},
       true},
      {"no vgcu: untouched", 4, {{"enflame.com/vgcu-percentage", 15}}, {}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto v = WithFactor(c.factor);
    ASSERT_NE(v, nullptr);
    auto m = v->Mutate(Res(c.limits, {}), {});
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->add_limits, c.added);
    EXPECT_EQ(!m->denials.empty(), c.denied);
  }
}

// Test_checkType: "the same type" fits; "the different type" is refused. Requests reach a vendor
// by type here (the scheduler routes them), so the check is on the device: a card of another
// type, such as a DRS card (type Enflame), is never a vGCU card.
TEST(EnflameVgcuUpstream, Test_checkType) {
  NodeView n;
  n.name = "n";
  n.capacity = {{"enflame.com/gcu-count", 1}};
  auto devs = ByWord(kWord).DecodeNode(n);
  ASSERT_TRUE(devs.ok());
  ASSERT_EQ(devs->size(), 1u);
  const core::DeviceRequest req{kWord, 1, 25, 0, 0, -1};
  EXPECT_FALSE(ByWord(kWord).CheckDevice(req, (*devs)[0], {}, {}).has_value());
  for (const char* other : {"Enflame", "test123"}) {
    core::DeviceInfo d = (*devs)[0];
    d.vendor = other;
    auto r = ByWord(kWord).CheckDevice(req, d, {}, {});
    ASSERT_TRUE(r.has_value()) << other;
    EXPECT_EQ(r->reason, scheduler::Reason::kCardTypeMismatch);
    EXPECT_TRUE(r->never);
  }
}

// Test_GenerateResourceRequests (factor 4). Upstream reads the percentage as given (15); we read
// it as the webhook rewrites it (25), so a pod that skipped the webhook books what it will get.
TEST(EnflameVgcuUpstream, Test_GenerateResourceRequests) {
  struct Case {
    const char* name;
    nlohmann::json res;
    std::optional<core::DeviceRequest> want;
  } cases[] = {
      {"all resources set to limits and requests",
       Res({{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 15}},
           {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 15}}),
       core::DeviceRequest{kWord, 1, 25, 0, 0, -1}},
      {"all resources don't set to limits and requests", Res({}, {}), std::nullopt},
      {"resourcemem don't set to limits and requests",
       Res({{"enflame.com/vgcu", 1}}, {{"enflame.com/vgcu", 1}}),
       core::DeviceRequest{kWord, 1, 100, 0, 0, -1}},
      {"constructed: requests only",
       Res({}, {{"enflame.com/vgcu", 1}, {"enflame.com/vgcu-percentage", 60}}),
       core::DeviceRequest{kWord, 1, 75, 0, 0, -1}},
      {"constructed: two cards are whole",
       Res({{"enflame.com/vgcu", 2}, {"enflame.com/vgcu-percentage", 10}}, {}),
       core::DeviceRequest{kWord, 2, 100, 0, 0, -1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = ByWord(kWord).ParseRequest(c.res, {});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, c.want);
  }
}

// TestDevices_Fit: upstream's rows (devices of 128 or 1280 "memory", 100 cores), through Fit.
// A refused request's tally also carries our node-level "NodeInsufficientDevice" (the node has
// fewer fitting devices than asked); the type-mismatch row is a device of another type, which Fit
// does not examine (Test_checkType has the refusal).
TEST(EnflameVgcuUpstream, TestDevices_Fit) {
  auto dev = [](const char* id, int64_t mem, const char* vendor = kWord) {
    core::DeviceInfo d;
    d.uuid = id;
    d.count = 100;
    d.devmem_mib = mem;
    d.devcore = 100;
    d.type = "Enflame";
    d.vendor = vendor;
    return d;
  };
  struct Case {
    const char* name;
    std::vector<core::DeviceInfo> devices;
    std::vector<core::DeviceUsage> usage;
    core::DeviceRequest request;
    std::map<std::string, std::string> annos;
    const char* want;  // the granted device, or the refusal summary
  } cases[] = {
      {"fit success",
       {dev("dev-0", 128), dev("dev-1", 128)},
       {{}, {}},
       {kWord, 1, 64, 0, 50, -1},
       {},
       "dev-0"},  // upstream walks from the last device: dev-1
      {"fit fail: memory not enough",
       {dev("dev-0", 128)},
       {{}},
       {kWord, 1, 512, 0, 50, -1},
       {},
       "1/1 CardInsufficientMemory, 1/1 NodeInsufficientDevice"},
      {"fit fail: core not enough",
       {dev("dev-0", 1024)},
       {{0, 0, 100}},
       {kWord, 1, 512, 0, 50, -1},
       {},
       "1/1 CardInsufficientCore, 1/1 NodeInsufficientDevice"},
      {"fit fail: type mismatch",
       {dev("dev-0", 128, "OtherType")},
       {{}},
       {kWord, 1, 512, 0, 50, -1},
       {},
       "1/1 NodeInsufficientDevice"},
      {"fit fail: user assign use uuid mismatch",
       {dev("dev-1", 1280)},
       {{}},
       {kWord, 1, 512, 0, 50, -1},
       {{"enflame.com/use-gpuuuid", "dev-0"}},
       "1/1 CardUuidMismatch, 1/1 NodeInsufficientDevice"},
      {"fit fail: user assign no use uuid match",
       {dev("dev-0", 1280)},
       {{}},
       {kWord, 1, 512, 0, 50, -1},
       {{"enflame.com/nouse-gpuuuid", "dev-0"}},
       "1/1 CardUuidMismatch, 1/1 NodeInsufficientDevice"},
      {"fit fail: card overused",
       {dev("dev-0", 1280)},
       {{100, 0, 0}},
       {kWord, 1, 512, 0, 50, -1},
       {},
       "1/1 CardTimeSlicingExhausted, 1/1 NodeInsufficientDevice"},
      {"fit fail:  card exclusively",
       {dev("dev-0", 1280)},
       {{20, 0, 0}},
       {kWord, 1, 512, 0, 100, -1},
       {},
       "1/1 ExclusiveDeviceAllocateConflict, 1/1 NodeInsufficientDevice"},
      {"fit fail:  CardComputeUnitsExhausted",
       {dev("dev-0", 1280)},
       {{20, 0, 100}},
       {kWord, 1, 512, 0, 0, -1},
       {},
       "1/1 CardComputeUnitsExhausted, 1/1 NodeInsufficientDevice"},
      {"fit success:  memory percentage",
       {dev("dev-0", 1280)},
       {{20, 0, 10}},
       {kWord, 1, 0, 10, 20, -1},
       {},
       "dev-0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Vendor& v = ByWord(kWord);
    auto sel = v.ParseSelectors(c.annos);
    ASSERT_TRUE(sel.ok());
    FitResult fit = v.Fit(c.request, c.devices, c.usage, *sel, NodeView{});
    const int n = static_cast<int>(c.devices.size());
    if (std::string(c.want).rfind("dev-", 0) == 0) {
      ASSERT_TRUE(fit.ok()) << fit.Summary(n);
      EXPECT_EQ(fit.devices[0].uuid, c.want);
    } else {
      EXPECT_FALSE(fit.ok());
      EXPECT_EQ(fit.Summary(n), c.want);
    }
  }
}

TEST(EnflameVgcuConfig, SectionOptions) {
  struct Case {
    const char* yaml;
    const char* error;  // "" = loads
  } cases[] = {
      {"enflamevgcu: {}\n", ""},
      {"enflamevgcu:\n  resourceNameVGCU: a.com/v\n  resourceNameVGCUPercentage: a.com/p\n", ""},
      {"enflamevgcu:\n  factor: 0\n", "enflamevgcu.factor: 0 must be in 1..100"},
      {"enflamevgcu:\n  factor: 101\n", "enflamevgcu.factor: 101 must be in 1..100"},
      {"enflamevgcu:\n  factor: four\n", "enflamevgcu.factor"},
      {"enflamevgcu:\n  resourceNameVGCU: a\n  resourceNameVGCUPercentage: a\n", "are equal"},
      {"enflamevgcu:\n  resourceNameGCU: x\n", "enflamevgcu.resourceNameGCU: unknown option"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    auto v = LoadVendors(c.yaml);
    if (std::string(c.error).empty()) {
      ASSERT_TRUE(v.ok()) << v.status();
      bool found = false;
      for (const auto& x : *v) found |= x->common_word() == kWord;
      EXPECT_TRUE(found);
    } else {
      ASSERT_FALSE(v.ok());
      EXPECT_NE(std::string(v.status().message()).find(c.error), std::string::npos) << v.status();
    }
  }
  auto off = LoadVendors("enflamevgcu:\n  enabled: false\n");
  ASSERT_TRUE(off.ok());
  for (const auto& x : *off) EXPECT_NE(x->common_word(), kWord);
}

}  // namespace
}  // namespace hami::vendors

namespace hami::vendors {
namespace {

// DRS and vGCU share upstream's record key: a pod holding both writes one record with both types,
// and each backend reads back its own devices.
TEST(EnflameVgcuConfig, DrsAndVgcuShareOneRecord) {
  auto set = VendorSet::Load("enflame: {}\nenflamevgcu: {}\n");
  ASSERT_TRUE(set.ok()) << set.status();
  core::PodAllocation a;
  a.node = "n";
  a.containers = {{{"drs-0", "Enflame", 12288, 25, 0}}, {{"n-enflame-1", "EnflameVGCU", 50, 0, 1}}};
  auto enc = (*set)->EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->at("hami.io/enflame-vgpu-devices-allocated"),
            "drs-0,Enflame,12288,25:;n-enflame-1,EnflameVGCU,50,0:;");
  EXPECT_EQ(enc->at("enflame.com/gcu-assigned-id"), "1");
  bool any = false;
  auto back = (*set)->DecodeDecision(*enc, &any);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->containers.size(), 2u);
  ASSERT_EQ(back->containers[0].size(), 1u);
  ASSERT_EQ(back->containers[1].size(), 1u);
  EXPECT_EQ(back->containers[0][0].vendor, "Enflame");
  EXPECT_EQ(back->containers[1][0].vendor, "EnflameVGCU");
}

}  // namespace
}  // namespace hami::vendors
