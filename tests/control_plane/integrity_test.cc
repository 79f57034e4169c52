// Hostile clients against the control plane (label integration, fake API server, loopback only):
// /filter and /bind that name another pod, node or uid; names that are not Kubernetes names;
// reservations no bind follows; forged or edited decision annotations found when state is rebuilt;
// a leader cut off from the API server. Each case is bounded in count and time.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/annotations.h"
#include "harness.h"
#include "vendors/nvidia/annotations.h"

namespace hami::controlplane {
namespace {

using k8s::testing::FakeApiServer;

Json Gpu(const std::string& name, const std::string& ns, int64_t mem) {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"spec",
       {{"containers", Json::array({{{"name", "c"},
                                     {"image", "cuda:12"},
                                     {"resources",
                                      {{"limits",
                                        {{"nvidia.com/gpu", "1"},
                                         {"nvidia.com/gpumem", std::to_string(mem)}}}}}}})}}}};
}

class IntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(api_.Start().ok()); }
  void AddNode(const std::string& name, int gpus) {
    ASSERT_TRUE(api_.Upsert("nodes", GpuNode(name, gpus)).ok());
    nodes_.push_back(name);
  }
  std::unique_ptr<Replica> StartReplica(ReplicaOptions o = {}) {
    return StartSynced(api_, nodes_.size(), o);
  }
  // Admitted and created (not filtered).
  Json Create(Replica& rep, const Json& spec) {
    KubeScheduler ks(rep.port());
    const std::string ns = spec["metadata"]["namespace"];
    std::string denied;
    Json admitted = ks.Admit(spec, ns, &denied);
    EXPECT_FALSE(admitted.is_null()) << denied;
    auto created = rep.client->Create(k8s::kPods, ns, admitted);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : Json();
  }
  // Created, filtered and bound; "" or why not.
  std::string Schedule(Replica& rep, const Json& spec) {
    Json pod = Create(rep, spec);
    KubeScheduler ks(rep.port());
    std::string err;
    const std::string node = ks.Filter(pod, nodes_, &err);
    if (node.empty()) return err.empty() ? "unschedulable" : err;
    return ks.Bind(pod, node);
  }
  Json Stored(const std::string& ns, const std::string& name) {
    return *api_.Get("pods", ns, name);
  }
  // Per device, the decisions of the pods that are bound (the ones a node can run).
  std::map<std::string, DeviceTotals> BoundTotals() {
    std::map<std::string, DeviceTotals> out;
    for (const auto& pod : api_.List("pods")) {
      auto held = extender::HeldAllocation(pod);
      if (!held || pod["spec"].value("nodeName", "").empty()) continue;
      for (const auto& [uuid, u] :
           core::EffectiveDeviceUsage(extender::KindsOfPodJson(pod), *held)) {
        out[uuid].tasks += u.used;
        out[uuid].mem += u.usedmem_mib;
        out[uuid].cores += u.usedcores;
      }
    }
    return out;
  }
  void ExpectNoOversubscription() {
    for (const auto& [uuid, t] : BoundTotals()) {
      SCOPED_TRACE(uuid);
      EXPECT_LE(t.mem, 16000);
      EXPECT_LE(t.cores, 100);
      EXPECT_LE(t.tasks, 4);
    }
  }

  FakeApiServer api_;
  std::vector<std::string> nodes_;
};

// /bind and /filter act only on the pod they name.
TEST_F(IntegrityTest, BindAndFilterActOnlyOnTheNamedPod) {
  AddNode("node-0", 1);
  AddNode("node-1", 1);
  auto rep = StartReplica();
  KubeScheduler ks(rep->port());
  Json victim = Create(*rep, Gpu("victim", "ml", 12000));
  std::string err;
  const std::string node = ks.Filter(victim, {"node-0"}, &err);
  ASSERT_EQ(node, "node-0") << err;
  Json attacker = Create(*rep, Gpu("attacker", "ml", 1000));
  // The attacker's own pod with the victim's uid: refused, and the victim's reservation stands.
  Json forged = attacker;
  forged["metadata"]["uid"] = victim["metadata"]["uid"];
  EXPECT_NE(ks.Bind(forged, "node-0").find("belongs to pod ml/victim"), std::string::npos);
  // The victim to a node other than its decision's, or to a node that does not exist: refused.
  EXPECT_NE(ks.Bind(victim, "node-1").find("decided for node node-0, not node-1"),
            std::string::npos);
  EXPECT_NE(ks.Bind(victim, "ghost").find("refused"), std::string::npos);
  // Nothing was released: a second 12000-MiB pod does not fit node-0 next to the victim.
  Json second = Create(*rep, Gpu("second", "ml", 12000));
  EXPECT_EQ(ks.Filter(second, {"node-0"}, &err), "");
  EXPECT_EQ(ks.Bind(victim, "node-0"), "");
  EXPECT_EQ(Stored("ml", "victim")["spec"]["nodeName"], "node-0");
  // A /filter for the bound victim does not rewrite its decision.
  const Json before = Stored("ml", "victim")["metadata"]["annotations"];
  EXPECT_EQ(ks.Filter(victim, {"node-1"}, &err), "");
  EXPECT_NE(err.find("already bound to node node-0"), std::string::npos) << err;
  EXPECT_EQ(Stored("ml", "victim")["metadata"]["annotations"], before);
  // 20 /filter calls with fresh uids for a real pod name (or for no pod): nothing is reserved.
  const size_t pods = rep->state->pod_count();
  for (int i = 0; i < 20; ++i) {
    Json phantom = attacker;
    phantom["metadata"]["uid"] = "0000-phantom-" + std::to_string(i);
    if (i % 2) phantom["metadata"]["name"] = "nobody-" + std::to_string(i);
    EXPECT_EQ(ks.Filter(phantom, nodes_, &err), "");
    EXPECT_FALSE(err.empty());
  }
  EXPECT_EQ(rep->state->pod_count(), pods);
  EXPECT_EQ(Schedule(*rep, Gpu("after", "ml", 12000)), "");  // node-1 is still free
  // A pod named ".." never makes the client write to the namespace URL.
  Json dots = attacker;
  dots["metadata"]["name"] = "..";
  EXPECT_EQ(ks.Filter(dots, nodes_, &err), "");
  EXPECT_NE(err.find("DNS-1123"), std::string::npos) << err;
  EXPECT_NE(ks.Bind(dots, "node-0").find("DNS-1123"), std::string::npos);
  EXPECT_EQ(api_.CountRequests("", "^/api/v1/namespaces/ml/?$"), 0);
  ExpectNoOversubscription();
}

