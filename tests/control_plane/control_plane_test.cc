// Control plane end to end through the fake API server (label integration): webhook -> filter ->
// bind as kube-scheduler drives it, concurrency without oversubscription, restart recovery from
// annotations, and API faults (409, 500, dropped watches, 410).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/annotations.h"
#include "harness.h"
#include "vendors/nvidia/annotations.h"

namespace hami::controlplane {
namespace {

using k8s::testing::FakeApiServer;

Json Container(const std::string& name, const Json& limits) {
  return Json{{"name", name}, {"image", "cuda:12"}, {"resources", {{"limits", limits}}}};
}

Json PodSpec(const std::string& name, const std::string& ns, const Json& containers,
             const Json& init = nullptr) {
  Json pod{{"apiVersion", "v1"},
           {"kind", "Pod"},
           {"metadata", {{"name", name}, {"namespace", ns}}},
           {"spec", {{"containers", containers}}}};
  if (!init.is_null()) pod["spec"]["initContainers"] = init;
  return pod;
}

class ControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(api_.Start().ok()); }
  void AddNodes(int n, int gpus) {
    for (int i = 0; i < n; ++i) {
      const std::string name = "node-" + std::to_string(i);
      ASSERT_TRUE(api_.Upsert("nodes", GpuNode(name, gpus)).ok());
      nodes_.push_back(name);
    }
  }
  std::unique_ptr<Replica> StartReplica(ReplicaOptions o = {}) {
    return StartSynced(api_, nodes_.size(), o);
  }
  // Admit + create + filter + bind; returns the stored pod (null when not scheduled).
  Json Schedule(Replica& rep, const Json& spec, std::string* why = nullptr) {
    KubeScheduler ks(rep.port());
    const std::string ns = spec["metadata"]["namespace"];
    Json admitted = ks.Admit(spec, ns, why);
    if (admitted.is_null()) return nullptr;
    auto created = rep.client->Create(k8s::kPods, ns, admitted);
    if (!created.ok()) {
      if (why) *why = std::string(created.status().message());
      return nullptr;
    }
    std::string err;
    std::string node;
    for (int attempt = 0; attempt < 5 && node.empty();
         ++attempt) {  // kube-scheduler retries errors
      node = ks.Filter(*created, nodes_, &err);
      if (node.empty() && err.empty()) break;  // unschedulable, not an error
    }
    if (node.empty()) {
      if (why) *why = err.empty() ? "unschedulable" : err;
      return nullptr;
    }
    std::string bind_err = ks.Bind(*created, node);
    if (!bind_err.empty()) {
      if (why) *why = bind_err;
      return nullptr;
    }
    return *api_.Get("pods", ns, (*created)["metadata"]["name"]);
  }
  void ExpectNoOversubscription() {
    for (const auto& [uuid, t] : TotalsFromAnnotations(api_)) {
      SCOPED_TRACE(uuid);
      EXPECT_LE(t.mem, 16000);
      EXPECT_LE(t.cores, 100);
      EXPECT_LE(t.tasks, 4);
      if (t.exclusive) {
        EXPECT_EQ(t.tasks, 1);
      }
    }
  }
  // The replica's cache holds exactly what the annotations say.
  bool CacheMatchesAnnotations(const Replica& rep) {
    auto truth = TotalsFromAnnotations(api_);
    for (const auto& name : nodes_) {
      auto snap = rep.sched->cache().Snapshot(name);
      if (!snap) return false;
      for (size_t i = 0; i < snap->info.devices.size(); ++i) {
        const auto& want = truth[snap->info.devices[i].uuid];
        const auto& got = snap->usage[i];
        if (got.used != want.tasks || got.usedmem_mib != want.mem || got.usedcores != want.cores)
          return false;
      }
    }
    return true;
  }

  FakeApiServer api_;
  std::vector<std::string> nodes_;
};

