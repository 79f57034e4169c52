// The Controller against the fake API server: what the informers deliver (direct API edits of a
// bound pod's decision) and what they keep of each object.
#include "extender/controller.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::extender {
namespace {

using k8s::testing::Eventually;
using k8s::testing::FakeApiServer;

// One 1000 MiB GPU on node n1.
Json OneGpuNode() {
  const char* devs =
      R"([{"id":"GPU-a","index":0,"count":10,"devmem":1000,"devcore":100,"type":"NVIDIA-T4","health":true}])";
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", "n1"}, {"annotations", {{"hami.io/node-nvidia-register", devs}}}}}};
}

// A running pod bound to n1 holding `mib` of GPU-a.
Json BoundPod(const std::string& name, int mib) {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"annotations",
         {{"hami.io/vgpu-node", "n1"},
          {"hami.io/vgpu-devices-allocated", "GPU-a,NVIDIA," + std::to_string(mib) + ",10:;"}}}}},
      {"spec",
       {{"schedulerName", "hami-scheduler"},
        {"nodeName", "n1"},
        {"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}},
      {"status", {{"phase", "Running"}}}};
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    k8s::ClientConfig cfg;
    cfg.server = api_.url();
    cfg.qps = 0;
    client_ = std::move(*k8s::Client::Create(cfg));
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    StateOptions so;
    so.on_rejected_decision = [this](const Json& ref, const std::string& reason,
                                     const std::string&) {
      MutexLock l(mu_);
      events_.push_back(ref.value("name", "") + ":" + reason);
    };
    state_ = std::make_unique<ClusterState>(*sched_, so);
  }
  void StartController() {
    controller_ = std::make_unique<Controller>(*client_, *state_, ControllerOptions{});
    controller_->Start();
    ASSERT_TRUE(controller_->WaitForSync(std::chrono::seconds(20)));
  }
  void TearDown() override {
    if (controller_) controller_->Stop();
  }
  int64_t UsedMiB() {
    auto n = sched_->cache().Snapshot("n1");
    return n && !n->usage.empty() ? n->usage[0].usedmem_mib : -1;
  }
  // Waits until the pod informer holds the object as stored now.
  bool SeesCurrent(const Json& stored) {
    const std::string rv = stored["metadata"]["resourceVersion"];
    const std::string name = stored["metadata"]["name"];
    return Eventually([&] {
      auto p = controller_->LookupPod("ml", name);
      return p && (*p)["metadata"].value("resourceVersion", "") == rv;
    });
  }
  std::vector<std::string> Events() {
    MutexLock l(mu_);
    return events_;
  }

  FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<Controller> controller_;
  Mutex mu_;
  std::vector<std::string> events_;
};

// Removing a bound pod's decision annotations by a direct API edit (the webhook not called) frees
// nothing: the devices stay booked until the pod finishes or is deleted, and the edit is reported
// (Event + the ChangedAfterBind metric).
TEST_F(ControllerTest, DecisionRemovedFromBoundPodKeepsTheBooking) {
  struct Case {
    const char* name;
    std::vector<std::string> removed;  // annotation keys the edit deletes
  };
  const Case cases[] = {
      {"vgpu-devices-allocated", {"hami.io/vgpu-devices-allocated"}},
      {"vgpu-node", {"hami.io/vgpu-node"}},
      {"both", {"hami.io/vgpu-devices-allocated", "hami.io/vgpu-node"}},
  };
  ASSERT_TRUE(api_.Upsert("nodes", OneGpuNode()).ok());
  StartController();
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string name = "p" + std::to_string(n++);
    ASSERT_TRUE(api_.Upsert("pods", BoundPod(name, 800)).ok());
    ASSERT_TRUE(Eventually([&] { return UsedMiB() == 800; }));
    Json edited = *api_.Get("pods", "ml", name);
    for (const auto& k : c.removed) edited["metadata"]["annotations"].erase(k);
    auto stored = api_.Upsert("pods", edited);
    ASSERT_TRUE(stored.ok());
    ASSERT_TRUE(SeesCurrent(*stored));
    EXPECT_EQ(UsedMiB(), 800) << "a second 800 MiB pod would now fit the 1000 MiB GPU";
    EXPECT_EQ(state_->NamespaceUsage()["ml"]["nvidia.com/gpumem"], 800);
    ASSERT_TRUE(Eventually([&] { return !Events().empty(); }));
    EXPECT_EQ(Events(), (std::vector<std::string>{name + ":" + kRejectChangedAfterBind}));
    // Deleting the pod gives the devices back.
    ASSERT_TRUE(api_.Delete("pods", "ml", name).ok());
    ASSERT_TRUE(Eventually([&] { return UsedMiB() == 0; }));
    MutexLock l(mu_);
    events_.clear();
  }
  EXPECT_EQ(state_->RejectedDecisions()[kRejectChangedAfterBind], 3);
}

