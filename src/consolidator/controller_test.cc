// The consolidation controller end to end on the fake API server: Deployments' pods with owners
// and PDBs, the Eviction API, a plan carried out, a PDB that blocks it, a failed move that stops
// the rest of its GPU's plan, a replacement that finishes a move.
#include "consolidator/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>

#include "consolidator/testing.h"
#include "k8s/testing/fake_apiserver.h"
#include "scheduler/gpu_reservation.h"

namespace hami::consolidator {
namespace {

using k8s::testing::FakeApiServer;
using testing::Node;
using testing::Pdb;
using testing::Pod;

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start().ok());
    k8s::ClientConfig cfg;
    cfg.server = fake_.url();
    cfg.qps = 0;
    cfg.max_retries = 0;
    client_ = std::move(*k8s::Client::Create(cfg));
    ASSERT_TRUE(fake_.Upsert("nodes", Node("n1", {"GPU-a", "GPU-b"})).ok());
    ASSERT_TRUE(fake_.Upsert("nodes", Node("n2", {"GPU-c"})).ok());
  }
  ControllerOptions Options(bool dry_run) {
    ControllerOptions o;
    o.dry_run = dry_run;
    o.usage.overcommit_pct = 200;
    o.usage.namespaces = {"ns"};
    o.plan.pack.contention_bp = 350;
    o.plan.relief_contention_bp = 700;
    o.host = "hami-consolidate-0";
    return o;
  }
  void Put(const Json& obj, const char* plural = "pods") {
    ASSERT_TRUE(fake_.Upsert(plural, obj).ok());
  }
  // Pods as {name, node, GPU, profile level (0: none), Deployment}.
  struct P {
    const char *name, *node, *gpu;
    int32_t level;
    const char* deploy;
  };
  void PutPods(const std::vector<P>& pods) {
    for (const P& p : pods) Put(Pod("ns", p.name, p.node, p.gpu, p.level, p.deploy));
  }
  // Events the controller posted, as "<reason> <pod>: <message>".
  std::vector<std::string> Events() {
    std::vector<std::string> out;
    for (const Json& e : fake_.List("events"))
      out.push_back(e.value("reason", "") + " " + e["involvedObject"].value("name", "") + ": " +
                    e.value("message", ""));
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string NodeMeta(const char* node, const char* map) {
    auto n = fake_.Get("nodes", "", node);
    if (!n || !(*n)["metadata"].contains(map)) return "";
    return (*n)["metadata"][map].value(kFreeGpus, "");
  }

  std::string Reservations(const char* node) {
    auto n = fake_.Get("nodes", "", node);
    if (!n || !(*n)["metadata"].contains("annotations")) return "";
    return (*n)["metadata"]["annotations"].value(scheduler::kGpuReservationsKey, "");
  }

  FakeApiServer fake_;
  std::unique_ptr<k8s::Client> client_;
  FakeClock clock_{static_cast<int64_t>(std::time(nullptr))};
};

TEST_F(ControllerTest, DryRunPrintsThePlanAndChangesNothing) {
  // GPU-a holds a quiet pod, GPU-b a busier one of another Deployment, GPU-c a pod without a
  // profile (never a destination, never emptied).
  PutPods({{"a", "n1", "GPU-a", 20000, "web"},
           {"b", "n1", "GPU-b", 30000, "api"},
           {"c", "n2", "GPU-c", 0, "legacy"}});
  Put(Pdb("ns", "web", "web", 1), "poddisruptionbudgets");
  Controller c(*client_, Options(true), clock_);
  auto r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->plan_text,
            "move ns/a GPU-a -> GPU-b (empty-gpu)\n"
            "saving 1 GPU(s): 1 freed, 0 opened\n"
            "hold ns/c: no trusted usage profile\n");
  EXPECT_EQ(r->saving_gpus, 1);
  EXPECT_EQ(r->evicted, 0);
  EXPECT_TRUE(fake_.Get("pods", "ns", "a").has_value());
  EXPECT_EQ(fake_.CountRequests("POST", "eviction"), 0);
  EXPECT_EQ(fake_.CountRequests("PATCH", ".*"), 0);
  EXPECT_TRUE(Events().empty());
}

