// Extender verbs on the pure paths (no API server): decisions, reasons, dry runs, leader gate.
#include "extender/extender.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/annotations.h"
#include "extender/metrics.h"
#include "vendors/nvidia/annotations.h"

namespace hami::extender {
namespace {

constexpr int64_t kNow = 1'700'000'000;

Json NodeJson(const std::string& name, int gpus, int64_t mem = 16000,
              const std::string& type = "NVIDIA-T4") {
  Json devs = Json::array();
  for (int i = 0; i < gpus; ++i)
    devs.push_back({{"id", name + "-gpu" + std::to_string(i)},
                    {"index", i},
                    {"count", 4},
                    {"devmem", mem},
                    {"devcore", 100},
                    {"type", type},
                    {"health", true}});
  return Json{{"metadata",
               {{"name", name}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}}};
}

Json PodJson(const std::string& uid, const Json& limits, const Json& init_limits = nullptr) {
  Json spec{{"containers", Json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}};
  if (!init_limits.is_null())
    spec["initContainers"] =
        Json::array({{{"name", "init"}, {"resources", {{"limits", init_limits}}}}});
  return Json{{"metadata", {{"name", "pod-" + uid}, {"namespace", "ml"}, {"uid", uid}}},
              {"spec", spec}};
}

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    StateOptions so;
    so.clock = &clock_;
    state_ = std::make_unique<ClusterState>(*sched_, so);
    state_->OnNode(NodeJson("n1", 2));
    state_->OnNode(NodeJson("n2", 2, 8000));
    state_->OnNode(NodeJson("a100", 1, 80000, "NVIDIA-A100"));
    ExtenderOptions eo;
    eo.clock = &clock_;
    eo.is_leader = [this] { return leader_; };
    eo.leader_name = [] { return std::string("hami-0"); };
    eo.synced = [this] { return synced_; };
    ext_ = std::make_unique<Extender>(*sched_, *state_, nullptr, eo);
  }
  ExtenderFilterResult Filter(const Json& pod,
                              std::vector<std::string> names = {"n1", "n2", "a100"}) {
    ExtenderArgs a;
    a.pod = pod;
    a.node_names = std::move(names);
    return ext_->Filter(a);
  }
  FakeClock clock_{kNow};
  bool leader_ = true;
  bool synced_ = true;
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<Extender> ext_;
};

TEST_F(ExtenderTest, FilterTable) {
  struct Case {
    const char* name;
    Json pod;
    std::vector<std::string> names;
    size_t passed;          // NodeNames size
    std::string failed_on;  // a node expected in FailedNodes or FailedAndUnresolvableNodes
    std::string reason_part;
    std::string error_part;
  };
  const std::vector<Case> cases = {
      {"one gpu share",
       PodJson("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}}),
       {"n1", "n2"},
       1,
       "",
       "",
       ""},
      {"too much memory per gpu",
       PodJson("b", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "12000"}}),
       {"n2"},
       0,
       "n2",
       "CardInsufficientMemory",
       ""},
      {"more gpus than a node has",
       PodJson("c", {{"nvidia.com/gpu", "2"}}),
       {"a100"},
       0,
       "a100",
       "",
       ""},
      {"type filter",
       [] {
         Json p = PodJson("d", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}});
         p["metadata"]["annotations"] = {{"nvidia.com/use-gputype", "A100"}};
         return p;
       }(),
       {"n1", "a100"},
       1,
       "",
       "",
       ""},
      // Reasons come back when no node fits (on success kube-scheduler does not read them).
      {"type filter, nothing fits",
       [] {
         Json p = PodJson("d2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}});
         p["metadata"]["annotations"] = {{"nvidia.com/use-gputype", "A100"}};
         return p;
       }(),
       {"n1", "n2"},
       0,
       "n1",
       "CardTypeMismatch",
       ""},
      {"unknown node",
       PodJson("e", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}),
       {"ghost", "n1"},
       1,
       "",
       "",
       ""},
      {"unknown node only",
       PodJson("e2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}),
       {"ghost"},
       0,
       "ghost",
       "node unregistered",
       ""},
      // Nodes without HAMi devices take a pod without devices; among GPU nodes only, the policy
      // picks one.
      {"no devices: a node without HAMi devices",
       PodJson("f", {{"cpu", "1"}}),
       {"n1", "ghost"},
       1,
       "",
       "",
       ""},
      {"no devices, only gpu nodes",
       PodJson("f2", {{"cpu", "1"}}),
       {"n1", "n2", "a100"},
       1,
       "",
       "",
       ""},
      {"bad request",
       PodJson("g", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "-5"}}),
       {"n1"},
       0,
       "",
       "",
       "gpumem"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Filter(c.pod, c.names);
    EXPECT_NE(r.error.find(c.error_part), std::string::npos) << r.error;
    if (!c.error_part.empty()) continue;
    EXPECT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.node_names.has_value());
    EXPECT_EQ(r.node_names->size(), c.passed);
    if (!c.failed_on.empty()) {
      std::string why;
      if (r.failed_nodes.count(c.failed_on)) why = r.failed_nodes.at(c.failed_on);
      if (r.failed_and_unresolvable.count(c.failed_on))
        why = r.failed_and_unresolvable.at(c.failed_on);
      EXPECT_FALSE(why.empty()) << "no failure recorded for " << c.failed_on;
      EXPECT_NE(why.find(c.reason_part), std::string::npos) << why;
    }
  }
}

TEST_F(ExtenderTest, FilterReservesAndRefilterReplaces) {
  auto r = Filter(PodJson("x", {{"nvidia.com/gpu", "1"},
                                {"nvidia.com/gpumem", "4000"},
                                {"nvidia.com/gpucores", "30"}}),
                  {"n2"});
  ASSERT_EQ(r.node_names->size(), 1u);
  auto used = [&] {
    int64_t mem = 0;
    const auto snap = sched_->cache().Snapshot("n2");
    for (const auto& u : snap->usage) mem += u.usedmem_mib;
    return mem;
  };
  EXPECT_EQ(used(), 4000);
  EXPECT_EQ(state_->pod_count(), 1u);
  // The same pod filtered again (its bind failed): the old reservation is given back first.
  Filter(PodJson("x", {{"nvidia.com/gpu", "1"},
                       {"nvidia.com/gpumem", "4000"},
                       {"nvidia.com/gpucores", "30"}}),
         {"n2"});
  EXPECT_EQ(used(), 4000);
  // Two whole-card pods fill n2; a third does not fit.
  EXPECT_EQ(Filter(PodJson("y", {{"nvidia.com/gpu", "1"}}), {"n2"}).node_names->size(), 1u);
  auto third = Filter(PodJson("z", {{"nvidia.com/gpu", "1"}}), {"n2"});
  EXPECT_EQ(third.node_names->size(), 0u);
  // One card holds 4000 MiB, the other a whole-card pod: neither has a whole card free.
  EXPECT_EQ(third.failed_nodes["n2"], "2/2 CardInsufficientMemory");
}

