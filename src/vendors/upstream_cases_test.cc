// Upstream HAMi's own per-vendor unit tests (pkg/device/<vendor>/*_test.go), case by case, through
// our Vendor interface. Each table is named after the upstream test it comes from; cases that are
// not observable through our interfaces, or where we differ on purpose, are listed in
// docs/migration.md ("Vendors: upstream test cases").
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/testing/defaults.h"
#include "vendors/testing/schedule.h"

namespace hami::vendors {
namespace {

using testing::All;
using testing::ByWord;

nlohmann::json Limits(std::map<std::string, int64_t> l) {
  return {{"limits", l}};
}

NodeView Capacity(std::string name, std::map<std::string, int64_t> cap) {
  NodeView n;
  n.name = std::move(name);
  n.capacity = std::move(cap);
  return n;
}

// ---- Cambricon (pkg/device/cambricon/device_test.go) ----

// Test_GetNodeDevices: vcore 1, vmemory 1 -> one card, 1 * 256 * 100 / 1 MiB.
TEST(CambriconUpstream, Test_GetNodeDevices) {
  struct Case {
    const char* name;
    int64_t vcore, vmemory;
    size_t devices;
    int64_t devmem;
  } cases[] = {
      {"test with vaild configuration", 1, 1, 1, 25600},
      // constructed beside upstream's case: the remainder of a started card counts as a card
      {"remainder rounds up", 150, 96, 2, 96 * 256 * 100 / 150},
      {"two whole cards", 200, 192, 2, 192 * 256 * 100 / 200},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto devs =
        ByWord("MLU").DecodeNode(Capacity("test", {{"cambricon.com/mlu.smlu.vcore", c.vcore},
                                                   {"cambricon.com/mlu.smlu.vmemory", c.vmemory}}));
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), c.devices);
    for (size_t i = 0; i < devs->size(); ++i) {
      const core::DeviceInfo& d = (*devs)[i];
      EXPECT_EQ(d.uuid, StrCat("test-cambricon-mlu-", i));
      EXPECT_EQ(d.index, static_cast<int>(i));
      EXPECT_EQ(d.count, 100);
      EXPECT_EQ(d.devmem_mib, c.devmem);
      EXPECT_EQ(d.devcore, 100);
      EXPECT_EQ(d.type, "MLU");
      EXPECT_EQ(d.numa, 0);
      EXPECT_TRUE(d.health);
    }
  }
}

// Test_GenerateResourceRequests (count resource cambricon.com/vmlu here: upstream's chart name).
TEST(CambriconUpstream, Test_GenerateResourceRequests) {
  struct Case {
    const char* name;
    nlohmann::json resources;
    bool request;
    int64_t memreq;
    int mem_percentage, cores;
  } cases[] = {
      {"don't set to limits and request", Limits({}), false, 0, 0, 0},
      {"resourcecoresname,resourcecountname and resourcememoryname set to limits and request",
       Limits({{"cambricon.com/vmlu", 1},
               {"cambricon.com/mlu.smlu.vmemory", 1000},
               {"cambricon.com/mlu.smlu.vcore", 2}}),
       true, 256000, 0, 2},
      {"resourcememoryname don't set to limits and requests",  // (cores absent: 100)
       Limits({{"cambricon.com/vmlu", 1}, {"cambricon.com/mlu.smlu.vmemory", 1000}}), true, 256000,
       0, 100},
      {"resourcecoresname don't set to limits and requests",
       Limits({{"cambricon.com/vmlu", 1}, {"cambricon.com/mlu.smlu.vcore", 2}}), true, 0, 100, 2},
      // upstream's GenerateResourceRequests needs the count resource
      {"no count resource", Limits({{"cambricon.com/mlu.smlu.vmemory", 4}}), false, 0, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ByWord("MLU").ParseRequest(c.resources, {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->has_value(), c.request);
    if (!c.request) continue;
    EXPECT_EQ((*r)->nums, 1);
    EXPECT_EQ((*r)->vendor, "MLU");
    EXPECT_EQ((*r)->memreq_mib, c.memreq);
    if (c.memreq == 0) {
      EXPECT_EQ((*r)->mem_percentage, c.mem_percentage);
    }
    EXPECT_EQ((*r)->coresreq, c.cores);
    auto m = ByWord("MLU").Mutate(c.resources, {});
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->empty()) << "upstream's MutateAdmission changes nothing";
  }
}

// Test_PatchAnnotations "exist device" (plus the lock, which upstream writes on the node).
TEST(CambriconUpstream, Test_PatchAnnotations) {
  core::PodAllocation a;
  a.containers = {{{"device-0", "MLU", 256000, 1, 0}}};
  auto enc = ByWord("MLU").EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->at("CAMBRICON_DSMLU_ASSIGNED"), "false");
  EXPECT_EQ(enc->at("CAMBRICON_DSMLU_PROFILE"), "0_1_1000");
  EXPECT_EQ(enc->at("hami.io/cambricon-mlu-devices-to-allocate"), "device-0,MLU,256000,1:;");
  EXPECT_EQ(enc->at("hami.io/cambricon-mlu-devices-allocated"), "device-0,MLU,256000,1:;");
  EXPECT_EQ(enc->count("CAMBRICON_DSMLU_ASSIGHED"), 0u);
  // The profile is the pod's first device's, also when the pod has more.
  a.containers = {{{"d-2", "MLU", 512, 10, 2}, {"d-3", "MLU", 512, 10, 3}}};
  enc = ByWord("MLU").EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->at("CAMBRICON_DSMLU_PROFILE"), "2_10_2");
}

