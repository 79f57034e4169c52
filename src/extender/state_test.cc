// ClusterState: node registration, pod decisions, stale informer copies, quotas, handshake.
#include "extender/state.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/annotations.h"
#include "core/pod_codec.h"

namespace hami::extender {
namespace {

constexpr int64_t kNow = 1'700'000'000;

Json NodeJson(const std::string& name, const Json& annotations,
              const Json& allocatable = Json::object()) {
  return Json{{"metadata", {{"name", name}, {"annotations", annotations}}},
              {"status", {{"allocatable", allocatable}}}};
}

const char* kTwoGpus =
    R"([{"id":"GPU-a","index":0,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-T4","health":true},)"
    R"({"id":"GPU-b","index":1,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-T4","health":true}])";

TEST(NodeView, Table) {
  struct Case {
    const char* name;
    Json node;
    bool registered;
    bool unhealthy;
    size_t devices;
  };
  const Case cases[] = {
      {"json registration", NodeJson("n", {{"hami.io/node-nvidia-register", kTwoGpus}}), true,
       false, 2},
      {"legacy csv",
       NodeJson("n", {{"hami.io/node-nvidia-register", "GPU-x,10,32768,100,NVIDIA-V100,0,true:"}}),
       true, false, 1},
      {"no annotation", NodeJson("n", Json::object()), false, false, 0},
      {"broken annotation", NodeJson("n", {{"hami.io/node-nvidia-register", "[{"}}), false, false,
       0},
      {"handshake fresh",
       NodeJson("n", {{"hami.io/node-nvidia-register", kTwoGpus},
                      {"hami.io/node-handshake", "Requesting_2023-11-14 22:13:00"}}),
       true, false, 2},
      {"handshake expired, nothing allocatable",
       NodeJson("n",
                {{"hami.io/node-nvidia-register", kTwoGpus},
                 {"hami.io/node-handshake", "Requesting_2023-11-14 22:00:00"}},
                {{"nvidia.com/gpu", "0"}}),
       true, true, 0},
      {"handshake expired but kubelet has devices",
       NodeJson("n",
                {{"hami.io/node-nvidia-register", kTwoGpus},
                 {"hami.io/node-handshake", "Requesting_2023-11-14 22:00:00"}},
                {{"nvidia.com/gpu", "20"}}),
       true, false, 2},
      {"reported",
       NodeJson("n", {{"hami.io/node-nvidia-register", kTwoGpus},
                      {"hami.io/node-handshake", "Reported_2023-11-14 22:00:00"}}),
       true, false, 2},
  };
  // kNow = 2023-11-14 22:13:20 UTC.
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView v = NodeViewFromJson(c.node, core::NvidiaResourceNames{}, kNow, 60);
    EXPECT_EQ(v.registered, c.registered) << v.error;
    EXPECT_EQ(v.unhealthy, c.unhealthy) << v.error;
    EXPECT_EQ(v.info.devices.size(), c.devices);
    EXPECT_EQ(v.error.empty(), c.registered && !c.unhealthy) << v.error;
  }
}

Json PodJson(const std::string& uid, const Json& annotations, const std::string& phase = "Pending",
             const std::string& node_name = "") {
  Json pod{
      {"metadata",
       {{"name", "p-" + uid}, {"namespace", "ml"}, {"uid", uid}, {"annotations", annotations}}},
      {"spec",
       {{"containers", Json::array({{{"name", "c"}}})}, {"schedulerName", "hami-scheduler"}}},
      {"status", {{"phase", phase}}}};
  if (!node_name.empty()) pod["spec"]["nodeName"] = node_name;
  return pod;
}