// Upstream's pkg/scheduler TestGetNodesUsageFailsClosedWithoutMigAllocation through /filter: a
// pod's grant on a MIG-mode GPU without its hami.io/vgpu-mig-allocations entry (written by an older
// HAMi) is charged, and the GPU then reads as unhealthy (retryable) until that pod is gone; with
// its entry (upstream's TestGetNodesUsageRestoresMigAllocationByProfileAndPlacement) or on a
// hami-core GPU the same grant blocks nothing. Each case has a node of its own with upstream's one
// GPU.
TEST_F(ExtenderTest, UpstreamTestGetNodesUsageFailsClosedWithoutMigAllocation) {
  struct Case {
    const char* name;
    const char* mode;  // of the GPU
    bool entry;        // the grant's hami.io/vgpu-mig-allocations entry is there
    const char* why;   // "" = the next pod passes while the grant is held
  };
  const Case cases[] = {
      {"no MIG entry", "mig", false, "1/1 CardNotHealth"},
      {"with its MIG entry", "mig", true, ""},
      {"a hami-core GPU", "hami-core", false, ""},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string node = "mig" + std::to_string(i), gpu = "GPU-" + std::to_string(i++);
    Json dev{{"id", gpu},       {"index", 0},     {"count", 7},
             {"devmem", 40960}, {"devcore", 100}, {"type", "NVIDIA-A100"},
             {"health", true},  {"mode", c.mode}};
    if (std::string(c.mode) == "mig")
      dev["migProfiles"] = Json::array(
          {{{"name", "1g.5gb"},
            {"memoryMB", 5120},
            {"core", 14},
            {"sliceCount", 1},
            {"placements",
             Json::array({{{"start", 5}, {"size", 1}}, {{"start", 6}, {"size", 1}}})}}});
    state_->OnNode(
        Json{{"metadata",
              {{"name", node},
               {"annotations", {{"hami.io/node-nvidia-register", Json::array({dev}).dump()}}}}}});
    Json ann{{"hami.io/vgpu-node", node},
             {"hami.io/vgpu-devices-allocated", gpu + ",NVIDIA,5120,14:;"},
             {"hami.io/vgpu-time", std::to_string(kNow)}};
    if (c.entry)
      ann["hami.io/vgpu-mig-allocations"] =
          Json::array({{{"containerIndex", 0},
                        {"deviceIndex", 0},
                        {"gpuUUID", gpu},
                        {"profile", "1g.5gb"},
                        {"placement", {{"start", 6}, {"size", 1}}},
                        {"migUUID", "MIG-a"},
                        {"gpuInstanceID", 7},
                        {"computeInstanceID", 0}}})
              .dump();
    const Json held{{"metadata",
                     {{"name", "held-" + node},
                      {"namespace", "ml"},
                      {"uid", "held-" + node},
                      {"annotations", ann}}},
                    {"spec",
                     {{"nodeName", node},
                      {"schedulerName", "hami-scheduler"},
                      {"containers", Json::array({{{"name", "main"}}})}}},
                    {"status", {{"phase", "Running"}}}};
    state_->OnPod(held);
    EXPECT_TRUE(state_->Find("held-" + node).has_value());  // charged either way
    const Json one{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
    auto r = Filter(PodJson("next-" + node, one), {node});
    ASSERT_TRUE(r.node_names.has_value());
    EXPECT_EQ(r.node_names->size(), std::string(c.why).empty() ? 1u : 0u);
    EXPECT_EQ(r.failed_nodes[node], c.why);
    EXPECT_EQ(r.failed_and_unresolvable.count(node), 0u);
    // The pod leaves: the GPU takes the next pod.
    state_->OnPodDeleted(held);
    r = Filter(PodJson("after-" + node, one), {node});
    ASSERT_TRUE(r.node_names.has_value());
    EXPECT_EQ(r.node_names->size(), 1u) << r.failed_nodes[node];
  }
}

TEST_F(ExtenderTest, DryRunWithFullNodesHasNoSideEffects) {
  Filter(PodJson("seed", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}}), {"n2"});
  const size_t pods = state_->pod_count();
  ExtenderArgs a;
  a.pod = PodJson("sim", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "4000"}});
  a.nodes = std::vector<Json>{NodeJson("n2", 2, 8000), NodeJson("fresh", 2, 8000),
                              Json{{"metadata", {{"name", "bare"}}}}};
  auto r = ext_->Filter(a);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.nodes.has_value());
  ASSERT_EQ(r.nodes->size(), 1u);
  // n2 has 6000 of 8000 used on one card (seen from the live cache): only "fresh" fits 2 x 4000.
  EXPECT_EQ((*r.nodes)[0]["metadata"]["name"], "fresh");
  EXPECT_EQ(*r.node_names, std::vector<std::string>{"fresh"});
  EXPECT_TRUE(r.failed_nodes.count("n2"));
  EXPECT_NE(r.failed_nodes["bare"].find("unregistered"), std::string::npos);
  EXPECT_EQ(state_->pod_count(), pods);
  EXPECT_FALSE(sched_->cache().Snapshot("fresh").has_value());
}

// Upstream's Test_Filter_SimulationEchoesNodesForNonHAMiPod: a simulation (the cluster
// autoscaler sends Nodes, not NodeNames) of a pod without HAMi devices gets every template node
// back, so the extender never vetoes a scale-up for ordinary workloads.
TEST_F(ExtenderTest, UpstreamTest_Filter_SimulationEchoesNodesForNonHAMiPod) {
  ExtenderArgs a;
  a.pod = PodJson("plain", {});
  a.nodes = std::vector<Json>{Json{{"metadata", {{"name", "template-node-1"}}}},
                              Json{{"metadata", {{"name", "template-node-2"}}}}};
  auto r = ext_->Filter(a);
  EXPECT_EQ(r.error, "");
  ASSERT_TRUE(r.nodes.has_value());
  ASSERT_EQ(r.nodes->size(), 2u);
  EXPECT_EQ((*r.nodes)[1]["metadata"]["name"], "template-node-2");
  EXPECT_TRUE(r.failed_nodes.empty());
}