// The informers keep only what the scheduler reads: no managedFields, no last-applied copy, no
// container images or env, no node image list; the decision, resources and identity stay, so the
// pod is charged as before.
// The node handshakes (one patch per node each time its device plugin reports: 10,000 nodes fill
// a qps-200 budget for 50 s) are background requests: after a housekeeping pass larger than the
// burst, a request on the scheduling path (a decision patch, a bind) still finds half the burst
// and does not wait. Before, the pass ran the shared bucket dry and every /filter patch and /bind
// waited 5-10 ms behind it (docs/benchmarks.md, "Scheduler at scale").
TEST_F(ControllerTest, HousekeepingLeavesTheBurstToTheSchedulingPath) {
  constexpr int kNodes = 60;  // more patches than the burst of 40
  for (int i = 0; i < kNodes; ++i) {
    Json node = OneGpuNode();
    node["metadata"]["name"] = "n" + std::to_string(i + 1);
    ASSERT_TRUE(api_.Upsert("nodes", node).ok());
  }
  FakeClock clock;  // the limiter's: moves only when a request sleeps for a token
  Mutex sleeps_mu;
  std::vector<int64_t> sleeps;
  k8s::ClientConfig cfg;
  cfg.server = api_.url();
  cfg.qps = 20;
  cfg.burst = 40;
  k8s::ClientOptions co;
  co.clock = &clock;
  co.sleep = [&](int64_t ns) {
    MutexLock l(sleeps_mu);
    sleeps.push_back(ns);
    clock.AdvanceNanos(ns);
  };
  client_ = std::move(*k8s::Client::Create(cfg, co));
  StartController();
  EXPECT_EQ(controller_->HousekeepOnce(), kNodes);
  const size_t after_housekeeping = [&] {
    MutexLock l(sleeps_mu);
    return sleeps.size();
  }();
  EXPECT_GT(after_housekeeping, 0u) << "the pass was paced by the limiter";
  EXPECT_TRUE(client_->Get(k8s::kNodes, "", "n1").ok());  // as a decision patch or bind
  controller_->Stop();                                    // its threads use `sleeps` and `clock`
  controller_.reset();
  MutexLock l(sleeps_mu);
  EXPECT_EQ(sleeps.size(), after_housekeeping) << "the scheduling path waited behind handshakes";
}

TEST_F(ControllerTest, StoresKeepOnlyWhatTheSchedulerReads) {
  Json node = OneGpuNode();
  node["metadata"]["managedFields"] = Json::array({{{"manager", "kubelet"}}});
  node["status"]["images"] = Json::array({{{"names", {"busybox"}}, {"sizeBytes", 1}}});
  ASSERT_TRUE(api_.Upsert("nodes", node).ok());
  Json pod = BoundPod("fat", 800);
  pod["metadata"]["managedFields"] =
      Json::array({{{"manager", "kubectl"}, {"fieldsV1", {{"f:x", 1}}}}});
  pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
      std::string(4096, 'x');
  pod["metadata"]["labels"] = {{"app", "a"}};
  pod["metadata"]["ownerReferences"] = Json::array({{{"kind", "ReplicaSet"}, {"name", "r"}}});
  pod["spec"]["priority"] = 5;
  pod["spec"]["volumes"] = Json::array({{{"name", "v"}}});
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "A"}, {"value", "1"}}});
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  pod["status"]["conditions"] = Json::array({{{"type", "Ready"}}});
  ASSERT_TRUE(api_.Upsert("pods", pod).ok());
  StartController();
  ASSERT_TRUE(Eventually([&] { return UsedMiB() == 800; }));
  auto kept = controller_->LookupPod("ml", "fat");
  ASSERT_TRUE(kept);
  const Json& p = *kept;
  struct Case {
    std::vector<const char*> path;
    bool present;
  };
  const Case cases[] = {
      {{"metadata", "managedFields"}, false},
      {{"metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"}, false},
      {{"spec", "volumes"}, false},
      {{"status", "conditions"}, false},
      {{"metadata", "name"}, true},
      {{"metadata", "uid"}, true},
      {{"metadata", "resourceVersion"}, true},
      {{"metadata", "labels", "app"}, true},
      {{"metadata", "ownerReferences"}, true},
      {{"metadata", "annotations", "hami.io/vgpu-devices-allocated"}, true},
      {{"spec", "nodeName"}, true},
      {{"spec", "schedulerName"}, true},
      {{"spec", "priority"}, true},
      {{"status", "phase"}, true},
  };
  for (const auto& c : cases) {
    const Json* at = &p;
    std::string where;
    for (const char* k : c.path) {
      where += std::string("/") + k;
      at = at && at->is_object() && at->contains(k) ? &(*at)[k] : nullptr;
    }
    EXPECT_EQ(at != nullptr, c.present) << where;
  }
  EXPECT_EQ(p["metadata"]["ownerReferences"], Json::array({{{"kind", "ReplicaSet"}}}));
  EXPECT_EQ(p["spec"]["containers"][0],
            (Json{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}));
  auto n = controller_->nodes().Get("n1");
  ASSERT_TRUE(n.has_value());
  EXPECT_FALSE((*n)["metadata"].contains("managedFields"));
  EXPECT_FALSE((*n)["status"].contains("images"));
  EXPECT_TRUE((*n)["metadata"]["annotations"].contains("hami.io/node-nvidia-register"));
}