// Test_CheckUUID: use/nouse lists against the device id.
TEST(CambriconUpstream, Test_CheckUUID) {
  const Vendor& v = ByWord("MLU");
  core::DeviceInfo d;
  d.vendor = "MLU";
  d.type = "MLU";
  d.count = 100;
  d.devmem_mib = 24576;
  d.devcore = 100;
  d.health = true;
  auto req =
      v.ParseRequest(Limits({{"cambricon.com/vmlu", 1}, {"cambricon.com/mlu.smlu.vcore", 10}}), {});
  ASSERT_TRUE(req.ok() && *req);
  struct Case {
    const char* name;
    std::map<std::string, std::string> annos;
    const char* id;
    bool want;
  } cases[] = {
      {"don't set UserUUID,NoUserUUID and annotation", {}, "", true},
      {"set UserUUID and annotation, don't set NoUserUUID",
       {{"cambricon.com/use-gpuuuid", "test123,111"}},
       "test123",
       true},
      {"don't set UserUUID, set NoUserUUID and annotation",
       {{"cambricon.com/nouse-gpuuuid", "test123,111"}},
       "test123",
       false},
      {"set UserUUID, don't set NoUserUUID,annotation and device not match",
       {{"cambricon.com/nouse-gpuuuid", "test123,111"}},
       "test456",
       true},
      {"don't set UserUUID,set NoUserUUID,annotation and device not match",
       {{"cambricon.com/use-gpuuuid", "test123,111"}},
       "test456",
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    d.uuid = c.id;
    auto sel = v.ParseSelectors(c.annos);
    ASSERT_TRUE(sel.ok());
    EXPECT_EQ(!v.CheckDevice(**req, d, {}, *sel).has_value(), c.want);
  }
}

// ---- Moore Threads (pkg/device/mthreads/device_test.go) ----

TEST(MthreadsUpstream, Test_GetNodeDevices) {
  auto devs = ByWord("Mthreads")
                  .DecodeNode(Capacity(
                      "test", {{"mthreads.com/sgpu-memory", 1}, {"mthreads.com/sgpu-core", 1}}));
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 1u);
  const core::DeviceInfo& d = devs->front();
  EXPECT_EQ(d.uuid, "test-mthreads-0");
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.count, 100);
  EXPECT_EQ(d.devmem_mib, 8192);  // 1 * 512 * 16 / 1
  EXPECT_EQ(d.devcore, 16);
  EXPECT_EQ(d.type, "Mthreads");
  // Two GPUs' worth: 32 core units, 192 memory units -> 2 x 48 GiB.
  devs = ByWord("Mthreads")
             .DecodeNode(Capacity(
                 "n", {{"mthreads.com/sgpu-memory", 192}, {"mthreads.com/sgpu-core", 32}}));
  ASSERT_TRUE(devs.ok());
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[1].uuid, "n-mthreads-1");
  EXPECT_EQ((*devs)[1].devmem_mib, 49152);
}

// Upstream v2.11 GetNodeDevices: the physical card ids come from the node label
// mthreads.com/sgpu.cores when it is set (sgpu_km may bind cards 0, 2 and 3), strictly: a label
// that does not account for the sgpu-core capacity (16 a card) fails the node; without the label,
// cards 0..N-1 as before.
TEST(MthreadsUpstream, GetNodeDevicesReadsTheCardIdsLabel) {
  struct Case {
    const char* label;  // nullptr: no label
    int64_t cores;
    std::vector<int> indices;  // empty: the node fails
  } cases[] = {
      {nullptr, 48, {0, 1, 2}}, {"", 48, {0, 1, 2}}, {"0-2-3", 48, {0, 2, 3}}, {"3,1", 32, {3, 1}},
      {"5", 16, {5}},           {"0-2", 48, {}},  // two cards named, three in the capacity
      {"0-2-3", 40, {}},                          // 40 is not three whole cards
      {"0-2-2", 48, {}},                          // a card twice
      {"0-x-3", 48, {}},        {"0--3", 48, {}},    {"-1-2-3", 48, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label ? c.label : "(no label)");
    NodeView n = Capacity("n", {{"mthreads.com/sgpu-memory", c.cores / 16 * 96},
                                {"mthreads.com/sgpu-core", c.cores}});
    if (c.label) n.labels["mthreads.com/sgpu.cores"] = c.label;
    auto devs = ByWord("Mthreads").DecodeNode(n);
    if (c.indices.empty()) {
      EXPECT_FALSE(devs.ok());
      continue;
    }
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), c.indices.size());
    for (size_t i = 0; i < devs->size(); ++i) {
      EXPECT_EQ((*devs)[i].index, c.indices[i]);
      EXPECT_EQ((*devs)[i].uuid, StrCat("n-mthreads-", c.indices[i]));
      EXPECT_EQ((*devs)[i].devmem_mib, 49152);
    }
    // What the simulator and the fakes write reads back the same.
    NodeView back;
    back.name = "n";
    ASSERT_TRUE(ByWord("Mthreads").EncodeNode(*devs, &back).ok());
    auto again = ByWord("Mthreads").DecodeNode(back);
    ASSERT_TRUE(again.ok()) << again.status();
    ASSERT_EQ(again->size(), devs->size());
    for (size_t i = 0; i < devs->size(); ++i) EXPECT_EQ((*again)[i].index, (*devs)[i].index);
  }
}

TEST(MthreadsUpstream, Test_GenerateResourceRequests) {
  struct Case {
    const char* name;
    nlohmann::json resources;
    bool request;
    int nums;
    int64_t memreq;
    int mem_percentage, cores;
  } cases[] = {
      {"all resources set to limit and request",
       Limits({{"mthreads.com/vgpu", 1},
               {"mthreads.com/sgpu-memory", 1000},
               {"mthreads.com/sgpu-core", 1}}),
       true, 1, 512000, 0, 1},
      {"all resources don't set to limit,count don't set to request",
       {{"requests", {{"mthreads.com/sgpu-memory", 1000}, {"mthreads.com/sgpu-core", 1}}}},
       false,
       0,
       0,
       0,
       0},
      // upstream: 0 MiB (100%), 0 cores when the webhook was skipped; ours books what the webhook
      // writes (16 cores, 96 units), see docs/migration.md
      {"all resources don't set to limit,cores and memory don't set to request",
       {{"requests", {{"mthreads.com/vgpu", 1}}}},
       true,
       1,
       49152,
       0,
       16},
      // constructed: a multi-GPU request splits memory and cores evenly (webhook's whole GPUs)
      {"two GPUs",
       Limits({{"mthreads.com/vgpu", 2},
               {"mthreads.com/sgpu-memory", 192},
               {"mthreads.com/sgpu-core", 32}}),
       true, 2, 49152, 0, 16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ByWord("Mthreads").ParseRequest(c.resources, {});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->has_value(), c.request);
    if (!c.request) continue;
    EXPECT_EQ((*r)->nums, c.nums);
    EXPECT_EQ((*r)->memreq_mib, c.memreq);
    EXPECT_EQ((*r)->mem_percentage, c.mem_percentage);
    EXPECT_EQ((*r)->coresreq, c.cores);
  }
}