// Upstream's TestPredicateRoute_CacheNotSynced: /filter before the informers' first list is an
// error in the reply (upstream waits for the sync, failing when the request is cancelled), and
// decides nothing; once synced the same pod is placed.
TEST_F(ExtenderTest, UpstreamTestPredicateRoute_CacheNotSynced) {
  synced_ = false;
  auto r = Filter(PodJson("early", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}));
  EXPECT_NE(r.error.find("informers not synced"), std::string::npos) << r.error;
  EXPECT_EQ(state_->pod_count(), 0u);
  synced_ = true;
  r = Filter(PodJson("early", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(state_->pod_count(), 1u);
}

// Upstream's TestBind_PodNotFound: a /bind for a pod the scheduler never decided is an error in the
// reply, and binds nothing.
TEST_F(ExtenderTest, UpstreamTestBind_PodNotFound) {
  auto b = ext_->Bind({"missing-pod", "default", "", "n1"});
  EXPECT_NE(b.error.find("pod default/missing-pod has no device decision to bind"),
            std::string::npos)
      << b.error;
  EXPECT_EQ(state_->pod_count(), 0u);
}

TEST_F(ExtenderTest, FollowersRefuse) {
  leader_ = false;
  auto r = Filter(PodJson("l", {{"nvidia.com/gpu", "1"}}));
  EXPECT_NE(r.error.find("not the leader (leader: hami-0)"), std::string::npos) << r.error;
  EXPECT_NE(ext_->Bind({"p", "ml", "u", "n1"}).error.find("not the leader"), std::string::npos);
  EXPECT_EQ(state_->pod_count(), 0u);
}

TEST_F(ExtenderTest, HandleBodies) {
  const Json bad = Json::parse(ext_->HandleFilter("{"));
  EXPECT_NE(bad["Error"].get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_TRUE(bad.contains("FailedNodes"));
  const Json ok = Json::parse(ext_->HandleFilter(Json{
      {"Pod", PodJson("h", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "100"}})},
      {"Nodes", nullptr},
      {"NodeNames", {"n1"}}}.dump()));
  EXPECT_EQ(ok["NodeNames"], Json::array({"n1"}));
  EXPECT_EQ(ok["Error"], "");
  const Json bind = Json::parse(ext_->HandleBind(R"({"PodName":"p"})"));
  EXPECT_NE(bind["Error"].get<std::string>().find("PodNamespace"), std::string::npos);
}

// Bind acts only on the pod it names: another pod's uid, another node or a node that does not exist
// is refused and releases nothing.
TEST_F(ExtenderTest, BindActsOnlyOnThePodItNames) {
  auto r =
      Filter(PodJson("victim", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}}), {"n1"});
  ASSERT_EQ(r.node_names->size(), 1u) << r.error;
  auto used = [&] {
    int64_t mem = 0;
    const auto snap = sched_->cache().Snapshot("n1");
    for (const auto& u : snap->usage) mem += u.usedmem_mib;
    return mem;
  };
  ASSERT_EQ(used(), 4000);
  struct Case {
    const char* name;
    ExtenderBindingArgs args;
    const char* error_part;
  };
  const Case cases[] = {
      {"another pod's uid", {"pod-attacker", "ml", "victim", "n1"}, "belongs to pod ml/pod-victim"},
      {"another namespace",
       {"pod-victim", "other", "victim", "n1"},
       "belongs to pod ml/pod-victim"},
      {"not the decision's node",
       {"pod-victim", "ml", "victim", "n2"},
       "decided for node n1, not n2"},
      {"no such node", {"pod-victim", "ml", "victim", "ghost"}, "decided for node n1"},
      {"dot-dot pod name", {"..", "ml", "victim", "n1"}, "DNS-1123 subdomain"},
      {"slash in namespace", {"pod-victim", "ml/x", "victim", "n1"}, "DNS-1123 label"},
      {"bad node name", {"pod-victim", "ml", "victim", "../n1"}, "DNS-1123 subdomain"},
      {"bad uid", {"pod-victim", "ml", "vic/tim", "n1"}, "uid"},
      // Upstream refuses a bind without a uid (scheduler_identity_test.go
      // TestBindRejectsRequestWithoutUID); ours takes the named pod's own reservation, held to it.
      {"no uid, not the decision's node",
       {"pod-victim", "ml", "", "n2"},
       "decided for node n1, not n2"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto b = ext_->Bind(c.args);
    EXPECT_NE(b.error.find(c.error_part), std::string::npos) << b.error;
    EXPECT_EQ(used(), 4000);  // the victim's reservation stands
    EXPECT_EQ(state_->pod_count(), 1u);
  }
  EXPECT_EQ(ext_->counters().refused_requests.load(), 9);
  // The victim's own bind goes through; a /filter for it afterwards cannot rewrite its decision.
  EXPECT_EQ(ext_->Bind({"pod-victim", "ml", "victim", "n1"}).error, "");
  auto again =
      Filter(PodJson("victim", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}}), {"n2"});
  EXPECT_NE(again.error.find("already bound to node n1"), std::string::npos) << again.error;
  EXPECT_EQ(state_->Find("victim")->allocation.node, "n1");
  EXPECT_EQ(used(), 4000);
  // A request copy that says it is bound is not decided either.
  Json bound = PodJson("other", {{"nvidia.com/gpu", "1"}});
  bound["spec"]["nodeName"] = "n2";
  EXPECT_NE(Filter(bound).error.find("already bound to node n2"), std::string::npos);
  EXPECT_FALSE(state_->Find("other").has_value());
}

// With the API server's copy (informer cache) the uid and the bound state are checked there.
TEST_F(ExtenderTest, FilterChecksThePodOnTheApiServer) {
  std::map<std::string, Json> live;
  ExtenderOptions eo;
  eo.clock = &clock_;
  eo.pod_lookup = [&live](const std::string& ns,
                          const std::string& name) -> ExtenderOptions::LivePodRef {
    auto it = live.find(ns + "/" + name);
    if (it == live.end()) return nullptr;
    return std::make_shared<const Json>(it->second);
  };
  ext_ = std::make_unique<Extender>(*sched_, *state_, nullptr, eo);
  const Json mine = PodJson("mine", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}});
  live["ml/pod-mine"] = mine;
  // The attacker's own pod name with fresh uids: refused, nothing reserved.
  for (int i = 0; i < 20; ++i) {
    Json forged = mine;
    forged["metadata"]["uid"] = "fresh-" + std::to_string(i);
    auto r = Filter(forged);
    EXPECT_NE(r.error.find("has uid mine, not fresh-"), std::string::npos) << r.error;
  }
  EXPECT_EQ(state_->pod_count(), 0u);
  EXPECT_EQ(Filter(mine).node_names->size(), 1u);
  live["ml/pod-mine"]["spec"]["nodeName"] = "n2";
  EXPECT_NE(Filter(mine).error.find("already bound to node n2"), std::string::npos);
}

