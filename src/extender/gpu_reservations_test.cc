// ClusterState's GPU reservations of the consolidation controller (gpu_reservations.cc): what a
// node's hami.io/consolidate-reservations annotation holds in the scheduler's cache, and when it
// gives the room back.
#include <gtest/gtest.h>

#include "extender/state.h"
#include "scheduler/gpu_reservation.h"

namespace hami::extender {
namespace {

constexpr int64_t kNow = 1'700'000'000;

const char* kTwoGpus =
    R"([{"id":"GPU-a","index":0,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-T4","health":true},)"
    R"({"id":"GPU-b","index":1,"count":10,"devmem":16000,"devcore":100,"type":"NVIDIA-T4","health":true}])";

Json Node(const std::string& reservations) {
  Json n = {{"metadata",
             {{"name", "n1"}, {"annotations", {{"hami.io/node-nvidia-register", kTwoGpus}}}}}};
  if (!reservations.empty())
    n["metadata"]["annotations"][scheduler::kGpuReservationsKey] = reservations;
  return n;
}

// One reservation of GPU-b for ReplicaSet rs-1 in namespace ns.
std::string One(int64_t mem, int64_t expires, const std::string& uuid = "GPU-b") {
  return scheduler::EncodeGpuReservations({{"r1", "ns", "rs-1", uuid, mem, 10, expires}});
}

// A pod charged with 6000 MiB of GPU-b.
Json Placed6000() {
  return {{"metadata",
           {{"uid", "p1"},
            {"name", "p1"},
            {"namespace", "ns"},
            {"annotations",
             {{"hami.io/vgpu-node", "n1"},
              {"hami.io/vgpu-devices-allocated", "GPU-b,NVIDIA,6000,0:;"}}}}},
          {"spec", {{"schedulerName", "hami-scheduler"}, {"nodeName", "n1"}}},
          {"status", {{"phase", "Running"}}}};
}

// A scheduler cache and the state that feeds it, at kNow.
struct Cluster {
  Cluster() {
    StateOptions o;
    o.clock = &clock;
    state = std::make_unique<ClusterState>(*sched, o);
  }
  int64_t GpuBMib() const { return sched->cache().Snapshot("n1")->usage[1].usedmem_mib; }
  FakeClock clock{kNow};
  std::unique_ptr<scheduler::Scheduler> sched = std::move(*scheduler::Scheduler::Create({}));
  std::unique_ptr<ClusterState> state;
};