TEST_F(ControllerTest, CarriesThePlanOutThroughTheEvictionApi) {
  PutPods({{"a", "n1", "GPU-a", 20000, "web"},
           {"b", "n1", "GPU-b", 30000, "api"},
           {"c", "n2", "GPU-c", 0, "legacy"}});
  Put(Pdb("ns", "web", "web", 1), "poddisruptionbudgets");
  const std::string uid_a = (*fake_.Get("pods", "ns", "a"))["metadata"]["uid"];
  Controller c(*client_, Options(false), clock_);
  auto r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->evicted, 1);
  EXPECT_EQ(r->lines, std::vector<std::string>{"ns/a GPU-a -> GPU-b: evicted"});
  EXPECT_FALSE(fake_.Get("pods", "ns", "a").has_value());
  EXPECT_EQ((*fake_.Get("poddisruptionbudgets", "ns", "web"))["status"]["disruptionsAllowed"], 0);
  EXPECT_EQ(Events(), std::vector<std::string>{
                          "ConsolidationMove a: Evicted to move off GPU GPU-a on node n1 "
                          "(empty-gpu); planned destination GPU GPU-b on node n1, reserved for "
                          "its replacement for 10 min"});
  // GPU-b is reserved for web's next pod: the room a held (30000 MiB), for 10 minutes.
  EXPECT_EQ(Reservations("n1"),
            StrCat(uid_a, ",ns,rs-web,GPU-b,30000,0,", clock_.UnixSeconds() + 600));
  // The freed GPU is published on its node; n2's GPU-c still holds its pod.
  EXPECT_EQ(NodeMeta("n1", "annotations"), "GPU-a");
  EXPECT_EQ(NodeMeta("n1", "labels"), "1");
  EXPECT_EQ(NodeMeta("n2", "annotations"), "");
  EXPECT_EQ(r->free_gpus, 1);
  ASSERT_EQ(c.history().in_flight.size(), 1u);
  EXPECT_EQ(c.counters().moves, 1);

  // The ReplicaSet's replacement runs on the planned GPU: the move is finished and the new pod
  // inherits its history. Its reservation is withdrawn (one patch); GPU-a is empty and was
  // published: nothing else to write.
  Json repl = Pod("ns", "a-2", "n1", "GPU-b", 20000, "web");
  Put(repl);
  const int64_t patches = fake_.CountRequests("PATCH", ".*");
  r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(c.history().in_flight.empty());
  EXPECT_EQ(c.history().moves.count("ns/a-2"), 1u);
  EXPECT_EQ(r->evicted, 0) << r->plan_text;
  EXPECT_EQ(fake_.CountRequests("PATCH", ".*"), patches + 1);
  EXPECT_EQ(Reservations("n1"), "");
  // A new pod on GPU-a: the node no longer advertises it.
  Put(Pod("ns", "d", "n1", "GPU-a", 0, "batch"));
  r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(NodeMeta("n1", "annotations"), "");
  EXPECT_EQ(NodeMeta("n1", "labels"), "");
}

TEST_F(ControllerTest, APdbThatAllowsNoneHoldsThePod) {
  PutPods({{"a", "n1", "GPU-a", 20000, "web"}, {"b", "n1", "GPU-b", 30000, "api"}});
  Put(Pdb("ns", "web", "web", 0), "poddisruptionbudgets");
  Controller c(*client_, Options(false), clock_);
  auto r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  // The PDB allows none: a is held; b is moved onto a's GPU instead (b has no PDB).
  EXPECT_NE(r->plan_text.find("hold ns/a: PodDisruptionBudget allows no disruption"),
            std::string::npos)
      << r->plan_text;
  EXPECT_EQ(r->lines, std::vector<std::string>{"ns/b GPU-b -> GPU-a: evicted"});
}

TEST_F(ControllerTest, A429FromTheEvictionApiSkipsTheMoveAndBacksOff) {
  // The listing says the PDB allows one, the API server answers 429 at the eviction (the
  // disruption controller changed its mind in between): skipped, a Warning Event, the workload
  // backs off.
  PutPods({{"a", "n1", "GPU-a", 20000, "web"}, {"b2", "n1", "GPU-b", 30000, "api"}});
  Put(Pdb("ns", "web", "web", 1), "poddisruptionbudgets");
  fake_.InjectErrors("POST", "/pods/a/eviction$", 429, 1);
  Controller c2(*client_, Options(false), clock_);
  // a's GPU is the least loaded, so a is planned first.
  auto r = c2.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->blocked, 1) << r->plan_text;
  EXPECT_EQ(r->lines,
            std::vector<std::string>{"ns/a GPU-a -> GPU-b: blocked by its disruption budget"});
  EXPECT_TRUE(fake_.Get("pods", "ns", "a").has_value());
  bool warned = false;
  for (const std::string& e : Events()) warned |= e.rfind("ConsolidationBlocked a:", 0) == 0;
  EXPECT_TRUE(warned);
  EXPECT_EQ(c2.history().backoff_until.count("ns/Deployment/web"), 1u);
  // Next round (same minute): the workload is backing off, so nothing of it is tried.
  r = c2.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->plan_text.find("hold ns/a: backing off after a failed move"), std::string::npos)
      << r->plan_text;
  EXPECT_EQ(fake_.CountRequests("POST", "/pods/a/eviction$"), 1);
}

TEST_F(ControllerTest, APdbThatAllowsOneMovesOneARound) {
  // Both pods of GPU-a belong to `web`, whose PDB allows one disruption: the first is evicted, the
  // second waits for the next round (the PDB's budget is spent; GPU-a is not freed this round).
  PutPods({{"a1", "n1", "GPU-a", 10000, "web"},
           {"a2", "n1", "GPU-a", 10000, "web"},
           {"b1", "n1", "GPU-b", 20000, "api"},
           {"b2", "n1", "GPU-b", 20000, "api"}});
  Put(Pdb("ns", "web", "web", 1), "poddisruptionbudgets");
  Controller c(*client_, Options(false), clock_);
  auto r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->lines, (std::vector<std::string>{
                          "ns/a1 GPU-a -> GPU-b: evicted",
                          "ns/a2 GPU-a -> GPU-b: skipped (ns/web allows no more this round)"}));
  EXPECT_EQ(fake_.CountRequests("POST", "/eviction$"), 1);
  EXPECT_EQ(r->blocked, 1);
  EXPECT_EQ(NodeMeta("n1", "annotations"), "");
}