// Decisions no bind follows lapse after the TTL (injected clock): 20 /filter calls with fresh uids
// fill a GPU only until then, and a bind after the lapse is refused.
TEST_F(ExtenderTest, ReservationsWithoutBindExpire) {
  const Json whole = {{"nvidia.com/gpu", "1"}};
  int placed = 0;
  for (int i = 0; i < 20; ++i)
    if (Filter(PodJson("phantom-" + std::to_string(i), whole), {"a100"}).node_names->size() == 1)
      ++placed;
  EXPECT_EQ(placed, 1);  // one whole card
  EXPECT_EQ(Filter(PodJson("real", whole), {"a100"}).node_names->size(), 0u);
  clock_.AdvanceSeconds(state_->options().reservation_ttl_s - 1);
  EXPECT_EQ(Filter(PodJson("real", whole), {"a100"}).node_names->size(), 0u);
  clock_.AdvanceSeconds(1);
  auto r = Filter(PodJson("real", whole), {"a100"});
  ASSERT_EQ(r.node_names->size(), 1u) << r.error;
  EXPECT_EQ(state_->expired_reservations(), 1);
  EXPECT_FALSE(state_->Find("phantom-0").has_value());
  EXPECT_NE(ext_->Bind({"pod-phantom-0", "ml", "phantom-0", "a100"}).error.find("refused"),
            std::string::npos);
  // A bound decision never lapses.
  EXPECT_EQ(ext_->Bind({"pod-real", "ml", "real", "a100"}).error, "");
  clock_.AdvanceSeconds(10 * state_->options().reservation_ttl_s);
  EXPECT_EQ(state_->ExpireReservations(), 0);
  EXPECT_TRUE(state_->Find("real").has_value());
  const std::string text = RenderMetrics(*sched_, *state_, &ext_->counters());
  EXPECT_NE(text.find("hami_scheduler_reservations_expired_total 1"), std::string::npos);
  // Upstream's name of the same count (PR #3088).
  EXPECT_NE(
      text.find(
          R"(hami_scheduler_stale_reservations_total{phase="reserve",device_type="",failure_reason="expired"} 1)"),
      std::string::npos)
      << text;
}

TEST(DecisionPatch, UpstreamKeys) {
  core::PodAllocation alloc;
  alloc.containers = {{core::ContainerDevice{"GPU-a", core::kNvidiaVendor, 3000, 30, 0}}};
  auto decision = vendors::VendorSet::NvidiaOnly().EncodeDecision(alloc, kNow);
  ASSERT_TRUE(decision.ok()) << decision.status();
  const Json p = DecisionPatch("n1", *decision, kNow);
  EXPECT_EQ(
      p,
      Json::parse(
          R"({"metadata":{"annotations":{"hami.io/vgpu-node":"n1","hami.io/vgpu-time":"1700000000",
    "hami.io/vgpu-devices-to-allocate":"GPU-a,NVIDIA,3000,30:;","hami.io/vgpu-devices-allocated":"GPU-a,NVIDIA,3000,30:;",
    "hami.io/bind-phase":null,"hami.io/bind-time":null},"labels":{"hami.io/vgpu-node":"n1"}}})"));
}

TEST_F(ExtenderTest, MetricsReflectAllocations) {
  Filter(PodJson("m", {{"nvidia.com/gpu", "1"},
                       {"nvidia.com/gpumem", "3000"},
                       {"nvidia.com/gpucores", "25"}}),
         {"a100"});
  const std::string text = RenderMetrics(*sched_, *state_, &ext_->counters());
  const std::string want[] = {
      "# TYPE hami_gpu_memory_allocated_bytes gauge",
      R"(hami_gpu_memory_allocated_bytes{zone="vGPU",node="a100",device_uuid="a100-gpu0",device_index="0",device_type="NVIDIA-A100",device_cores="100"} 3145728000)",
      R"(hami_gpu_shared_count{zone="vGPU",node="a100",device_uuid="a100-gpu0",device_index="0",device_type="NVIDIA-A100"} 1)",
      R"(hami_gpu_core_allocated_ratio{zone="vGPU",node="a100",device_uuid="a100-gpu0",device_index="0",device_type="NVIDIA-A100"} 25)",
      R"(hami_gpu_memory_limit_bytes{zone="vGPU",node="n2",device_uuid="n2-gpu1",device_index="1",device_type="NVIDIA-T4"} 8388608000)",
      R"(hami_vgpu_memory_allocated_bytes{zone="vGPU",namespace="ml",node="a100",pod="pod-m",container_index="0",device_uuid="a100-gpu0"} 3145728000)",
      "hami_extender_filter_requests_total 1",
  };
  for (const auto& w : want) EXPECT_NE(text.find(w), std::string::npos) << w << "\n" << text;
}

// Upstream's buckets: an observation counts in the first bucket whose bound holds it (bounds are
// inclusive, as Prometheus' le); above 10 s only in +Inf (the count).
TEST(LatencyHistogram, UpstreamBuckets) {
  struct Case {
    int64_t ns;
    int bucket;  // -1: +Inf only
  } cases[] = {{0, 0},           {1'000'000, 0},   {1'000'001, 1},       {7'000'000, 2},
               {250'000'000, 6}, {999'999'999, 8}, {10'000'000'000, 11}, {10'000'000'001, -1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.ns);
    LatencyHistogram h;
    h.Observe(c.ns);
    for (size_t i = 0; i < h.per_bucket.size(); ++i)
      EXPECT_EQ(h.per_bucket[i].load(), static_cast<int>(i) == c.bucket ? 1 : 0) << i;
    EXPECT_EQ(h.count.load(), 1);
    EXPECT_EQ(h.sum_ns.load(), c.ns);
  }
}

