#include "consolidator/snapshot.h"

#include <gtest/gtest.h>

#include "consolidator/testing.h"
#include "k8s/client.h"
#include "scheduler/gpu_reservation.h"

namespace hami::consolidator {
namespace {

using testing::Node;
using testing::Pdb;
using testing::Pod;

Json Owned(const char* api, const char* kind) {
  Json p = Pod("ns", "p", "n1", "GPU-a", 20000);
  p["metadata"]["ownerReferences"] = {
      {{"apiVersion", api}, {"kind", kind}, {"name", "o"}, {"controller", true}}};
  return p;
}

TEST(Eligibility, OwnerAnnotationAndNamespace) {
  const Json no_ns;
  Json bare = Pod("ns", "p", "n1", "GPU-a", 20000);
  bare["metadata"].erase("ownerReferences");
  Json not_controller = Owned("apps/v1", "ReplicaSet");
  not_controller["metadata"]["ownerReferences"][0]["controller"] = false;
  Json job_in = Owned("batch/v1", "Job");
  job_in["metadata"]["annotations"]["hami.io/consolidate"] = "true";
  Json annotated = Pod("ns", "p", "n1", "GPU-a", 20000);
  annotated["metadata"]["annotations"]["hami.io/no-consolidate"] = "";
  Json annotated_false = Pod("ns", "p", "n1", "GPU-a", 20000);
  annotated_false["metadata"]["annotations"]["hami.io/no-consolidate"] = "false";
  const Json ns_out = {
      {"metadata", {{"name", "ns"}, {"labels", {{"hami.io/no-consolidate", "true"}}}}}};
  struct Case {
    const char* name;
    Json pod;
    Json ns;
    Hold want;
  };
  const Case cases[] = {
      {"a Deployment's pod (through its ReplicaSet)", Pod("ns", "p", "n1", "GPU-a", 20000), no_ns,
       Hold::kMovable},
      {"a StatefulSet's pod", Owned("apps/v1", "StatefulSet"), no_ns, Hold::kMovable},
      {"a bare pod", bare, no_ns, Hold::kBarePod},
      {"an owner that is not the controller", not_controller, no_ns, Hold::kBarePod},
      {"a Job's pod", Owned("batch/v1", "Job"), no_ns, Hold::kJobNotOptedIn},
      {"a Job's pod that opted in", job_in, no_ns, Hold::kMovable},
      {"a DaemonSet's pod", Owned("apps/v1", "DaemonSet"), no_ns, Hold::kOtherOwner},
      {"a custom controller's pod", Owned("example.com/v1", "ReplicaSet"), no_ns,
       Hold::kOtherOwner},
      {"hami.io/no-consolidate", annotated, no_ns, Hold::kAnnotated},
      {"hami.io/no-consolidate: false", annotated_false, no_ns, Hold::kMovable},
      {"a namespace labelled hami.io/no-consolidate", Pod("ns", "p", "n1", "GPU-a", 20000), ns_out,
       Hold::kNamespaceOptedOut},
      {"kube-system (--skip-namespaces)", Pod("kube-system", "p", "n1", "GPU-a", 20000), no_ns,
       Hold::kNamespaceOptedOut},
  };
  for (const Case& c : cases)
    EXPECT_EQ(HoldName(OwnerHold(c.pod, c.ns, EligibilityOptions{})), std::string(HoldName(c.want)))
        << c.name;
}

TEST(Eligibility, PodDisruptionBudgetAsTheEvictionApi) {
  Json unobserved = Pdb("ns", "u", "web", 1);
  unobserved["metadata"]["generation"] = 3;
  unobserved["status"]["observedGeneration"] = 2;
  Json empty_selector = Pdb("ns", "e", "web", 0);
  empty_selector["spec"]["selector"] = Json::object();
  struct Case {
    const char* name;
    std::vector<Json> pdbs;
    Hold want;
    const char* pdb;
    int64_t allowed;
  };
  const Case cases[] = {
      {"no PDB", {}, Hold::kMovable, "", 0},
      {"a PDB that allows one", {Pdb("ns", "a", "web", 1)}, Hold::kMovable, "ns/a", 1},
      {"a PDB that allows none", {Pdb("ns", "a", "web", 0)}, Hold::kPdbBlocks, "ns/a", 0},
      {"a PDB of other pods", {Pdb("ns", "a", "db", 0)}, Hold::kMovable, "", 0},
      {"a PDB of another namespace", {Pdb("other", "a", "web", 0)}, Hold::kMovable, "", 0},
      {"an empty selector selects nothing", {empty_selector}, Hold::kMovable, "", 0},
      {"two PDBs", {Pdb("ns", "a", "web", 1), Pdb("ns", "b", "web", 1)}, Hold::kPdbMultiple, "", 0},
      {"a PDB not yet observed", {unobserved}, Hold::kPdbBlocks, "ns/u", 0},
  };
  const Json pod = Pod("ns", "p", "n1", "GPU-a", 20000);
  for (const Case& c : cases) {
    std::string pdb;
    int64_t allowed = -1;
    EXPECT_EQ(HoldName(PdbHold(pod, c.pdbs, &pdb, &allowed)), std::string(HoldName(c.want)))
        << c.name;
    if (c.want != Hold::kPdbMultiple) {
      EXPECT_EQ(pdb, c.pdb) << c.name;
      EXPECT_EQ(allowed, c.allowed) << c.name;
    }
  }
}

TEST(Eligibility, WorkloadNamesTheDeployment) {
  Json no_hash = Pod("ns", "p", "n1", "GPU-a", 20000);
  no_hash["metadata"]["labels"].erase("pod-template-hash");
  Json bare = no_hash;
  bare["metadata"].erase("ownerReferences");
  EXPECT_EQ(WorkloadOf(Pod("ns", "p", "n1", "GPU-a", 20000, "web")), "ns/Deployment/web");
  EXPECT_EQ(WorkloadOf(no_hash), "ns/ReplicaSet/web-5d8f");
  EXPECT_EQ(WorkloadOf(Owned("apps/v1", "StatefulSet")), "ns/StatefulSet/o");
  EXPECT_EQ(WorkloadOf(bare), "");
}

scheduler::UsageRule Rule() {
  scheduler::UsageRuleOptions o;
  o.overcommit_pct = 200;
  o.namespaces = {"ns"};
  return scheduler::UsageRule(o);
}

constexpr int32_t kNow = 29'940'000;  // Unix minutes, 2026-12-04

TEST(Snapshot, GpusPodsAndWhatHoldsThem) {
  Objects o;
  o.nodes = {Node("n1", {"GPU-a", "GPU-b"}), Node("n2", {"GPU-c", "GPU-d"})};
  o.nodes[1]["spec"]["unschedulable"] = true;
  o.nodes[0]["metadata"]["annotations"]["hami.io/device-cordon"] = "GPU-b";
  Json untrusted = Pod("elsewhere", "u", "n2", "GPU-d", 20000, "x");
  Json unprofiled = Pod("ns", "np", "n1", "GPU-b", 0, "y");
  Json pending = Pod("ns", "pend", "", "GPU-a", 20000);
  pending["spec"].erase("nodeName");
  Json done = Pod("ns", "done", "n1", "GPU-a", 20000);
  done["status"]["phase"] = "Succeeded";
  o.pods = {Pod("ns", "a", "n1", "GPU-a", 20000),
            unprofiled,
            Pod("ns", "b", "n1", "GPU-b", 20000),
            Pod("ns", "c", "n2", "GPU-c", 20000, "db"),
            untrusted,
            pending,
            done};
  o.pdbs = {Pdb("ns", "db", "db", 0)};
  History h;
  const Snapshot s = BuildSnapshot(o, &h, Rule(), EligibilityOptions{}, kNow, 15);
  ASSERT_EQ(s.state.gpus.size(), 4u);
  // accepts: a yes; b cordoned (and holds a pod without a profile); c, d: node unschedulable.
  EXPECT_TRUE(s.state.gpus[0].accepts);
  EXPECT_FALSE(s.state.gpus[1].accepts);
  EXPECT_FALSE(s.state.gpus[2].accepts);
  EXPECT_FALSE(s.state.gpus[3].accepts);
  EXPECT_EQ(s.gpus[1].pods, 2);
  EXPECT_EQ(s.gpus[3].pods, 1);
  ASSERT_EQ(s.state.pods.size(), 3u);  // a, b, c: profiled, trusted, placed, not finished
  EXPECT_EQ(s.state.pods[0].name, "ns/a");
  EXPECT_TRUE(s.state.pods[0].movable);
  EXPECT_EQ(s.state.pods[0].workload, "ns/Deployment/web");
  EXPECT_EQ(s.state.pods[0].tenant.limit_mib, 30000);
  EXPECT_EQ(s.state.pods[0].tenant.spike_mib, 30000);
  EXPECT_EQ(s.state.pods[0].since_minute, 29'934'720);  // 2026-12-01T00:00:00Z
  EXPECT_FALSE(s.state.pods[1].movable);                // b shares GPU-b with np
  EXPECT_FALSE(s.state.pods[2].movable);                // c: its PDB allows none
  std::string held;
  for (const HeldPod& p : s.held) held += p.pod + ": " + HoldName(p.why) + "\n";
  EXPECT_EQ(held,
            "elsewhere/u: no trusted usage profile\n"
            "ns/b: its GPU holds a pod without a profile\n"
            "ns/c: PodDisruptionBudget allows no disruption\n"
            "ns/np: no trusted usage profile\n");
}

TEST(Snapshot, MovesUnderWayCountUntilTheReplacementRuns) {
  Objects o;
  o.nodes = {Node("n1", {"GPU-a", "GPU-b"})};
  o.pods = {Pod("ns", "a", "n1", "GPU-a", 20000), Pod("ns", "b", "n1", "GPU-b", 20000, "other")};
  History h;
  h.moves["ns/gone"] = {kNow - 3};
  h.in_flight.push_back(
      {"ns/gone", "uid-gone", "ns/Deployment/web", "GPU-x", "GPU-a", kNow - 3, kNow + 12});
  // The replacement was created before the eviction: not it. The move stays under way and its
  // ghost counts.
  Snapshot s = BuildSnapshot(o, &h, Rule(), EligibilityOptions{}, kNow, 15);
  ASSERT_EQ(s.state.pods.size(), 3u);
  EXPECT_EQ(s.state.pods[2].gpu, -1);
  EXPECT_TRUE(s.state.pods[2].in_flight);
  EXPECT_EQ(s.state.pods[2].move_minutes, std::vector<int32_t>{kNow - 3});
  EXPECT_EQ(h.in_flight.size(), 1u);
  // Created after the eviction and running: it finishes the move and inherits the history.
  o.pods[0]["metadata"]["creationTimestamp"] = k8s::FormatTime(int64_t{kNow - 2} * 60);
  s = BuildSnapshot(o, &h, Rule(), EligibilityOptions{}, kNow, 15);
  EXPECT_EQ(s.state.pods.size(), 2u);
  EXPECT_TRUE(h.in_flight.empty());
  EXPECT_EQ(s.state.pods[0].move_minutes, std::vector<int32_t>{kNow - 3});
  EXPECT_EQ(h.moves.count("ns/gone"), 0u);
  // A move nobody finishes is given up at its deadline.
  h.in_flight.push_back(
      {"ns/gone2", "uid-gone2", "ns/Deployment/none", "GPU-x", "GPU-a", kNow - 20, kNow});
  s = BuildSnapshot(o, &h, Rule(), EligibilityOptions{}, kNow, 15);
  EXPECT_TRUE(h.in_flight.empty());
  ASSERT_EQ(s.timed_out.size(), 1u);
  EXPECT_EQ(s.timed_out[0].pod_key, "ns/gone2");
  // History older than a day is forgotten.
  h.moves["ns/a"] = {kNow - consolidate::kMinutesPerDay, kNow - 10};
  s = BuildSnapshot(o, &h, Rule(), EligibilityOptions{}, kNow, 15);
  EXPECT_EQ(s.state.pods[0].move_minutes, std::vector<int32_t>{kNow - 10});
}

TEST(Snapshot, BackoffHoldsTheWorkload) {
  Objects o;
  o.nodes = {Node("n1", {"GPU-a"})};
  o.pods = {Pod("ns", "a", "n1", "GPU-a", 20000)};
  History h;
  h.backoff_until["ns/Deployment/web"] = kNow + 1;
  EXPECT_FALSE(BuildSnapshot(o, &h, Rule(), {}, kNow, 15).state.pods[0].movable);
  EXPECT_TRUE(BuildSnapshot(o, &h, Rule(), {}, kNow + 1, 15).state.pods[0].movable);
}

TEST(Snapshot, AStatefulSetReplacementKeepsTheNameAndFinishesTheMove) {
  auto sts = [](const std::string& uid, int32_t created_minute, bool terminating) {
    Json p = Pod("ns", "db-0", "n1", "GPU-a", 20000);
    p["metadata"]["uid"] = uid;
    p["metadata"]["ownerReferences"] = {
        {{"apiVersion", "apps/v1"}, {"kind", "StatefulSet"}, {"name", "db"}, {"controller", true}}};
    p["metadata"].erase("labels");
    p["metadata"]["creationTimestamp"] = k8s::FormatTime(int64_t{created_minute} * 60);
    if (terminating) p["metadata"]["deletionTimestamp"] = k8s::FormatTime(int64_t{kNow} * 60);
    return p;
  };
  Objects o;
  o.nodes = {Node("n1", {"GPU-a", "GPU-b"})};
  History h;
  h.moves["ns/db-0"] = {kNow - 2};
  h.in_flight.push_back(
      {"ns/db-0", "old", "ns/StatefulSet/db", "GPU-a", "GPU-b", kNow - 2, kNow + 13});
  // The evicted pod is still terminating: it is in the state once (in flight), not also a ghost.
  o.pods = {sts("old", kNow - 100, true)};
  Snapshot s = BuildSnapshot(o, &h, Rule(), {}, kNow, 15);
  ASSERT_EQ(s.state.pods.size(), 1u);
  EXPECT_TRUE(s.state.pods[0].in_flight);
  EXPECT_EQ(h.in_flight.size(), 1u);
  // Gone; the StatefulSet re-created db-0 (another uid) and it runs: the move is finished and the
  // new db-0 carries the move.
  o.pods = {sts("new", kNow - 1, false)};
  s = BuildSnapshot(o, &h, Rule(), {}, kNow, 15);
  EXPECT_TRUE(h.in_flight.empty());
  ASSERT_EQ(s.state.pods.size(), 1u);
  EXPECT_FALSE(s.state.pods[0].in_flight);
  EXPECT_EQ(s.state.pods[0].move_minutes, std::vector<int32_t>{kNow - 2});
  EXPECT_TRUE(s.timed_out.empty());
}

// Issue 28: a move's reservation ends as soon as its replacement is bound on the reserved GPU under
// the scheduler's decision naming it (scheduler::kGpuReservationPodKey = the evicted pod's uid),
// not when the replacement runs; the move itself stays under way until then.
TEST(Snapshot, AReservationEndsWhenItsReplacementIsBoundThere) {
  struct Case {
    const char* name;
    std::string names, gpu, owner, ns;
    bool bound;
    bool reserved_after;  // reserve_until_s still set
  };
  const Case cases[] = {
      {"bound there, named: withdrawn", "uid-a", "GPU-b", "rs-web", "ns", true, false},
      {"decided there, not bound yet: kept", "uid-a", "GPU-b", "rs-web", "ns", false, true},
      {"names none (a replica placed there before): kept", "", "GPU-b", "rs-web", "ns", true, true},
      {"names another move: kept", "uid-x", "GPU-b", "rs-web", "ns", true, true},
      {"another GPU: kept", "uid-a", "GPU-c", "rs-web", "ns", true, true},
      {"another owner: kept", "uid-a", "GPU-b", "rs-api", "ns", true, true},
      {"another namespace: kept", "uid-a", "GPU-b", "rs-web", "other", true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Objects o;
    o.nodes = {Node("n1", {"GPU-a", "GPU-b", "GPU-c"})};
    Json pod = Pod(c.ns, "a-2", "n1", c.gpu, 20000);  // Pending: not the move's finish
    pod["metadata"]["uid"] = "uid-a2";
    pod["metadata"]["ownerReferences"][0]["uid"] = c.owner;
    pod["metadata"]["creationTimestamp"] = k8s::FormatTime(int64_t{kNow} * 60);
    pod["status"]["phase"] = "Pending";
    if (!c.names.empty())
      pod["metadata"]["annotations"][scheduler::kGpuReservationPodKey] = c.names;
    if (!c.bound) pod["spec"].erase("nodeName");
    o.pods = {pod};
    History h;
    InFlight f{"ns/a", "uid-a", "ns/Deployment/web", "GPU-a", "GPU-b", kNow - 1, kNow + 14};
    f.to_node = "n1", f.owner_uid = "rs-web", f.mem_mib = 30000,
    f.reserve_until_s = kNow * 60 + 540;
    h.in_flight = {f};
    BuildSnapshot(o, &h, Rule(), {}, kNow, 15);
    ASSERT_EQ(h.in_flight.size(), 1u);  // under way until a replacement runs
    EXPECT_EQ(h.in_flight[0].reserve_until_s != 0, c.reserved_after);
  }
}

}  // namespace
}  // namespace hami::consolidator