// A decision no bind follows gives its devices back after the TTL (injected clock), and its late
// bind is refused.
TEST_F(IntegrityTest, UnboundReservationExpires) {
  AddNode("node-0", 1);
  FakeClock clock;
  auto rep = StartReplica({.reservation_ttl_s = 30, .clock = &clock});
  KubeScheduler ks(rep->port());
  Json idle = Create(*rep, Gpu("idle", "ml", 12000));
  std::string err;
  ASSERT_EQ(ks.Filter(idle, nodes_, &err), "node-0") << err;
  ASSERT_TRUE(WaitFor([&] { return rep->state->Find(idle["metadata"]["uid"])->confirmed; }));
  Json next = Create(*rep, Gpu("next", "ml", 12000));
  EXPECT_EQ(ks.Filter(next, nodes_, &err), "");
  clock.AdvanceSeconds(30);
  ASSERT_EQ(ks.Filter(next, nodes_, &err), "node-0") << err;
  EXPECT_EQ(ks.Bind(next, "node-0"), "");
  EXPECT_NE(ks.Bind(idle, "node-0").find("reservation lapsed after 30 s"), std::string::npos);
  EXPECT_EQ(rep->state->expired_reservations(), 1);
  ExpectNoOversubscription();
}

// Rebuilding after a restart charges only decisions consistent with the binding, the scheduler and
// the device, and reports the rest (Event + metric); edits after bind change nothing.
TEST_F(IntegrityTest, RestartIgnoresForgedDecisions) {
  AddNode("node-0", 1);
  AddNode("node-1", 1);
  ASSERT_TRUE(api_.Upsert("resourcequotas",
                          Json{{"apiVersion", "v1"},
                               {"kind", "ResourceQuota"},
                               {"metadata", {{"name", "gpu"}, {"namespace", "team"}}},
                               {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "10000"}}}}}})
                  .ok());
  auto forged = [&](const std::string& name, const std::string& scheduler, const std::string& bound,
                    const std::string& node, const std::string& devices) {
    Json p = Gpu(name, "evil", 1000);
    p["spec"]["schedulerName"] = scheduler;
    p["spec"]["nodeName"] = bound;
    p["metadata"]["annotations"] = {{core::kVgpuNode, node},
                                    {vendors::nvidia::kNvidiaDevicesAllocated, devices},
                                    {vendors::nvidia::kNvidiaDevicesToAllocate, devices}};
    p["status"] = {{"phase", "Running"}};
    ASSERT_TRUE(api_.Upsert("pods", p).ok());
  };
  forged("other-scheduler", "default-scheduler", "node-0", "node-0",
         "node-0-gpu0,NVIDIA,16000,100:;");
  forged("bound-elsewhere", "hami-scheduler", "node-1", "node-0", "node-0-gpu0,NVIDIA,16000,100:;");
  forged("too-big", "hami-scheduler", "node-0", "node-0", "node-0-gpu0,NVIDIA,20000,100:;");
  auto first = StartReplica();
  ASSERT_EQ(Schedule(*first, Gpu("legit", "team", 8000)), "");
  // The owner edits the annotations of the bound pod to claim 1 MiB on the other node's card.
  Json legit = Stored("team", "legit");
  legit["metadata"]["annotations"][vendors::nvidia::kNvidiaDevicesAllocated] =
      "node-1-gpu0,NVIDIA,1,0:;";
  ASSERT_TRUE(api_.Upsert("pods", legit).ok());
  ASSERT_TRUE(WaitFor(
      [&] { return first->state->RejectedDecisions().count(extender::kRejectChangedAfterBind); }));
  // Past neither the quota nor the card: 8000 MiB are still charged to team and to node-0's card.
  std::string denied;
  EXPECT_TRUE(
      KubeScheduler(first->port()).Admit(Gpu("more", "team", 4000), "team", &denied).is_null());
  EXPECT_NE(denied.find("exceeding resource quota team/gpu"), std::string::npos) << denied;
  EXPECT_EQ(first->state->NamespaceUsage().at("team")["nvidia.com/gpumem"], 8000);
  {
    KubeScheduler ks(first->port());
    Json big = Create(*first, Gpu("big", "ml", 12000));
    std::string err;
    EXPECT_EQ(ks.Filter(big, {"node-0"}, &err), "") << err;
  }
  // (After a restart the annotations are the only record: the webhook's denial of such edits is
  // what keeps them honest then; docs/security.md.)
  ASSERT_TRUE(api_.Delete("pods", "team", "legit").ok());
  ASSERT_TRUE(api_.Delete("pods", "ml", "big").ok());
  first.reset();

  auto second = StartReplica({.identity = "replica-1"});
  ASSERT_TRUE(WaitFor([&] { return second->state->RejectedDecisions().size() >= 3; }));
  const auto rejected = second->state->RejectedDecisions();
  EXPECT_EQ(rejected.at(extender::kRejectForeignScheduler), 1);
  EXPECT_EQ(rejected.at(extender::kRejectNodeMismatch), 1);
  EXPECT_EQ(rejected.at(extender::kRejectExceedsDevice), 1);
  const std::string metrics = KubeScheduler(second->port()).http.Get("/metrics")->body;
  EXPECT_NE(
      metrics.find(
          R"(hami_scheduler_decisions_rejected_total{zone="vGPU",reason="ForeignScheduler"} 1)"),
      std::string::npos);
  ASSERT_TRUE(WaitFor([&] {
    int n = 0;
    for (const auto& e : api_.List("events"))
      if (e.value("reason", "").rfind("Decision", 0) == 0 &&
          e["involvedObject"].value("namespace", "") == "evil")
        ++n;
    return n >= 3;
  }));
  // The forged pods block nobody's GPU: both cards take a whole-card pod.
  EXPECT_EQ(second->state->pod_count(), 0u);
  EXPECT_EQ(Schedule(*second, Gpu("whole-0", "ml", 16000)), "");
  EXPECT_EQ(Schedule(*second, Gpu("whole-1", "ml", 16000)), "");
}