// Upstream's pkg/scheduler/metrics_test.go: the filter and bind duration histograms and totals by
// result are exported after requests (TestMetricsRegistrationAndObservation), with bounded labels:
// result success or error, bind's phase "total" (TestBindDurationLabelsAreBounded,
// TestResultLabel).
TEST_F(ExtenderTest, UpstreamTestMetricsRegistrationAndObservation) {
  const std::string before = RenderMetrics(*sched_, *state_, &ext_->counters());
  EXPECT_EQ(before.find("hami_scheduler_filter_duration_seconds"), std::string::npos) << before;
  ext_->HandleFilter("{");  // error
  ext_->HandleFilter(Json{
      {"Pod", PodJson("h", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "100"}})},
      {"Nodes", nullptr},
      {"NodeNames",
       {"n1"}}}.dump());                   // success
  ext_->HandleBind(R"({"PodName":"p"})");  // error
  const std::string text = RenderMetrics(*sched_, *state_, &ext_->counters());
  const std::string want[] = {
      "# TYPE hami_scheduler_filter_duration_seconds histogram",
      R"(hami_scheduler_filter_duration_seconds_count{result="error"} 1)",
      R"(hami_scheduler_filter_duration_seconds_count{result="success"} 1)",
      R"(hami_scheduler_filter_duration_seconds_bucket{result="success",le="+Inf"} 1)",
      R"(hami_scheduler_filter_duration_seconds_bucket{result="success",le="10"} 1)",
      R"(hami_scheduler_filter_duration_seconds_bucket{result="success",le="0.001"} )",
      R"(hami_scheduler_bind_duration_seconds_count{phase="total",result="error"} 1)",
      "# TYPE hami_scheduler_filter_total counter",
      R"(hami_scheduler_filter_total{result="success"} 1)",
      R"(hami_scheduler_filter_total{result="error"} 1)",
      R"(hami_scheduler_bind_total{result="error"} 1)",
  };
  for (const auto& w : want) EXPECT_NE(text.find(w), std::string::npos) << w << "\n" << text;
  EXPECT_EQ(text.find(R"(hami_scheduler_bind_total{result="success"})"), std::string::npos) << text;
}

// Upstream's allocation outcome counters (PR #3088, docs/develop/scheduler-metrics.md): a reserved
// decision, a pod no node fits, by phase, device type and failure reason; the cache's expired
// reservations as stale reservations.
TEST_F(ExtenderTest, UpstreamAllocationOutcomeCounters) {
  EXPECT_EQ(
      RenderMetrics(*sched_, *state_, &ext_->counters()).find("hami_scheduler_allocations_total"),
      std::string::npos);
  Filter(PodJson("fits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}), {"a100"});
  Filter(PodJson("fits2", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}), {"a100"});
  Filter(PodJson("huge", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "900000"}}), {"a100"});
  const std::string text = RenderMetrics(*sched_, *state_, &ext_->counters());
  const std::string want[] = {
      "# TYPE hami_scheduler_allocations_total counter",
      R"(hami_scheduler_allocations_total{phase="filter",device_type="NVIDIA",failure_reason="none"} 2)",
      R"(hami_scheduler_allocation_failures_total{phase="filter",device_type="NVIDIA",failure_reason="no_fit"} 1)",
  };
  for (const auto& w : want) EXPECT_NE(text.find(w), std::string::npos) << w << "\n" << text;
  EXPECT_EQ(text.find("hami_scheduler_bind_rollbacks_total{"), std::string::npos) << text;
}

// Upstream's replica gauges (PR #2758): a follower reports 0 for both, as upstream's does.
TEST(ReplicaMetrics, UpstreamIsLeaderAndCacheSynced) {
  struct Case {
    bool leader, synced;
    const char* want;
  } cases[] = {
      {true, true, "hami_scheduler_is_leader 1\n"},
      {true, true, "hami_scheduler_cache_synced 1\n"},
      {true, false, "hami_scheduler_cache_synced 0\n"},
      {false, true, "hami_scheduler_is_leader 0\n"},
      {false, true, "hami_scheduler_cache_synced 0\n"},
      {true, true, "# TYPE hami_scheduler_is_leader gauge\n"},
  };
  for (const Case& c : cases) {
    const std::string text = RenderReplicaMetrics(c.leader, c.synced);
    EXPECT_NE(text.find(c.want), std::string::npos) << c.want << "\n" << text;
  }
}

// Quota series carry upstream's labels (quota_name = the resource, limit = its value, no zone), and
// two ResourceQuotas of one namespace give one series per resource with the tighter limit.
TEST_F(ExtenderTest, QuotaMetricsOneSeriesPerResourceWithTheTightestLimit) {
  auto quota = [](const char* name, const char* mem) {
    return Json{
        {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", std::string("q-") + name}}},
        {"spec", {{"hard", {{"limits.nvidia.com/gpumem", mem}}}}}};
  };
  state_->OnQuota(quota("wide", "20000"));
  state_->OnQuota(quota("tight", "8000"));
  Filter(PodJson("m", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}), {"a100"});
  const std::string text = RenderMetrics(*sched_, *state_, &ext_->counters());
  EXPECT_NE(
      text.find(
          R"(hami_resource_quota_used{namespace="ml",quota_name="nvidia.com/gpumem",limit="8000"} 3000)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(R"(hami_resource_quota_limit{namespace="ml",quota_name="nvidia.com/gpumem"} 8000)"),
      std::string::npos);
  EXPECT_EQ(text.find("limit=\"20000\""), std::string::npos) << "one series per resource";
}

// The cache knows node allocatable CPU/memory and what every bound pod asks (devices or not), and
// Filter keeps the pod's CPU/memory: a GPU pod avoids the node whose CPU a kube-scheduler-placed
// pod has taken, and a reservation counts its CPU until the pod is gone.
TEST_F(ExtenderTest, CpuAndMemoryOfBoundPodsCount) {
  auto with_cpu = [](Json node, const char* cpu, const char* memory) {
    node["status"]["allocatable"] = {{"cpu", cpu}, {"memory", memory}};
    return node;
  };
  state_->OnNode(with_cpu(NodeJson("c1", 2), "4", "16Gi"));
  state_->OnNode(with_cpu(NodeJson("c2", 2), "8", "32Gi"));
  auto c1 = sched_->cache().Snapshot("c1");
  ASSERT_TRUE(c1.has_value());
  EXPECT_EQ(c1->info.cpu_milli, 4000);
  EXPECT_EQ(c1->info.memory_mib, 16384);
  // A CPU-only pod kube-scheduler bound to c1, with an init container larger than its app.
  Json cpu_pod = PodJson("cpu", {{"cpu", "2500m"}, {"memory", "1Gi"}}, {{"cpu", "3"}});
  cpu_pod["spec"]["nodeName"] = "c1";
  cpu_pod["status"]["phase"] = "Running";
  state_->OnPod(cpu_pod);
  EXPECT_EQ(sched_->cache().Snapshot("c1")->cpu_used, 3000);  // the init container's peak
  EXPECT_EQ(sched_->cache().Snapshot("c1")->mem_used, 1024);
  // A GPU pod asking 2 cores fits only c2 now (c1 would fit its GPU but not its CPU).
  Json gpu = PodJson("g", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"cpu", "2"}});
  auto r = Filter(gpu, {"c1", "c2"});
  ASSERT_EQ(r.node_names->size(), 1u) << r.error;
  EXPECT_EQ((*r.node_names)[0], "c2");
  EXPECT_EQ(sched_->cache().Snapshot("c2")->cpu_used, 2000);  // the reservation carries its CPU
  // The CPU-only pod finishes: its CPU is given back.
  cpu_pod["status"]["phase"] = "Succeeded";
  state_->OnPod(cpu_pod);
  EXPECT_EQ(sched_->cache().Snapshot("c1")->cpu_used, 0);
  // A placed GPU pod seen by the informer (restart) counts its CPU as well.
  Json placed =
      PodJson("h", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"cpu", "1500m"}});
  placed["metadata"]["annotations"] = {
      {"hami.io/vgpu-node", "c1"}, {"hami.io/vgpu-devices-allocated", "c1-gpu0,NVIDIA,1000,0:;"}};
  placed["spec"]["nodeName"] = "c1";
  placed["spec"]["schedulerName"] = "hami-scheduler";  // only our own decisions are charged
  state_->OnPod(placed);
  EXPECT_EQ(sched_->cache().Snapshot("c1")->cpu_used, 1500);
  state_->OnPodDeleted(placed);
  EXPECT_EQ(sched_->cache().Snapshot("c1")->cpu_used, 0);
  // A pod without devices on GPU nodes only: placed by the policy and reserved with its CPU; the
  // bound pod from the informer then replaces the reservation (counted once); a node without HAMi
  // devices among the candidates takes it instead.
  Json plain = PodJson("plain", {{"cpu", "3"}});
  auto p = Filter(plain, {"c1", "c2"});
  ASSERT_EQ(p.node_names->size(), 1u) << p.error;
  const std::string where = (*p.node_names)[0];
  const int64_t before = where == "c1" ? 0 : 2000;
  EXPECT_EQ(sched_->cache().Snapshot(where)->cpu_used, before + 3000);
  plain["spec"]["nodeName"] = where;
  state_->OnPod(plain);
  EXPECT_EQ(sched_->cache().Snapshot(where)->cpu_used, before + 3000);
  auto q = Filter(PodJson("plain2", {{"cpu", "3"}}), {"c1", "cpu-node"});
  ASSERT_EQ(q.node_names->size(), 1u);
  EXPECT_EQ((*q.node_names)[0], "cpu-node");
  // More CPU than any GPU node has left: no node (the cache proves it cannot fit).
  auto big = Filter(PodJson("big", {{"cpu", "7"}}), {"c1", "c2"});
  EXPECT_TRUE(big.node_names->empty());
  EXPECT_FALSE(big.failed_nodes.empty() && big.failed_and_unresolvable.empty());
}

}  // namespace
// ---- Filter's phases, one table each (extender.h, "Filter's phases") ----