TEST(GpuReservations, WhatANodesAnnotationHolds) {
  const Json placed_6000 = Placed6000();
  struct Case {
    const char* name;
    std::string annotation;
    bool with_pod;       // GPU-b already holds 6000 of its 16000 MiB
    int64_t held_mib;    // GPU-b's memory in the cache after the update
    const char* listed;  // ClusterState::GpuReservations, "" = none
  };
  const Case cases[] = {
      {"a live reservation holds its room", One(8000, kNow + 600), false, 8000, "n1 r1 GPU-b held"},
      {"next to a pod, within the card", One(8000, kNow + 600), true, 14000, "n1 r1 GPU-b held"},
      {"more than the card has left: steers, holds nothing", One(12000, kNow + 600), true, 6000,
       "n1 r1 GPU-b not-charged"},
      {"a GPU the node does not register", One(8000, kNow + 600, "GPU-z"), false, 0,
       "n1 r1 GPU-z not-charged"},
      {"expired", One(8000, kNow), false, 0, ""},
      {"expiring past the hour the scheduler grants", One(8000, kNow + 3601), false, 0, ""},
      {"an annotation that does not decode", "r1,ns,rs-1,GPU-b,8000", false, 0, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Cluster k;
    ClusterState& state = *k.state;
    state.OnNode(Node(""));
    if (c.with_pod) state.OnPod(placed_6000);
    state.OnNode(Node(c.annotation));
    EXPECT_EQ(k.GpuBMib(), c.held_mib);
    const std::vector<std::string> listed = state.GpuReservations();
    EXPECT_EQ(listed.empty() ? "" : listed[0], c.listed);
  }
}

TEST(GpuReservations, TheRoomComesBackWhenTakenWithdrawnOrExpired) {
  struct Case {
    const char* name;
    int step;  // 0 taken by the workload, 1 withdrawn from the node, 2 expired, 3 node deleted
  };
  for (const Case& c : {Case{"taken by the workload's pod", 0}, Case{"withdrawn", 1},
                        Case{"expired", 2}, Case{"node deleted", 3}}) {
    SCOPED_TRACE(c.name);
    Cluster k;
    ClusterState& state = *k.state;
    const Json node = Node(One(8000, kNow + 600));
    state.OnNode(node);
    ASSERT_EQ(k.GpuBMib(), 8000);
    // Another workload, or another namespace, takes nothing.
    EXPECT_FALSE(state.TakeGpuReservation("ns", "rs-2", "p2"));
    EXPECT_FALSE(state.TakeGpuReservation("other", "rs-1", "p2"));
    switch (c.step) {
      case 0: {
        auto t = state.TakeGpuReservation("ns", "rs-1", "p2");
        ASSERT_TRUE(t);
        EXPECT_EQ(t->node, "n1");
        EXPECT_EQ(t->reservation.uuid, "GPU-b");
        EXPECT_FALSE(state.TakeGpuReservation("ns", "rs-1", "p3"));  // one pod
        state.OnNode(node);  // the same annotation again: not held again
        break;
      }
      case 1:
        state.OnNode(Node(""));
        break;
      case 2:
        k.clock.AdvanceSeconds(600);
        state.ExpireReservations();
        EXPECT_FALSE(state.TakeGpuReservation("ns", "rs-1", "p2"));
        break;
      case 3:
        state.OnNodeDeleted(node);
        state.OnNode(Node(""));
        break;
    }
    EXPECT_EQ(k.GpuBMib(), 0);
  }
}

TEST(GpuReservations, AReservationWithoutRoomHoldsItOnceTheGpuHasIt) {
  Cluster k;
  const Json pod = Placed6000();
  k.state->OnNode(Node(""));
  k.state->OnPod(pod);
  const Json node = Node(One(12000, kNow + 600));
  k.state->OnNode(node);  // 6000 + 12000 > 16000: not held
  EXPECT_EQ(k.GpuBMib(), 6000);
  k.state->OnPodDeleted(pod);
  k.state->OnNode(node);  // the node's next update (a heartbeat): the room is there now
  EXPECT_EQ(k.GpuBMib(), 12000);
  EXPECT_EQ(k.state->GpuReservations(), std::vector<std::string>{"n1 r1 GPU-b held"});
}

// A pod of ReplicaSet `owner` charged with 6000 MiB of `gpu`, whose decision names reservation
// `names` ("" = none; scheduler::kGpuReservationPodKey), bound or decided only.
Json Replica(const std::string& uid, const std::string& owner, const std::string& names,
             const std::string& gpu, bool bound) {
  Json pod = Placed6000();
  pod["metadata"]["uid"] = uid;
  pod["metadata"]["name"] = uid;
  pod["metadata"]["ownerReferences"] = Json::array(
      {{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"uid", owner}, {"controller", true}}});
  pod["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = gpu + ",NVIDIA,6000,0:;";
  if (!names.empty()) pod["metadata"]["annotations"][scheduler::kGpuReservationPodKey] = names;
  if (!bound) {
    pod["spec"].erase("nodeName");
    pod["status"]["phase"] = "Pending";
  }
  return pod;
}

// Issue 28: a replica that becomes leader reads the reservation off the node and the replacement
// another leader decided onto it off the API server, in either order. The replacement holds the
// reservation (it names it, is of its workload, holds its GPU): the room is charged once, by the
// pod, and no other pod of the workload is steered there. Before, the new leader charged the
// reservation again beside the replacement and gave it to the workload's next pod.
TEST(GpuReservations, AReplacementDecidedElsewhereHoldsItsReservation) {
  struct Case {
    const char* name;
    Json pod;
    bool pod_first;      // the informer delivers the pod before the node
    int64_t gpu_b_mib;   // GPU-b's memory in the cache
    const char* listed;  // ClusterState::GpuReservations
    bool next_pod_gets_it;
  };
  const Case cases[] = {
      {"landed, node first", Replica("p2", "rs-1", "r1", "GPU-b", true), false, 6000,
       "n1 r1 GPU-b landed", false},
      {"landed, pod first", Replica("p2", "rs-1", "r1", "GPU-b", true), true, 6000,
       "n1 r1 GPU-b landed", false},
      {"decided, not bound yet", Replica("p2", "rs-1", "r1", "GPU-b", false), false, 6000,
       "n1 r1 GPU-b taken", false},
      {"a replica of the workload placed there before (names none)",
       Replica("p2", "rs-1", "", "GPU-b", true), false, 14000, "n1 r1 GPU-b held", true},
      {"names it, holds another GPU", Replica("p2", "rs-1", "r1", "GPU-a", true), false, 8000,
       "n1 r1 GPU-b held", true},
      {"names it, of another workload", Replica("p2", "rs-2", "r1", "GPU-b", true), true, 14000,
       "n1 r1 GPU-b held", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Cluster k;
    ClusterState& state = *k.state;
    state.OnNode(Node(""));
    if (c.pod_first) state.OnPod(c.pod);
    state.OnNode(Node(One(8000, kNow + 600)));
    if (!c.pod_first) state.OnPod(c.pod);
    EXPECT_EQ(k.GpuBMib(), c.gpu_b_mib);
    EXPECT_EQ(state.GpuReservations(), std::vector<std::string>{c.listed});
    EXPECT_EQ(state.TakeGpuReservation("ns", "rs-1", "p3").has_value(), c.next_pod_gets_it);
  }
}

// A reservation serves one pod of its workload: the first decided onto it holds it (the same pod
// filtered again gets it again); a second pod of the workload at the same time does not; it is
// free again when its holder does not land (not decided onto it, its decision dropped, the pod
// deleted before bind), consumed once the holder is bound.
TEST(GpuReservations, OnePodOfTheWorkloadTakesIt) {
  struct Case {
    const char* name;
    int then;  // what happens to p2 after it took the reservation
    bool p3_gets_it;
    int64_t gpu_b_mib;  // after p3's try
  };
  const Case cases[] = {
      {"p2 holds it: p3 gets nothing, p2 filtered again does", 0, false, 0},
      {"p2 did not fit there: given back", 1, true, 0},
      {"p2's decision dropped before bind: free again", 2, true, 0},
      {"p2 deleted before bind: free again", 3, true, 0},
      {"p2 bound there: consumed", 4, false, 6000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Cluster k;
    ClusterState& state = *k.state;
    state.OnNode(Node(One(8000, kNow + 600)));
    ASSERT_TRUE(state.TakeGpuReservation("ns", "rs-1", "p2"));
    EXPECT_EQ(k.GpuBMib(), 0);  // the room is p2's to take
    const Json decided = Replica("p2", "rs-1", "r1", "GPU-b", false);
    switch (c.then) {
      case 1:
        state.ReturnGpuReservation("r1", "p2");
        EXPECT_EQ(k.GpuBMib(), 8000);  // held again at once
        break;
      case 2:
        state.OnPod(decided);
        state.Drop("p2");
        (void)k.sched->RemovePod("p2");
        break;
      case 3:
        state.OnPod(decided);
        state.OnPodDeleted(decided);
        break;
      case 4:
        state.OnPod(decided);
        state.MarkBound("p2", "n1");
        break;
    }
    if (c.then == 0) {
      EXPECT_TRUE(state.TakeGpuReservation("ns", "rs-1", "p2"));
    }
    const auto p3 = state.TakeGpuReservation("ns", "rs-1", "p3");
    EXPECT_EQ(p3.has_value(), c.p3_gets_it);
    if (p3) {
      EXPECT_EQ(p3->reservation.id, "r1");
    }
    EXPECT_EQ(k.GpuBMib(), c.gpu_b_mib);
  }
}

// Issue 28, quota: while a reservation holds its room it counts against its namespace's quota as
// the evicted pod did, so another pod of the namespace cannot take the quota the replacement
// needs; the replacement taking it gets it back (its own decision is then charged).
TEST(GpuReservations, AHeldReservationCountsAgainstItsNamespacesQuota) {
  struct Case {
    const char* name;
    std::string ns;
    bool taken_first;  // the workload's replacement took the reservation
    bool other_fits;   // a 4000 MiB pod of the namespace fits the 10000 MiB quota
  };
  const Case cases[] = {
      {"held: 8000 of the 10000 MiB counted", "ns", false, false},
      {"taken by the replacement: not counted", "ns", true, true},
      {"another namespace's quota: not counted", "other", false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Cluster k;
    ClusterState& state = *k.state;
    state.OnQuota(Json{{"metadata", {{"name", "q"}, {"namespace", c.ns}}},
                       {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "10000"}}}}}});
    state.OnNode(Node(One(8000, kNow + 600)));
    if (c.taken_first) {
      ASSERT_TRUE(state.TakeGpuReservation("ns", "rs-1", "p2"));
    }
    PodTotals demand;
    demand["nvidia.com/gpumem"] = 4000;
    EXPECT_EQ(state.CheckQuota(c.ns, demand).ok(), c.other_fits);
    EXPECT_EQ(state.QuotaRoomOf(c.ns).vendors.at(0).mem_mib, c.other_fits ? 10000 : 2000);
  }
  // Withdrawn from the node: the quota is free again.
  Cluster k;
  k.state->OnQuota(Json{{"metadata", {{"name", "q"}, {"namespace", "ns"}}},
                        {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "10000"}}}}}});
  k.state->OnNode(Node(One(8000, kNow + 600)));
  k.state->OnNode(Node(""));
  EXPECT_TRUE(k.state->NamespaceUsage()["ns"].empty());
}

}  // namespace
}  // namespace hami::extender