// The cut made while a page is parsed drops nothing the Trim functions keep: a pod and a node
// listed with it and trimmed equal the same objects listed whole and trimmed, whatever names their
// labels, annotations and list entries use.
TEST_F(ControllerTest, DropWhileParsingCutsNothingTheTrimKeeps) {
  Json node = OneGpuNode();
  node["metadata"]["managedFields"] = Json::array({{{"manager", "kubelet"}}});
  node["metadata"]["labels"] = {{"images", "x"}, {"managedFields", "y"}};
  node["status"]["images"] = Json::array({{{"names", {"busybox"}}}});
  node["status"]["conditions"] = Json::array({{{"type", "Ready"}, {"status", "True"}}});
  ASSERT_TRUE(api_.Upsert("nodes", node).ok());
  Json pod = BoundPod("fat", 800);
  pod["metadata"]["managedFields"] = Json::array({{{"manager", "kubectl"}}});
  // Keys named like dropped members, at depths where they are data.
  pod["metadata"]["labels"] = {{"env", "prod"}, {"image", "x"}, {"volumes", "3"}};
  pod["metadata"]["annotations"]["conditions"] = "kept";
  pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}";
  pod["metadata"]["ownerReferences"] =
      Json::array({{{"kind", "ReplicaSet"}, {"name", "r"}, {"controller", true}, {"uid", "u"}}});
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "A"}}});
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  pod["spec"]["initContainers"] =
      Json::array({{{"name", "i"}, {"image", "x"}, {"restartPolicy", "Always"}}});
  pod["spec"]["priority"] = 7;
  pod["spec"]["volumes"] = Json::array({{{"name", "v"}}});
  pod["status"]["initContainerStatuses"] = Json::array(
      {{{"name", "i"}, {"image", "x"}, {"state", {{"terminated", {{"exitCode", 0}}}}}}});
  pod["status"]["conditions"] = Json::array({{{"type", "Ready"}}});
  ASSERT_TRUE(api_.Upsert("pods", pod).ok());
  struct Case {
    const char* name;
    const k8s::Resource& resource;
    k8s::Client::FieldFilter drop;
    std::function<void(Json&)> trim;
  };
  const Case cases[] = {
      {"pods", k8s::kPods, DropPodFieldWhileParsing, TrimPodForScheduler},
      {"nodes", k8s::kNodes, DropNodeFieldWhileParsing, TrimNodeForScheduler},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto whole = client_->List(c.resource, "");
    ASSERT_TRUE(whole.ok());
    std::vector<Json> cut;
    auto rv = client_->ListPages(
        c.resource, "", {},
        [&](Json& page) {
          for (auto& item : page["items"]) cut.push_back(item);
        },
        {}, c.drop);
    ASSERT_TRUE(rv.ok());
    EXPECT_EQ(*rv, (*whole)["metadata"]["resourceVersion"]);
    ASSERT_EQ(cut.size(), (*whole)["items"].size());
    for (size_t i = 0; i < cut.size(); ++i) {
      Json expected = (*whole)["items"][i];
      EXPECT_NE(cut[i], expected) << "something was dropped while parsing";
      c.trim(expected);
      c.trim(cut[i]);
      EXPECT_EQ(cut[i], expected);
    }
  }
}

// The informer keeps of a pod's owners what preemption reads, and the controller owner's uid only
// on a pod whose decision names a consolidation reservation (ClusterState matches the reservation's
// workload by it; issue 28).
TEST(TrimPod, KeepsTheControllerOwnersUidOnlyOnAPodNamingAReservation) {
  struct Case {
    const char* name;
    bool names_reservation;
    bool controller;
    Json kept;  // the owner reference after the trim
  };
  const Case cases[] = {
      {"names a reservation",
       true,
       true,
       {{"kind", "ReplicaSet"}, {"controller", true}, {"uid", "rs-1"}}},
      {"names none", false, true, {{"kind", "ReplicaSet"}, {"controller", true}}},
      {"names one, the owner is not the controller",
       true,
       false,
       {{"kind", "ReplicaSet"}, {"controller", false}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Json pod = {{"metadata",
                 {{"name", "p"},
                  {"annotations", Json::object()},
                  {"ownerReferences", Json::array({{{"kind", "ReplicaSet"},
                                                    {"name", "rs"},
                                                    {"controller", c.controller},
                                                    {"uid", "rs-1"}}})}}}};
    if (c.names_reservation)
      pod["metadata"]["annotations"][scheduler::kGpuReservationPodKey] = "r1";
    TrimPodForScheduler(pod);
    EXPECT_EQ(pod["metadata"]["ownerReferences"], Json::array({c.kept}));
  }
}

}  // namespace
}  // namespace hami::extender