// Upstream v2.11 (pkg/device/mthreads): memoryPerCard sizes (512 MiB units) give the legal slices
// (powers of two from 2 and the whole card, the union over the sizes) and the whole-GPU rewrite
// (the first size); a container may not mix mthreads.com/gpu (whole cards of the vendor plugin)
// with sGPU resources, in limits or requests.
TEST(MthreadsUpstream, MemoryPerCardAndNoMixingWholeCardsAndSlices) {
  struct Case {
    const char* config;  // the mthreads: section
    nlohmann::json resources;
    const char* denial;  // "" = admitted
    std::map<std::string, int64_t> added;
  } cases[] = {
      {"{}", Limits({{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 96}}), "", {}},
      {"{}",
       Limits({{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 128}}),
       "must be one of 2, 4, 8, 16, 32, 64, 96 (units",
       {}},
      {"{memoryPerCard: [160]}",
       Limits({{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 128}}),
       "",
       {}},
      {"{memoryPerCard: [160]}",
       Limits({{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 96}}),
       "must be one of 2, 4, 8, 16, 32, 64, 128, 160 (units",
       {}},
      {"{memoryPerCard: [96, 160]}",
       Limits({{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 96}}),
       "",
       {}},
      {"{memoryPerCard: 160}",
       Limits({{"mthreads.com/vgpu", 2}}),
       "",
       {{"mthreads.com/sgpu-core", 32}, {"mthreads.com/sgpu-memory", 320}}},
      {"{}",
       Limits({{"mthreads.com/gpu", 1}, {"mthreads.com/vgpu", 1}}),
       "cannot mix mthreads.com/gpu",
       {}},
      {"{}",
       {{"requests", {{"mthreads.com/gpu", 1}, {"mthreads.com/sgpu-core", 4}}}},
       "cannot mix mthreads.com/gpu",
       {}},
      {"{}", Limits({{"mthreads.com/gpu", 2}}), "", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.config) + " " + c.resources.dump());
    auto vendors = LoadVendors(std::string("mthreads: ") + c.config + "\n");
    ASSERT_TRUE(vendors.ok()) << vendors.status();
    const Vendor* v = nullptr;
    for (const auto& x : *vendors)
      if (x->common_word() == "Mthreads") v = x.get();
    ASSERT_NE(v, nullptr);
    auto m = v->Mutate(c.resources, {});
    ASSERT_TRUE(m.ok()) << m.status();
    if (*c.denial == '\0') {
      EXPECT_TRUE(m->denials.empty()) << m->denials.front();
    } else {
      ASSERT_EQ(m->denials.size(), 1u);
      EXPECT_NE(m->denials[0].find(c.denial), std::string::npos) << m->denials[0];
    }
    EXPECT_EQ(m->add_limits, c.added);
  }
  // A whole GPU of a 160-unit card books the card (80 GiB) where the node publishes no memory.
  auto vendors = LoadVendors("mthreads:\n  memoryPerCard: [160]\n");
  ASSERT_TRUE(vendors.ok());
  for (const auto& x : *vendors)
    if (x->common_word() == "Mthreads") {
      auto r = x->ParseRequest(Limits({{"mthreads.com/vgpu", 1}}), {});
      ASSERT_TRUE(r.ok() && *r);
      EXPECT_EQ((*r)->memreq_mib, 160 * 512);
    }
  for (const char* bad : {"mthreads:\n  memoryPerCard: [0]\n", "mthreads:\n  memoryPerCard: [x]\n",
                          "mthreads:\n  memoryPerCard: {a: 1}\n"}) {
    auto r = LoadVendors(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(std::string(r.status().message()).find("mthreads.memoryPerCard"), std::string::npos)
        << r.status();
  }
}

// Test_MutateAdmission: count > 1 or no memory -> whole GPUs; memory must be an sGPU slice.
TEST(MthreadsUpstream, Test_MutateAdmission) {
  struct Case {
    const char* name;
    std::map<std::string, int64_t> limits;
    std::map<std::string, int64_t> added;
    bool denied;
  } cases[] = {
      {"set to resources limit",
       {{"mthreads.com/vgpu", 2}, {"mthreads.com/sgpu-memory", 2}, {"mthreads.com/sgpu-core", 1}},
       {{"mthreads.com/sgpu-core", 32}, {"mthreads.com/sgpu-memory", 192}},
       false},
      {"don't set to count limit",
       {{"mthreads.com/sgpu-memory", 2}, {"mthreads.com/sgpu-core", 1}},
       {},
       false},
      {"don't set to memory limit",
       {{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-core", 1}},
       {{"mthreads.com/sgpu-core", 16}, {"mthreads.com/sgpu-memory", 96}},
       false},
      {"count less than one",
       {{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 2}, {"mthreads.com/sgpu-core", 1}},
       {},
       false},
      {"memory no exist legalMemoryslices",
       {{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 3}, {"mthreads.com/sgpu-core", 1}},
       {},
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto m = ByWord("Mthreads").Mutate(Limits(c.limits), {});
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->add_limits, c.added);
    EXPECT_EQ(!m->denials.empty(), c.denied);
  }
}

// Test_PatchAnnotations "exist device": the permanent record, gpu-index, predicate-node.
TEST(MthreadsUpstream, Test_PatchAnnotations) {
  core::PodAllocation a;
  a.node = "";
  a.containers = {{{"test1", "Mthreads", 1000, 1, 0}}};
  auto enc = ByWord("Mthreads").EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->at("hami.io/mthreads-vgpu-devices-allocated"), "test1,Mthreads,1000,1:;");
  EXPECT_EQ(enc->at("mthreads.com/gpu-index"), "0");
  EXPECT_EQ(enc->at("mthreads.com/predicate-node"), "");
  EXPECT_EQ(enc->at("mthreads.com/predicate-time"), "1700000000000000000");
  EXPECT_EQ(enc->count("hami.io/mthreads-vgpu-devices-to-allocate"), 0u);
  a.node = "node-a";
  a.containers = {{{"g-1", "Mthreads", 1000, 1, 1}},
                  {{"g-2", "Mthreads", 1000, 1, 2}, {"g-3", "Mthreads", 1000, 1, 3}}};
  enc = ByWord("Mthreads").EncodeDecision(a, 1700000000);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->at("mthreads.com/gpu-index"), "2,3");  // the last container with devices
  EXPECT_EQ(enc->at("mthreads.com/predicate-node"), "node-a");
}