TEST_F(ControlPlaneTest, WebhookFilterBindTable) {
  AddNodes(2, 4);
  auto rep = StartReplica();
  struct Case {
    const char* name;
    Json spec;
    std::string want_allocated_pattern;  // number of ';'-separated container entries and devices
    int containers;
    int devices;
  };
  const Case cases[] = {
      {"single gpu share",
       PodSpec("single", "ml",
               Json::array({Container("c", {{"nvidia.com/gpu", "1"},
                                            {"nvidia.com/gpumem", "3000"},
                                            {"nvidia.com/gpucores", "30"}})})),
       "", 1, 1},
      {"bare gpu: whole exclusive card",
       PodSpec("whole", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "1"}})})), "", 1, 1},
      {"multi gpu",
       PodSpec(
           "multi", "ml",
           Json::array({Container("c", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "5000"}})})),
       "", 1, 2},
      {"multi container with init",
       PodSpec(
           "mc", "ml",
           Json::array(
               {Container("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "2000"}}),
                Container("b", {{"cpu", "1"}}),
                Container("c", {{"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "10"}})}),
           Json::array(
               {Container("init", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4000"}})})),
       "", 4, 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string why;
    Json pod = Schedule(*rep, c.spec, &why);
    ASSERT_FALSE(pod.is_null()) << why;
    const auto& ann = pod["metadata"]["annotations"];
    EXPECT_EQ(pod["spec"]["schedulerName"], "hami-scheduler");
    EXPECT_EQ(pod["spec"]["nodeName"], ann[core::kVgpuNode]);
    EXPECT_EQ(pod["metadata"]["labels"][core::kVgpuNode], ann[core::kVgpuNode]);
    EXPECT_EQ(ann[core::kBindPhase], "allocating");
    EXPECT_TRUE(ann.contains(core::kBindTime));
    EXPECT_TRUE(ann.contains(core::kVgpuTime));
    // The device plugin's contract: a to-allocate record equal to the permanent one until Allocate.
    EXPECT_EQ(ann[vendors::nvidia::kNvidiaDevicesToAllocate],
              ann[vendors::nvidia::kNvidiaDevicesAllocated]);
    auto alloc =
        core::DecodePodDevices(ann[vendors::nvidia::kNvidiaDevicesAllocated].get<std::string>());
    ASSERT_TRUE(alloc.ok()) << alloc.status();
    EXPECT_EQ(static_cast<int>(alloc->containers.size()), c.containers);
    int devices = 0;
    for (const auto& ctr : alloc->containers) devices += static_cast<int>(ctr.size());
    EXPECT_EQ(devices, c.devices);
    for (const auto& ctr : alloc->containers)
      for (const auto& d : ctr) EXPECT_EQ(d.vendor, "NVIDIA");
  }
  // Pods that request no GPU are left alone by the webhook; a preset nodeName is refused.
  KubeScheduler ks(rep->port());
  Json cpu = PodSpec("cpu", "ml", Json::array({Container("c", {{"cpu", "1"}})}));
  EXPECT_EQ(ks.Admit(cpu, "ml"), cpu);
  Json preset = PodSpec("preset", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "1"}})}));
  preset["spec"]["nodeName"] = "node-0";
  std::string denied;
  EXPECT_TRUE(ks.Admit(preset, "ml", &denied).is_null());
  EXPECT_NE(denied.find("spec.nodeName"), std::string::npos) << denied;
  ExpectNoOversubscription();
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesAnnotations(*rep); }));
}

TEST_F(ControlPlaneTest, ConcurrentPodsNeverOversubscribe) {
  AddNodes(20, 4);
  auto rep = StartReplica({.threads = 32});
  constexpr int kPods = 200;
  std::atomic<int> scheduled{0}, unschedulable{0};
  const auto errors = ParallelFor(16, kPods, [&](int, int i) -> std::string {
    // A mix: shares of 1-2 GPUs, some whole cards, some compute-capped.
    const int gpus = 1 + (i % 5 == 0);
    Json limits{{"nvidia.com/gpu", std::to_string(gpus)}};
    if (i % 7 != 0) limits["nvidia.com/gpumem"] = std::to_string(2000 + (i * 977) % 6000);
    if (i % 3 == 0) limits["nvidia.com/gpucores"] = std::to_string(10 + (i * 13) % 50);
    std::string why;
    Json pod = Schedule(*rep,
                        PodSpec("p" + std::to_string(i), "ns" + std::to_string(i % 4),
                                Json::array({Container("c", limits)})),
                        &why);
    if (!pod.is_null()) {
      scheduled++;
      return "";
    }
    if (why == "unschedulable") {
      unschedulable++;
      return "";
    }
    return why;
  });
  EXPECT_TRUE(errors.empty()) << errors.size()
                              << " errors, first: " << (errors.empty() ? "" : errors[0]);
  EXPECT_EQ(scheduled + unschedulable, kPods);
  EXPECT_GT(scheduled.load(), 150);  // 80 GPUs x 4 slots: most of the mix fits
  ExpectNoOversubscription();
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesAnnotations(*rep); }));
}