// 1. Decode + validate: what the pod asks, or why it cannot be scheduled as written.
TEST(FilterPhases, DecodeFilterPod) {
  struct Case {
    const char* name;
    Json pod;
    bool has_devices;
    const char* error_part;  // "" = decodes
  };
  const Case cases[] = {
      {"a GPU share", PodJson("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}), true,
       ""},
      {"no devices", PodJson("b", {{"cpu", "1"}}), false, ""},
      {"a count that is not a quantity", PodJson("d", {{"nvidia.com/gpu", "one"}}), false,
       "cannot be scheduled as written"},
      {"containers not an array",
       Json{{"metadata", {{"name", "e"}}}, {"spec", {{"containers", 3}}}}, false,
       "cannot be scheduled as written"},
  };
  for (const auto& c : cases) {
    ExtenderArgs a;
    a.pod = c.pod;
    auto got = DecodeFilterPod(a, vendors::VendorSet::NvidiaOnly());
    if (*c.error_part) {
      ASSERT_FALSE(got.ok()) << c.name;
      EXPECT_NE(got.status().message().find(c.error_part), std::string::npos)
          << c.name << ": " << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    EXPECT_EQ(got->HasDevices(), c.has_devices) << c.name;
    EXPECT_EQ(got->uid, c.pod["metadata"]["uid"]) << c.name;
  }
}

// 2. Candidate nodes: NodeNames in place (no copy), or the names of the Nodes list.
TEST(FilterPhases, CandidateNodes) {
  struct Case {
    const char* name;
    std::optional<std::vector<std::string>> node_names;
    std::optional<std::vector<Json>> nodes;
    std::vector<std::string> want;
    bool in_place;
  };
  const Case cases[] = {
      {"NodeNames", std::vector<std::string>{"n1", "n2"}, std::nullopt, {"n1", "n2"}, true},
      {"empty NodeNames", std::vector<std::string>{}, std::nullopt, {}, true},
      {"Nodes",
       std::nullopt,
       std::vector<Json>{NodeJson("x", 1), NodeJson("y", 1)},
       {"x", "y"},
       false},
      {"neither", std::nullopt, std::nullopt, {}, false},
  };
  for (const auto& c : cases) {
    ExtenderArgs a;
    a.node_names = c.node_names;
    a.nodes = c.nodes;
    std::vector<std::string> storage;
    const std::vector<std::string>& got = CandidateNodes(a, &storage);
    EXPECT_EQ(got, c.want) << c.name;
    EXPECT_EQ(a.node_names.has_value() && &got == &*a.node_names, c.in_place) << c.name;
  }
}

// 3. Pod checks: only a pod with a uid, Kubernetes names, not bound and not another pod's uid is
// decided for; a refusal reserves nothing.
TEST_F(ExtenderTest, FilterPhasePodChecks) {
  const Json gpu = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  ASSERT_EQ(Filter(PodJson("owner", gpu)).node_names->size(), 1u);  // uid "owner" is pod-owner's
  struct Case {
    const char* name;
    Json pod;
    const char* error_part;  // "" = decided
  };
  const Case cases[] = {
      {"no uid",
       [&] {
         Json p = PodJson("x", gpu);
         p["metadata"].erase("uid");
         return p;
       }(),
       "has no metadata.uid"},
      {"a name that is not a Kubernetes name",
       [&] {
         Json p = PodJson("y", gpu);
         p["metadata"]["name"] = "Not_A_Name";
         return p;
       }(),
       "Not_A_Name"},
      {"already bound in the request",
       [&] {
         Json p = PodJson("z", gpu);
         p["spec"]["nodeName"] = "n1";
         return p;
       }(),
       "already bound to node n1"},
      {"another pod's uid",
       [&] {
         Json p = PodJson("owner", gpu);
         p["metadata"]["name"] = "thief";
         return p;
       }(),
       "belongs to pod ml/pod-owner"},
      {"a fine pod", PodJson("fine", gpu), ""},
  };
  for (const auto& c : cases) {
    const size_t before = state_->pod_count();
    auto r = Filter(c.pod);
    if (*c.error_part) {
      EXPECT_NE(r.error.find(c.error_part), std::string::npos) << c.name << ": " << r.error;
      EXPECT_EQ(state_->pod_count(), before) << c.name;
    } else {
      EXPECT_EQ(r.error, "") << c.name;
      EXPECT_EQ(state_->pod_count(), before + 1) << c.name;
    }
  }
  EXPECT_EQ(ext_->counters().refused_requests.load(), 4);
}

// 4a. Schedule's result as the next step.
TEST(FilterPhases, ScheduleStep) {
  struct Case {
    const char* name;
    Status status;
    bool placed, explained;
    FilterStep want;
  };
  const Case cases[] = {
      {"placed", OkStatus(), true, false, FilterStep::kFits},
      {"placed with reasons", OkStatus(), true, true, FilterStep::kFits},
      {"nothing fits, no reasons yet", OkStatus(), false, false, FilterStep::kExplain},
      {"nothing fits, explained", OkStatus(), false, true, FilterStep::kDone},
      {"lost the race", absl::AbortedError("changed"), false, false, FilterStep::kLostRace},
      {"lost the race while explaining", absl::AbortedError("changed"), false, true,
       FilterStep::kLostRace},
      {"a bad annotation", InvalidArgument("bad"), false, false, FilterStep::kDone},
  };
  for (const auto& c : cases)
    EXPECT_EQ(ScheduleStep(c.status, c.placed, c.explained), c.want) << c.name;
}

// 4b. Encode: the decision's annotations and the fingerprint the reservation keeps.
TEST(FilterPhases, EncodeFilterDecision) {
  auto alloc = [](std::vector<std::vector<core::ContainerDevice>> containers) {
    core::PodAllocation a;
    a.node = "n1";
    a.containers = std::move(containers);
    return a;
  };
  core::ContainerDevice d;
  d.uuid = "GPU-a";
  d.usedmem_mib = 3000;
  d.usedcores = 30;
  core::ContainerDevice bad = d;
  bad.uuid = "GPU,a";
  struct Case {
    const char* name;
    core::PodAllocation allocation;
    const char* to_allocate;  // nullptr = an error
  };
  const Case cases[] = {
      {"one container", alloc({{d}}), "GPU-a,NVIDIA,3000,30:;"},
      {"two containers, the second without devices", alloc({{d}, {}}), "GPU-a,NVIDIA,3000,30:;;"},
      {"a uuid that cannot be written", alloc({{bad}}), nullptr},
  };
  for (const auto& c : cases) {
    auto got = EncodeFilterDecision(vendors::VendorSet::NvidiaOnly(), c.allocation, kNow);
    if (c.to_allocate == nullptr) {
      EXPECT_FALSE(got.ok()) << c.name;
      continue;
    }
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    EXPECT_EQ(got->annotations.at(vendors::nvidia::kNvidiaDevicesToAllocate), c.to_allocate)
        << c.name;
    EXPECT_EQ(got->annotations.at(vendors::nvidia::kNvidiaDevicesAllocated), c.to_allocate)
        << c.name;
    EXPECT_EQ(got->fingerprint,
              vendors::VendorSet::NvidiaOnly().DecisionFingerprint(got->annotations))
        << c.name;
  }
}

// 4c. The quota's verdict, with the rule-out budget.
TEST(FilterPhases, QuotaStep) {
  FilterRetries fresh, spent;
  spent.quota_rule_outs = FilterRetries::kQuotaRetries;
  const Status over = FailedPrecondition("over");
  struct Case {
    const char* name;
    Status quota;
    bool depends_on_device;
    FilterRetries retries;
    size_t candidates;
    FilterStep want;
  };
  const Case cases[] = {
      {"within the quota", OkStatus(), false, fresh, 3, FilterStep::kFits},
      {"over, a fixed charge", over, false, fresh, 3, FilterStep::kDone},
      {"over, a charge that depends on the card", over, true, fresh, 3, FilterStep::kRuleOutNode},
      {"over, the last candidate", over, true, fresh, 1, FilterStep::kDone},
      {"over, no rule-outs left", over, true, spent, 3, FilterStep::kDone},
  };
  for (const auto& c : cases)
    EXPECT_EQ(QuotaStep(c.quota, c.depends_on_device, c.retries, c.candidates), c.want) << c.name;
}

// 4d. Reserve's result.
TEST(FilterPhases, ReserveStep) {
  struct Case {
    const char* name;
    Status reserve;
    FilterStep want;
  };
  const Case cases[] = {
      {"reserved", OkStatus(), FilterStep::kReserved},
      {"the room went to a concurrent decision", absl::AbortedError("x"), FilterStep::kLostRace},
      {"a stale informer copy of the pod", absl::AlreadyExistsError("x"), FilterStep::kLostRace},
      {"an error", absl::InternalError("x"), FilterStep::kDone},
      {"a node that left", absl::NotFoundError("x"), FilterStep::kDone},
  };
  for (const auto& c : cases) EXPECT_EQ(ReserveStep(c.reserve), c.want) << c.name;
}

// 4e. The lost-race budget: kOptimisticAttempts shared attempts, one exclusive, then an error.
TEST(FilterPhases, LostRaceBudget) {
  FilterRetries r;
  std::vector<bool> exclusive;
  do {
    exclusive.push_back(r.Exclusive());
  } while (r.AfterLostRace());
  std::vector<bool> want(FilterRetries::kOptimisticAttempts, false);
  want.push_back(true);
  EXPECT_EQ(exclusive, want);
}

// 4 end to end: a quota charge that depends on the card (a percentage of its memory). The policy
// chooses among the cards the quota leaves room for (ScheduleOptions::quota), so a node whose cards
// are all too large does not fit, with the quota's reason; TryReserve stays the final guard
// (FilterPhases.QuotaStep: a decision it refuses rules its node out).
TEST_F(ExtenderTest, FilterPhaseQuotaRulesOutANode) {
  state_->OnQuota(Json{{"metadata", {{"name", "q"}, {"namespace", "ml"}, {"uid", "q-1"}}},
                       {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "5000"}}}}}});
  const Json half = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}};
  struct Case {
    const char* name;
    std::vector<std::string> names;
    std::vector<std::string> want;        // NodeNames
    std::set<std::string> quota_refused;  // exactly the nodes FailedNodes names (quota reason)
  };
  const Case cases[] = {
      // 50 % of a 16000 MiB (n1) or 80000 MiB (a100) card is over 5000; of n2's 8000 MiB is not.
      {"the small cards fit", {"n1", "n2"}, {"n2"}, {}},
      {"the last candidate", {"n1"}, {}, {"n1"}},
      {"no candidate's cards fit", {"n1", "a100"}, {}, {"n1", "a100"}},
  };
  int i = 0;
  for (const auto& c : cases) {
    const std::string uid = "half-" + std::to_string(i++);
    auto r = Filter(PodJson(uid, half), c.names);
    EXPECT_EQ(r.error, "") << c.name;
    ASSERT_TRUE(r.node_names.has_value()) << c.name;
    EXPECT_EQ(*r.node_names, c.want) << c.name;
    std::set<std::string> refused;
    for (const auto& [node, why] : r.failed_nodes) {
      EXPECT_NE(why.find("ResourceQuotaNotFit"), std::string::npos) << c.name << ": " << why;
      refused.insert(node);
    }
    EXPECT_EQ(refused, c.quota_refused) << c.name;
    EXPECT_TRUE(r.failed_and_unresolvable.empty()) << c.name;
    if (state_->Drop(uid)) (void)sched_->Unreserve(uid);
  }
}