// A leader cut off from the API server stops deciding at its renew deadline, before the lease
// expires; the other replica takes over; no GPU is decided twice and no two replicas lead at once.
TEST_F(IntegrityTest, LeaderCutOffStopsDecidingBeforeTakeOver) {
  AddNode("node-0", 1);
  auto a = StartReplica({.leader_elect = true, .identity = "a", .token = "token-a"});
  ASSERT_TRUE(WaitFor([&] { return a->controller->IsLeader(); }));
  auto b = StartReplica({.leader_elect = true, .identity = "b", .token = "token-b"});
  ASSERT_TRUE(WaitFor([&] { return b->controller->Leader() == "a"; }));
  std::atomic<bool> stop{false};
  std::atomic<int> both{0}, samples{0};
  std::thread monitor([&] {
    while (!stop) {
      if (a->controller->IsLeader() && b->controller->IsLeader()) ++both;
      ++samples;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  api_.Partition("Bearer token-a", true);
  ASSERT_TRUE(WaitFor([&] { return b->controller->IsLeader(); }));
  EXPECT_FALSE(a->controller->IsLeader());
  KubeScheduler ka(a->port()), kb(b->port());
  Json p1 = Create(*b, Gpu("p1", "ml", 16000));
  std::string err;
  EXPECT_EQ(ka.Filter(p1, nodes_, &err), "");
  EXPECT_NE(err.find("not the leader"), std::string::npos) << err;
  ASSERT_EQ(kb.Filter(p1, nodes_, &err), "node-0") << err;
  EXPECT_EQ(kb.Bind(p1, "node-0"), "");
  api_.Partition("Bearer token-a", false);
  ASSERT_TRUE(WaitFor([&] { return a->controller->Leader() == "b"; }));
  Json p2 = Create(*b, Gpu("p2", "ml", 16000));
  EXPECT_EQ(ka.Filter(p2, nodes_, &err), "");  // a follows now
  EXPECT_EQ(kb.Filter(p2, nodes_, &err), "");  // and the card is taken
  stop = true;
  monitor.join();
  EXPECT_GT(samples.load(), 0);
  EXPECT_EQ(both.load(), 0);
  ExpectNoOversubscription();
  EXPECT_EQ(BoundTotals()["node-0-gpu0"].tasks, 1);
}

}  // namespace
}  // namespace hami::controlplane