// Regression (bench/extender lost ~0.3 % of pods): concurrent filters that pick the same node make
// the scheduler's re-check of the winner fail (ABORTED "changed during the decision"). The extender
// must decide again instead of answering Error: here kube-scheduler does not retry, so every single
// /filter has to come back with a node.
TEST_F(ControlPlaneTest, ConcurrentFiltersRacingForOneNodeAllSucceed) {
  AddNodes(50, 8);
  auto rep = StartReplica({.threads = 32});
  constexpr int kPods = 1000;  // 50 nodes x 8 GPUs x 4 slots = 1600: everything fits
  std::vector<Json> pods;
  for (int i = 0; i < kPods; ++i) {
    auto created = rep->client->Create(
        k8s::kPods, "race",
        PodSpec("r" + std::to_string(i), "race",
                Json::array(
                    {Container("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}})})));
    ASSERT_TRUE(created.ok()) << created.status();
    pods.push_back(*created);
  }
  std::vector<std::unique_ptr<KubeScheduler>> clients;
  for (int w = 0; w < 16; ++w) clients.push_back(std::make_unique<KubeScheduler>(rep->port()));
  std::atomic<int> bound{0};
  const auto errors = ParallelFor(16, kPods, [&](int w, int i) -> std::string {
    std::string err;
    const Json& pod = pods[static_cast<size_t>(i)];
    const std::string node = clients[static_cast<size_t>(w)]->Filter(pod, nodes_, &err);
    if (!node.empty())
      err = clients[static_cast<size_t>(w)]->Bind(pod, node);
    else if (err.empty())
      err = "unschedulable";
    if (err.empty()) bound++;
    return err;
  });
  EXPECT_TRUE(errors.empty()) << errors.size()
                              << " errors, first: " << (errors.empty() ? "" : errors[0]);
  EXPECT_EQ(bound.load(), kPods);
  ExpectNoOversubscription();
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesAnnotations(*rep); }));
}

TEST_F(ControlPlaneTest, RestartRecoversFromAnnotations) {
  AddNodes(4, 4);
  auto first = StartReplica();
  for (int i = 0; i < 20; ++i) {
    std::string why;
    ASSERT_FALSE(Schedule(*first,
                          PodSpec("a" + std::to_string(i), "ml",
                                  Json::array({Container("c", {{"nvidia.com/gpu", "1"},
                                                               {"nvidia.com/gpumem", "6000"}})})),
                          &why)
                     .is_null())
        << why;
  }
  // A pod filtered (annotated) but not yet bound when the replica dies still holds its devices.
  {
    KubeScheduler ks(first->port());
    Json spec = ks.Admit(PodSpec("inflight", "ml",
                                 Json::array({Container("c", {{"nvidia.com/gpu", "1"},
                                                              {"nvidia.com/gpumem", "6000"}})})),
                         "ml");
    auto created = first->client->Create(k8s::kPods, "ml", spec);
    ASSERT_TRUE(created.ok());
    ASSERT_FALSE(ks.Filter(*created, nodes_).empty());
    // The decision patch is written after /filter answers (only /bind waits for it): the pod is
    // "annotated" once the API server holds it.
    ASSERT_TRUE(WaitFor([&] {
      auto p = api_.Get("pods", "ml", "inflight");
      return p && p->value("/metadata/annotations"_json_pointer, Json::object())
                      .contains(core::kVgpuNode);
    }));
  }
  first.reset();  // crash/restart: nothing survives but the API server's objects
  auto second = StartReplica({.identity = "replica-1"});
  EXPECT_TRUE(WaitFor([&] { return second->state->pod_count() == 21; }))
      << second->state->pod_count();
  EXPECT_TRUE(CacheMatchesAnnotations(*second));
  // Fill the cluster from the new replica: never more than fits, given what the first one placed.
  int more = 0;
  for (int i = 0; i < 40; ++i) {
    std::string why;
    if (!Schedule(*second,
                  PodSpec("b" + std::to_string(i), "ml",
                          Json::array({Container(
                              "c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "6000"}})})),
                  &why)
             .is_null())
      ++more;
    else
      EXPECT_EQ(why, "unschedulable");
  }
  EXPECT_EQ(more, 16 * 2 - 21);  // 16 GPUs x two 6000-MiB shares of 16000
  ExpectNoOversubscription();
}

TEST_F(ControlPlaneTest, SurvivesApiFaults) {
  AddNodes(3, 4);
  auto rep = StartReplica();
  auto spec = [](const std::string& name) {
    return PodSpec(
        name, "ml",
        Json::array({Container("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}})}));
  };
  std::string why;
  // 409 on the decision patch: the filter fails cleanly (no leaked reservation), the retry
  // succeeds.
  api_.InjectErrors("PATCH", "/api/v1/namespaces/ml/pods/.*", 409, 1);
  ASSERT_FALSE(Schedule(*rep, spec("conflict"), &why).is_null()) << why;
  // 500s on binding are retried by the client.
  api_.InjectErrors("POST", ".*/binding", 500, 2);
  ASSERT_FALSE(Schedule(*rep, spec("internal"), &why).is_null()) << why;
  // A binding that keeps failing: the reservation is released and the pod marked failed.
  {
    KubeScheduler ks(rep->port());
    auto created = rep->client->Create(k8s::kPods, "ml", ks.Admit(spec("doomed"), "ml"));
    ASSERT_TRUE(created.ok());
    const size_t pods_before = rep->sched->cache().pod_count();
    const std::string node = ks.Filter(*created, nodes_);
    ASSERT_FALSE(node.empty());
    EXPECT_EQ(rep->sched->cache().pod_count(), pods_before + 1);  // reserved
    api_.InjectErrors("POST", ".*/binding", 403, 1);
    EXPECT_NE(ks.Bind(*created, node).find("failed"), std::string::npos);
    EXPECT_EQ(rep->sched->cache().pod_count(), pods_before);  // the reservation is released
    EXPECT_FALSE(rep->state->Find((*created)["metadata"]["uid"]).has_value());
    EXPECT_EQ((*api_.Get("pods", "ml", "doomed"))["metadata"]["annotations"][core::kBindPhase],
              "failed");
    rep->ext->FlushEvents();  // events are posted in batches (EventRecorderOptions::linger)
    EXPECT_GE(api_.CountRequests("POST", "/api/v1/namespaces/ml/events"), 1);
  }
  // Dropped watches and 410 Gone: pods placed by someone else meanwhile still reach the cache.
  api_.DropWatches();
  api_.ForceGone(2);
  Json foreign = PodSpec("foreign", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "1"}})}));
  foreign["metadata"]["annotations"] = {
      {core::kVgpuNode, "node-2"},
      {vendors::nvidia::kNvidiaDevicesAllocated, "node-2-gpu3,NVIDIA,16000,100:;"}};
  foreign["spec"]["schedulerName"] = "hami-scheduler";  // placed by another replica of ours
  ASSERT_TRUE(api_.Upsert("pods", foreign).ok());
  api_.Compact();
  api_.DropWatches();
  ASSERT_TRUE(api_.Delete("pods", "ml", "conflict").ok());
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesAnnotations(*rep); }));
  EXPECT_GE(rep->controller->pods().lists(), 2);
  ASSERT_FALSE(Schedule(*rep, spec("after"), &why).is_null()) << why;
  ExpectNoOversubscription();
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesAnnotations(*rep); }));
}

