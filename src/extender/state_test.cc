// ClusterState: node registration, pod decisions, stale informer copies, quotas, handshake.
#include "extender/state.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/annotations.h"
#include "core/pod_codec.h"
#include "extender/metrics.h"
#include "vendors/testing/mixed_config.h"

namespace hami::extender {
namespace {

constexpr int64_t kNow = 1'700'000'000;

// A quota demand of NVIDIA memory (MiB) and cores under upstream's default resource names.
PodTotals Nvidia(int64_t mem_mib, int64_t cores) {
  PodTotals t;
  if (mem_mib != 0) t["nvidia.com/gpumem"] = mem_mib;
  if (cores != 0) t["nvidia.com/gpucores"] = cores;
  return t;
}

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
    NodeView v = NodeViewFromJson(c.node, kNow, 60);
    EXPECT_EQ(v.registered, c.registered) << v.error;
    EXPECT_EQ(v.unhealthy, c.unhealthy) << v.error;
    EXPECT_EQ(v.info.devices.size(), c.devices);
    EXPECT_EQ(v.error.empty(), c.registered && !c.unhealthy) << v.error;
  }
}

// A refused registration (said as a warning once per change) is told apart from a node without any
// (a CPU node: not worth a warning).
TEST(NodeView, RefusedRegistrationIsToldFromAnAbsentOne) {
  Json many = Json::array();
  for (int i = 0; i < 129; ++i)
    many.push_back({{"id", "GPU-" + std::to_string(i)},
                    {"index", i},
                    {"count", 10},
                    {"devmem", 16000},
                    {"devcore", 100},
                    {"type", "NVIDIA-T4"},
                    {"health", true}});
  struct Case {
    const char* name;
    Json node;
    bool refused;
  };
  const Case cases[] = {
      {"no annotation", NodeJson("n", Json::object()), false},
      {"registered", NodeJson("n", {{"hami.io/node-nvidia-register", kTwoGpus}}), false},
      {"garbage", NodeJson("n", {{"hami.io/node-nvidia-register", "[{"}}), true},
      {"129 devices", NodeJson("n", {{"hami.io/node-nvidia-register", many.dump()}}), true},
  };
  for (const auto& c : cases) {
    const NodeView v = NodeViewFromJson(c.node, kNow, 60);
    EXPECT_EQ(v.refused, c.refused) << c.name << ": " << v.error;
    if (c.refused) {
      EXPECT_FALSE(v.registered) << c.name;
    }
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
  // What Filter reserves for pod p-<uid> placed on n1 with one NVIDIA device of 5000 MiB: the
  // decision and the vendors' fingerprint of its annotations.
  static PodRecord Reservation5000(const std::string& uid) {
    PodRecord rec;
    rec.uid = uid;
    rec.namespace_ = "ml";
    rec.name = "p-" + uid;
    rec.allocation = *core::DecodePodDevices("GPU-a,NVIDIA,5000,0:;");
    rec.allocation.node = "n1";
    rec.encoded = vendors::VendorSet::NvidiaOnly().DecisionFingerprint(
        {{"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,5000,0:;"}});
    rec.totals = {{"nvidia.com/gpumem", 5000}};
    return rec;
  }
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
  const PodRecord rec = Reservation5000("u1");
  const std::string encoded = rec.encoded;
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

// Our /bind can finish before the informer delivers our decision patch: a copy from before the
// patch (no decision, not yet bound) is then stale, not an edit of a bound pod. It reports nothing
// and frees nothing (ControlPlaneTest.PodEventsAsUpstream saw a DecisionChangedAfterBind Event
// under load). A bound copy without the decision is the edit, and is reported.
TEST_F(StateTest, CopyFromBeforeOurPatchAfterOurBindIsNoEdit) {
  std::vector<std::string> events;
  RecordRejections(&events);
  ASSERT_TRUE(state_->TryReserve(Reservation5000("u1")).ok());
  state_->MarkBound("u1", "n1");
  state_->OnPod(PodJson("u1", Json::object()));  // the pod as created, delivered late
  EXPECT_TRUE(events.empty()) << events.front();
  EXPECT_EQ(state_->RejectedDecisions()[kRejectChangedAfterBind], 0);
  ASSERT_EQ(state_->Pods().size(), 1u);
  EXPECT_EQ(state_->Pods()[0].bound_node, "n1");
  // The same copy bound to the node, decision gone: an edit after bind, reported; still charged.
  state_->OnPod(PodJson("u1", Json::object(), "Running", "n1"));
  EXPECT_EQ(events, (std::vector<std::string>{"p-u1:" + std::string(kRejectChangedAfterBind)}));
  EXPECT_EQ(state_->Pods().size(), 1u);
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

// pkg/scheduler/scheduler_pod_lifecycle_test.go: how pod events charge and release devices and
// quota. A terminating pod still runs and holds its devices; a delete is known by the pod's UID,
// whatever annotations the final object still carries, and only for that UID; a finished pod
// releases its devices; an undecodable decision of a bound pod is reported.
TEST_F(StateTest, UpstreamPodLifecycle) {
  std::vector<std::string> events;
  RecordRejections(&events);
  state_->OnNode(NodeJson("n1", {{"hami.io/node-nvidia-register", kTwoGpus}}));
  const Json ann{{"hami.io/vgpu-node", "n1"},
                 {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,16000,100:;"}};
  const auto mem_used = [&] {
    const auto usage = state_->NamespaceUsage();
    auto ns = usage.find("ml");
    if (ns == usage.end()) return int64_t{0};
    auto m = ns->second.find("nvidia.com/gpumem");
    return m == ns->second.end() ? int64_t{0} : m->second;
  };
  const auto terminating = [&](const std::string& uid) {
    Json pod = PodJson(uid, ann, "Running", "n1");
    pod["metadata"]["name"] = "long-graceful";
    pod["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z";
    pod["spec"]["terminationGracePeriodSeconds"] = 3600;
    return pod;
  };
  const auto without_annotations = [](Json pod) {
    pod["metadata"]["annotations"] = Json::object();
    return pod;
  };
  {
    SCOPED_TRACE("Test_onAddPod_TerminatingPodReplayedIntoEmptyCache");
    state_->OnPod(terminating("replay-add-uid"));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{1, 16000, 100}));
    EXPECT_EQ(mem_used(), 16000);
  }
  {
    SCOPED_TRACE("Test_onDelPod_CleansCachedAllocationWithoutAnnotations");
    state_->OnPodDeleted(without_annotations(terminating("replay-add-uid")));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
    EXPECT_EQ(mem_used(), 0);
  }
  {
    SCOPED_TRACE("Test_onDelPod_CleansAnnotationlessTombstoneAndIsIdempotent");
    state_->OnPod(terminating("tombstone-uid"));
    state_->OnPodDeleted(without_annotations(terminating("tombstone-uid")));
    state_->OnPodDeleted(without_annotations(terminating("tombstone-uid")));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
    EXPECT_EQ(state_->pod_count(), 0u);
  }
  {
    SCOPED_TRACE("Test_onDelPod_AnnotationlessOldUIDDoesNotDeleteReplacement");
    state_->OnPod(terminating("old-uid"));
    state_->OnPodDeleted(without_annotations(terminating("old-uid")));
    state_->OnPod(terminating("new-uid"));  // same namespace and name, a new UID
    state_->OnPodDeleted(without_annotations(terminating("old-uid")));  // a late, stale delete
    EXPECT_EQ(Usage(0), (core::DeviceUsage{1, 16000, 100}));
    EXPECT_EQ(mem_used(), 16000);
    state_->OnPodDeleted(terminating("new-uid"));
  }
  {
    SCOPED_TRACE("Test_onUpdatePod_TerminatedWithoutAssignmentRemovesCachedUsage");
    state_->OnPod(PodJson("terminal", ann, "Running", "n1"));
    EXPECT_EQ(mem_used(), 16000);
    state_->OnPod(PodJson("terminal", Json::object(), "Succeeded", "n1"));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
    EXPECT_EQ(mem_used(), 0);
  }
  {
    SCOPED_TRACE("Test_onAddPod_ReportsUndecodableBoundAllocation");
    EXPECT_TRUE(events.empty());
    state_->OnPod(PodJson(
        "bad-allocation",
        {{"hami.io/vgpu-node", "n1"}, {"hami.io/vgpu-devices-allocated", "GPU0,NVIDIA,20000:;"}},
        "Running", "n1"));
    EXPECT_EQ(state_->pod_count(), 0u);
    // Upstream's event reason is AllocationDecodeFailed; ours DecisionUndecodable.
    EXPECT_EQ(events, (std::vector<std::string>{"p-bad-allocation:Undecodable"}));
    EXPECT_EQ(state_->RejectedDecisions().at(kRejectUndecodable), 1);
  }
}

// MIG grants read back from pods (hami.io/vgpu-mig-allocations) are charged only when the GPU can
// hold them: mig mode, a profile and placement it reports, the profile's memory and cores, and no
// slice another charged pod holds (docs/security.md).
TEST_F(StateTest, MigGrantsAreCheckedBeforeTheyAreCharged) {
  std::vector<std::string> events;
  RecordRejections(&events);
  state_->OnNode(NodeJson(
      "n1",
      {{"hami.io/node-nvidia-register",
        R"([{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","health":true,"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":5120,"core":14,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":6,"size":1}]},{"name":"2g.10gb","memoryMB":10240,"core":28,"sliceCount":2,"placements":[{"start":0,"size":2},{"start":2,"size":2}]}]},{"id":"GPU-c","index":1,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-T4","health":true,"mode":"hami-core"}])"}}));
  auto ann = [](const std::string& devices, const std::string& profile, int start, int size) {
    return Json{{"hami.io/vgpu-node", "n1"},
                {"hami.io/vgpu-devices-allocated", devices},
                {"hami.io/vgpu-time", std::to_string(kNow)},
                {"hami.io/vgpu-mig-allocations",
                 Json::array({{{"containerIndex", 0},
                               {"deviceIndex", 0},
                               {"gpuUUID", devices.substr(0, 5)},
                               {"profile", profile},
                               {"placement", {{"start", start}, {"size", size}}}}})
                     .dump()}};
  };
  struct Case {
    const char* name;
    Json pod;
    const char* reason;  // "" = charged
  };
  const Case cases[] = {
      {"consistent",
       PodJson("ok", ann("GPU-m,NVIDIA,10240,28:;", "2g.10gb", 0, 2), "Running", "n1"), ""},
      {"slices another pod holds",
       PodJson("twice", ann("GPU-m,NVIDIA,10240,28:;", "2g.10gb", 0, 2), "Running", "n1"),
       kRejectMigPlacement},
      {"a placement the profile lacks",
       PodJson("where", ann("GPU-m,NVIDIA,10240,28:;", "2g.10gb", 4, 2), "Running", "n1"),
       kRejectMigPlacement},
      {"a profile the GPU lacks",
       PodJson("what", ann("GPU-m,NVIDIA,20480,42:;", "3g.20gb", 4, 4), "Running", "n1"),
       kRejectMigPlacement},
      {"less memory than the profile",
       PodJson("small", ann("GPU-m,NVIDIA,100,28:;", "2g.10gb", 2, 2), "Running", "n1"),
       kRejectMigPlacement},
      {"a MIG grant on a hami-core GPU",
       PodJson("shared", ann("GPU-c,NVIDIA,5120,14:;", "1g.5gb", 0, 1), "Running", "n1"),
       kRejectMigPlacement},
      {"another free instance",
       PodJson("one", ann("GPU-m,NVIDIA,5120,14:;", "1g.5gb", 6, 1), "Running", "n1"), ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    state_->OnPod(c.pod);
    const std::string uid = c.pod["metadata"]["uid"];
    EXPECT_EQ(state_->Find(uid).has_value(), std::string(c.reason).empty());
    if (!std::string(c.reason).empty()) {
      ASSERT_FALSE(events.empty());
      EXPECT_EQ(events.back(), "p-" + uid + ":" + c.reason);
    }
  }
  EXPECT_EQ(Usage(0), (core::DeviceUsage{2, 10240 + 5120, 28 + 14, 0x43}));
  EXPECT_EQ(Usage(1), (core::DeviceUsage{}));
}

// One container holding two instances of one MIG GPU (a request for two GPUs on a node with one MIG
// GPU) is read back and charged both; two grants of the decision at one placement are refused.
TEST_F(StateTest, SeveralInstancesOfOneGpuInOneContainer) {
  std::vector<std::string> events;
  RecordRejections(&events);
  state_->OnNode(NodeJson(
      "n1",
      {{"hami.io/node-nvidia-register",
        R"([{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","health":true,"mode":"mig","migProfiles":[{"name":"2g.10gb","memoryMB":10240,"core":28,"sliceCount":2,"placements":[{"start":0,"size":2},{"start":2,"size":2},{"start":4,"size":2}]}]}])"}}));
  auto ann = [](int second_start) {
    Json entries = Json::array();
    for (int k : {0, 1})
      entries.push_back({{"containerIndex", 0},
                         {"deviceIndex", k},
                         {"gpuUUID", "GPU-m"},
                         {"profile", "2g.10gb"},
                         {"placement", {{"start", k == 0 ? 0 : second_start}, {"size", 2}}}});
    return Json{{"hami.io/vgpu-node", "n1"},
                {"hami.io/vgpu-devices-allocated", "GPU-m,NVIDIA,10240,28:GPU-m,NVIDIA,10240,28:;"},
                {"hami.io/vgpu-time", std::to_string(kNow)},
                {"hami.io/vgpu-mig-allocations", entries.dump()}};
  };
  state_->OnPod(PodJson("same", ann(0), "Running", "n1"));
  EXPECT_FALSE(state_->Find("same").has_value());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events.back(), "p-same:" + std::string(kRejectMigPlacement));
  state_->OnPod(PodJson("two", ann(4), "Running", "n1"));
  EXPECT_TRUE(state_->Find("two").has_value());
  EXPECT_EQ(events.size(), 1u);
  EXPECT_EQ(Usage(0), (core::DeviceUsage{2, 2 * 10240, 2 * 28, 0x33}));
}

// Upstream's TestClusterManagerCollectorExposesDynamicMigRuntimeIdentity: the scheduler's
// hami_node_gpu_mig_instance_info carries the MIG UUID and the GPU and compute instance ids the
// device plugin writes back into hami.io/vgpu-mig-allocations, each series its own instance's. A
// grant not made yet keeps its series with the three empty (upstream shows only made instances).
TEST_F(StateTest, UpstreamTestClusterManagerCollectorExposesDynamicMigRuntimeIdentity) {
  state_->OnNode(NodeJson(
      "n1",
      {{"hami.io/node-nvidia-register",
        R"([{"id":"GPU-parent","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100","health":true,"mode":"mig","migProfiles":[{"name":"2g.10gb","memoryMB":10240,"core":28,"sliceCount":2,"placements":[{"start":0,"size":2},{"start":2,"size":2}]}]}])"}}));
  // Entry k of the one container: placement {2k, 2}; with `made`, the plugin's runtime identity
  // (MIG UUID "MIG-runtime-<k>", GPU instance 4 + k, compute instance k).
  auto ann = [](bool made) {
    Json entries = Json::array();
    for (int k : {0, 1}) {
      Json e = {{"containerIndex", 0},
                {"deviceIndex", k},
                {"gpuUUID", "GPU-parent"},
                {"profile", "2g.10gb"},
                {"placement", {{"start", 2 * k}, {"size", 2}}}};
      if (made) {
        e["migUUID"] = "MIG-runtime-" + std::to_string(k);
        e["gpuInstanceID"] = 4 + k;
        e["computeInstanceID"] = k;
      }
      entries.push_back(e);
    }
    return Json{{"hami.io/vgpu-node", "n1"},
                {"hami.io/vgpu-devices-allocated",
                 "GPU-parent,NVIDIA,10240,28:GPU-parent,NVIDIA,10240,28:;"},
                {"hami.io/vgpu-time", std::to_string(kNow)},
                {"hami.io/vgpu-mig-allocations", entries.dump()}};
  };
  auto series = [](int start, const std::string& mig_uuid, const std::string& gi,
                   const std::string& ci) {
    return R"(hami_node_gpu_mig_instance_info{zone="vGPU",node="n1",device_uuid="GPU-parent",)"
           R"(device_index="0",mig_uuid=")" +
           mig_uuid + R"(",profile="2g.10gb",gpu_instance_id=")" + gi +
           R"(",compute_instance_id=")" + ci + R"(",placement_start=")" + std::to_string(start) +
           R"(",placement_size="2"} 1)";
  };
  struct Case {
    const char* name;
    bool made;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"granted, not made yet", false, {series(0, "", "", ""), series(2, "", "", "")}},
      {"made: the plugin wrote the identity back",
       true,
       {series(0, "MIG-runtime-0", "4", "0"), series(2, "MIG-runtime-1", "5", "1")}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    // The same decision each time: only the runtime identity changes.
    state_->OnPod(PodJson("mig", ann(c.made), "Running", "n1"));
    ASSERT_TRUE(state_->Find("mig").has_value());
    const std::string text = RenderMetrics(*sched_, *state_, nullptr);
    for (const std::string& want : c.want)
      EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
    size_t n = 0;
    for (size_t at = text.find("hami_node_gpu_mig_instance_info{"); at != std::string::npos;
         at = text.find("hami_node_gpu_mig_instance_info{", at + 1))
      ++n;
    EXPECT_EQ(n, c.want.size());
  }
  EXPECT_EQ(Usage(0), (core::DeviceUsage{2, 2 * 10240, 2 * 28, 0x0f}));
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
  EXPECT_EQ(state_->NamespaceUsage().at("ml")["nvidia.com/gpumem"], 12000);
  EXPECT_EQ(state_->RejectedDecisions().at(kRejectChangedAfterBind), 1);
  // The pod going away still releases what it was charged.
  state_->OnPodDeleted(PodJson("u1", edited, "Running", "n1"));
  EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
}

// Once bound, a pod keeps its booking until it finishes or is deleted: removing its decision
// annotations (or making them undecodable) by a direct API edit frees nothing and is reported once
// (Event + metric) as a change after bind.
TEST_F(StateTest, DecisionRemovedAfterBindKeepsTheBooking) {
  const Json ann{{"hami.io/vgpu-node", "n1"},
                 {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,12000,50:;"}};
  struct Case {
    const char* name;
    Json edited;  // the annotations after the edit
  };
  const Case cases[] = {
      {"vgpu-devices-allocated removed", {{"hami.io/vgpu-node", "n1"}}},
      {"vgpu-node removed", {{"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,12000,50:;"}}},
      {"vgpu-node emptied",
       {{"hami.io/vgpu-node", ""}, {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,12000,50:;"}}},
      {"both removed", Json::object()},
      {"made undecodable",
       {{"hami.io/vgpu-node", "n1"}, {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA,x,50:;"}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> events;
    RecordRejections(&events);
    state_->OnPod(PodJson("u1", ann, "Running", "n1"));
    ASSERT_EQ(Usage(0), (core::DeviceUsage{1, 12000, 50}));
    state_->OnPod(PodJson("u1", c.edited, "Running", "n1"));
    state_->OnPod(PodJson("u1", c.edited, "Running", "n1"));  // a resync: reported once
    EXPECT_EQ(Usage(0), (core::DeviceUsage{1, 12000, 50}));
    EXPECT_EQ(state_->NamespaceUsage()["ml"]["nvidia.com/gpumem"], 12000);
    EXPECT_EQ(events, (std::vector<std::string>{"p-u1:" + std::string(kRejectChangedAfterBind)}));
    EXPECT_EQ(state_->RejectedDecisions()[kRejectChangedAfterBind], 1);
    // Finishing releases it; so does deletion (below, for a pod still running).
    state_->OnPod(PodJson("u1", c.edited, "Succeeded", "n1"));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
    state_->OnPod(PodJson("u2", ann, "Running", "n1"));
    state_->OnPod(PodJson("u2", c.edited, "Running", "n1"));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{1, 12000, 50}));
    state_->OnPodDeleted(PodJson("u2", c.edited, "Running", "n1"));
    EXPECT_EQ(Usage(0), (core::DeviceUsage{}));
  }
}

// A pod we placed without devices (CPU only) never carried a decision: seen bound without one, it
// is no edit to report (the whole-trace replay's CPU pods said ChangedAfterBind before).
TEST_F(StateTest, CpuOnlyPodBoundWithoutDecisionIsNoEdit) {
  std::vector<std::string> events;
  RecordRejections(&events);
  PodRecord rec;
  rec.uid = "c1";
  rec.namespace_ = "ml";
  rec.name = "p-c1";
  rec.allocation.node = "n1";
  rec.allocation.containers.emplace_back();  // one container, no devices
  ASSERT_TRUE(state_->TryReserve(rec).ok());
  state_->MarkBound("c1", "n1");
  state_->OnPod(PodJson("c1", Json::object(), "Running", "n1"));
  state_->OnPod(PodJson("c1", Json::object(), "Running", "n1"));
  EXPECT_TRUE(events.empty()) << events.front();
  EXPECT_EQ(state_->RejectedDecisions()[kRejectChangedAfterBind], 0);
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
    rec.totals = Nvidia(s.mem, s.cores);
    Status st = state_->TryReserve(rec);
    EXPECT_EQ(st.ok(), s.ok) << st;
    if (!s.ok) {
      EXPECT_NE(std::string(st.message()).find("exceeding resource quota ml/q"), std::string::npos);
    }
  }
  EXPECT_EQ(state_->NamespaceUsage()["ml"]["nvidia.com/gpumem"], 8000);
  EXPECT_FALSE(state_->CheckQuota("ml", Nvidia(1, 0)).ok());
  state_->Drop("q0");
  EXPECT_TRUE(state_->CheckQuota("ml", Nvidia(6000, 30)).ok());
  state_->OnQuotaDeleted(Json{{"metadata", {{"name", "q"}, {"namespace", "ml"}}}});
  EXPECT_TRUE(state_->CheckQuota("ml", Nvidia(1'000'000, 1000)).ok());
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
    EXPECT_EQ(state_->NamespaceUsage()["ml"]["nvidia.com/gpumem"], c.mem);
    EXPECT_EQ(state_->NamespaceUsage()["ml"]["nvidia.com/gpucores"], c.cores);
    state_->OnPodDeleted(pod);
    EXPECT_EQ(state_->NamespaceUsage()["ml"]["nvidia.com/gpumem"], 0);
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
    // memoryFactor reaches the quota through the NVIDIA vendor the file configures.
    auto set = vendors::VendorSet::Load(StrCat("nvidia:\n  memoryFactor: ", c.memory_factor, "\n"));
    ASSERT_TRUE(set.ok()) << set.status();
    StateOptions o;
    o.vendors = set->get();
    ClusterState state(*sched, o);
    int k = 0;
    for (const auto& hard : c.hards)
      state.OnQuota(Json{{"metadata", {{"name", "q" + std::to_string(k++)}, {"namespace", "ml"}}},
                         {"spec", {{"hard", hard}}}});
    EXPECT_EQ(state.CheckQuota("ml", Nvidia(c.mem, c.cores)).ok(), c.ok);
  }
}

TEST_F(StateTest, HousekeepingHandshake) {
  const std::vector<Json> nodes = {
      NodeJson("fresh", {{"hami.io/node-nvidia-register", kTwoGpus}}),
      NodeJson("asked", {{"hami.io/node-nvidia-register", kTwoGpus},
                         {"hami.io/node-handshake", "Requesting_2023-11-14 22:13:00"}}),
      NodeJson("dead", {{"hami.io/node-nvidia-register", kTwoGpus},
                        {"hami.io/node-handshake", "Requesting_2023-11-14 21:00:00"}}),
      // Cleaned up by an earlier cycle: upstream's CheckHealth ("Deleted state") neither asks
      // again nor registers the devices until the device plugin reports (issue 31).
      NodeJson("cleaned", {{"hami.io/node-nvidia-register", kTwoGpus},
                           {"hami.io/node-handshake", "Deleted_2023-11-14 22:13:00"}}),
      NodeJson("cpu-only", Json::object()),
  };
  auto patches = state_->Housekeeping(nodes);
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0].first, "fresh");
  EXPECT_EQ(patches[0].second["metadata"]["annotations"]["hami.io/node-handshake"],
            "Requesting_2023-11-14 22:13:20");
  // Upstream's NodeCleanUp marks the handshake Deleted_<time>.
  EXPECT_EQ(patches[1].first, "dead");
  EXPECT_EQ(patches[1].second["metadata"]["annotations"]["hami.io/node-handshake"],
            "Deleted_2023-11-14 22:13:20");
  EXPECT_EQ(sched_->cache().Snapshot("cleaned")->info.devices.size(), 0u);
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
  EXPECT_EQ(st.NamespaceUsage()["ml"]["nvidia.com/gpumem"], 8000);
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
  EXPECT_EQ(st.NamespaceUsage()["ml"]["nvidia.com/gpumem"], 3000);
}

// ---- Namespace quotas for every vendor (upstream pkg/device/quota_test.go, per vendor) ----
// Upstream's quota manager limits `limits.<resource>` of every backend's memory and core resources
// (GetResourceNames), counts every device of a request, and scales a memory limit by the backend's
// memoryFactor. Here each vendor's Vendor::QuotaKeys says the same; a quota value counts in the
// memory resource's own unit (Hygon memoryFactor 4: 1 = 4 MiB; Cambricon 256 MiB; Moore Threads
// 512 MiB).
// The mixed-cluster vendors (NVIDIA, Hygon, Cambricon, Ascend 910B3) with Hygon's memoryFactor 4,
// plus Moore Threads and Enflame.
std::string QuotaVendors() {
  std::string yaml = vendors::testing::kMixedConfig;
  const std::string hygon = "hygon: {}";
  yaml.replace(yaml.find(hygon), hygon.size(), "hygon: {memoryFactor: 4}");
  return yaml + "mthreads: {}\nenflame: {}\n";
}

class UpstreamQuota : public ::testing::Test {
 protected:
  void SetUp() override {
    state_.reset();  // before what it refers to
    sched_.reset();
    auto set = vendors::VendorSet::Load(QuotaVendors());
    ASSERT_TRUE(set.ok()) << set.status();
    set_ = std::move(*set);
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    StateOptions o;
    o.vendors = set_.get();
    state_ = std::make_unique<ClusterState>(*sched_, o);
  }
  void Quota(const std::string& name, const Json& hard, const Json& extra = Json::object()) {
    Json q{{"metadata", {{"name", name}, {"namespace", "ml"}}}, {"spec", {{"hard", hard}}}};
    q["spec"].update(extra);
    state_->OnQuota(q);
  }
  // What the webhook checks for a pod with these containers' limits.
  StatusOr<PodTotals> Demand(const Json& limits_per_container) {
    Json pod{{"metadata", {{"name", "p"}, {"namespace", "ml"}}},
             {"spec", {{"containers", Json::array()}}}};
    int k = 0;
    for (const Json& l : limits_per_container)
      pod["spec"]["containers"].push_back(
          {{"name", "c" + std::to_string(k++)}, {"resources", {{"limits", l}}}});
    HAMI_ASSIGN_OR_RETURN(auto parsed, set_->ParsePod(pod));
    return set_->QuotaCharge(core::RequestedDeviceTotalsByVendor(parsed));
  }
  // A placed pod charged from its decision annotations, as the informer path charges it.
  PodRecord Placed(const std::string& uid, const std::map<std::string, std::string>& decision,
                   int containers = 1) {
    bool any = false;
    auto alloc = set_->DecodeDecision(decision, &any);
    EXPECT_TRUE(alloc.ok() && any) << alloc.status();
    PodRecord rec;
    rec.uid = uid;
    rec.namespace_ = "ml";
    rec.name = uid;
    rec.allocation = alloc.ok() ? *alloc : core::PodAllocation{};
    rec.kinds.assign(containers, core::ContainerKind::kApp);
    rec.totals = state_->ChargeOf(rec.kinds, rec.allocation);
    return rec;
  }
  std::unique_ptr<vendors::VendorSet> set_;
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
};

TEST_F(UpstreamQuota, TestIsManagedQuota) {
  struct Case {
    const char* resource;
    bool managed;
    bool memory;
    int64_t unit;
  };
  const Case cases[] = {
      {"nvidia.com/gpumem", true, true, 1},
      {"nvidia.com/gpucores", true, false, 1},
      {"hygon.com/dcumem", true, true, 4},  // memoryFactor
      {"hygon.com/dcucores", true, false, 1},
      {"cambricon.com/mlu.smlu.vmemory", true, true, 256},
      {"cambricon.com/mlu.smlu.vcore", true, false, 1},
      {"huawei.com/Ascend910B3-memory", true, true, 1},
      {"huawei.com/Ascend910B3-core", true, false, 1},
      {"mthreads.com/sgpu-memory", true, true, 512},
      {"mthreads.com/sgpu-core", true, false, 1},
      {"enflame.com/gcu-memory", true, true, 1},
      {"enflame.com/gcu-core", true, false, 1},
      // Count resources and other names are not device quotas.
      {"nvidia.com/gpu", false, false, 0},
      {"hygon.com/dcunum", false, false, 0},
      {"enflame.com/gcu", false, false, 0},
      {"other-resource", false, false, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.resource);
    const vendors::QuotaKey* k = state_->QuotaKeyOf(c.resource);
    ASSERT_EQ(k != nullptr, c.managed);
    if (!k) continue;
    EXPECT_EQ(k->memory, c.memory);
    EXPECT_EQ(k->unit, c.unit);
  }
}

// Upstream TestFitQuota per vendor: a namespace with some usage already, and a pod's demand as the
// webhook computes it (every device of a multi-device request, memory x the vendor's unit).
TEST_F(UpstreamQuota, TestFitQuota) {
  struct Case {
    const char* name;
    Json hard;       // the namespace's ResourceQuota
    PodTotals used;  // already charged
    Json limits;     // containers' limits of the new pod
    bool ok;
  };
  const Case cases[] = {
      {"hygon: 2 x 500 units x memoryFactor 4 = 4000 MiB, limit 1500 units = 6000, 2000 used",
       {{"limits.hygon.com/dcumem", "1500"}},
       {{"hygon.com/dcumem", 2000}},
       Json::array({{{"hygon.com/dcunum", "2"}, {"hygon.com/dcumem", "500"}}}),
       true},
      {"hygon: one unit more on each of the two devices exceeds it",
       {{"limits.hygon.com/dcumem", "1500"}},
       {{"hygon.com/dcumem", 2000}},
       Json::array({{{"hygon.com/dcunum", "2"}, {"hygon.com/dcumem", "501"}}}),
       false},
      {"hygon: cores of both devices count",
       {{"limits.hygon.com/dcucores", "100"}},
       {{"hygon.com/dcucores", 50}},
       Json::array(
           {{{"hygon.com/dcunum", "2"}, {"hygon.com/dcumem", "1"}, {"hygon.com/dcucores", "30"}}}),
       false},
      {"cambricon: 2 x 16 x 256 MiB = 8192 MiB within 32 units",
       {{"limits.cambricon.com/mlu.smlu.vmemory", "32"}},
       {},
       Json::array({{{"cambricon.com/vmlu", "2"}, {"cambricon.com/mlu.smlu.vmemory", "16"}}}),
       true},
      {"cambricon: 2 x 17 units exceed 32",
       {{"limits.cambricon.com/mlu.smlu.vmemory", "32"}},
       {},
       Json::array({{{"cambricon.com/vmlu", "2"}, {"cambricon.com/mlu.smlu.vmemory", "17"}}}),
       false},
      {"cambricon: cores default to 100 per card, 2 cards exceed 150",
       {{"limits.cambricon.com/mlu.smlu.vcore", "150"}},
       {},
       Json::array({{{"cambricon.com/vmlu", "2"}, {"cambricon.com/mlu.smlu.vmemory", "1"}}}),
       false},
      {"ascend: two containers of 16384 MiB fill 32768",
       {{"limits.huawei.com/Ascend910B3-memory", "32768"}},
       {},
       Json::array({{{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "16384"}},
                    {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "16384"}}}),
       true},
      {"ascend: with 1 MiB used they do not",
       {{"limits.huawei.com/Ascend910B3-memory", "32768"}},
       {{"huawei.com/Ascend910B3-memory", 1}},
       Json::array({{{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "16384"}},
                    {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "16384"}}}),
       false},
      {"mthreads: 8 units of 512 MiB within 8",
       {{"limits.mthreads.com/sgpu-memory", "8"}},
       {},
       Json::array({{{"mthreads.com/vgpu", "1"}, {"mthreads.com/sgpu-memory", "8"}}}),
       true},
      {"mthreads: 16 units exceed 8",
       {{"limits.mthreads.com/sgpu-memory", "8"}},
       {},
       Json::array({{{"mthreads.com/vgpu", "1"}, {"mthreads.com/sgpu-memory", "16"}}}),
       false},
      {"another vendor's quota does not limit this one",
       {{"limits.nvidia.com/gpumem", "1"}},
       {},
       Json::array({{{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "4000"}}}),
       true},
      {"a mixed pod is held to each vendor's quota",
       {{"limits.nvidia.com/gpumem", "1000"}, {"limits.hygon.com/dcumem", "1000"}},
       {},
       Json::array({{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}},
                    {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "1001"}}}),
       false},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SetUp();
    Quota("q", c.hard);
    if (!c.used.empty()) {
      PodRecord rec;
      rec.uid = "used" + std::to_string(i++);
      rec.namespace_ = "ml";
      rec.name = rec.uid;
      rec.totals = c.used;
      ASSERT_TRUE(state_->TryReserve(rec).ok());
    }
    auto demand = Demand(c.limits);
    ASSERT_TRUE(demand.ok()) << demand.status();
    Status st = state_->CheckQuota("ml", *demand);
    EXPECT_EQ(st.ok(), c.ok) << st;
    if (!c.ok) {
      EXPECT_NE(std::string(st.message()).find("exceeding resource quota ml/q"), std::string::npos);
    }
    // A namespace without quota always fits.
    EXPECT_TRUE(state_->CheckQuota("otherns", *demand).ok());
  }
}

// Upstream TestAddUsageAndRmUsage and TestRmUsageDoesNotUnderflow, per vendor: a placed pod's
// decision charges each device it names (memory as granted, in MiB), and releasing it twice leaves
// nothing negative.
TEST_F(UpstreamQuota, TestAddUsageAndRmUsage) {
  struct Case {
    const char* name;
    std::map<std::string, std::string> decision;
    PodTotals want;
  };
  const Case cases[] = {
      {"nvidia",
       {{"hami.io/vgpu-devices-allocated", "GPU0,NVIDIA,1000,100:;"}},
       {{"nvidia.com/gpumem", 1000}, {"nvidia.com/gpucores", 100}}},
      {"hygon, two devices",
       {{"hami.io/dcu-devices-allocated", "DCU-0,DCU,2000,20:DCU-1,DCU,2000,20:;"}},
       {{"hygon.com/dcumem", 4000}, {"hygon.com/dcucores", 40}}},
      {"cambricon",
       {{"hami.io/cambricon-mlu-devices-allocated", "n-cambricon-mlu-0,MLU,4096,25:;"}},
       {{"cambricon.com/mlu.smlu.vmemory", 4096}, {"cambricon.com/mlu.smlu.vcore", 25}}},
      {"ascend template",
       {{"hami.io/Ascend910B3-devices-allocated", "910B3-0,Ascend910B3,16384,25:;"}},
       {{"huawei.com/Ascend910B3-memory", 16384}, {"huawei.com/Ascend910B3-core", 25}}},
      {"mthreads (core units)",
       {{"hami.io/mthreads-vgpu-devices-allocated", "n-mthreads-0,Mthreads,4096,8:;"}},
       {{"mthreads.com/sgpu-memory", 4096}, {"mthreads.com/sgpu-core", 8}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    PodRecord rec = Placed("p", c.decision);
    EXPECT_EQ(rec.totals, c.want);
    ASSERT_TRUE(state_->TryReserve(rec).ok());
    EXPECT_EQ(state_->NamespaceUsage()["ml"], c.want);
    EXPECT_TRUE(state_->Drop("p"));
    EXPECT_FALSE(state_->Drop("p"));  // a duplicate delete
    const auto usage = state_->NamespaceUsage();
    for (const auto& [resource, amount] : usage.at("ml")) {
      SCOPED_TRACE(resource);
      EXPECT_EQ(amount, 0);
    }
  }
}

// Upstream TestAddQuotaAndDelQuota per vendor: limits.<resource> of every vendor's quota keys are
// read (memory scaled to MiB by the key's unit), other keys ignored, and deleting the object
// removes them. A scoped quota is not enforced (usage is tracked per namespace, as upstream).
TEST_F(UpstreamQuota, TestAddQuotaAndDelQuota) {
  Quota("q", {{"limits.nvidia.com/gpumem", "100"},
              {"limits.nvidia.com/gpucores", "10"},
              {"limits.hygon.com/dcumem", "100"},
              {"limits.cambricon.com/mlu.smlu.vmemory", "100"},
              {"limits.mthreads.com/sgpu-core", "16"},
              {"limits.huawei.com/Ascend910B3-memory", "100"},
              {"limits.hygon.com/dcunum", "4"},
              {"requests.hygon.com/dcumem", "1"},
              {"limits.cpu", "8"}});
  auto quotas = state_->Quotas();
  ASSERT_EQ(quotas.size(), 1u);
  const std::map<std::string, int64_t> want = {
      {"nvidia.com/gpumem", 100},     {"nvidia.com/gpucores", 10},
      {"hygon.com/dcumem", 400},      {"cambricon.com/mlu.smlu.vmemory", 25600},
      {"mthreads.com/sgpu-core", 16}, {"huawei.com/Ascend910B3-memory", 100}};
  EXPECT_EQ(quotas[0].limits, want);
  state_->OnQuotaDeleted(Json{{"metadata", {{"name", "q"}, {"namespace", "ml"}}}});
  EXPECT_TRUE(state_->Quotas().empty());

  Quota("scoped", {{"limits.hygon.com/dcumem", "1"}}, {{"scopes", {"BestEffort"}}});
  Quota("selected", {{"limits.hygon.com/dcumem", "1"}},
        {{"scopeSelector", {{"matchExpressions", Json::array()}}}});
  EXPECT_TRUE(state_->Quotas().empty());
  EXPECT_TRUE(state_->CheckQuota("ml", {{"hygon.com/dcumem", 1000}}).ok());
}

// The quota metrics cover every vendor's keys: one used and one limit series per resource, the
// memory limit in MiB (Hygon: 100 units x memoryFactor 4).
TEST_F(UpstreamQuota, QuotaMetricsForEveryVendor) {
  Quota("q", {{"limits.hygon.com/dcumem", "100"}, {"limits.cambricon.com/mlu.smlu.vcore", "150"}});
  PodRecord rec =
      Placed("p", {{"hami.io/dcu-devices-allocated", "DCU-0,DCU,200,20:DCU-1,DCU,100,10:;"},
                   {"hami.io/cambricon-mlu-devices-allocated", "n-cambricon-mlu-0,MLU,4096,25:;"}});
  ASSERT_TRUE(state_->TryReserve(rec).ok());
  const std::string text = RenderMetrics(*sched_, *state_, nullptr);
  for (
      const char* series :
      {R"(hami_resource_quota_used{namespace="ml",quota_name="hygon.com/dcumem",limit="400"} 300)",
       R"(hami_resource_quota_limit{namespace="ml",quota_name="hygon.com/dcumem"} 400)",
       R"(hami_resource_quota_used{namespace="ml",quota_name="cambricon.com/mlu.smlu.vcore",limit="150"} 25)",
       R"(hami_resource_quota_limit{namespace="ml",quota_name="cambricon.com/mlu.smlu.vcore"} 150)"})
    EXPECT_NE(text.find(series), std::string::npos) << series << "\n" << text;
  // Resources without a quota get no series.
  EXPECT_EQ(text.find("hygon.com/dcucores"), std::string::npos);
}

// A lupine server as the informer delivers it: its remote-mode cards are the remote-GPU backend's,
// named after the node, and its InternalIP reaches the vendor (docs/vendors.md#remote-gpu).
TEST(StateNodeView, LupineServerNodeRegistersTheFleet) {
  auto set = vendors::VendorSet::Load("remotegpu: {}");
  ASSERT_TRUE(set.ok()) << set.status();
  const Json node = Json::parse(R"({"metadata":{"name":"gpu-a",
      "labels":{"hami.io/lupine-server":""},
      "annotations":{"hami.io/node-nvidia-register":
        "[{\"id\":\"GPU-aaa\",\"count\":10,\"devmem\":40000,\"devcore\":100,\"type\":\"A100\",\"health\":true,\"mode\":\"remote\"},{\"id\":\"GPU-own\",\"count\":10,\"devmem\":40000,\"devcore\":100,\"type\":\"A100\",\"health\":true}]"}},
    "status":{"addresses":[{"type":"Hostname","address":"gpu-a"},{"type":"InternalIP","address":7},
                           {"type":"InternalIP","address":"10.0.0.5"}]}})");
  EXPECT_EQ(VendorNodeView(node).internal_ip, "10.0.0.5");
  const NodeView v = NodeViewFromJson(node, 0, 60, **set);
  ASSERT_EQ(v.info.devices.size(), 2u) << v.error;
  EXPECT_EQ(v.info.devices[0].uuid, "GPU-own");
  EXPECT_EQ(v.info.devices[0].vendor, "NVIDIA");
  EXPECT_EQ(v.info.devices[1].uuid, "gpu-a/GPU-aaa");
  EXPECT_EQ(v.info.devices[1].vendor, "RemoteGPU");
  EXPECT_EQ(VendorNodeView(Json::parse(R"({"status":{"addresses":"x"}})")).internal_ip, "");
}

}  // namespace
}  // namespace hami::extender