// TestDevices_Fit "fit success" / "memory not enough", on devices decoded the way upstream does
// (cores are units: 16 a GPU).
TEST(MthreadsUpstream, TestDevices_Fit) {
  const Vendor& v = ByWord("Mthreads");
  const NodeView node =
      Capacity("n", {{"mthreads.com/sgpu-memory", 192}, {"mthreads.com/sgpu-core", 32}});
  auto devs = v.DecodeNode(node);
  ASSERT_TRUE(devs.ok());
  std::vector<core::DeviceUsage> usage(devs->size());
  auto req = v.ParseRequest(Limits({{"mthreads.com/vgpu", 1},
                                    {"mthreads.com/sgpu-memory", 8},
                                    {"mthreads.com/sgpu-core", 8}}),
                            {});
  ASSERT_TRUE(req.ok() && *req);
  FitResult fit = v.Fit(**req, *devs, usage, {}, node);
  ASSERT_TRUE(fit.ok()) << fit.Summary(2);
  EXPECT_EQ(fit.devices[0].usedcores, 8);  // units in the decision
  EXPECT_EQ(fit.devices[0].usedmem_mib, 4096);
  usage[0].usedcores = usage[1].usedcores = 10;  // 6 units free on each
  fit = v.Fit(**req, *devs, usage, {}, node);
  EXPECT_FALSE(fit.ok());
  EXPECT_EQ(fit.Summary(2), "2/2 CardInsufficientCore, 1/2 NodeInsufficientDevice");
  req = v.ParseRequest(Limits({{"mthreads.com/vgpu", 1}, {"mthreads.com/sgpu-memory", 200}}), {});
  ASSERT_TRUE(req.ok() && *req);
  usage.assign(devs->size(), {});
  fit = v.Fit(**req, *devs, usage, {}, node);
  EXPECT_FALSE(fit.ok());
  EXPECT_NE(fit.Summary(2).find("2/2 CardInsufficientMemory"), std::string::npos);
}

// customFilterRule (Fit's `allocated`: every container of a pod on one GPU), through the scheduler,
// which holds the pod's earlier containers: two GPUs, two containers of one sGPU each.
TEST(MthreadsUpstream, TestDevices_FitCustomFilterRule) {
  auto set = VendorSet::Load("mthreads: {}\n");
  ASSERT_TRUE(set.ok()) << set.status();
  const NodeView node =
      Capacity("n", {{"mthreads.com/sgpu-memory", 192}, {"mthreads.com/sgpu-core", 32}});
  auto sgpu = [](int cores) {
    return nlohmann::json{{"mthreads.com/vgpu", 1},
                          {"mthreads.com/sgpu-memory", 8},
                          {"mthreads.com/sgpu-core", cores}};
  };
  auto policy = [](const char* p) { return nlohmann::json{{"hami.io/gpu-scheduler-policy", p}}; };
  // GPU 0 with 10 of its 16 core units taken by another pod.
  const core::PodAllocation busy0 = {"", {{{"n-mthreads-0", "Mthreads", 0, 10, 0}}}};
  struct Case {
    const char* name;
    std::vector<nlohmann::json> containers;
    nlohmann::json annotations;
    std::vector<core::PodAllocation> busy;
    const char* want;  // the uuid both containers get, or the node's failure reason (substring)
  } cases[] = {
      // spread alone would put the second container on the other, idle GPU
      {"spread: both containers on the first one's GPU",
       {sgpu(4), sgpu(4)},
       policy("spread"),
       {},
       "n-mthreads-1"},
      {"binpack: both on the busy GPU",
       {sgpu(2), sgpu(2)},
       policy("binpack"),
       {busy0},
       "n-mthreads-0"},
      // the first container fills GPU 0; the idle GPU 1 would hold the second but the rule refuses
      // it (upstream decides container by container too)
      {"the second container does not fit the first one's GPU: refused",
       {sgpu(4), sgpu(8)},
       policy("binpack"),
       {busy0},
       "1/2 CardNotFoundCustomFilterRule"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto d = testing::ScheduleOnOneNode(**set, node, c.busy,
                                        testing::PodJson(c.containers, c.annotations));
    ASSERT_TRUE(d.ok()) << d.status();
    if (std::string(c.want).rfind("n-mthreads-", 0) == 0) {
      ASSERT_EQ(d->node, "n");
      ASSERT_EQ(d->allocation.containers.size(), 2u);
      for (const auto& ctr : d->allocation.containers) {
        ASSERT_EQ(ctr.size(), 1u);
        EXPECT_EQ(ctr[0].uuid, c.want);
      }
      continue;
    }
    EXPECT_EQ(d->node, "");
    ASSERT_EQ(d->failures.size(), 1u);
    EXPECT_NE(d->failures[0].reason.find(c.want), std::string::npos) << d->failures[0].reason;
  }
}

// ---- MetaX, Enflame (pkg/device/metax/device_test.go, pkg/device/enflame/gcu_test.go) ----

TEST(CapacityVendorsUpstream, Test_GetNodeDevices) {
  struct Case {
    const char* word;
    std::map<std::string, int64_t> cap;
    size_t devices;
    const char* id1;
    int count;
    int64_t devmem;
    const char* type;
  } cases[] = {
      {"Metax-GPU", {{"metax-tech.com/gpu", 2}}, 2, "n-metax-1", 1, 65536, "Metax-GPU"},
      {"GCU", {{"enflame.com/gcu", 2}}, 2, "n-GCU-1", 1, 100, "GCU"},
      {"kunlun", {{"kunlunxin.com/xpu", 8}}, 8, "n-kunlun-1", 1, 98304, "kunlun"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.word);
    auto devs = ByWord(c.word).DecodeNode(Capacity("n", c.cap));
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), c.devices);
    EXPECT_EQ((*devs)[1].uuid, c.id1);
    EXPECT_EQ((*devs)[1].count, c.count);
    EXPECT_EQ((*devs)[1].devmem_mib, c.devmem);
    EXPECT_EQ((*devs)[1].devcore, 100);
    EXPECT_EQ((*devs)[1].type, c.type);
  }
}

// ---- Kunlunxin (pkg/device/kunlun/topo_test.go, device_test.go, vdevice_test.go) ----