TEST_F(ControlPlaneTest, QuotaEnforcedInWebhookAndFilter) {
  AddNodes(2, 4);
  ASSERT_TRUE(api_.Upsert("resourcequotas",
                          Json{{"apiVersion", "v1"},
                               {"kind", "ResourceQuota"},
                               {"metadata", {{"name", "gpu"}, {"namespace", "team"}}},
                               {"spec", {{"hard", {{"limits.nvidia.com/gpumem", "10000"}}}}}})
                  .ok());
  auto rep = StartReplica();
  ASSERT_TRUE(WaitFor([&] { return rep->state->Quotas().size() == 1; }));
  auto spec = [](const std::string& name, int mem) {
    return PodSpec(name, "team",
                   Json::array({Container("c", {{"nvidia.com/gpu", "1"},
                                                {"nvidia.com/gpumem", std::to_string(mem)}})}));
  };
  std::string why;
  ASSERT_FALSE(Schedule(*rep, spec("q1", 6000), &why).is_null()) << why;
  EXPECT_TRUE(Schedule(*rep, spec("q2", 6000), &why).is_null());
  EXPECT_NE(why.find("exceeding resource quota team/gpu"), std::string::npos) << why;
  ASSERT_FALSE(Schedule(*rep, spec("q3", 4000), &why).is_null()) << why;
  const std::string metrics = KubeScheduler(rep->port()).http.Get("/metrics")->body;
  // Upstream's labels: quota_name is the resource, `limit` the limit's value, no zone.
  EXPECT_NE(
      metrics.find(
          R"(hami_resource_quota_used{namespace="team",quota_name="nvidia.com/gpumem",limit="10000"} 10000)"),
      std::string::npos)
      << metrics.substr(0, 2000);
  EXPECT_NE(
      metrics.find(
          R"(hami_resource_quota_limit{namespace="team",quota_name="nvidia.com/gpumem"} 10000)"),
      std::string::npos);
}