// pkg/scheduler/scheduler_test.go Test_ResourceQuota: one node of four GPUs (2000, 8000, 4000 and
// 6000 MiB) and a quota on limits.nvidia.com/gpumem and gpucores, through /filter; each case's pod
// is gone before the next (upstream deletes it). Upstream's four cases, then ours: whole cards over
// several devices and several containers (the quota counts them together while the cards are
// chosen).
TEST_F(ExtenderTest, UpstreamTest_ResourceQuota) {
  Json devs = Json::array();
  int i = 0;
  for (int64_t mem : {2000, 8000, 4000, 6000})
    devs.push_back({{"id", "device" + std::to_string(i + 1)},
                    {"index", i},
                    {"count", 10},
                    {"devmem", mem},
                    {"devcore", 100},
                    {"type", "NVIDIA"},
                    {"health", true}}),
        ++i;
  state_->OnNode(Json{
      {"metadata",
       {{"name", "node1"}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}}});
  const Json whole = {{"nvidia.com/gpu", 1}};
  struct Case {
    const char* name;
    std::vector<Json> containers;  // each container's limits
    const char* gpucores;
    const char* gpumem;
    std::set<std::string> want;  // the devices granted; empty = node1 does not fit
  };
  const Case cases[] = {
      {"multi device Resourcequota pass",
       {{{"nvidia.com/gpu", 2}, {"nvidia.com/gpucores", 100}, {"nvidia.com/gpumem", 2000}}},
       "200",
       "4000",
       {"device2", "device4"}},
      {"multi device Resourcequota deny",
       {{{"nvidia.com/gpu", 2}, {"nvidia.com/gpucores", 60}, {"nvidia.com/gpumem", 3000}}},
       "200",
       "4000",
       {}},
      // A bare nvidia.com/gpu books the whole card: only the 2000 MiB one is within the quota.
      {"unspecified device Resourcequota pass", {whole}, "100", "2000", {"device1"}},
      {"unspecified device Resourcequota deny", {whole}, "100", "1500", {}},
      // Two whole cards within 6000 MiB: the 4000 and 2000 MiB ones.
      {"multi device unspecified memory pass",
       {{{"nvidia.com/gpu", 2}}},
       "200",
       "6000",
       {"device1", "device3"}},
      {"multi device unspecified memory deny", {{{"nvidia.com/gpu", 2}}}, "200", "5000", {}},
      {"multi container unspecified memory pass",
       {whole, whole},
       "200",
       "6000",
       {"device1", "device3"}},
      {"multi container Resourcequota deny",
       {{{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}},
        {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}}},
       "200",
       "5000",
       {}},
  };
  int k = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Json quota{
        {"metadata", {{"name", "test-quota"}, {"namespace", "ml"}, {"uid", "q"}}},
        {"spec",
         {{"hard",
           {{"limits.nvidia.com/gpucores", c.gpucores}, {"limits.nvidia.com/gpumem", c.gpumem}}}}}};
    state_->OnQuota(quota);
    const std::string uid = "rq-" + std::to_string(k++);
    Json pod = PodJson(uid, c.containers[0]);
    for (size_t ci = 1; ci < c.containers.size(); ++ci)
      pod["spec"]["containers"].push_back(
          {{"name", "c" + std::to_string(ci)}, {"resources", {{"limits", c.containers[ci]}}}});
    auto r = Filter(pod, {"node1"});
    EXPECT_EQ(r.error, "");
    ASSERT_TRUE(r.node_names.has_value());
    const bool fits = !c.want.empty();
    EXPECT_EQ(*r.node_names, fits ? std::vector<std::string>{"node1"} : std::vector<std::string>{})
        << testing::PrintToString(r.failed_nodes)
        << testing::PrintToString(r.failed_and_unresolvable);
    if (fits) {
      auto rec = state_->Find(uid);
      ASSERT_TRUE(rec.has_value());
      std::set<std::string> got;
      for (const auto& ctr : rec->allocation.containers)
        for (const auto& d : ctr) got.insert(d.uuid);
      EXPECT_EQ(got, c.want);
    } else {
      // Upstream lists node1 in FailedNodes; ours in FailedAndUnresolvableNodes when one of its
      // cards can never hold the request (the 2000 MiB card and 3000 MiB per device).
      auto failed = r.failed_nodes;
      failed.insert(r.failed_and_unresolvable.begin(), r.failed_and_unresolvable.end());
      ASSERT_EQ(failed.size(), 1u);
      EXPECT_NE(failed["node1"].find("ResourceQuotaNotFit"), std::string::npos) << failed["node1"];
    }
    if (state_->Drop(uid)) (void)sched_->Unreserve(uid);
    state_->OnQuotaDeleted(quota);
  }
}

