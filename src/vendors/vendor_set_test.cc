// VendorSet: the enabled vendors as one path for pods, nodes, decisions and the scheduler's rules.
#include "vendors/vendor_set.h"

#include <gtest/gtest.h>

#include <set>

#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "vendors/testing/mixed_config.h"

namespace hami::vendors {
namespace {

using Json = nlohmann::json;

const std::string kConfig = std::string(testing::kMixedConfig) + "kunlun: {}\n";

std::unique_ptr<VendorSet> Load(const std::string& yaml = kConfig) {
  auto s = VendorSet::Load(yaml);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

Json Pod(Json containers, Json annotations = Json::object()) {
  return Json{{"metadata",
               {{"name", "p"}, {"namespace", "ns"}, {"uid", "u1"}, {"annotations", annotations}}},
              {"spec", {{"containers", containers}}}};
}
Json Ctr(const std::string& name, Json limits) {
  return Json{{"name", name}, {"resources", {{"limits", limits}}}};
}

TEST(VendorSetTest, ParsePodTable) {
  auto set = Load();
  struct Case {
    const char* name;
    Json pod;
    // Per container: (vendor, nums, memreq, coresreq) of each request, in order.
    std::vector<std::vector<std::tuple<std::string, int, int64_t, int>>> want;
    std::string error;  // substring; empty = ok
  };
  const Case cases[] = {
      {"nvidia only",
       Pod(Json::array({Ctr("a", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}})})),
       {{{"NVIDIA", 1, 3000, 0}}},
       ""},
      {"dcu",
       Pod(Json::array({Ctr(
           "a",
           {{"hygon.com/dcunum", 2}, {"hygon.com/dcumem", 2000}, {"hygon.com/dcucores", 20}})})),
       {{{"DCU", 2, 2000, 20}}},
       ""},
      {"mixed containers",
       Pod(Json::array(
           {Ctr("a", {{"nvidia.com/gpu", 1}}),
            Ctr("b", {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 10000}}),
            Ctr("c", {{"cpu", 1}})})),
       {{{"NVIDIA", 1, 0, 100}}, {{"Ascend910B3", 1, 16384, 0}}, {}},  // its template
       ""},
      {"two vendors in one container",
       Pod(Json::array({Ctr("a", {{"nvidia.com/gpu", 1},
                                  {"cambricon.com/vmlu", 1},
                                  {"cambricon.com/mlu.smlu.vmemory", 16}})})),  // 256 MiB units
       {{{"NVIDIA", 1, 0, 100}, {"MLU", 1, 4096, 100}}},
       ""},
      {"ascend cores refused for template vNPU",
       Pod(Json::array(
           {Ctr("train", {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-core", 5}})})),
       {},
       "spec.containers[0] \"train\": huawei.com/Ascend910B3-core"},
      {"bad quantity names the container",
       Pod(Json::array({Ctr("x", {{"hygon.com/dcunum", "1.5"}})})),
       {},
       "spec.containers[0] \"x\": "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = set->ParsePod(c.pod);
    if (!c.error.empty()) {
      ASSERT_FALSE(p.ok());
      EXPECT_NE(std::string(p.status().message()).find(c.error), std::string::npos) << p.status();
      continue;
    }
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->containers.size(), c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) {
      ASSERT_EQ(p->containers[i].devices.size(), c.want[i].size()) << "container " << i;
      for (size_t k = 0; k < c.want[i].size(); ++k) {
        const auto& d = p->containers[i].devices[k];
        const auto& [vendor, nums, mem, cores] = c.want[i][k];
        EXPECT_EQ(d.vendor, vendor);
        EXPECT_EQ(d.nums, nums);
        EXPECT_EQ(d.memreq_mib, mem);
        EXPECT_EQ(d.coresreq, cores);
      }
    }
  }
}

TEST(VendorSetTest, DisabledVendorsAreNotParsedOrCovered) {
  auto set = Load("hygon: {enabled: false}\n");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->vendors().size(), 1u);
  auto p = set->ParsePod(Pod(Json::array({Ctr("a", {{"hygon.com/dcunum", 1}})})));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->HasDevices());
  EXPECT_FALSE(set->Covers("DCU"));
  EXPECT_FALSE(set->Covers("NVIDIA"));
  auto full = Load();
  EXPECT_TRUE(full->Covers("DCU"));
  EXPECT_FALSE(full->Covers("NVIDIA")) << "NVIDIA keeps the framework's generic checks";
}

TEST(VendorSetTest, DecisionRoundTripAcrossVendors) {
  auto set = Load();
  core::ContainerDevice gpu{"GPU-a", "NVIDIA", 3000, 30, 0};
  core::ContainerDevice npu{"910B3-0", "Ascend910B3", 16384, 25, 0};
  core::ContainerDevice dcu{"DCU-0", "DCU", 2000, 20, 1};
  core::PodAllocation a;
  a.node = "n";
  a.containers = {{gpu}, {npu, dcu}, {}};
  auto ann = set->EncodeDecision(a, 1700000000);
  ASSERT_TRUE(ann.ok()) << ann.status();
  const std::pair<const char*, const char*> want[] = {
      {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,3000,30:;;;"},
      {"hami.io/vgpu-devices-to-allocate", "GPU-a,NVIDIA,3000,30:;;;"},
      {"hami.io/Ascend910B3-devices-allocated", ";910B3-0,Ascend910B3,16384,25:;;"},
      {"hami.io/dcu-devices-allocated", ";DCU-0,DCU,2000,20:;;"},
  };
  for (const auto& [k, v] : want) {
    ASSERT_TRUE(ann->count(k)) << k;
    EXPECT_EQ(ann->at(k), v) << k;
  }
  EXPECT_EQ(ann->count("hami.io/cambricon-mlu-devices-allocated"), 0u)
      << "no MLU device, no MLU key";
  bool any = false;
  auto back = set->DecodeDecision(*ann, &any);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(any);
  ASSERT_GE(back->containers.size(), 2u);
  EXPECT_EQ(back->containers[0].size(), 1u);
  EXPECT_EQ(back->containers[1].size(), 2u);
  std::map<std::string, int64_t> mem;
  for (const auto& c : back->containers)
    for (const auto& d : c) mem[d.uuid] = d.usedmem_mib;
  EXPECT_EQ(mem,
            (std::map<std::string, int64_t>{{"GPU-a", 3000}, {"910B3-0", 16384}, {"DCU-0", 2000}}));
  EXPECT_NE(set->DecisionFingerprint(*ann), "");
  EXPECT_EQ(set->DecisionFingerprint({{"x", "y"}}), "");

  core::PodAllocation foreign;
  foreign.containers = {{core::ContainerDevice{"X-0", "Unknown", 1, 1, 0}}};
  EXPECT_FALSE(set->EncodeDecision(foreign, 0).ok());
  bool none = true;
  auto empty = set->DecodeDecision({}, &none);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(none);
}

TEST(VendorSetTest, CheckAndGrantFollowTheVendor) {
  auto set = Load();
  core::DeviceInfo npu;
  npu.uuid = "910B3-0";
  npu.vendor = "Ascend910B3";
  npu.type = "Ascend910B3";
  npu.count = 4;
  npu.devmem_mib = 65536;
  npu.devcore = 100;
  core::DeviceInfo xpu = npu;
  xpu.uuid = "XPU-0";
  xpu.vendor = set->Find("kunlun")->common_word();
  core::DeviceRequest ascend{"Ascend910B3", 1, 10000, 0, 0, -1};
  core::DeviceRequest ascend2{"Ascend910B3", 2, 10000, 0, 0, -1};
  core::DeviceRequest big{"Ascend910B3", 1, 70000, 0, 0, -1};  // above the card
  core::DeviceRequest kunlun3{xpu.vendor, 3, 0, 100, 100, -1};
  struct Case {
    const char* name;
    core::DeviceRequest req;
    core::DeviceInfo dev;
    core::DeviceUsage usage;
    scheduler::Reason reason;  // kCount = fits
    bool never;
  };
  const Case cases[] = {
      {"template fits", ascend, npu, {}, scheduler::Reason::kCount, false},
      {"busy memory",
       ascend,
       npu,
       {1, 60000, 25},
       scheduler::Reason::kCardInsufficientMemory,
       false},
      {"no template or card holds 70000",
       big,
       npu,
       {},
       scheduler::Reason::kCardInsufficientMemory,
       true},
      {"partial vNPU on two devices",
       ascend2,
       npu,
       {},
       scheduler::Reason::kNodeInsufficientDevice,
       true},
      {"kunlun count 3 not allowed",
       kunlun3,
       xpu,
       {},
       scheduler::Reason::kNodeInsufficientDevice,
       true},
  };
  core::PodRequest pod;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto v = set->Check(*set->Prepare(pod), c.req, c.dev, c.usage);
    EXPECT_EQ(v.reason, c.reason) << scheduler::ReasonName(v.reason);
    if (c.reason != scheduler::Reason::kCount) {
      EXPECT_EQ(v.never, c.never);
    }
  }
  const auto t = set->Grant(ascend, npu);
  EXPECT_EQ(t.mem_mib, 16384) << "rounded up to the smallest template";
  EXPECT_EQ(t.cores, 25);
}

TEST(VendorSetTest, NodeDecodeAndHandshakePerVendor) {
  auto set = Load();
  constexpr int64_t kNow = 1700000000;  // 2023-11-14 22:13:20 UTC
  struct Case {
    const char* name;
    NodeView node;
    size_t devices;
    std::map<std::string, std::string> updates;
    bool error;
  };
  const std::string dcu = "DCU-0a1b,4,16368,100,DCU-Z100L,0,true,0,:";
  const std::string kOneGpu = "GPU-0a1b,10,40960,100,NVIDIA-A100,0,true,0,:";
  const Case cases[] = {
      {"dcu without handshake: ask",
       {{{"hami.io/node-dcu-register", dcu}}, {}},
       1,
       {{"hami.io/node-handshake-dcu", "Requesting_2023-11-14 22:13:20"}},
       false},
      {"dcu requested recently: healthy",
       {{{"hami.io/node-dcu-register", dcu},
         {"hami.io/node-handshake-dcu", "Requesting_2023-11-14 22:13:00"}},
        {}},
       1,
       {},
       false},
      {"dcu requested long ago, nothing allocatable: dropped and cleaned",
       {{{"hami.io/node-dcu-register", dcu},
         {"hami.io/node-handshake-dcu", "Requesting_2023-11-14 22:00:00"}},
        {}},
       0,
       {{"hami.io/node-handshake-dcu", "Deleted_2023-11-14 22:13:20"}},  // upstream's NodeCleanUp
       true},
      {"dcu requested long ago but allocatable: healthy",
       {{{"hami.io/node-dcu-register", dcu},
         {"hami.io/node-handshake-dcu", "Requesting_2023-11-14 22:00:00"}},
        {{"hygon.com/dcunum", 4}}},
       1,
       {},
       false},
      {"mlu from capacity: no handshake key",
       {{}, {{"cambricon.com/mlu.smlu.vcore", 200}}},
       2,
       {},
       false},
      {"broken registration",
       {{{"hami.io/node-dcu-register", "x,y:"}}, {}},
       0,
       {{"hami.io/node-handshake-dcu", "Requesting_2023-11-14 22:13:20"}},
       true},
      // NVIDIA is a vendor like the others: same registration and handshake rule.
      {"nvidia registers no devices: its handshake is requested",
       {{{"hami.io/node-nvidia-register", "[]"}}, {}},
       0,
       {{"hami.io/node-handshake", "Requesting_2023-11-14 22:13:20"}},
       false},
      {"nvidia requested long ago, nothing allocatable: dropped and cleaned",
       {{{"hami.io/node-nvidia-register", kOneGpu},
         {"hami.io/node-handshake", "Requesting_2023-11-14 22:00:00"}},
        {}},
       0,
       {{"hami.io/node-handshake", "Deleted_2023-11-14 22:13:20"}},
       true},
      {"nvidia reported: healthy, asked again",
       {{{"hami.io/node-nvidia-register", kOneGpu},
         {"hami.io/node-handshake", "Reported_2023-11-14 22:13:00"}},
        {}},
       1,
       {{"hami.io/node-handshake", "Requesting_2023-11-14 22:13:20"}},
       false},
      {"nvidia and dcu on one node: NVIDIA's devices first",
       {{{"hami.io/node-nvidia-register", kOneGpu},
         {"hami.io/node-handshake", "Reported_2023-11-14 22:13:00"},
         {"hami.io/node-dcu-register", dcu},
         {"hami.io/node-handshake-dcu", "Reported_2023-11-14 22:13:00"}},
        {}},
       2,
       {{"hami.io/node-handshake", "Requesting_2023-11-14 22:13:20"},
        {"hami.io/node-handshake-dcu", "Requesting_2023-11-14 22:13:20"}},
       false},
      // Issue 31: the cleanup mark is not an answer. The node stays out, and no new request is
      // written, until the device plugin reports again (Test_CheckHealth "Deleted state").
      {"nvidia cleaned up, plugin silent: dropped, nothing written",
       {{{"hami.io/node-nvidia-register", kOneGpu},
         {"hami.io/node-handshake", "Deleted_2023-11-14 22:13:20"}},
        {}},
       0,
       {},
       true},
      {"dcu cleaned up, plugin silent: dropped, nothing written",
       {{{"hami.io/node-dcu-register", dcu},
         {"hami.io/node-handshake-dcu", "Deleted_2023-11-14 22:00:00"}},
        {{"hygon.com/dcunum", 4}}},
       0,
       {},
       true},
      {"nvidia cleaned up, then the plugin reports: back, asked again",
       {{{"hami.io/node-nvidia-register", kOneGpu},
         {"hami.io/node-handshake", "Reported_2023-11-14 22:13:30"}},
        {}},
       1,
       {{"hami.io/node-handshake", "Requesting_2023-11-14 22:13:20"}},
       false},
      {"a handshake without a registration is still answered",
       {{{"hami.io/node-handshake", "Requesting_2023-11-14 22:00:00"}}, {}},
       0,
       {{"hami.io/node-handshake", "Deleted_2023-11-14 22:13:20"}},
       false},
      {"no GPU at all: left alone", {{{"other", "x"}}, {}}, 0, {}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const VendorSet::NodeDevices d = set->DecodeNode(c.node, kNow);
    EXPECT_EQ(d.devices.size(), c.devices);
    EXPECT_EQ(!d.errors.empty(), c.error) << d.errors;
    EXPECT_EQ(d.unhealthy, std::string(c.name).find("dropped") != std::string::npos) << d.errors;
    EXPECT_EQ(set->HandshakeUpdates(c.node, kNow), c.updates);
    if (std::string(c.name).find("first") != std::string::npos) {
      ASSERT_EQ(d.devices.size(), 2u);
      EXPECT_EQ(d.devices[0].vendor, "NVIDIA");
    }
  }
}

// Issue 31's reproduction, housekeeping round by round (15 s apart): a node whose NVIDIA plugin is
// gone (request expired, nothing allocatable) is dropped and cleaned up, and stays out while the
// only thing on it is the scheduler's own cleanup mark; the plugin's report brings it back. Before
// the fix the round after the cleanup read `Deleted_` as healthy and offered the GPU again.
TEST(VendorSetTest, CleanedUpNodeStaysOutUntilThePluginReports) {
  auto set = Load();
  const std::string kOneGpu = "GPU-0a1b,10,40960,100,NVIDIA-A100,0,true,0,:";
  constexpr int64_t kStart = 1700000000;  // 2023-11-14 22:13:20 UTC
  struct Round {
    int64_t at;
    const char* plugin_writes;  // the device plugin's handshake value before the round ("": none)
    size_t devices;             // devices offered after the round
    const char* scheduler_writes;  // handshake value the round writes ("": nothing)
  };
  const Round rounds[] = {
      {kStart, "", 0, "Deleted_2023-11-14 22:13:20"},  // expired request: dropped, cleaned up
      {kStart + 15, "", 0, ""},                        // cleanup mark only: still out
      {kStart + 30, "", 0, ""},
      {kStart + 300, "", 0, ""},
      {kStart + 315, "Reported_2023-11-14 22:18:35", 1, "Requesting_2023-11-14 22:18:35"},
  };
  NodeView node{{{"hami.io/node-nvidia-register", kOneGpu},
                 {"hami.io/node-handshake", "Requesting_2023-11-14 22:00:00"}},
                {}};
  for (const Round& r : rounds) {
    SCOPED_TRACE(r.at - kStart);
    if (*r.plugin_writes != '\0') node.annotations["hami.io/node-handshake"] = r.plugin_writes;
    EXPECT_EQ(set->DecodeNode(node, r.at).devices.size(), r.devices);
    const auto updates = set->HandshakeUpdates(node, r.at);
    if (*r.scheduler_writes == '\0') {
      EXPECT_TRUE(updates.empty());
    } else {
      ASSERT_EQ(updates.size(), 1u);
      EXPECT_EQ(updates.begin()->second, r.scheduler_writes);
    }
    for (const auto& [k, v] : updates) node.annotations[k] = v;
  }
}

// A Kunlun node of 8 whole XPUs (two NUMA halves 0-3, 4-7) as its capacity registers it, with the
// XPUs at `busy` indices taken by one pod each.
void AddKunlunNode(scheduler::Scheduler& sched, const VendorSet& set, const std::string& name,
                   const std::vector<int>& busy) {
  NodeView view;
  view.name = name;
  view.capacity["kunlunxin.com/xpu"] = 8;
  core::NodeInfo info;
  info.name = name;
  VendorSet::NodeDevices d = set.DecodeNode(view, 0);
  info.devices = std::move(d.devices);
  ASSERT_EQ(info.devices.size(), 8u) << d.errors;
  for (int b : busy) {
    const core::DeviceInfo& d = info.devices[b];
    ASSERT_EQ(d.index, b);
    core::PodAllocation a;
    a.node = name;
    a.containers.push_back({core::ContainerDevice{d.uuid, d.vendor, d.devmem_mib, 100, d.index}});
    ASSERT_TRUE(sched.AddPod(StrCat(name, "-busy-", b), a).ok());
  }
  sched.UpsertNode(std::move(info));
}

StatusOr<std::unique_ptr<scheduler::Scheduler>> MakeScheduler(const VendorSet& set) {
  scheduler::SchedulerOptions so;
  so.vendor_rules = &set;
  return scheduler::Scheduler::Create(so);
}

core::PodRequest KunlunPod(const VendorSet& set, int nums) {
  auto p = set.ParsePod(Pod(Json::array({Ctr("c", {{"kunlunxin.com/xpu", nums}})})));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : core::PodRequest{};
}

// Device indices of the decision's devices (uuid -> index over the node's devices).
std::set<int> GrantedIndices(const VendorSet& set, const scheduler::Decision& d) {
  NodeView view;
  view.name = d.node;
  view.capacity["kunlunxin.com/xpu"] = 8;
  std::set<int> out;
  for (const auto& dev : set.DecodeNode(view, 0).devices)
    for (const auto& c : d.allocation.containers)
      for (const auto& g : c)
        if (g.uuid == dev.uuid) out.insert(dev.index);
  return out;
}

TEST(VendorSetTest, KunlunGrantStaysInOneHalf) {
  auto set = Load();
  struct Case {
    const char* name;
    std::vector<int> busy;
    int nums;
    std::set<int> want;  // empty = refused (NumaNotFit)
  } cases[] = {
      // free 3 | 4, 7: first-fit by index would take 3 and 4 across the halves
      {"2 XPUs take two of one half", {0, 1, 2, 5, 6}, 2, {4, 7}},
      {"2 XPUs, the fuller half first", {0, 1, 4}, 2, {2, 3}},
      // free 1, 2, 3 | 5, 6, 7: upstream's cross group 2-3-6-7 (it leaves the pair 1-5)
      {"4 XPUs, 3 free per half: a cross group", {0, 4}, 4, {2, 3, 6, 7}},
      {"4 XPUs, free 2, 3, 4, 7: no cross group", {0, 1, 5, 6}, 4, {}},
      {"2 XPUs, free 3 | 4: not a cross pair", {0, 1, 2, 5, 6, 7}, 2, {}},
      {"4 XPUs take the free half", {0}, 4, {4, 5, 6, 7}},
      {"8 XPUs take the node", {}, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"2 XPUs, one free per half: allowed across", {0, 1, 2, 4, 5, 6}, 2, {3, 7}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto sched = MakeScheduler(*set);
    ASSERT_TRUE(sched.ok()) << sched.status();
    AddKunlunNode(**sched, *set, "xpu-node", c.busy);
    scheduler::ScheduleOptions opt;
    opt.explain = true;
    auto d = (*sched)->Schedule(KunlunPod(*set, c.nums), nullptr, opt);
    ASSERT_TRUE(d.ok()) << d.status();
    if (c.want.empty()) {
      EXPECT_EQ(d->node, "");
      ASSERT_EQ(d->failures.size(), 1u);
      EXPECT_NE(d->failures[0].reason.find("NumaNotFit"), std::string::npos)
          << d->failures[0].reason;
    } else {
      EXPECT_EQ(d->node, "xpu-node");
      EXPECT_EQ(GrantedIndices(*set, *d), c.want);
    }
  }
}

TEST(VendorSetTest, TopologyScoreBreaksTiesBetweenNodes) {
  auto set = Load();
  // Both nodes have two free XPUs (equal policy scores): "a-split" only across the halves (score
  // 50), "z-half" inside one half (100). Without the vendor score the name order picks a-split.
  struct Case {
    const char* name;
    std::vector<int> a_busy, z_busy;
    std::string want;
  } cases[] = {
      // a-split: free 3 | 7, the cross pair 3-7
      {"one half beats across halves", {0, 1, 2, 4, 5, 6}, {0, 1, 2, 3, 6, 7}, "z-half"},
      {"equal cohesion keeps name order", {0, 1, 2, 3, 6, 7}, {0, 1, 2, 3, 6, 7}, "a-split"},
      {"reversed", {0, 1, 4, 5, 6, 7}, {0, 1, 2, 4, 5, 6}, "a-split"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto sched = MakeScheduler(*set);
    ASSERT_TRUE(sched.ok()) << sched.status();
    AddKunlunNode(**sched, *set, "a-split", c.a_busy);
    AddKunlunNode(**sched, *set, "z-half", c.z_busy);
    const std::vector<std::string> names = {"z-half", "a-split"};
    auto d = (*sched)->Schedule(KunlunPod(*set, 2), &names, {});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->node, c.want);
    EXPECT_EQ(d->feasible_nodes, 2);
  }
}

TEST(VendorSetTest, PickAndScoreOnlyForVendorsWithRules) {
  auto set = Load();
  std::vector<core::DeviceInfo> devs(4);
  for (int i = 0; i < 4; ++i) {
    devs[i].uuid = StrCat("DCU-", i);
    devs[i].vendor = "DCU";
    devs[i].index = i;
  }
  const std::vector<int> cand = {0, 1, 2, 3};
  std::vector<int> out;
  core::DeviceRequest dcu{"DCU", 2, 1000, 0, 0, -1};
  EXPECT_FALSE(set->Pick(*set->Prepare(core::PodRequest{}), dcu, devs, {}, cand,
                         &out));  // the policy chooses
  EXPECT_EQ(set->Score(dcu, devs, std::vector<int>{0, 3}), 0);
}

// pkg/scheduler/score_align_test.go Test_calcScore_MultiTypeContainerAlignment: a pod whose
// containers ask different vendors (or none) gets, per vendor, a decision with one slot per
// container in container order, its devices only in the slots of the containers that asked.
TEST(VendorSetUpstream, Test_calcScore_MultiTypeContainerAlignment) {
  auto set = Load();
  ASSERT_NE(set, nullptr);
  const auto dev = [](const char* uuid, const char* vendor) {
    core::ContainerDevice d;
    d.uuid = uuid;
    d.vendor = vendor;
    d.usedmem_mib = 1024;
    d.usedcores = 1;
    return d;
  };
  struct Case {
    std::vector<std::vector<core::ContainerDevice>> containers;
    const char* nvidia;  // hami.io/vgpu-devices-to-allocate; null = not written
    const char* dcu;     // hami.io/dcu-devices-to-allocate
  };
  const Case cases[] = {
      {{{dev("GPU-a", "NVIDIA")}, {dev("DCU-b", "DCU")}},  // container0 NVIDIA, container1 DCU
       "GPU-a,NVIDIA,1024,1:;;",
       ";DCU-b,DCU,1024,1:;"},
      {{{}, {dev("DCU-b", "DCU")}},  // container1 DCU after a no-device container0
       nullptr,
       ";DCU-b,DCU,1024,1:;"},
      {{{dev("GPU-a", "NVIDIA")}, {}, {dev("DCU-b", "DCU")}},  // a no-device container1 between
       "GPU-a,NVIDIA,1024,1:;;;",
       ";;DCU-b,DCU,1024,1:;"},
  };
  for (const Case& c : cases) {
    core::PodAllocation alloc;
    alloc.containers = c.containers;
    auto enc = set->EncodeDecision(alloc, 1700000000);
    ASSERT_TRUE(enc.ok()) << enc.status();
    const auto value = [&](const char* key) -> const char* {
      auto it = enc->find(key);
      return it == enc->end() ? nullptr : it->second.c_str();
    };
    EXPECT_STREQ(value("hami.io/vgpu-devices-to-allocate"), c.nvidia);
    EXPECT_STREQ(value("hami.io/vgpu-devices-allocated"), c.nvidia);
    EXPECT_STREQ(value("hami.io/dcu-devices-to-allocate"), c.dcu);
    bool any = false;
    auto back = set->DecodeDecision(*enc, &any);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(any);
    EXPECT_EQ(back->containers, c.containers);
  }
}

// pkg/device/nvidia Test_PatchAnnotations "no device": a pod without devices gets no decision key.
TEST(VendorSetUpstream, Test_PatchAnnotationsNoDevice) {
  auto set = Load();
  ASSERT_NE(set, nullptr);
  core::PodAllocation none;
  auto enc = set->EncodeDecision(none, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_TRUE(enc->empty());
  none.containers = {{}, {}};  // containers without devices
  enc = set->EncodeDecision(none, 1700000000);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_TRUE(enc->empty());
}

// Upstream's device_cordon_test.go of pkg/device/awsneuron (TestFit_DeviceCordon,
// TestFit_DeviceCordonMultiCardTopology) and pkg/device/ascend (TestFit_DeviceCordon): a device
// named in the node's hami.io/device-cordon takes no new grant, grants already on it stay. Ours
// applies the cordon in the scheduler for every vendor (core::NodeInfo::cordoned, read from the
// annotation with the node), before the vendor's set choice, so the rows run through the scheduler.
// Ascend rows ask a template (upstream's table asks 64 MiB and 50 cores of a hami-core device).
TEST(VendorSetUpstream, TestFit_DeviceCordon) {
  auto set = Load(kConfig + "awsneuron: {}\n");
  ASSERT_NE(set, nullptr);
  enum Kind { kTrn, kInf2, kAscend };
  struct Case {
    const char* name;
    Kind kind;
    Json limits;
    std::vector<int> cordoned, busy;  // device indices
    std::set<int> want;               // granted indices; empty = refused with `reason`
    const char* reason = "";
  } cases[] = {
      {"awsneuron TestFit_DeviceCordon: cordoned device is skipped, healthy sibling still fits",
       kTrn,
       {{"aws.amazon.com/neuroncore", 2}},
       {1},
       {},
       {0}},
      {"awsneuron TestFit_DeviceCordon: all devices cordoned fails with CardCordoned reason",
       kTrn,
       {{"aws.amazon.com/neuroncore", 2}},
       {0, 1},
       {},
       {},
       "2/2 CardCordoned"},
      {"awsneuron TestFit_DeviceCordon: nothing cordoned (upstream's dev-1: the last device)",
       kTrn,
       {{"aws.amazon.com/neuroncore", 2}},
       {},
       {},
       {1}},
      {"TestFit_DeviceCordonMultiCardTopology: a run stepping over a cordoned device is rejected, "
       "the next run wins",
       kInf2,
       {{"aws.amazon.com/neuron", 4}},
       {0},
       {},
       {1, 2, 3, 4}},
      {"TestFit_DeviceCordonMultiCardTopology: all devices cordoned fails with CardCordoned rather "
       "than NumaNotFit",
       kInf2,
       {{"aws.amazon.com/neuron", 4}},
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
       {},
       {},
       "16/16 CardCordoned"},
      {"TestFit_DeviceCordonMultiCardTopology: nothing cordoned still reports NumaNotFit when no "
       "run exists",
       kInf2,
       {{"aws.amazon.com/neuron", 4}},
       {},
       {3, 7, 11, 15},
       {},
       "NumaNotFit"},
      {"ascend TestFit_DeviceCordon: cordoned device is skipped, healthy sibling still fits",
       kAscend,
       {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 16384}},
       {1},
       {},
       {0}},
      {"ascend TestFit_DeviceCordon: no annotation means nothing cordoned (dev-1, as upstream)",
       kAscend,
       {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 16384}},
       {},
       {},
       {1}},
      {"ascend TestFit_DeviceCordon: all devices cordoned fails with CardCordoned reason",
       kAscend,
       {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 16384}},
       {0, 1},
       {},
       {},
       "2/2 CardCordoned"},
      {"ascend TestFit_DeviceCordon: running pods on a cordoned device are unaffected",
       kAscend,
       {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 16384}},
       {1},
       {1},
       {0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView view;
    view.name = "n";
    if (c.kind == kAscend) {
      view.annotations["hami.io/node-register-Ascend910B3"] =
          R"([{"id":"dev-0","index":0,"count":10,"devmem":65536,"devcore":100,"type":"Ascend910B3","health":true},)"
          R"({"id":"dev-1","index":1,"count":10,"devmem":65536,"devcore":100,"type":"Ascend910B3","health":true}])";
    } else {
      const int n = c.kind == kTrn ? 2 : 16;
      view.capacity = {{"aws.amazon.com/neuron", n}, {"aws.amazon.com/neuroncore", 2 * n}};
      view.labels["node.kubernetes.io/instance-type"] = c.kind == kTrn ? "trn1.32xlarge" : "inf2";
    }
    VendorSet::NodeDevices nd = set->DecodeNode(view, 0);
    ASSERT_EQ(nd.devices.size(), c.kind == kInf2 ? 16u : 2u) << nd.errors;
    auto sched = MakeScheduler(*set);
    ASSERT_TRUE(sched.ok()) << sched.status();
    core::NodeInfo info;
    info.name = "n";
    info.devices = nd.devices;
    for (int i : c.cordoned) info.cordoned.push_back(info.devices[i].uuid);
    for (int b : c.busy) {
      const core::DeviceInfo& d = info.devices[b];
      core::PodAllocation a;
      a.node = "n";
      a.containers.push_back({core::ContainerDevice{d.uuid, d.vendor, c.kind == kAscend ? 16384 : 0,
                                                    c.kind == kAscend ? 25 : d.devcore, d.index}});
      ASSERT_TRUE((*sched)->AddPod(StrCat("busy-", b), a).ok());
    }
    (*sched)->UpsertNode(std::move(info));
    auto pod = set->ParsePod(Pod(Json::array({Ctr("c", c.limits)})));
    ASSERT_TRUE(pod.ok()) << pod.status();
    scheduler::ScheduleOptions opt;
    opt.explain = true;
    auto d = (*sched)->Schedule(*pod, nullptr, opt);
    ASSERT_TRUE(d.ok()) << d.status();
    if (c.want.empty()) {
      EXPECT_EQ(d->node, "");
      ASSERT_EQ(d->failures.size(), 1u);
      EXPECT_NE(d->failures[0].reason.find(c.reason), std::string::npos) << d->failures[0].reason;
      EXPECT_EQ(d->failures[0].reason.find(c.kind == kInf2 && c.cordoned.empty() ? "Cordoned"
                                                                                 : "NumaNotFit"),
                std::string::npos)
          << d->failures[0].reason;
      continue;
    }
    ASSERT_EQ(d->node, "n");
    std::set<int> got;
    for (const auto& ctr : d->allocation.containers)
      for (const auto& g : ctr)
        for (const auto& dev : nd.devices)
          if (dev.uuid == g.uuid) got.insert(dev.index);
    EXPECT_EQ(got, c.want);
  }
}

}  // namespace
}  // namespace hami::vendors