// Quotas charge a pod as upstream does (docs/upstream-contract.md#quota): the sum over its devices,
// so nvidia.com/gpu x gpumem per container, a gpumem-percentage resolved against the card it gets
// (the quota is checked per device while fitting, as upstream does, so a node with smaller cards
// fits), and gpucores likewise. The steps run in order; usage accumulates.
TEST_F(ControlPlaneTest, QuotaChargesPerPodAndResolvesPercentagesOnTheCard) {
  for (const char* n : {"big-0", "big-1"}) {
    ASSERT_TRUE(api_.Upsert("nodes", GpuNode(n, 2, 80000)).ok());
    nodes_.push_back(n);
  }
  ASSERT_TRUE(api_.Upsert("nodes", GpuNode("small-0", 2, 16000)).ok());
  nodes_.push_back("small-0");
  ASSERT_TRUE(
      api_.Upsert("resourcequotas", Json{{"apiVersion", "v1"},
                                         {"kind", "ResourceQuota"},
                                         {"metadata", {{"name", "gpu"}, {"namespace", "team"}}},
                                         {"spec",
                                          {{"hard",
                                            {{"limits.nvidia.com/gpumem", "30000"},
                                             {"limits.nvidia.com/gpucores", "150"}}}}}})
          .ok());
  auto rep = StartReplica();
  ASSERT_TRUE(WaitFor([&] { return rep->state->Quotas().size() == 1; }));
  struct Step {
    const char* name;
    Json limits;
    std::string want_node;                     // "" = not scheduled
    std::string want_reason;                   // in the webhook denial or in FailedNodes
    int64_t used_mem, used_cores;              // the namespace's charge afterwards
    std::vector<std::string> candidates = {};  // empty: every node
  };
  const Step steps[] = {
      {"2 GPUs x 5000 MiB: charged 10000",
       {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "5000"}},
       "big-0",
       "",
       10000,
       0,
       {"big-0"}},
      // binpack (upstream's default node policy) would prefer the used big-0, then big-1, over
      // small-0; with the quota in view while the cards are chosen, the big nodes' cards are
      // skipped in the one decision (none is ruled out after it) and small-0 is chosen.
      {"50 % of an 80000-MiB card (40000) exceeds the quota; of a 16000-MiB card (8000) it fits",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}},
       "small-0",
       "",
       18000,
       0},
      {"2 GPUs x 40 cores: charged 80 cores",
       {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "1000"}, {"nvidia.com/gpucores", "40"}},
       "*",
       "",
       20000,
       80},
      {"a whole card: 100 % memory of any card exceeds the 10000 MiB left",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "50"}},
       "",
       "ResourceQuotaNotFit",
       20000,
       80},
      {"2 x 40 more cores: 160 > 150, denied at admission",
       {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "100"}, {"nvidia.com/gpucores", "40"}},
       "",
       "exceeding resource quota team/gpu",
       20000,
       80},
  };
  KubeScheduler ks(rep->port());
  int i = 0;
  for (const auto& s : steps) {
    SCOPED_TRACE(s.name);
    std::string denied;
    Json spec = PodSpec("s" + std::to_string(i++), "team", Json::array({Container("c", s.limits)}));
    spec["metadata"]["annotations"] = {{"hami.io/node-scheduler-policy", "binpack"}};
    Json admitted = ks.Admit(spec, "team", &denied);
    std::string node, err;
    extender::ExtenderFilterResult res;
    if (!admitted.is_null()) {
      auto created = rep->client->Create(k8s::kPods, "team", admitted);
      ASSERT_TRUE(created.ok()) << created.status();
      node = ks.Filter(*created, s.candidates.empty() ? nodes_ : s.candidates, &err, &res);
      EXPECT_EQ(err, "");
      if (!node.empty()) {
        EXPECT_EQ(ks.Bind(*created, node), "");
      }
    }
    if (s.want_node.empty()) {
      EXPECT_EQ(node, "");
      std::string reasons = denied;
      for (const auto& [n, why] : res.failed_nodes) reasons += why;
      EXPECT_NE(reasons.find(s.want_reason), std::string::npos) << reasons;
    } else {
      EXPECT_EQ(denied, "");
      EXPECT_TRUE(s.want_node == "*" ? !node.empty() : node == s.want_node) << node;
      if (s.want_node == "small-0") {  // the quota did not refuse a decision for a big node
        for (const char* big : {"big-0", "big-1"}) {
          EXPECT_EQ(res.failed_nodes.count(big), 0u) << big;
        }
      }
    }
    const auto usage = rep->state->NamespaceUsage();
    ASSERT_EQ(usage.count("team"), 1u);
    const auto& team = usage.at("team");
    EXPECT_EQ(team.count("nvidia.com/gpumem") ? team.at("nvidia.com/gpumem") : 0, s.used_mem);
    EXPECT_EQ(team.count("nvidia.com/gpucores") ? team.at("nvidia.com/gpucores") : 0, s.used_cores);
  }
  ExpectNoOversubscription();
}