TEST_F(ControllerTest, AFailedMoveStopsTheRestOfItsGpusPlan) {
  // GPU-a holds two quiet pods of `web`; both fit on GPU-b. The first eviction fails: the second
  // is not tried, so GPU-a keeps both pods (nothing half-emptied, nothing published).
  PutPods({{"a1", "n1", "GPU-a", 10000, "web"},
           {"a2", "n1", "GPU-a", 10000, "web"},
           {"b1", "n1", "GPU-b", 20000, "api"},
           {"b2", "n1", "GPU-b", 20000, "api"},
           {"c1", "n2", "GPU-c", 20000, "db"},
           {"c2", "n2", "GPU-c", 20000, "db"}});
  Controller c(*client_, Options(false), clock_);
  // Dry run first, to see what the plan is.
  Controller dry(*client_, Options(true), clock_);
  auto plan = dry.RunOnce();
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->planned, 2) << plan->plan_text;
  fake_.InjectErrors("POST", "/eviction$", 500, 1);
  auto r = c.RunOnce();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed, 1);
  EXPECT_EQ(r->skipped, 1);
  EXPECT_EQ(r->evicted, 0);
  EXPECT_EQ(fake_.CountRequests("POST", "/eviction$"), 1);
  EXPECT_TRUE(fake_.Get("pods", "ns", "a1").has_value());
  EXPECT_TRUE(fake_.Get("pods", "ns", "a2").has_value());
  EXPECT_EQ(NodeMeta("n1", "annotations"), "");
  // GPU-b was reserved before the eviction and the reservation withdrawn when it failed.
  EXPECT_EQ(fake_.CountRequests("PATCH", "/nodes/n1$"), 2);
  EXPECT_EQ(Reservations("n1"), "");
  EXPECT_EQ(c.counters().aborted_plans, 1);
  bool failed = false;
  for (const std::string& e : Events()) failed |= e.rfind("ConsolidationFailed", 0) == 0;
  EXPECT_TRUE(failed);
  EXPECT_NE(c.RenderMetrics().find("hami_consolidate_aborted_plans_total 1"), std::string::npos);
}

TEST_F(ControllerTest, HistorySurvivesALeaderChange) {
  // Leader 1 moves `a` (a move under way, GPU-b reserved) or is refused with a 429 (web backs off);
  // then it is gone and leader 2, a new instance, runs the next round.
  struct Case {
    const char* name;
    bool persisted;  // ControllerOptions::history_name set
    bool refused;    // leader 1's eviction answered 429
  };
  const Case cases[] = {
      {"kept: the move under way and its reservation stay", true, false},
      {"in memory: the new leader forgets the move and withdraws the reservation", false, false},
      {"kept: the workload still backs off", true, true},
      {"in memory: the new leader moves the pod at once", false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (const char* pod : {"a", "b"}) (void)fake_.Delete("pods", "ns", pod);
    (void)fake_.Delete("configmaps", "hami-system", "hami-consolidate-history");
    Put(Node("n1", {"GPU-a", "GPU-b"}), "nodes");
    PutPods({{"a", "n1", "GPU-a", 20000, "web"}, {"b", "n1", "GPU-b", 30000, "api"}});
    ControllerOptions o = Options(false);
    if (c.persisted)
      o.history_namespace = "hami-system", o.history_name = "hami-consolidate-history";
    if (c.refused) fake_.InjectErrors("POST", "/pods/a/eviction$", 429, 1);
    {
      Controller leader1(*client_, o, clock_);
      auto r = leader1.RunOnce();
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->lines.size(), 1u) << r->plan_text;
    }
    clock_.AdvanceSeconds(60);
    Controller leader2(*client_, o, clock_);
    auto r = leader2.RunOnce();
    ASSERT_TRUE(r.ok()) << r.status();
    const History& h = leader2.history();
    if (!c.refused) {
      EXPECT_EQ(h.in_flight.size(), c.persisted ? 1u : 0u);
      EXPECT_EQ(h.moves.count("ns/a"), c.persisted ? 1u : 0u);
      EXPECT_EQ(Reservations("n1").empty(), !c.persisted) << Reservations("n1");
    } else {
      EXPECT_EQ(fake_.Get("pods", "ns", "a").has_value(), c.persisted) << r->plan_text;
      EXPECT_EQ(r->plan_text.find("hold ns/a: backing off") != std::string::npos, c.persisted)
          << r->plan_text;
      EXPECT_EQ(h.failures.count("ns/Deployment/web"), c.persisted ? 1u : 0u);
    }
  }
}

}  // namespace
}  // namespace hami::consolidator