// 5 + 6. Commit: the leader is checked again before the decision is written; a replica that lost
// the lease while deciding releases the reservation. The reply names the node.
TEST_F(ExtenderTest, FilterPhaseCommit) {
  const Json gpu = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};
  int leader_checks = 0, leading_for = 1;  // leading for one check: the verb's start
  ExtenderOptions eo;
  eo.clock = &clock_;
  eo.leader_name = [] { return std::string("hami-1"); };
  eo.is_leader = [&] {
    ++leader_checks;
    return leading_for-- > 0;
  };
  ext_ = std::make_unique<Extender>(*sched_, *state_, nullptr, eo);
  auto lost = Filter(PodJson("late", gpu));
  EXPECT_NE(lost.error.find("not the leader (leader: hami-1)"), std::string::npos) << lost.error;
  EXPECT_EQ(leader_checks, 2);
  EXPECT_EQ(state_->pod_count(), 0u);
  EXPECT_EQ(sched_->cache().pod_count(), 0u);
  leading_for = 100;  // leading throughout
  auto won = Filter(PodJson("on-time", gpu), {"n2"});
  EXPECT_EQ(won.error, "");
  EXPECT_EQ(*won.node_names, std::vector<std::string>{"n2"});
  EXPECT_TRUE(state_->Find("on-time").has_value());
}

}  // namespace hami::extender