TEST_F(ControlPlaneTest, OnlyTheLeaderDecides) {
  AddNodes(2, 4);
  // Each replica labels its own pod hami.io/scheduler-role (upstream's; a Service may select on
  // it).
  for (const char* pod : {"sched-a", "sched-b"})
    ASSERT_TRUE(
        api_.Upsert("pods", Json{{"metadata", {{"name", pod}, {"namespace", "hami-system"}}},
                                 {"spec", {{"containers", Json::array()}}}})
            .ok());
  const auto role = [&](const char* pod) {
    auto p = api_.Get("pods", "hami-system", pod);
    return p ? p->value("/metadata/labels"_json_pointer, Json::object())
                   .value(extender::kSchedulerRoleLabel, "")
             : "";
  };
  auto a = StartReplica({.leader_elect = true, .identity = "a", .self_pod = "sched-a"});
  ASSERT_TRUE(WaitFor([&] { return a->controller->IsLeader(); }));
  auto b = StartReplica({.leader_elect = true, .identity = "b", .self_pod = "sched-b"});
  ASSERT_TRUE(WaitFor([&] { return b->controller->Ready(); }));
  ASSERT_TRUE(WaitFor([&] { return role("sched-a") == "leader" && role("sched-b") == "follower"; }))
      << role("sched-a") << " " << role("sched-b");
  EXPECT_FALSE(b->controller->IsLeader());
  EXPECT_EQ(b->controller->Leader(), "a");
  KubeScheduler ks(b->port());
  auto created = b->client->Create(
      k8s::kPods, "ml",
      ks.Admit(PodSpec("l", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "1"}})})), "ml"));
  ASSERT_TRUE(created.ok());
  std::string err;
  EXPECT_TRUE(ks.Filter(*created, nodes_, &err).empty());
  EXPECT_NE(err.find("not the leader"), std::string::npos) << err;
  a.reset();  // the leader goes away (releases the lease): b takes over and decides
  ASSERT_TRUE(WaitFor([&] { return b->controller->IsLeader(); }));
  EXPECT_FALSE(ks.Filter(*created, nodes_, &err).empty()) << err;
  EXPECT_TRUE(WaitFor([&] { return role("sched-b") == "leader"; })) << role("sched-b");
}