// graghSelect over 8 XPUs; `used` are the busy cards, `want` the chosen indices.
TEST(KunlunUpstream, TestGraghSelect) {
  const Vendor& v = ByWord("kunlun");
  const NodeView node = Capacity("n", {{"kunlunxin.com/xpu", 8}});
  auto devs = v.DecodeNode(node);
  ASSERT_TRUE(devs.ok());
  struct Case {
    const char* name;
    int nums;
    std::set<int> used;
    std::vector<int> want;  // empty: does not fit
  } cases[] = {
      {"8 on an empty node", 8, {}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"8 with one busy", 8, {3}, {}},
      {"4 on an empty node: the left half", 4, {}, {0, 1, 2, 3}},
      {"4 with the left half broken", 4, {0}, {4, 5, 6, 7}},
      {"4 across halves", 4, {2, 3, 6, 7}, {0, 1, 4, 5}},
      {"4 with 5 free: the whole free half", 4, {0, 2, 3}, {4, 5, 6, 7}},
      // free 1,2,3,5,6,7: 0-1-4-5 is not free; 2-3-6-7 leaves 1-5, a cross pair
      {"4 across halves, 6 free leaving a pair", 4, {0, 4}, {2, 3, 6, 7}},
      {"2: the half with exactly two free", 2, {0, 1}, {2, 3}},
      {"2: a cross pair when no half has two", 2, {0, 2, 3, 4, 6, 7}, {1, 5}},
      {"2: no cross pair", 2, {0, 1, 2, 5, 6, 7}, {}},
      {"1: inside the busier half", 1, {4, 5}, {6}},
      {"1: a half with one free first", 1, {0, 1, 2}, {3}},
      {"1: three free before four", 1, {7}, {4}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<core::DeviceUsage> usage(devs->size());
    for (int u : c.used) usage[u].used = 1;
    auto req = v.ParseRequest(Limits({{"kunlunxin.com/xpu", c.nums}}), {});
    ASSERT_TRUE(req.ok() && *req);
    const FitResult fit = v.Fit(**req, *devs, usage, {}, node);
    std::vector<int> got;
    for (const auto& d : fit.devices) got.push_back(d.index);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, c.want);
  }
}

TEST(KunlunUpstream, TestPatchAnnotations) {
  core::PodAllocation a;
  a.containers = {
      {{"n-kunlun-0", "kunlun", 98304, 100, 0}, {"n-kunlun-1", "kunlun", 98304, 100, 1}}};
  auto enc = ByWord("kunlun").EncodeDecision(a, 0);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->at("hami.io/kunlun-allocated"),
            "n-kunlun-0,kunlun,98304,100:n-kunlun-1,kunlun,98304,100:;");
  EXPECT_EQ(enc->at("BAIDU_COM_DEVICE_IDX"), "0,1");
}

TEST(KunlunUpstream, TestNodeNuma) {
  auto devs = ByWord("kunlun").DecodeNode(Capacity("n", {{"kunlunxin.com/xpu", 8}}));
  ASSERT_TRUE(devs.ok());
  for (const auto& d : *devs) EXPECT_EQ(d.numa, d.index >= 4 ? 1 : 0) << d.index;
}

