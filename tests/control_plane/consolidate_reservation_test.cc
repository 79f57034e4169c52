// The consolidation controller and the scheduler together on the fake API server (issue 28): the
// controller plans to move pod `a` of Deployment `web` off GPU-a onto GPU-b, reserves GPU-b for
// web's next pod (hami.io/consolidate-reservations on the node) and evicts `a`; the scheduler
// holds GPU-b's room against other pods while the reservation lives and decides web's replacement
// onto GPU-b through /filter and /bind, although the pod asks for the spread policy, under which
// the empty GPUs score higher. Without the reservation, or once it expired, both go elsewhere.
#include <gtest/gtest.h>

#include <ctime>

#include "common/clock.h"
#include "consolidator/controller.h"
#include "consolidator/testing.h"
#include "harness.h"

namespace hami::controlplane {
namespace {

using k8s::testing::FakeApiServer;

// A pod of the consolidation tests (consolidator/testing.h) as hami-scheduler placed it.
Json Placed(const std::string& name, const std::string& gpu, int32_t level,
            const std::string& deploy, int64_t grant_mib = 30000) {
  Json pod = consolidator::testing::Pod("ns", name, "n1", gpu, level, deploy, grant_mib);
  pod["metadata"]["annotations"]["hami.io/vgpu-node"] = "n1";
  pod["metadata"]["annotations"]["hami.io/bind-phase"] = "success";
  pod["spec"]["schedulerName"] = "hami-scheduler";
  return pod;
}

// A pending pod asking one GPU with `mib` MiB, of ReplicaSet `owner_uid`, under the spread policy
// (the emptiest GPU scores highest); `profile_level` 0: no usage profile; `gpu`: use-gpuuuid.
Json Pending(const std::string& name, const std::string& owner_uid, int32_t profile_level,
             const std::string& gpu = "", const std::string& mib = "30000") {
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ns"},
        {"labels", {{"app", "web"}, {"pod-template-hash", "5d8f"}}},
        {"annotations", {{"hami.io/gpu-scheduler-policy", "spread"}}},
        {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "web-5d8f"},
                                          {"uid", owner_uid},
                                          {"controller", true}}})}}},
      {"spec",
       {{"schedulerName", "hami-scheduler"},
        {"containers",
         Json::array({{{"name", "c"},
                       {"image", "srv"},
                       {"resources",
                        {{"limits", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", mib}}}}}}})}}}};
  if (profile_level > 0)
    pod["metadata"]["annotations"]["hami.io/usage-profile"] =
        consolidator::testing::Profile(profile_level, profile_level + 10000);
  if (!gpu.empty()) pod["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] = gpu;
  return pod;
}

// The GPU a placed pod holds ("" when it holds none).
std::string GpuOf(FakeApiServer& api, const std::string& name) {
  auto pod = api.Get("pods", "ns", name);
  if (!pod) return "";
  auto held = extender::HeldAllocation(*pod);
  if (!held || held->containers.empty() || held->containers[0].empty()) return "";
  return held->containers[0][0].uuid;
}

// A scheduler replica's options for these tests: the usage rule trusts namespace ns.
ReplicaOptions ReplicaFor(const Clock& clock) {
  ReplicaOptions ro;
  ro.clock = &clock;
  ro.usage.overcommit_pct = 200;
  ro.usage.namespaces = {"ns"};
  return ro;
}

// `hami consolidate`'s options for these tests: the planner moves a off GPU-a onto GPU-b.
consolidator::ControllerOptions ConsolidateFor(const ReplicaOptions& ro) {
  consolidator::ControllerOptions co;
  co.dry_run = false;
  co.usage = ro.usage;
  co.plan.pack.contention_bp = 350;
  co.plan.relief_contention_bp = 700;
  return co;
}

TEST(ConsolidateReservation, TheReplacementLandsOnThePlannedGpu) {
  struct Case {
    const char* name;
    int32_t reserve_min;    // hami consolidate --reserve-min
    int64_t advance_s;      // time passing between the eviction and the next pods
    bool other_fits_b;      // an unrelated pod asking GPU-b's room gets it
    bool replacement_on_b;  // web's replacement is decided onto GPU-b
  };
  const Case cases[] = {
      {"reserved: GPU-b's room is held, the replacement lands there", 10, 0, false, true},
      {"not reserved (--reserve-min 0): both go where they score", 0, 0, true, false},
      {"the reservation expired after 10 minutes: it holds and steers nothing", 10, 601, true,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeApiServer api;
    ASSERT_TRUE(api.Start().ok());
    ASSERT_TRUE(
        api.Upsert("nodes", consolidator::testing::Node("n1", {"GPU-a", "GPU-b", "GPU-c"})).ok());
    ASSERT_TRUE(api.Upsert("pods", Placed("a", "GPU-a", 20000, "web")).ok());
    ASSERT_TRUE(api.Upsert("pods", Placed("b", "GPU-b", 30000, "api")).ok());
    FakeClock clock(static_cast<int64_t>(std::time(nullptr)));
    const ReplicaOptions ro = ReplicaFor(clock);
    auto rep = StartSynced(api, 1, ro);
    ASSERT_TRUE(WaitFor([&] { return rep->state->pod_count() == 2; }));

    // One round of `hami consolidate`: a moves off GPU-a onto GPU-b.
    consolidator::ControllerOptions co = ConsolidateFor(ro);
    co.reserve_min = c.reserve_min;
    consolidator::Controller controller(*rep->client, co, clock);
    auto round = controller.RunOnce();
    ASSERT_TRUE(round.ok()) << round.status();
    ASSERT_EQ(round->lines, std::vector<std::string>{"ns/a GPU-a -> GPU-b: evicted"})
        << round->plan_text;
    ASSERT_TRUE(WaitFor([&] { return rep->state->pod_count() == 1; }));  // a is gone
    if (c.reserve_min > 0) {  // the scheduler read the reservation off the node
      ASSERT_TRUE(WaitFor([&] {
        auto r = rep->state->GpuReservations();
        return r.size() == 1 && r[0].find("n1 ") == 0 &&
               r[0].find(" GPU-b held") != std::string::npos;
      }));
    }
    clock.AdvanceSeconds(c.advance_s);

    KubeScheduler ks(rep->port());
    // An unrelated pod (no profile, another owner) that asks GPU-b by UUID: b's 30000 MiB and its
    // 30000 fit the 81920 MiB card, with the reservation's 30000 they do not.
    auto other = rep->client->Create(k8s::kPods, "ns", Pending("other", "rs-other", 0, "GPU-b"));
    ASSERT_TRUE(other.ok()) << other.status();
    std::string error;
    const std::string other_node = ks.Filter(*other, {"n1"}, &error);
    EXPECT_EQ(!other_node.empty(), c.other_fits_b) << error;
    if (!other_node.empty()) {  // out of the way again, so the replacement sees what `a` left
      ASSERT_EQ(ks.Bind(*other, other_node), "");
      EXPECT_EQ(GpuOf(api, "other"), "GPU-b");
      ASSERT_TRUE(api.Delete("pods", "ns", "other").ok());
      ASSERT_TRUE(WaitFor([&] { return rep->state->pod_count() == 1; }));
    }

    // The ReplicaSet's replacement of a: same owner, same profile.
    auto repl = rep->client->Create(k8s::kPods, "ns", Pending("a-2", "rs-web", 20000));
    ASSERT_TRUE(repl.ok()) << repl.status();
    const std::string node = ks.Filter(*repl, {"n1"}, &error);
    ASSERT_EQ(node, "n1") << error;
    ASSERT_EQ(ks.Bind(*repl, node), "");
    const std::string gpu = GpuOf(api, "a-2");
    if (c.replacement_on_b)
      EXPECT_EQ(gpu, "GPU-b");
    else
      EXPECT_TRUE(gpu == "GPU-a" || gpu == "GPU-c") << gpu;
  }
}

// Issue 28, one replacement per reservation, for every leader: `web` gets two new pods at once (the
// ReplicaSet's replacement of `a` and a scale-up). Scheduler replica one decides the first onto
// the reserved GPU-b and binds it; then replica two, which followed the cluster all along, leads.
// It must neither charge the reservation again beside the replacement nor steer web's second pod
// onto GPU-b (where, with the reservation re-charged and given again, it would fit). A second
// controller instance, leading next, withdraws the reservation from the node although the
// replacement is not running yet. Before, replica two held the reservation ("held", GPU-b at 70000
// MiB) and decided a-3 onto GPU-b; the node kept the reservation until a-2 ran.
TEST(ConsolidateReservation, ALandedReplacementEndsTheReservationForEveryLeader) {
  FakeApiServer api;
  ASSERT_TRUE(api.Start().ok());
  ASSERT_TRUE(
      api.Upsert("nodes", consolidator::testing::Node("n1", {"GPU-a", "GPU-b", "GPU-c"})).ok());
  ASSERT_TRUE(api.Upsert("pods", Placed("a", "GPU-a", 20000, "web", 20000)).ok());
  ASSERT_TRUE(api.Upsert("pods", Placed("b", "GPU-b", 30000, "api")).ok());
  const std::string a_uid = (*api.Get("pods", "ns", "a"))["metadata"].value("uid", "");
  FakeClock clock(static_cast<int64_t>(std::time(nullptr)));
  ReplicaOptions ro = ReplicaFor(clock);
  auto one = StartSynced(api, 1, ro);
  ro.identity = "replica-1";
  auto two = StartSynced(api, 1, ro);
  ASSERT_TRUE(
      WaitFor([&] { return one->state->pod_count() == 2 && two->state->pod_count() == 2; }));

  consolidator::ControllerOptions co = ConsolidateFor(ro);
  co.history_namespace = "hami-system";
  co.history_name = "hami-consolidate-history";
  {
    consolidator::Controller first(*one->client, co, clock);
    auto round = first.RunOnce();
    ASSERT_TRUE(round.ok()) << round.status();
    ASSERT_EQ(round->lines, std::vector<std::string>{"ns/a GPU-a -> GPU-b: evicted"})
        << round->plan_text;
  }
  const std::vector<std::string> held = {"n1 " + a_uid + " GPU-b held"};
  ASSERT_TRUE(WaitFor([&] {
    return one->state->GpuReservations() == held && two->state->GpuReservations() == held;
  }));

  auto a2 = one->client->Create(k8s::kPods, "ns", Pending("a-2", "rs-web", 20000, "", "20000"));
  auto a3 = one->client->Create(k8s::kPods, "ns", Pending("a-3", "rs-web", 20000, "", "20000"));
  ASSERT_TRUE(a2.ok() && a3.ok());
  std::string error;
  KubeScheduler ks1(one->port());
  ASSERT_EQ(ks1.Filter(*a2, {"n1"}, &error), "n1") << error;
  ASSERT_EQ(ks1.Bind(*a2, "n1"), "");
  ASSERT_EQ(GpuOf(api, "a-2"), "GPU-b");

  // Replica two leads from here.
  const std::string a2_uid = (*a2)["metadata"].value("uid", "");
  ASSERT_TRUE(WaitFor([&] {
    auto r = two->state->Find(a2_uid);
    return r && r->bound_node == "n1";
  }));
  EXPECT_EQ(two->state->GpuReservations(),
            std::vector<std::string>{"n1 " + a_uid + " GPU-b landed"});
  EXPECT_EQ(two->sched->cache().Snapshot("n1")->usage[1].usedmem_mib, 30000 + 20000);
  KubeScheduler ks2(two->port());
  ASSERT_EQ(ks2.Filter(*a3, {"n1"}, &error), "n1") << error;
  ASSERT_EQ(ks2.Bind(*a3, "n1"), "");
  const std::string a3_gpu = GpuOf(api, "a-3");
  EXPECT_TRUE(a3_gpu == "GPU-a" || a3_gpu == "GPU-c") << a3_gpu;

  // A second controller instance leads: it reads the history and the pods, and withdraws the
  // reservation the replacement consumed (a-2 is bound, not running).
  consolidator::Controller second(*two->client, co, clock);
  auto round = second.RunOnce();
  ASSERT_TRUE(round.ok()) << round.status();
  auto node = api.Get("nodes", "", "n1");
  ASSERT_TRUE(node);
  const Json& annotations = (*node)["metadata"]["annotations"];
  EXPECT_EQ(annotations.value(scheduler::kGpuReservationsKey, ""), "");
  ASSERT_TRUE(WaitFor([&] { return two->state->GpuReservations().empty(); }));
}

}  // namespace
}  // namespace hami::controlplane