// Upstream's pod events (pkg/scheduler/event.go): FilteringSucceed and BindingSucceed (Normal),
// FilteringFailed (Warning) when no node fits; core/v1 Events the API server's validation accepts.
TEST_F(ControlPlaneTest, PodEventsAsUpstream) {
  AddNodes(1, 1);
  auto rep = StartReplica();
  Json ok = Schedule(
      *rep, PodSpec("fits", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "1"}})})));
  ASSERT_FALSE(ok.is_null());
  std::string why;
  EXPECT_TRUE(
      Schedule(*rep, PodSpec("big", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "2"}})})),
               &why)
          .is_null());
  rep->ext->FlushEvents();
  std::map<std::string, std::set<std::string>> reasons;  // pod -> reasons
  for (const auto& e : api_.List("events")) {
    EXPECT_EQ(e["metadata"]["namespace"], "ml");
    const std::string type = e.value("type", "");
    const std::string reason = e.value("reason", "");
    EXPECT_EQ(type, reason.find("Failed") != std::string::npos ? "Warning" : "Normal") << reason;
    reasons[e["involvedObject"].value("name", "")].insert(reason);
  }
  EXPECT_EQ(reasons["fits"], (std::set<std::string>{"FilteringSucceed", "BindingSucceed"}));
  EXPECT_EQ(reasons["big"], (std::set<std::string>{"FilteringFailed"}));
  EXPECT_EQ(rep->ext->counters().events_dropped.load(), 0);
}

// Deployed, kube-scheduler runs in each replica's pod and calls the extender on 127.0.0.1; with
// follow_lease the extender leads exactly where kube-scheduler holds its Lease (identity
// "<pod name>_<uuid>"), so the scheduling kube-scheduler never meets a follower.
TEST_F(ControlPlaneTest, FollowsTheKubeSchedulerLease) {
  AddNodes(2, 4);
  auto lease = [&](const std::string& holder, int renew) {
    ASSERT_TRUE(
        api_.Upsert(
                "leases",
                Json{{"apiVersion", "coordination.k8s.io/v1"},
                     {"kind", "Lease"},
                     {"metadata", {{"name", "kube-scheduler-lease"}, {"namespace", "hami-system"}}},
                     {"spec",
                      {{"holderIdentity", holder},
                       {"leaseDurationSeconds", 15},
                       {"renewTime", StrCat("2026-01-01T00:00:", 10 + renew, ".000000Z")}}}})
            .ok());
  };
  lease("pod-b_0b6a1e2c-5d4f-4e1a-9c7b-2f3e4d5c6b7a", 0);
  auto a = StartReplica(
      {.leader_elect = true, .identity = "pod-a_1", .follow_lease = "kube-scheduler-lease"});
  auto b = StartReplica(
      {.leader_elect = true, .identity = "pod-b_2", .follow_lease = "kube-scheduler-lease"});
  ASSERT_TRUE(WaitFor([&] { return b->controller->IsLeader(); }));
  EXPECT_FALSE(a->controller->IsLeader());
  EXPECT_EQ(a->controller->Leader(), "pod-b");
  EXPECT_TRUE(a->controller->Ready());
  KubeScheduler ka(a->port()), kb(b->port());
  auto created = b->client->Create(
      k8s::kPods, "ml",
      kb.Admit(PodSpec("f", "ml", Json::array({Container("c", {{"nvidia.com/gpu", "1"}})})), "ml"));
  ASSERT_TRUE(created.ok());
  std::string err;
  EXPECT_TRUE(ka.Filter(*created, nodes_, &err).empty());
  EXPECT_NE(err.find("not the leader (leader: pod-b)"), std::string::npos) << err;
  // kube-scheduler fails over to pod a: so does the extender.
  lease("pod-a_9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", 1);
  ASSERT_TRUE(WaitFor([&] { return a->controller->IsLeader() && !b->controller->IsLeader(); }));
  EXPECT_FALSE(ka.Filter(*created, nodes_, &err).empty()) << err;
  // A lease nobody renews expires (lease_duration 1.5 s in the harness): nobody decides.
  EXPECT_TRUE(WaitFor([&] { return !a->controller->IsLeader() && !b->controller->IsLeader(); }));
}