// vdevice_test: the legacy baidu.com selectors also pick vXPUs.
TEST(KunlunUpstream, TestVxpuLegacySelectors) {
  const Vendor& v = ByWord("XPU");
  auto s = v.ParseSelectors({{"baidu.com/use-gpuuuid", "xpu-a,xpu-b"},
                             {"baidu.com/nouse-gpuuuid", "xpu-c"},
                             {"hami.io/use-xpu-uuid", "xpu-a"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->use_uuids, (std::vector<std::string>{"xpu-a", "xpu-b"}));
  EXPECT_EQ(s->nouse_uuids, (std::vector<std::string>{"xpu-c"}));
}

// ---- Ascend, Hygon (pkg/device/ascend/device_test.go, pkg/device/hygon/device_test.go) ----

// Memory above the largest template and up to the card takes the whole card; beyond the card's
// memoryCapacity the webhook refuses it (Test_MutateAdmission "resourcememoryname is invalid").
TEST(AscendUpstream, TestFitMemoryAboveTheLargestTemplate) {
  const Vendor& v = ByWord("Ascend910B3");
  core::DeviceInfo d;
  d.uuid = "npu-0";
  d.vendor = d.type = "Ascend910B3";
  d.count = 4;
  d.devmem_mib = 65536;
  d.devcore = 100;
  d.health = true;
  struct Case {
    int64_t mem;
    bool fits;
    int64_t usedmem;
    int cores;
  } cases[] = {{16000, true, 16384, 25},
               {40000, true, 65536, 100},
               {65536, true, 65536, 100},
               {70000, false, 0, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mem);
    const auto res =
        Limits({{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", c.mem}});
    auto m = v.Mutate(res, {});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->denials.empty(), c.fits) << (m->denials.empty() ? "" : m->denials.front());
    auto req = v.ParseRequest(res, {});
    ASSERT_TRUE(req.ok() && *req);
    auto sel = v.ParseSelectors({});
    ASSERT_TRUE(sel.ok());
    EXPECT_EQ(!v.CheckDevice(**req, d, {}, *sel).has_value(), c.fits);
    if (!c.fits) continue;
    const core::ContainerDevice g = v.Grant(**req, d);
    EXPECT_EQ(g.usedmem_mib, c.usedmem);
    EXPECT_EQ(g.usedcores, c.cores);
  }
}

// ---- AMD (pkg/device/amd/device_test.go, upstream's v2.11 line: #3179 gpumem-percentage,
// core percentage of the card's CUs) ----

// Upstream's Fit rows: devcore is the card's CU count and amd.com/gpucores a percentage of it (50 %
// of 100 -> 50; 5 % of 64 -> 3, at least one; omitted -> all the CUs); amd.com/gpumem-percentage a
// share of the card's memory; out-of-range percentages are refused, not clamped. cuPerWGP rounding
// (#3174) is not modelled (rows "rdna odd cores" and "one-wgp apu" would give 4 and 2).
// Upstream v2.11 amd.com/numa-bind (#3186; its e2e "keeps numa-bind GPUs on one NUMA node"): with
// the annotation true (Go's ParseBool) every GPU of a multi-GPU AMD request sits on one NUMA node;
// without it, or with a value ParseBool refuses, any free GPUs. Through the scheduler.
TEST(AmdUpstream, NumaBindKeepsTheGpusOnOneNumaNode) {
  auto set = VendorSet::Load("amd: {}\n");
  ASSERT_TRUE(set.ok()) << set.status();
  // Four GPUs: 2 on NUMA 1, the others on NUMA 0; GPU 1 is full. Unbound, the picker takes 2 and 3
  // (across NUMA nodes); bound, NUMA 0's free pair 0 and 3.
  NodeView node;
  node.name = "n";
  std::string reg = "[";
  for (int i = 0; i < 4; ++i)
    reg += StrCat(i ? "," : "", R"({"id":"amd-)", i, R"(","index":)", i,
                  R"(,"count":1,"devmem":16000,"devcore":64,"type":"AMDGPU","numa":)",
                  i == 2 ? 1 : 0, R"(,"health":true})");
  node.annotations["hami.io/node-amd-register"] = reg + "]";
  const core::PodAllocation busy1 = {"", {{{"amd-1", "AMD", 16000, 64, 1}}}};
  struct Case {
    const char* name;
    const char* bind;  // amd.com/numa-bind; nullptr: absent
    std::set<std::string> want;
  } cases[] = {
      {"numa-bind true: both on NUMA 0", "true", {"amd-0", "amd-3"}},
      {"numa-bind 1 (ParseBool): both on NUMA 0", "1", {"amd-0", "amd-3"}},
      {"no annotation: across NUMA nodes", nullptr, {"amd-2", "amd-3"}},
      {"numa-bind false", "false", {"amd-2", "amd-3"}},
      {"numa-bind yes (not a Go bool): off", "yes", {"amd-2", "amd-3"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    nlohmann::json annotations = nlohmann::json::object();
    if (c.bind) annotations["amd.com/numa-bind"] = c.bind;
    auto d = testing::ScheduleOnOneNode(
        **set, node, {busy1},
        testing::PodJson({{{"amd.com/gpu", 2}, {"amd.com/gpumem", 1000}}}, annotations));
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->node, "n");
    ASSERT_EQ(d->allocation.containers.size(), 1u);
    std::set<std::string> got;
    for (const auto& g : d->allocation.containers[0]) got.insert(g.uuid);
    EXPECT_EQ(got, c.want);
  }
}

// One AMD container's limits on `d` with `used_cores` CUs booked by one task: the grant, or
// nullopt when CheckDevice refuses it.
std::optional<core::ContainerDevice> AmdGrant(const nlohmann::json& limits,
                                              const core::DeviceInfo& d, int used_cores) {
  const Vendor& v = ByWord("AMD");
  auto req = v.ParseRequest(limits, {});
  auto sel = v.ParseSelectors({});
  EXPECT_TRUE(req.ok() && *req && sel.ok()) << req.status();
  if (!req.ok() || !*req || !sel.ok()) return std::nullopt;
  core::DeviceUsage u;
  u.usedcores = used_cores;
  u.used = used_cores > 0 ? 1 : 0;
  if (v.CheckDevice(**req, d, u, *sel)) return std::nullopt;
  return v.Grant(**req, d);
}

// Upstream v2.11 TestFit "rounds cores up to whole WGPs on RDNA": the compute units a request
// books are rounded up to whole WGPs by the registration's customInfo.cuPerWGP (never above the
// card), as the AMD device plugin masks them; no cuPerWGP (CDNA), a fractional or non-numeric one:
// single CUs.
TEST(AmdUpstream, TestFitRoundsCoresUpToWholeWgps) {
  const Vendor& v = ByWord("AMD");
  struct Case {
    const char* name;
    int devcore, used_cores, cores_percent;
    const char* custom_info;  // the registration entry's customInfo member ("" = none)
    int want_cores;           // 0: does not fit
  } cases[] = {
      {"rdna odd cores", 64, 0, 5, R"("customInfo":{"cuPerWGP":2})", 4},
      {"cdna keeps single cus", 64, 0, 5, R"("customInfo":{})", 3},
      {"one-wgp apu", 2, 0, 50, R"("customInfo":{"cuPerWGP":2})", 2},
      {"huge wgp size does not overflow", 4, 0, 75, R"("customInfo":{"cuPerWGP":2147483647})", 4},
      {"fractional wgp size is ignored", 64, 0, 5, R"("customInfo":{"cuPerWGP":2.5})", 3},
      {"apu wgp already taken", 2, 2, 50, R"("customInfo":{"cuPerWGP":2})", 0},
      // constructed: the AMD plugin's own key spelling (Go matches the field case-insensitively)
      {"custominfo as the plugin writes it", 64, 0, 5, R"("custominfo":{"cuPerWGP":2})", 4},
      {"a whole-WGP request stays", 64, 0, 50, R"("customInfo":{"cuPerWGP":2})", 32},
      {"cuPerWGP as a string is ignored", 64, 0, 5, R"("customInfo":{"cuPerWGP":"2"})", 3},
      {"cuPerWGP 1", 64, 0, 5, R"("customInfo":{"cuPerWGP":1})", 3},
      {"cuPerWGP beyond int32 is ignored", 4, 0, 75, R"("customInfo":{"cuPerWGP":4294967296})", 3},
      {"no customInfo", 64, 0, 5, "", 3},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // A UUID of its own per case: the vendor keeps cuPerWGP per device across decodes.
    const std::string id = StrCat("wgp-case-", n++);
    NodeView node;
    node.annotations["hami.io/node-amd-register"] =
        StrCat(R"([{"id":")", id, R"(","index":0,"count":10,"devmem":1000,"devcore":)", c.devcore,
               R"(,"type":"AMDGPU","health":true)", *c.custom_info ? "," : "", c.custom_info, "}]");
    auto devs = v.DecodeNode(node);
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), 1u);
    const core::DeviceInfo& d = devs->front();
    const auto g = AmdGrant(
        Limits(
            {{"amd.com/gpu", 1}, {"amd.com/gpumem", 100}, {"amd.com/gpucores", c.cores_percent}}),
        d, c.used_cores);
    EXPECT_EQ(g ? g->usedcores : 0, c.want_cores);
  }
  // The device registers again without cuPerWGP: single CUs from then on.
  NodeView node;
  node.annotations["hami.io/node-amd-register"] =
      R"([{"id":"wgp-case-0","index":0,"count":10,"devmem":1000,"devcore":64,"type":"AMDGPU",)"
      R"("health":true}])";
  auto devs = v.DecodeNode(node);
  ASSERT_TRUE(devs.ok() && devs->size() == 1) << devs.status();
  auto req = v.ParseRequest(
      Limits({{"amd.com/gpu", 1}, {"amd.com/gpumem", 100}, {"amd.com/gpucores", 5}}), {});
  ASSERT_TRUE(req.ok() && *req);
  EXPECT_EQ(v.Grant(**req, devs->front()).usedcores, 3);
}

TEST(AmdUpstream, TestFitCoresArePercentOfTheCus) {
  const Vendor& v = ByWord("AMD");
  struct Case {
    const char* name;
    std::map<std::string, int64_t> limits;
    int devcore;
    int used_cores;  // already booked on the card
    bool fits;
    int64_t usedmem;
    int cores;
  } cases[] = {
      {"50% of 100 CUs",
       {{"amd.com/gpu", 1}, {"amd.com/gpumem", 500}, {"amd.com/gpucores", 50}},
       100,
       0,
       true,
       500,
       50},
      {"cdna keeps single cus: 5% of 64",
       {{"amd.com/gpu", 1}, {"amd.com/gpumem", 100}, {"amd.com/gpucores", 5}},
       64,
       0,
       true,
       100,
       3},
      {"1% of 2 CUs is one CU",
       {{"amd.com/gpu", 1}, {"amd.com/gpumem", 100}, {"amd.com/gpucores", 1}},
       2,
       0,
       true,
       100,
       1},
      {"no core limit: all the CUs",
       {{"amd.com/gpu", 1}, {"amd.com/gpumem", 100}},
       64,
       0,
       true,
       100,
       64},
      {"no core limit on a card with CUs in use",
       {{"amd.com/gpu", 1}, {"amd.com/gpumem", 100}},
       64,
       1,
       false,
       0,
       0},
      {"memory percentage",
       {{"amd.com/gpu", 1}, {"amd.com/gpumem-percentage", 50}, {"amd.com/gpucores", 25}},
       64,
       0,
       true,
       500,
       16},
      {"memory percentage alone",
       {{"amd.com/gpumem-percentage", 1}, {"amd.com/gpucores", 10}},
       100,
       0,
       true,
       10,
       10},
  };
  core::DeviceInfo d;
  d.uuid = "dev-0";
  d.vendor = "AMD";
  d.type = "AMDGPU";
  d.count = 10;
  d.devmem_mib = 1000;
  d.health = true;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    d.devcore = c.devcore;
    const auto res = Limits(c.limits);
    auto m = v.Mutate(res, {});
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(m->denials.empty()) << m->denials.front();
    const auto g = AmdGrant(res, d, c.used_cores);
    EXPECT_EQ(g.has_value(), c.fits);
    if (!g) continue;
    EXPECT_EQ(g->usedmem_mib, c.usedmem);
    EXPECT_EQ(g->usedcores, c.cores);
  }
  // Upstream's MutateAdmission / GenerateResourceRequests refusals.
  for (const auto& [limits, part] :
       std::vector<std::pair<std::map<std::string, int64_t>, std::string>>{
           {{{"amd.com/gpu", 1}, {"amd.com/gpumem-percentage", 101}}, "between 0 and 100"},
           {{{"amd.com/gpu", 1}, {"amd.com/gpucores", 101}}, "between 1 and 100"},
           {{{"amd.com/gpu", 1}, {"amd.com/gpucores", 0}}, "between 1 and 100"}}) {
    const auto res = Limits(limits);
    auto m = v.Mutate(res, {});
    ASSERT_TRUE(m.ok());
    ASSERT_FALSE(m->denials.empty()) << res.dump();
    EXPECT_NE(m->denials.back().find(part), std::string::npos) << m->denials.back();
    EXPECT_FALSE(v.ParseRequest(res, {}).ok()) << res.dump();
  }
  // An upstream v2.11 amd: section loads (resource names read; runtimeClassName and the priority
  // resource accepted).
  auto vendors = LoadVendors(
      "amd:\n  resourceCountName: amd.com/gpu\n  resourceMemoryName: amd.com/gpumem\n"
      "  resourceMemoryPercentageName: amd.com/gpumem-pct\n  resourceCoreName: amd.com/gpucores\n"
      "  runtimeClassName: amd\n  resourcePriorityName: amd.com/priority\n");
  ASSERT_TRUE(vendors.ok()) << vendors.status();
  bool found = false;
  for (const auto& x : *vendors)
    if (x->common_word() == "AMD") {
      found = true;
      EXPECT_EQ(x->resources().memory_percentage, "amd.com/gpumem-pct");
    }
  EXPECT_TRUE(found);
}

TEST(MemoryFactorUpstream, HygonAndAscendScaleTheMemoryResource) {
  auto vendors = LoadVendors(
      "hygon:\n  memoryFactor: 1024\nvnpus:\n  - chipName: 910B3\n    commonWord: Ascend910B3\n"
      "    memoryFactor: 1024\n    memoryCapacity: 65536\n    aiCore: 20\n    templates:\n"
      "      - name: vir05_1c_16g\n        memory: 16384\n        aiCore: 5\n");
  ASSERT_TRUE(vendors.ok()) << vendors.status();
  int seen = 0;
  for (const auto& v : *vendors) {
    if (v->common_word() == "DCU") {
      auto r = v->ParseRequest(Limits({{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 2}}), {});
      ASSERT_TRUE(r.ok() && *r);
      EXPECT_EQ((*r)->memreq_mib, 2048);
      ++seen;
    }
    if (v->common_word() == "Ascend910B3") {
      auto r = v->ParseRequest(
          Limits({{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 16}}), {});
      ASSERT_TRUE(r.ok() && *r);
      EXPECT_EQ((*r)->memreq_mib, 16384);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 2);
  EXPECT_FALSE(LoadVendors("hygon:\n  memoryFactor: 0\n").ok());
}

// Upstream's v2.11 line renamed Hygon DCU to HCU (PR #2969); both generations are served. Each row:
// a `hygon:` section, then the Type that a resource name, a node registration and a decision key
// belong to.
TEST(HygonUpstream, HcuRenameKeepsDcuWorking) {
  struct Case {
    const char* section;  // the hygon: section
    const char* count;    // a count resource asked for
    const char* type;     // the Type that parses it ("" = none)
  } cases[] = {
      {"hygon: {}\n", "hygon.com/hcunum", "HCU"},
      {"hygon: {}\n", "hygon.com/dcunum", "DCU"},
      // a v2.11 file names its own (hcu) defaults: DCU keeps its names
      {"hygon:\n  resourceCountName: hygon.com/hcunum\n  resourceMemoryName: hygon.com/hcumem\n"
       "  resourceCoreName: hygon.com/hcucores\n",
       "hygon.com/dcunum", "DCU"},
      // an older file renaming DCU's resources keeps HCU's defaults
      {"hygon:\n  resourceCountName: example.com/dcu\n", "example.com/dcu", "DCU"},
      {"hygon:\n  resourceCountName: example.com/dcu\n", "hygon.com/hcunum", "HCU"},
      {"hygon:\n  resourceCountName: example.com/dcu\n", "hygon.com/dcunum", ""},
      {"hygon:\n  resourceCountName: hygon.com/hcunum\n  memoryFactor: 4\n", "hygon.com/hcunum",
       "HCU"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(StrCat(c.section, " ", c.count));
    auto vendors = LoadVendors(c.section);
    ASSERT_TRUE(vendors.ok()) << vendors.status();
    std::string parsed_by;
    for (const auto& v : *vendors) {
      auto r = v->ParseRequest(Limits({{c.count, 1}}), {});
      ASSERT_TRUE(r.ok()) << r.status();
      if (*r) parsed_by += v->common_word();
    }
    EXPECT_EQ(parsed_by, c.type);
  }
  // The HCU plugin's node registration, handshake and decision keys (its chart's own names).
  const Vendor& hcu = ByWord("HCU");
  NodeView node;
  node.annotations["hami.io/node-hcu-register"] =
      "HCU-T6T8290019020401,4,65520,100,HCU-K100_AI,0,true,0,hami:";
  auto devs = hcu.DecodeNode(node);
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 1u);
  EXPECT_EQ((*devs)[0].uuid, "HCU-T6T8290019020401");
  EXPECT_EQ((*devs)[0].vendor, "HCU");
  EXPECT_EQ((*devs)[0].mode, core::kModeHamiCore);  // the plugin's mode word "hami"
  EXPECT_EQ(hcu.keys().handshake, "hami.io/node-handshake-hcu");
  EXPECT_EQ(hcu.keys().allocated, "hami.io/hcu-devices-allocated");
  EXPECT_EQ(hcu.keys().to_allocate, "hami.io/hcu-devices-to-allocate");
  EXPECT_EQ(hcu.keys().use_type, "hygon.com/use-hcutype");
  EXPECT_TRUE(ByWord("DCU").DecodeNode(node)->empty());  // not a DCU node
  // Cores beyond a whole HCU are refused at admission, as for DCU.
  auto m = hcu.Mutate(Limits({{"hygon.com/hcunum", 1}, {"hygon.com/hcucores", 150}}), {});
  ASSERT_TRUE(m.ok());
  ASSERT_FALSE(m->denials.empty());
  EXPECT_NE(m->denials.front().find("more than a whole HCU"), std::string::npos);
}

// ---- Ascend 910C module pairing (pkg/device/ascend/device_910c_pairing_test.go) ----
// With `superPod: true` a 910C module is two dies (indices 2k, 2k+1) and a request for several
// NPUs takes whole modules. NetworkID does not change the rule, so the rows with and without it
// are the same. Without superPod (upstream's split mode, device_910c_superpod_test.go) the dies
// are taken one by one: an odd count fits and one NPU is one die.
TEST(Ascend910CUpstream, Pairing) {
  const Vendor* npu[2] = {nullptr, nullptr};  // [super_pod]
  std::vector<std::unique_ptr<Vendor>> loaded[2];
  for (int super_pod : {0, 1}) {
    auto vendors = LoadVendors(
        StrCat("vnpus:\n  - chipName: 910C\n    commonWord: Ascend910C\n    memoryCapacity: 32000\n"
               "    aiCore: 24\n    superPod: ",
               super_pod ? "true" : "false", "\n"));
    ASSERT_TRUE(vendors.ok()) << vendors.status();
    loaded[super_pod] = std::move(*vendors);
    for (const auto& x : loaded[super_pod])
      if (x->common_word() == "Ascend910C") npu[super_pod] = x.get();
    ASSERT_NE(npu[super_pod], nullptr);
    EXPECT_EQ(npu[super_pod]->rules().group_rules, super_pod == 1);
  }
  struct Case {
    const char* name;
    std::vector<int> free_indices;
    int nums;
    std::vector<int> want;  // chosen indices; empty = does not fit
    bool super_pod = true;
  } cases[] = {
      {"TestAscend910C_FitPartialAllocationBug: one whole module and three halves, 4 asked",
       {0, 1, 2, 4, 6},
       4,
       {}},
      {"TestAscend910C_FitExactCountBypassBug: two halves of two modules", {0, 2}, 2, {}},
      {"TestAscend910C_FitFullPairSucceeds", {0, 1}, 2, {0, 1}},
      {"TestAscend910C_FitWithoutNetworkID_ValidatesPairing/halves", {0, 2}, 2, {}},
      {"TestAscend910C_FitWithoutNetworkID_ValidatesPairing/pair", {0, 1}, 2, {0, 1}},
      {"TestComputeBestCombination910C_NoFullPairsReturnsEmpty", {0, 2, 4, 6}, 4, {}},
      {"whole modules are taken, halves skipped", {0, 2, 3, 5, 6, 7}, 4, {2, 3, 6, 7}},
      {"an odd count above one cannot be whole modules", {0, 1, 2, 3}, 3, {}},
      // Test_MutateAdmission910C "request 1 → auto adjust to 2": one NPU is a whole module.
      {"one NPU takes a whole module", {0, 2, 3}, 1, {2, 3}},
      // split mode (no superPod): any dies, in the generic picker's order (upstream's test
      // asserts the count, 3)
      {"TestAscend910C_FitSplitModeOddRequestSchedulable",
       {0, 1, 2, 3, 4, 5, 6, 7},
       3,
       {0, 1, 2},
       false},
      {"split: halves of two modules", {0, 2}, 2, {0, 2}, false},
      {"split: one NPU is one die", {0, 2, 3}, 1, {0}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<core::DeviceInfo> devs;
    for (int i : c.free_indices) {
      core::DeviceInfo d;
      d.uuid = "dev-" + std::to_string(i);
      d.index = i;
      d.vendor = d.type = "Ascend910C";
      d.count = 1;
      d.devmem_mib = 32000;
      d.devcore = 100;
      d.health = true;
      devs.push_back(d);
    }
    const Vendor& v = *npu[c.super_pod ? 1 : 0];
    auto req = v.ParseRequest(Limits({{"huawei.com/Ascend910C", c.nums}}), {});
    ASSERT_TRUE(req.ok() && *req) << req.status();
    auto sel = v.ParseSelectors({});
    ASSERT_TRUE(sel.ok());
    const std::vector<core::DeviceUsage> usage(devs.size());
    const FitResult fit = v.Fit(**req, devs, usage, *sel, {});
    std::vector<int> got;
    for (const auto& g : fit.devices)
      for (const auto& d : devs)
        if (d.uuid == g.uuid) got.push_back(d.index);
    EXPECT_EQ(got, c.want) << fit.Summary(static_cast<int>(devs.size()));
    if (c.want.empty()) {
      ASSERT_FALSE(fit.refusals.empty());
      EXPECT_EQ(fit.refusals.back().reason, scheduler::Reason::kNumaNotFit);
    }
  }
}

}  // namespace
}  // namespace hami::vendors