TEST(HeldAllocation, Table) {
  const Json placed{{"hami.io/vgpu-node", "n1"},
                    {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,3000,30:;"}};
  Json failed = placed;
  failed["hami.io/bind-phase"] = "failed";
  struct Case {
    const char* name;
    Json pod;
    bool held;
  };
  const Case cases[] = {
      {"placed", PodJson("1", placed), true},
      {"running", PodJson("1", placed, "Running", "n1"), true},
      {"succeeded", PodJson("1", placed, "Succeeded", "n1"), false},
      {"failed phase", PodJson("1", placed, "Failed", "n1"), false},
      {"bind failed, unbound", PodJson("1", failed), false},
      {"bind failed but bound", PodJson("1", failed, "Pending", "n1"), true},
      {"no annotations", PodJson("1", Json::object()), false},
      {"garbage decision",
       PodJson("1", {{"hami.io/vgpu-node", "n1"}, {"hami.io/vgpu-devices-allocated", "x"}}), false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = HeldAllocation(c.pod);
    EXPECT_EQ(a.has_value(), c.held);
    if (a) {
      EXPECT_EQ(a->node, "n1");
    }
  }
}

class StateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    StateOptions o;
    o.clock = &clock_;
    state_ = std::make_unique<ClusterState>(*sched_, o);
    state_->OnNode(NodeJson("n1", {{"hami.io/node-nvidia-register", kTwoGpus}}));
  }
  core::DeviceUsage Usage(int dev) { return sched_->cache().Snapshot("n1")->usage[dev]; }
  // A fresh state whose rejected decisions are logged as "<pod name>:<reason>" into `events`.
  void RecordRejections(std::vector<std::string>* events) {
    StateOptions o;
    o.clock = &clock_;
    o.on_rejected_decision = [events](const Json& ref, const std::string& reason,
                                      const std::string&) {
      events->push_back(ref["name"].get<std::string>() + ":" + reason);
    };
    state_ = std::make_unique<ClusterState>(*sched_, o);
  }
  FakeClock clock_{kNow};
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(StateTest, PodsFromAnnotationsAddAndRelease) {
  const Json ann{{"hami.io/vgpu-node", "n1"},
                 {"hami.io/vgpu-devices-allocated", "GPU-b,NVIDIA,3000,30:;"}};
  state_->OnPod(PodJson("u1", ann));
  EXPECT_EQ(Usage(1), (core::DeviceUsage{1, 3000, 30}));
  state_->OnPod(PodJson("u1", ann));  // same event again: idempotent
  EXPECT_EQ(Usage(1), (core::DeviceUsage{1, 3000, 30}));
  state_->OnPod(PodJson("u1", ann, "Succeeded", "n1"));
  EXPECT_EQ(Usage(1), (core::DeviceUsage{}));
  state_->OnPod(PodJson("u2", ann));
  state_->OnPodDeleted(PodJson("u2", ann));
  EXPECT_EQ(Usage(1), (core::DeviceUsage{}));
  EXPECT_EQ(state_->pod_count(), 0u);
}

TEST_F(StateTest, StaleCopyDoesNotReplaceReservation) {
  PodRecord rec;
  rec.uid = "u1";
  rec.namespace_ = "ml";
  rec.name = "p-u1";
  rec.allocation = *core::DecodePodDevices("GPU-a,NVIDIA,5000,0:;");
  rec.allocation.node = "n1";
  // What Filter records: the vendors' fingerprint of the decision annotations.
  const std::string encoded = vendors::VendorSet::NvidiaOnly().DecisionFingerprint(
      {{"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,5000,0:;"}});
  rec.encoded = encoded;
  rec.totals = {5000, 0};
  ASSERT_TRUE(state_->TryReserve(rec).ok());
  // An informer copy from before our patch (an older decision, or none) must not touch it.
  state_->OnPod(PodJson("u1", {{"hami.io/vgpu-node", "n1"},
                               {"hami.io/vgpu-devices-allocated", "GPU-b,NVIDIA,1000,0:;"}}));
  state_->OnPod(PodJson("u1", Json::object()));
  EXPECT_EQ(state_->Pods().size(), 1u);
  EXPECT_EQ(state_->Pods()[0].encoded, encoded);
  EXPECT_FALSE(state_->Pods()[0].confirmed);
  state_->OnPod(PodJson("u1", {{"hami.io/vgpu-node", "n1"},
                               {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,5000,0:;"}}));
  EXPECT_TRUE(state_->Pods()[0].confirmed);
  // Once confirmed, the API server's copy rules: removing the decision releases the pod.
  state_->OnPod(PodJson("u1", Json::object()));
  EXPECT_EQ(state_->pod_count(), 0u);
}

// Rebuilding from annotations charges a pod only for a decision consistent with its binding, its
// scheduler and the device; the rest is reported once (sink + RejectedDecisions) and blocks
// nothing.
TEST_F(StateTest, RebuildChargesOnlyConsistentDecisions) {
  std::vector<std::string> events;
  RecordRejections(&events);
  state_->OnNode(NodeJson("n1", {{"hami.io/node-nvidia-register", kTwoGpus}}));
  auto ann = [](const std::string& devices, const std::string& node = "n1") {
    return Json{{"hami.io/vgpu-node", node},
                {"hami.io/vgpu-devices-allocated", devices},
                {"hami.io/vgpu-time", std::to_string(kNow)}};
  };
  struct Case {
    const char* name;
    Json pod;
    const char* reason;  // "" = charged
  };
  Json foreign = PodJson("foreign", ann("GPU-a,NVIDIA,16000,100:;"), "Running", "n1");
  foreign["spec"]["schedulerName"] = "default-scheduler";
  Json unnamed = PodJson("unnamed", ann("GPU-a,NVIDIA,16000,100:;"), "Running", "n1");
  unnamed["spec"].erase("schedulerName");
  const Case cases[] = {
      {"other scheduler", foreign, kRejectForeignScheduler},
      {"no scheduler name (= default-scheduler)", unnamed, kRejectForeignScheduler},
      {"bound elsewhere", PodJson("elsewhere", ann("GPU-a,NVIDIA,1000,10:;"), "Running", "n2"),
       kRejectNodeMismatch},
      {"device not on the node",
       PodJson("ghostdev", ann("GPU-z,NVIDIA,1000,10:;"), "Running", "n1"), kRejectUnknownDevice},
      {"more memory than the device",
       PodJson("huge", ann("GPU-a,NVIDIA,20000,10:;"), "Running", "n1"), kRejectExceedsDevice},
      {"more cores than the device",
       PodJson("cores", ann("GPU-a,NVIDIA,100,150:;"), "Running", "n1"), kRejectExceedsDevice},
      {"consistent", PodJson("ok", ann("GPU-b,NVIDIA,12000,60:;"), "Running", "n1"), ""},
      {"over-commits with the others (charged, reported)",
       PodJson("over", ann("GPU-b,NVIDIA,8000,10:;"), "Running", "n1"), kOverCommitted},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    state_->OnPod(c.pod);
    state_->OnPod(c.pod);  // a resync: reported once
    const std::string uid = c.pod["metadata"]["uid"];
    const bool charged = std::string(c.reason).empty() || std::string(c.reason) == kOverCommitted;
    EXPECT_EQ(state_->Find(uid).has_value(), charged);
    if (!std::string(c.reason).empty()) {
      ASSERT_FALSE(events.empty());
      EXPECT_EQ(events.back(), "p-" + uid + ":" + c.reason);
    }
  }
  EXPECT_EQ(events.size(), 7u);
  EXPECT_EQ(Usage(0), (core::DeviceUsage{}));  // no forged decision blocks GPU-a
  EXPECT_EQ(Usage(1), (core::DeviceUsage{2, 20000, 70}));
  const auto rejected = state_->RejectedDecisions();
  EXPECT_EQ(rejected.at(kRejectForeignScheduler), 2);
  EXPECT_EQ(rejected.at(kRejectExceedsDevice), 2);
  EXPECT_EQ(rejected.at(kOverCommitted), 1);
}

// The pod informer may deliver pods before their node: a decision charged while the node was
// unknown is checked when the node arrives, so a restart cannot charge what the device cannot hold.
TEST_F(StateTest, DecisionsSeenBeforeTheirNodeAreCheckedWhenItArrives) {
  std::vector<std::string> events;
  RecordRejections(&events);
  auto ann = [](const std::string& devices) {
    return Json{{"hami.io/vgpu-node", "n9"},
                {"hami.io/vgpu-devices-allocated", devices},
                {"hami.io/vgpu-time", std::to_string(kNow)}};
  };
  state_->OnPod(PodJson("huge", ann("GPU-a,NVIDIA,20000,10:;"), "Running", "n9"));
  state_->OnPod(PodJson("ghost", ann("GPU-z,NVIDIA,1000,10:;"), "Running", "n9"));
  state_->OnPod(PodJson("ok", ann("GPU-b,NVIDIA,12000,60:;"), "Running", "n9"));
  EXPECT_TRUE(events.empty());
  state_->OnNode(NodeJson("n9", {{"hami.io/node-nvidia-register", kTwoGpus}}));
  std::sort(events.begin(), events.end());
  EXPECT_EQ(events, (std::vector<std::string>{"p-ghost:" + std::string(kRejectUnknownDevice),
                                              "p-huge:" + std::string(kRejectExceedsDevice)}));
  EXPECT_FALSE(state_->Find("huge").has_value());
  EXPECT_FALSE(state_->Find("ghost").has_value());
  EXPECT_TRUE(state_->Find("ok").has_value());
  auto n9 = sched_->cache().Snapshot("n9");
  ASSERT_TRUE(n9.has_value());
  EXPECT_EQ(n9->usage[0], (core::DeviceUsage{}));
  EXPECT_EQ(n9->usage[1], (core::DeviceUsage{1, 12000, 60}));
  state_->OnNode(NodeJson("n9", {{"hami.io/node-nvidia-register", kTwoGpus}, {"changed", "1"}}));
  EXPECT_EQ(events.size(), 2u) << "checked once";
}

// Once bound, a pod's decision is final: an edit of its annotations (to claim less, or another
// device) changes neither the device usage nor the namespace's quota usage.
TEST_F(StateTest, EditsAfterBindAreIgnored) {
  const Json ann{{"hami.io/vgpu-node", "n1"},
                 {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,12000,50:;"}};
  state_->OnPod(PodJson("u1", ann, "Running", "n1"));
  ASSERT_EQ(Usage(0), (core::DeviceUsage{1, 12000, 50}));
  const Json edited{{"hami.io/vgpu-node", "n1"},
                    {"hami.io/vgpu-devices-allocated", "GPU-b,NVIDIA,1,0:;"}};
  state_->OnPod(PodJson("u1", edited, "Running", "n1"));
  EXPECT_EQ(Usage(0), (core::DeviceUsage{1, 12000, 50}));
  EXPECT_EQ(Usage(1), (core::DeviceUsage{}));
  EXPECT_EQ(state_->NamespaceUsage().at("ml").mem_mib, 12000);
  EXPECT_EQ(state_->RejectedDecisions().at(kRejectChangedAfterBind), 1);
  // The pod going away still releases what it was charged.
  state_->OnPodDeleted(PodJson("u1", edited, "Running", "n1"));
  EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
}

// An unbound pod's decision (a filter no bind followed) holds its devices for the TTL at most,
// counted from its hami.io/vgpu-time when that is earlier than when it was first seen; a forged
// future time does not extend it, and the same copy seen again after the lapse is not charged
// again.
TEST_F(StateTest, UnboundDecisionsLapse) {
  auto ann = [](const std::string& dev, int64_t t) {
    return Json{{"hami.io/vgpu-node", "n1"},
                {"hami.io/vgpu-devices-allocated", dev},
                {"hami.io/vgpu-time", std::to_string(t)}};
  };
  const int64_t ttl = state_->options().reservation_ttl_s;
  state_->OnPod(PodJson("old", ann("GPU-a,NVIDIA,1000,0:;", kNow - ttl)));
  EXPECT_FALSE(state_->Find("old").has_value());
  state_->OnPod(PodJson("recent", ann("GPU-a,NVIDIA,2000,0:;", kNow - 10)));
  state_->OnPod(PodJson("future", ann("GPU-b,NVIDIA,3000,0:;", kNow + 100000)));
  EXPECT_EQ(Usage(0).usedmem_mib, 2000);
  EXPECT_EQ(Usage(1).usedmem_mib, 3000);
  clock_.AdvanceSeconds(ttl - 10);
  EXPECT_EQ(state_->ExpireReservations(), 1);  // "recent"
  EXPECT_EQ(Usage(0).usedmem_mib, 0);
  clock_.AdvanceSeconds(10);
  EXPECT_EQ(state_->ExpireReservations(), 1);  // "future": from when it was seen
  EXPECT_EQ(Usage(1).usedmem_mib, 0);
  state_->OnPod(
      PodJson("recent", ann("GPU-a,NVIDIA,2000,0:;", kNow - 10)));  // resync of the same copy
  EXPECT_EQ(Usage(0).usedmem_mib, 0);
  // Bound after all (someone else's bind): a bound, consistent decision counts.
  state_->OnPod(PodJson("recent", ann("GPU-a,NVIDIA,2000,0:;", kNow - 10), "Running", "n1"));
  EXPECT_EQ(Usage(0).usedmem_mib, 2000);
  EXPECT_EQ(state_->expired_reservations(), 2);
}

TEST_F(StateTest, QuotaLimitsMemoryAndCores) {
  state_->OnQuota(Json{
      {"metadata", {{"name", "q"}, {"namespace", "ml"}}},
      {"spec",
       {{"hard", {{"limits.nvidia.com/gpumem", "8000"}, {"limits.nvidia.com/gpucores", "50"}}}}}});
  state_->OnQuota(Json{{"metadata", {{"name", "cpu-only"}, {"namespace", "ml"}}},
                       {"spec", {{"hard", {{"limits.cpu", "8"}}}}}});
  EXPECT_EQ(state_->Quotas().size(), 1u);
  struct Step {
    const char* name;
    std::string ns;
    int64_t mem, cores;
    bool ok;
  };
  const Step steps[] = {
      {"fits", "ml", 6000, 30, true},
      {"memory over", "ml", 3000, 10, false},
      {"cores over", "ml", 1000, 30, false},
      {"exactly to the limit", "ml", 2000, 20, true},
      {"other namespace unlimited", "web", 100000, 1000, true},
  };
  int i = 0;
  for (const auto& s : steps) {
    SCOPED_TRACE(s.name);
    PodRecord rec;
    rec.uid = "q" + std::to_string(i++);
    rec.namespace_ = s.ns;
    rec.name = rec.uid;
    rec.totals = {s.mem, s.cores};
    Status st = state_->TryReserve(rec);
    EXPECT_EQ(st.ok(), s.ok) << st;
    if (!s.ok) {
      EXPECT_NE(std::string(st.message()).find("exceeding resource quota ml/q"), std::string::npos);
    }
  }
  EXPECT_EQ(state_->NamespaceUsage()["ml"].mem_mib, 8000);
  EXPECT_FALSE(state_->CheckQuota("ml", 1, 0).ok());
  state_->Drop("q0");
  EXPECT_TRUE(state_->CheckQuota("ml", 6000, 30).ok());
  state_->OnQuotaDeleted(Json{{"metadata", {{"name", "q"}, {"namespace", "ml"}}}});
  EXPECT_TRUE(state_->CheckQuota("ml", 1'000'000, 1000).ok());
}

// What a placed pod is charged against its namespace's quota (docs/upstream-contract.md#quota): the
// sum of
// the memory and cores of its devices as allocated (so nvidia.com/gpu x gpumem, and a percentage as
// resolved on its card), per pod. Init containers are collapsed per device as device usage is
// (max(peak init, sum of the app containers)); upstream's countPodDevices adds them up instead,
// which charges a pod for memory it never holds at once.
TEST_F(StateTest, QuotaChargesEachPodTheSumOfItsDevices) {
  struct Case {
    const char* name;
    int init_containers, app_containers;
    const char* allocated;  // hami.io/vgpu-devices-allocated, init containers first
    int64_t mem, cores;
  };
  const Case cases[] = {
      {"one container, one device", 0, 1, "GPU-a,NVIDIA,3000,30:;", 3000, 30},
      {"nvidia.com/gpu 2 x 3000 MiB: 6000", 0, 1, "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;",
       6000, 60},
      {"two containers on one device", 0, 2, "GPU-a,NVIDIA,3000,10:;GPU-a,NVIDIA,2000,20:;", 5000,
       30},
      {"a percentage as resolved on the card (50 % of 16000)", 0, 1, "GPU-b,NVIDIA,8000,0:;", 8000,
       0},
      {"init 4000 then app 1000 on one device: 4000, not 5000", 1, 1,
       "GPU-a,NVIDIA,4000,50:;GPU-a,NVIDIA,1000,10:;", 4000, 50},
      {"init and app on different devices: both", 1, 1,
       "GPU-a,NVIDIA,4000,50:;GPU-b,NVIDIA,1000,10:;", 5000, 60},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string uid = "c" + std::to_string(i++);
    Json pod = PodJson(
        uid, {{"hami.io/vgpu-node", "n1"}, {"hami.io/vgpu-devices-allocated", c.allocated}});
    pod["spec"]["containers"] = Json::array();
    for (int k = 0; k < c.app_containers; ++k)
      pod["spec"]["containers"].push_back({{"name", "app" + std::to_string(k)}});
    for (int k = 0; k < c.init_containers; ++k)
      pod["spec"]["initContainers"].push_back({{"name", "init" + std::to_string(k)}});
    state_->OnPod(pod);
    ASSERT_EQ(state_->pod_count(), 1u);
    EXPECT_EQ(state_->NamespaceUsage()["ml"].mem_mib, c.mem);
    EXPECT_EQ(state_->NamespaceUsage()["ml"].cores, c.cores);
    state_->OnPodDeleted(pod);
    EXPECT_EQ(state_->NamespaceUsage()["ml"].mem_mib, 0);
  }
}

// Quota limits: memoryFactor scales the memory limit like requests; several ResourceQuota objects
// in a namespace all apply (the strictest decides); an explicit 0 forbids (Kubernetes' meaning;
// older upstream read 0 as "no limit").
TEST(QuotaLimits, Table) {
  struct Case {
    const char* name;
    int memory_factor;
    std::vector<Json> hards;  // spec.hard of each ResourceQuota in namespace ml
    int64_t mem, cores;       // asked for (memory in scaled units, as requests are)
    bool ok;
  };
  const Case cases[] = {
      {"under the limit", 1, {{{"limits.nvidia.com/gpumem", "8000"}}}, 8000, 0, true},
      {"over the limit", 1, {{{"limits.nvidia.com/gpumem", "8000"}}}, 8001, 0, false},
      {"memoryFactor 10 scales the limit",
       10,
       {{{"limits.nvidia.com/gpumem", "8000"}}},
       80000,
       0,
       true},
      {"memoryFactor 10, over", 10, {{{"limits.nvidia.com/gpumem", "8000"}}}, 80001, 0, false},
      {"cores are not scaled", 10, {{{"limits.nvidia.com/gpucores", "50"}}}, 0, 51, false},
      {"two quotas: the stricter",
       1,
       {{{"limits.nvidia.com/gpumem", "8000"}}, {{"limits.nvidia.com/gpumem", "4000"}}},
       5000,
       0,
       false},
      {"explicit 0 forbids", 1, {{{"limits.nvidia.com/gpumem", "0"}}}, 1, 0, false},
      {"0 memory asked passes a memory quota",
       1,
       {{{"limits.nvidia.com/gpumem", "0"}}},
       0,
       100,
       true},
      {"requests.* keys do not count", 1, {{{"requests.nvidia.com/gpumem", "1"}}}, 5000, 0, true},
      {"unparsable limit ignored", 1, {{{"limits.nvidia.com/gpumem", "lots"}}}, 5000, 0, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto sched = std::move(*scheduler::Scheduler::Create({}));
    StateOptions o;
    o.resources.memory_factor = c.memory_factor;
    ClusterState state(*sched, o);
    int k = 0;
    for (const auto& hard : c.hards)
      state.OnQuota(Json{{"metadata", {{"name", "q" + std::to_string(k++)}, {"namespace", "ml"}}},
                         {"spec", {{"hard", hard}}}});
    EXPECT_EQ(state.CheckQuota("ml", c.mem, c.cores).ok(), c.ok);
  }
}

TEST_F(StateTest, HousekeepingHandshake) {
  const std::vector<Json> nodes = {
      NodeJson("fresh", {{"hami.io/node-nvidia-register", kTwoGpus}}),
      NodeJson("asked", {{"hami.io/node-nvidia-register", kTwoGpus},
                         {"hami.io/node-handshake", "Requesting_2023-11-14 22:13:00"}}),
      NodeJson("dead", {{"hami.io/node-nvidia-register", kTwoGpus},
                        {"hami.io/node-handshake", "Requesting_2023-11-14 21:00:00"}}),
      // Cleaned up by an earlier cycle: upstream's CheckHealth asks again (and registers the
      // devices until that request times out too).
      NodeJson("cleaned", {{"hami.io/node-nvidia-register", kTwoGpus},
                           {"hami.io/node-handshake", "Deleted_2023-11-14 22:13:00"}}),
      NodeJson("cpu-only", Json::object()),
  };
  auto patches = state_->Housekeeping(nodes);
  ASSERT_EQ(patches.size(), 3u);
  EXPECT_EQ(patches[0].first, "fresh");
  EXPECT_EQ(patches[0].second["metadata"]["annotations"]["hami.io/node-handshake"],
            "Requesting_2023-11-14 22:13:20");
  // Upstream's NodeCleanUp marks the handshake Deleted_<time>.
  EXPECT_EQ(patches[1].first, "dead");
  EXPECT_EQ(patches[1].second["metadata"]["annotations"]["hami.io/node-handshake"],
            "Deleted_2023-11-14 22:13:20");
  EXPECT_EQ(patches[2].first, "cleaned");
  EXPECT_EQ(patches[2].second["metadata"]["annotations"]["hami.io/node-handshake"],
            "Requesting_2023-11-14 22:13:20");
  EXPECT_EQ(sched_->cache().Snapshot("cleaned")->info.devices.size(), 2u);
  // The dead node offers no devices any more.
  EXPECT_EQ(sched_->cache().Snapshot("dead")->info.devices.size(), 0u);
  EXPECT_EQ(sched_->cache().Snapshot("fresh")->info.devices.size(), 2u);
}

// Devices and quota held by init containers are given back once every init container succeeded
// (status.initContainerStatuses), as upstream does; a sidecar does not hold the release back.
TEST(ClusterState, InitContainerUsageIsReleasedWhenTheyAllSucceeded) {
  auto sched = std::move(*scheduler::Scheduler::Create({}));
  FakeClock clock(kNow);
  StateOptions so;
  so.clock = &clock;
  ClusterState st(*sched, so);
  st.OnNode(NodeJson("n1", {{"hami.io/node-nvidia-register", kTwoGpus}}));
  Json pod{{"metadata",
            {{"name", "p"},
             {"namespace", "ml"},
             {"uid", "u"},
             {"annotations",
              {{"hami.io/vgpu-node", "n1"},
               {"hami.io/vgpu-devices-allocated",
                "GPU-a,NVIDIA,8000,50:;GPU-a,NVIDIA,1000,0:;GPU-a,NVIDIA,2000,10:;"}}}}},
           {"spec",
            {{"nodeName", "n1"},
             {"schedulerName", "hami-scheduler"},
             {"initContainers",
              Json::array({{{"name", "init"}}, {{"name", "side"}, {"restartPolicy", "Always"}}})},
             {"containers", Json::array({{{"name", "c"}}})}}},
           {"status", {{"phase", "Pending"}}}};
  st.OnPod(pod);
  EXPECT_EQ(sched->cache().Snapshot("n1")->usage[0].usedmem_mib, 8000);  // init 8000 > 1000 + 2000
  EXPECT_EQ(st.NamespaceUsage()["ml"].mem_mib, 8000);
  pod["status"]["initContainerStatuses"] =
      Json::array({{{"name", "init"}, {"state", {{"running", Json::object()}}}},
                   {{"name", "side"}, {"state", {{"running", Json::object()}}}}});
  st.OnPod(pod);
  EXPECT_EQ(sched->cache().Snapshot("n1")->usage[0].usedmem_mib, 8000);  // still running
  pod["status"]["initContainerStatuses"][0]["state"] = {{"terminated", {{"exitCode", 1}}}};
  st.OnPod(pod);
  EXPECT_EQ(sched->cache().Snapshot("n1")->usage[0].usedmem_mib,
            8000);  // failed: it will run again
  pod["status"]["initContainerStatuses"][0]["state"] = {{"terminated", {{"exitCode", 0}}}};
  pod["status"]["phase"] = "Running";
  st.OnPod(pod);
  EXPECT_EQ(sched->cache().Snapshot("n1")->usage[0].usedmem_mib, 3000);  // sidecar + app
  EXPECT_EQ(sched->cache().Snapshot("n1")->usage[0].used, 2);
  EXPECT_EQ(st.NamespaceUsage()["ml"].mem_mib, 3000);
}

}  // namespace
}  // namespace hami::extender