// The preemption verb as kube-scheduler calls it (nodeCacheCapable: victims by UID) over HTTP, with
// the pods and a policy/v1 PodDisruptionBudget from the API server's informers: a proposed victim
// of the preemptor's own priority is spared, the budget keeps its pod until it allows a disruption,
// and a request that cannot be read is an HTTP error.
TEST_F(ControlPlaneTest, PreemptRefinesVictimsOverHttp) {
  AddNodes(1, 1);
  auto rep = StartReplica();
  auto placed = [&](const char* name, int64_t mem, int cores, int priority, Json labels) {
    Json spec =
        PodSpec(name, "ml",
                Json::array({Container("c", {{"nvidia.com/gpu", "1"},
                                             {"nvidia.com/gpumem", std::to_string(mem)},
                                             {"nvidia.com/gpucores", std::to_string(cores)}})}));
    spec["spec"]["priority"] = priority;
    if (!labels.is_null()) spec["metadata"]["labels"] = labels;
    return spec;
  };
  std::map<std::string, std::string> uid;
  for (const auto& [name, mem, cores, prio, labels] :
       std::vector<std::tuple<const char*, int64_t, int, int, Json>>{
           {"guarded", 8000, 50, 1, {{"app", "guarded"}}},
           {"free", 4000, 25, 2, nullptr},
           {"peer", 4000, 25, 100, nullptr}}) {
    std::string why;
    Json pod = Schedule(*rep, placed(name, mem, cores, prio, labels), &why);
    ASSERT_FALSE(pod.is_null()) << name << ": " << why;
    uid[name] = pod["metadata"]["uid"];
  }
  Json pdb{{"apiVersion", "policy/v1"},
           {"kind", "PodDisruptionBudget"},
           {"metadata", {{"name", "guarded"}, {"namespace", "ml"}}},
           {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "guarded"}}}}}}},
           {"status", {{"disruptionsAllowed", 0}}}};
  ASSERT_TRUE(api_.Upsert("poddisruptionbudgets", pdb).ok());
  auto allowed = [&](int n) {
    auto pdbs = rep->controller->PodDisruptionBudgets();
    return pdbs && pdbs->size() == 1 && (*pdbs)[0]["status"]["disruptionsAllowed"] == n;
  };
  ASSERT_TRUE(WaitFor([&] { return allowed(0); }));
  ASSERT_TRUE(WaitFor([&] { return rep->state->Pods().size() == 3; }));

  KubeScheduler ks(rep->port());
  Json high = placed("high", 8000, 50, 100, nullptr);
  high = ks.Admit(high, "ml");
  auto created = rep->client->Create(k8s::kPods, "ml", high);
  ASSERT_TRUE(created.ok()) << created.status();
  std::string err;
  EXPECT_EQ(ks.Filter(*created, nodes_, &err), "") << "the GPU is full";
  auto preempt = [&](const std::vector<std::string>& proposed) {
    extender::ExtenderPreemptionArgs a;
    a.pod = *created;
    a.node_to_meta_victims =
        std::map<std::string, extender::MetaVictims>{{"node-0", {proposed, 0}}};
    auto r = ks.http.Post("/preempt", extender::ToJson(a).dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
    auto res = extender::ParseExtenderPreemptionResult(r ? r->body : "");
    EXPECT_TRUE(res.ok()) << res.status();
    return res.ok() ? res->node_to_meta_victims : std::map<std::string, extender::MetaVictims>{};
  };
  // "peer" has the preemptor's priority; "free" alone is not enough; "guarded" has no budget.
  EXPECT_TRUE(preempt({uid["peer"]}).empty());
  pdb["status"]["disruptionsAllowed"] = 1;
  ASSERT_TRUE(api_.Upsert("poddisruptionbudgets", pdb).ok());
  ASSERT_TRUE(WaitFor([&] { return allowed(1); }));
  auto got = preempt({uid["peer"]});
  ASSERT_EQ(got.count("node-0"), 1u);
  EXPECT_EQ(got["node-0"].pod_uids, std::vector<std::string>{uid["guarded"]});

  auto bad =
      ks.http.Post("/preempt", R"({"Pod":{},"NodeNameToMetaVictims":[]})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_NE(bad->body.find("NodeNameToMetaVictims"), std::string::npos) << bad->body;
}

}  // namespace
}  // namespace hami::controlplane
