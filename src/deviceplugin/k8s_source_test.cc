// The Kubernetes side of the device plugin against the fake API server (real HTTP + JSON).
#include "deviceplugin/k8s_source.h"

#include <gtest/gtest.h>

#include <set>

#include "common/clock.h"
#include "core/annotations.h"
#include "core/mig.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/testing/fake_kubelet.h"
#include "gpu/static_discovery.h"
#include "k8s/testing/fake_apiserver.h"
#include "vendors/nvidia/annotations.h"

namespace hami::deviceplugin {
namespace {

using Json = nlohmann::json;
using std::chrono::seconds;

constexpr char kGpuA[] = "GPU-aaaa";
constexpr char kGpuB[] = "GPU-bbbb";

// A pod bound to `node` by hami-scheduler: one init container and two app containers.
Json BoundPod(const std::string& name, const std::string& to_allocate,
              const std::string& node = "node1", const std::string& phase = "allocating") {
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"uid", "uid-" + name},
        {"annotations",
         {{vendors::nvidia::kNvidiaDevicesToAllocate, to_allocate},
          {core::kVgpuNode, node},
          {core::kBindPhase, phase},
          {core::kBindTime, "1700000000"}}}}},
      {"spec",
       {{"nodeName", node},
        {"schedulerName", "hami-scheduler"},
        {"initContainers", {{{"name", "init"}}}},
        {"containers",
         {{{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/priority", "1"}}}}}},
          {{"name", "side"}, {"env", {{{"name", "CUDA_DISABLE_CONTROL"}, {"value", "true"}}}}}}}}},
      {"status", {{"phase", "Pending"}}}};
  return pod;
}

TEST(PendingFromPodJsonTest, Table) {
  const std::string two =
      std::string(";") + kGpuA + ",NVIDIA,3000,30:;" + kGpuB + ",NVIDIA,1000,0:;";
  struct Case {
    const char* name;
    Json pod;
    bool want_error;
    int want_containers;       // -1 = not pending
    const char* refused = "";  // substring of PendingPod::refused; "" = trusted
  };
  auto edit = [&](auto f) {
    Json p = BoundPod("p", two);
    f(p);
    return p;
  };
  std::vector<Case> cases = {
      {"pending, two containers", BoundPod("p", two), false, 2},
      {"other node", BoundPod("p", two, "node2"), false, -1},
      {"all consumed", BoundPod("p", ";;;"), false, -1},
      {"bad annotation", BoundPod("p", "GPU-a,NVIDIA,x,0:;"), true, 0},
      {"entry beyond containers", BoundPod("p", ";;;" + std::string(kGpuA) + ",NVIDIA,1,0:;"), true,
       0},
      {"no decision", edit([](Json& p) {
         p["metadata"]["annotations"].erase(vendors::nvidia::kNvidiaDevicesToAllocate);
       }),
       false, -1},
      {"already running", edit([](Json& p) { p["status"]["phase"] = "Running"; }), false, -1},
      // A record the scheduler did not leave there: reported, never armed.
      {"bind failed", BoundPod("p", two, "node1", "failed"), false, 2,
       "bind-phase is \"failed\", not allocating"},
      {"already success", BoundPod("p", two, "node1", "success"), false, 2, "not allocating"},
      {"user-written: no bind phase, no node", edit([](Json& p) {
         p["metadata"]["annotations"].erase(core::kBindPhase);
         p["metadata"]["annotations"].erase(core::kVgpuNode);
       }),
       false, 2, "no hami.io/bind-phase, no hami.io/vgpu-node"},
      {"decided for another node",
       edit([](Json& p) { p["metadata"]["annotations"][core::kVgpuNode] = "node2"; }), false, 2,
       "hami.io/vgpu-node is \"node2\", not this node"},
      {"another scheduler's pod", edit([](Json& p) { p["spec"]["schedulerName"] = "volcano"; }),
       false, 2, "spec.schedulerName is \"volcano\", not hami-scheduler"},
      {"no schedulerName", edit([](Json& p) { p["spec"].erase("schedulerName"); }), false, 2,
       "spec.schedulerName"},
      {"labelled ignore", edit([](Json& p) {
         p["metadata"]["labels"] = {{core::kWebhookLabel, "ignore"}};
       }),
       false, 2, "hami.io/webhook=ignore"},
      {"ignore label that is not a string", edit([](Json& p) {
         p["metadata"]["labels"] = {{core::kWebhookLabel, 1}};
       }),
       false, 2},
  };
  for (const auto& tc : cases) {
    auto r = PendingFromPodJson(tc.pod, "node1");
    if (tc.want_error) {
      EXPECT_FALSE(r.ok()) << tc.name;
      continue;
    }
    ASSERT_TRUE(r.ok()) << tc.name << ": " << r.status();
    if (tc.want_containers < 0) {
      EXPECT_FALSE(r->has_value()) << tc.name;
      continue;
    }
    ASSERT_TRUE(r->has_value()) << tc.name;
    const PendingPod& p = **r;
    if (*tc.refused) {
      EXPECT_NE(p.refused.find(tc.refused), std::string::npos) << tc.name << ": " << p.refused;
    } else {
      EXPECT_EQ(p.refused, "") << tc.name;
    }
    ASSERT_EQ(static_cast<int>(p.containers.size()), tc.want_containers) << tc.name;
    EXPECT_EQ(p.uid, "uid-p");
    EXPECT_EQ(p.Key(), "ml/p");
    EXPECT_EQ(p.bind_time, 1700000000);
    EXPECT_EQ(p.containers[0].index, 1);
    EXPECT_EQ(p.containers[0].name, "main");
    EXPECT_EQ(p.containers[0].priority, 1);
    EXPECT_FALSE(p.containers[0].disable_control);
    EXPECT_EQ(p.containers[0].devices[0].usedmem_mib, 3000);
    EXPECT_EQ(p.containers[1].name, "side");
    EXPECT_TRUE(p.containers[1].disable_control);
  }
  // The scheduler name is the plugin's configuration.
  auto other = PendingFromPodJson(BoundPod("p", two), "node1", "my-scheduler");
  ASSERT_TRUE(other.ok() && other->has_value());
  EXPECT_NE((*other)->refused.find("not my-scheduler"), std::string::npos) << (*other)->refused;
}

// hami.io/numa-alignment rides on the pending pod: whether GetPreferredAllocation asks the NUMA
// refit.
TEST(PendingFromPodJsonTest, NumaAlignment) {
  const std::string one = std::string(";") + kGpuA + ",NVIDIA,1000,10:;";
  const struct {
    const char* value;  // nullptr: no annotation
    core::NumaAlignment want;
  } cases[] = {{nullptr, core::NumaAlignment::kNone},
               {"best-effort", core::NumaAlignment::kBestEffort},
               {" STRICT ", core::NumaAlignment::kStrict},
               {"required", core::NumaAlignment::kNone}};  // refused at admission; asks nothing
  for (const auto& c : cases) {
    SCOPED_TRACE(c.value == nullptr ? "(none)" : c.value);
    Json pod = BoundPod("p", one);
    if (c.value != nullptr) pod["metadata"]["annotations"][core::kNumaAlignment] = c.value;
    auto r = PendingFromPodJson(pod, "node1");
    ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
    EXPECT_EQ((*r)->numa_alignment, c.want);
  }
}

TEST(PendingFromPodJsonTest, RegionOwnerFromTheSecurityContext) {
  const std::string one =
      std::string(";") + kGpuA + ",NVIDIA,3000,30:;" + kGpuB + ",NVIDIA,1000,0:;";
  struct Case {
    const char* name;
    Json pod_sc, main_sc;
    int64_t uid, gid;  // of container "main"
  };
  const Case cases[] = {
      {"nothing said: the plugin's own", nullptr, nullptr, -1, -1},
      {"pod user and fsGroup",
       {{"runAsUser", 1000}, {"fsGroup", 3000}, {"runAsGroup", 2000}},
       nullptr,
       1000,
       3000},
      {"container user wins, pod runAsGroup without fsGroup",
       {{"runAsUser", 1000}, {"runAsGroup", 2000}},
       {{"runAsUser", 1001}},
       1001,
       2000},
      {"container runAsGroup", nullptr, {{"runAsUser", 5}, {"runAsGroup", 6}}, 5, 6},
      {"fsGroup beats the container's runAsGroup", {{"fsGroup", 7}}, {{"runAsGroup", 6}}, -1, 7},
      {"garbage ids are ignored",
       {{"runAsUser", "root"}, {"fsGroup", -4}},
       {{"runAsUser", 1.5}},
       -1,
       -1},
  };
  for (const Case& c : cases) {
    Json pod = BoundPod("p", one);
    if (!c.pod_sc.is_null()) pod["spec"]["securityContext"] = c.pod_sc;
    if (!c.main_sc.is_null()) pod["spec"]["containers"][0]["securityContext"] = c.main_sc;
    auto r = PendingFromPodJson(pod, "node1");
    ASSERT_TRUE(r.ok() && r->has_value()) << c.name;
    EXPECT_EQ((*r)->containers[0].uid, c.uid) << c.name;
    EXPECT_EQ((*r)->containers[0].gid, c.gid) << c.name;
  }
  // The webhook's region group, when the pod holds it, beats fsGroup: every process holds both, and
  // the plugin's directories all use one group.
  Json pod = BoundPod("p", one);
  pod["spec"]["securityContext"] = {{"fsGroup", 7}, {"supplementalGroups", {3, 4242}}};
  auto held = PendingFromPodJson(pod, "node1", "hami-scheduler", 4242);
  ASSERT_TRUE(held.ok() && held->has_value());
  EXPECT_EQ((*held)->containers[0].gid, 4242);
  auto not_held = PendingFromPodJson(pod, "node1", "hami-scheduler", 5555);
  ASSERT_TRUE(not_held.ok() && not_held->has_value());
  EXPECT_EQ((*not_held)->containers[0].gid, 7);
}

class K8sSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = std::make_unique<k8s::testing::FakeApiServer>();
    ASSERT_TRUE(api_->Start().ok());
    k8s::ClientConfig cfg;
    cfg.server = api_->url();
    auto c = k8s::Client::Create(cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  std::string PodAnnotation(const std::string& name, const char* key) {
    auto p = api_->Get("pods", "ml", name);
    if (!p) return "<no pod>";
    return (*p)["metadata"]["annotations"].value(key, "<absent>");
  }
  std::unique_ptr<k8s::testing::FakeApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(K8sSourceTest, ConsumesTheDecisionContainerByContainer) {
  ASSERT_TRUE(api_->Upsert("pods", BoundPod("p", std::string(";") + kGpuA + ",NVIDIA,3000,30:;" +
                                                     kGpuB + ",NVIDIA,1000,0:;"))
                  .ok());
  ASSERT_TRUE(api_->Upsert("pods", BoundPod("elsewhere",
                                            std::string(";") + kGpuA + ",NVIDIA,1,0:;;", "node2"))
                  .ok());
  K8sPendingPodSource src(client_.get(), "node1");
  auto pods = src.ListPending();
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 1u);
  PendingPod p = (*pods)[0];
  p.uid = (*api_->Get("pods", "ml", "p"))["metadata"]["uid"];  // the server assigns uids
  ASSERT_TRUE(src.MarkAllocated(p, 1).ok());
  EXPECT_EQ(PodAnnotation("p", vendors::nvidia::kNvidiaDevicesToAllocate),
            std::string(";;") + kGpuB + ",NVIDIA,1000,0:;");
  EXPECT_EQ(PodAnnotation("p", core::kBindPhase), "allocating");
  EXPECT_FALSE(src.MarkAllocated(p, 1).ok());  // already consumed
  ASSERT_TRUE(src.MarkAllocated(p, 2).ok());
  EXPECT_EQ(PodAnnotation("p", vendors::nvidia::kNvidiaDevicesToAllocate), ";;;");
  EXPECT_EQ(PodAnnotation("p", core::kBindPhase), "success");
  EXPECT_TRUE(src.ListPending()->empty());
  ASSERT_TRUE(src.MarkFailed(p, "test").ok());
  EXPECT_EQ(PodAnnotation("p", core::kBindPhase), "failed");
  PendingPod stale = p;
  stale.uid = "uid-of-an-older-pod";
  EXPECT_FALSE(src.MarkAllocated(stale, 1).ok());
}

TEST_F(K8sSourceTest, MigGrantsAreReadAndTheInstancesRecordedOnThePod) {
  Json pod = BoundPod("m", std::string(";") + kGpuA + ",NVIDIA,4864,14:;");
  // Container 1 (main) gets 1g.5gb at slice 6; the entry for container 2 names no device of the
  // record (a stale one) and is left out.
  pod["metadata"]["annotations"][core::kMigAllocations] =
      R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-aaaa","profile":"1g.5gb",)"
      R"("placement":{"start":6,"size":1}},{"containerIndex":2,"deviceIndex":0,)"
      R"("gpuUUID":"GPU-aaaa","profile":"1g.5gb","placement":{"start":5,"size":1}}])";
  ASSERT_TRUE(api_->Upsert("pods", pod).ok());
  K8sPendingPodSource src(client_.get(), "node1");
  auto pods = src.ListPending();
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 1u);
  PendingPod p = (*pods)[0];
  ASSERT_EQ(p.containers.size(), 1u);
  const PendingContainer& c = p.containers[0];
  EXPECT_EQ(c.devices[0].mig_profile, "1g.5gb");
  EXPECT_EQ(c.devices[0].mig_placement, (core::MigPlacement{6, 1}));
  ASSERT_EQ(c.mig.size(), 1u);
  EXPECT_FALSE(c.mig[0].HasRuntime());

  core::MigAllocation made = c.mig[0];
  made.mig_uuid = "MIG-1234";
  made.gpu_instance_id = 13;
  made.compute_instance_id = 0;
  p.uid = (*api_->Get("pods", "ml", "m"))["metadata"]["uid"];
  ASSERT_TRUE(src.RecordMig(p, {made}).ok());
  EXPECT_EQ(PodAnnotation("m", core::kMigAllocations),
            R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-aaaa","profile":"1g.5gb",)"
            R"("placement":{"start":6,"size":1},"migUUID":"MIG-1234","gpuInstanceID":13,)"
            R"("computeInstanceID":0},{"containerIndex":2,"deviceIndex":0,"gpuUUID":"GPU-aaaa",)"
            R"("profile":"1g.5gb","placement":{"start":5,"size":1}}])");
  pods = src.ListPending();
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ((*pods)[0].containers[0].mig[0], made);

  // A malformed grant is an error naming the pod and the annotation (the pod is not armed).
  pod["metadata"]["annotations"][core::kMigAllocations] = R"([{"containerIndex":"one"}])";
  auto bad = PendingFromPodJson(pod, "node1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("hami.io/vgpu-mig-allocations"),
            std::string::npos)
      << bad.status();
}

TEST_F(K8sSourceTest, ActiveMigGrantsAreThoseOfPodsThatHaveNotTerminated) {
  auto with_grant = [](Json pod, int start, const std::string& phase) {
    pod["metadata"]["annotations"][core::kMigAllocations] =
        StrCat(R"([{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-aaaa","profile":"1g.5gb",)",
               R"("placement":{"start":)", start, R"(,"size":1}}])");
    pod["status"]["phase"] = phase;
    return pod;
  };
  const std::string rec = std::string(";") + kGpuA + ",NVIDIA,4864,14:;";
  ASSERT_TRUE(api_->Upsert("pods", with_grant(BoundPod("run", rec), 6, "Running")).ok());
  ASSERT_TRUE(api_->Upsert("pods", with_grant(BoundPod("wait", rec), 5, "Pending")).ok());
  ASSERT_TRUE(api_->Upsert("pods", with_grant(BoundPod("done", rec), 4, "Succeeded")).ok());
  ASSERT_TRUE(api_->Upsert("pods", with_grant(BoundPod("dead", rec), 3, "Failed")).ok());
  ASSERT_TRUE(api_->Upsert("pods", with_grant(BoundPod("away", rec, "node2"), 2, "Running")).ok());
  K8sPendingPodSource src(client_.get(), "node1");
  auto grants = src.ActiveMigGrants();
  ASSERT_TRUE(grants.ok()) << grants.status();
  std::set<int> starts;
  for (const auto& g : *grants) starts.insert(g.placement.start);
  EXPECT_EQ(starts, (std::set<int>{5, 6}));
  // One grant that does not decode: unknown, so the caller reclaims nothing.
  Json bad = BoundPod("bad", rec);
  bad["metadata"]["annotations"][core::kMigAllocations] = "[{";
  ASSERT_TRUE(api_->Upsert("pods", bad).ok());
  EXPECT_FALSE(src.ActiveMigGrants().ok());
}

TEST_F(K8sSourceTest, RegistrarWritesAnnotationsAndAnswersHandshake) {
  Json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", "node1"},
        {"annotations", {{vendors::nvidia::kNodeHandshake, "Requesting_2023-11-14 22:13:00"}}}}}};
  ASSERT_TRUE(api_->Upsert("nodes", node).ok());
  std::map<std::string, std::string> ann = {{vendors::nvidia::kNodeNvidiaRegister, "[]"}};
  FakeClock clock(1'700'000'000);
  NodeRegistrar reg(
      client_.get(), "node1", [&] { return ann; }, &clock);
  EXPECT_TRUE(reg.Changed());
  ASSERT_TRUE(reg.SyncOnce().ok());
  EXPECT_FALSE(reg.Changed());
  auto got = (*api_->Get("nodes", "", "node1"))["metadata"]["annotations"];
  EXPECT_EQ(got[vendors::nvidia::kNodeNvidiaRegister], "[]");
  EXPECT_EQ(got[vendors::nvidia::kNodeHandshake], "Reported_2023-11-14 22:13:20");
  int64_t writes = api_->CountRequests("PATCH", "/api/v1/nodes/node1");
  ASSERT_TRUE(reg.SyncOnce().ok());  // nothing changed, handshake already answered: no write
  EXPECT_EQ(api_->CountRequests("PATCH", "/api/v1/nodes/node1"), writes);
  // The scheduler's cleanup mark is answered too: the node stays out until the plugin reports.
  node["metadata"]["annotations"][vendors::nvidia::kNodeHandshake] = "Deleted_2023-11-14 22:13:30";
  ASSERT_TRUE(api_->Upsert("nodes", node).ok());
  clock.AdvanceSeconds(30);
  ASSERT_TRUE(reg.SyncOnce().ok());
  EXPECT_EQ((*api_->Get("nodes", "",
                        "node1"))["metadata"]["annotations"][vendors::nvidia::kNodeHandshake],
            "Reported_2023-11-14 22:13:50");
  ann[vendors::nvidia::kNodeNvidiaRegister] = "[{}]";
  EXPECT_TRUE(reg.Changed());
  ASSERT_TRUE(reg.SyncOnce().ok());
  EXPECT_EQ((*api_->Get("nodes", "",
                        "node1"))["metadata"]["annotations"][vendors::nvidia::kNodeNvidiaRegister],
            "[{}]");
  EXPECT_FALSE(NodeRegistrar(
                   client_.get(), "missing-node", [&] { return ann; }, &clock)
                   .SyncOnce()
                   .ok());
}

// --report-node-capacity: the sums go into nodes/<name>/status (capacity and allocatable, as
// quantities), once per change; written again when the Node lost them; none without the option.
TEST_F(K8sSourceTest, RegistrarReportsNodeCapacityThroughTheStatus) {
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "node1"}}},
               {"status", {{"capacity", {{"cpu", "8"}}}, {"allocatable", {{"cpu", "8"}}}}}};
  ASSERT_TRUE(api_->Upsert("nodes", node).ok());
  std::map<std::string, std::string> ann = {{vendors::nvidia::kNodeNvidiaRegister, "[]"}};
  std::map<std::string, int64_t> cap = {{"nvidia.com/gpumem", 81920}, {"nvidia.com/gpucores", 200}};
  FakeClock clock(1'700'000'000);
  NodeRegistrar reg(
      client_.get(), "node1", [&] { return ann; }, &clock, [&] { return cap; });
  auto status_writes = [&] { return api_->CountRequests("PATCH", "/api/v1/nodes/node1/status"); };
  struct Step {
    const char* name;
    std::map<std::string, int64_t> cap;
    bool drop_from_node;  // the Node loses the resources (e.g. replaced) before the sync
    int64_t writes;       // status writes so far
    const char* mem;      // status.capacity and .allocatable of nvidia.com/gpumem after
    const char* cores;
  };
  const Step steps[] = {
      {"first sync writes both",
       {{"nvidia.com/gpumem", 81920}, {"nvidia.com/gpucores", 200}},
       false,
       1,
       "81920",
       "200"},
      {"same sums: no write",
       {{"nvidia.com/gpumem", 81920}, {"nvidia.com/gpucores", 200}},
       false,
       1,
       "81920",
       "200"},
      {"a GPU turned unhealthy",
       {{"nvidia.com/gpumem", 40960}, {"nvidia.com/gpucores", 100}},
       false,
       2,
       "40960",
       "100"},
      {"the Node lost them: written again",
       {{"nvidia.com/gpumem", 40960}, {"nvidia.com/gpucores", 100}},
       true,
       3,
       "40960",
       "100"},
  };
  for (const auto& st : steps) {
    cap = st.cap;
    if (st.drop_from_node) {
      ASSERT_TRUE(api_->Upsert("nodes", node).ok());
    }
    ASSERT_TRUE(reg.SyncOnce().ok()) << st.name;
    EXPECT_EQ(status_writes(), st.writes) << st.name;
    const Json got = (*api_->Get("nodes", "", "node1"))["status"];
    for (const char* field : {"capacity", "allocatable"}) {
      EXPECT_EQ(got[field].value("nvidia.com/gpumem", ""), st.mem) << st.name << " " << field;
      EXPECT_EQ(got[field].value("nvidia.com/gpucores", ""), st.cores) << st.name << " " << field;
      EXPECT_EQ(got[field].value("cpu", ""), "8") << st.name << " " << field;
    }
  }
  // Option off (empty sums): the status is never written.
  cap.clear();
  const int64_t before = status_writes();
  ASSERT_TRUE(api_->Upsert("nodes", node).ok());
  ASSERT_TRUE(reg.SyncOnce().ok());
  EXPECT_EQ(status_writes(), before);
}

TEST_F(K8sSourceTest, AllocateThroughKubeletReadsTheDecisionFromTheApiServer) {
  char tmpl[] = "/tmp/hdkXXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  PluginConfig cfg;
  cfg.plugin_dir = dir + "/dp";
  cfg.region_root = dir + "/regions";
  cfg.split_count = 2;
  gpu::StaticDiscovery disc(
      {gpu::MakeGpu(0, kGpuA, "T4", 15360), gpu::MakeGpu(1, kGpuB, "T4", 15360)});
  K8sPendingPodSource src(client_.get(), "node1");
  testing::FakeKubelet kubelet(cfg.plugin_dir);
  ASSERT_TRUE(kubelet.Start().ok());
  {
    DevicePlugin plugin(cfg, &disc, &src, 9);
    ASSERT_TRUE(plugin.Start().ok());
    ASSERT_TRUE(kubelet.WaitForRegistrations(1, seconds(10)));
    ASSERT_TRUE(
        api_->Upsert("pods", BoundPod("p", std::string(";") + kGpuB + ",NVIDIA,3000,30:;;")).ok());
    auto r = kubelet.Allocate({{std::string(kGpuA) + "-1"}});
    ASSERT_TRUE(r.ok()) << r.status();
    const auto& env = r->container_responses(0).envs();
    EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), kGpuB);
    EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
    EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "30");
    EXPECT_EQ(env.at("CUDA_TASK_PRIORITY"), "1");
    EXPECT_EQ(PodAnnotation("p", core::kBindPhase), "success");
    auto again = kubelet.Allocate({{std::string(kGpuA) + "-0"}});
    EXPECT_FALSE(again.ok());

    // A pod whose creator wrote the decision (scheduled elsewhere, bound here): refused, untouched.
    Json forged = BoundPod("forged", std::string(";") + kGpuA + ",NVIDIA,15360,0:;;");
    forged["metadata"]["annotations"].erase(core::kBindPhase);
    forged["spec"]["schedulerName"] = "default-scheduler";
    ASSERT_TRUE(api_->Upsert("pods", forged).ok());
    auto refused = kubelet.Allocate({{std::string(kGpuA) + "-0"}});
    ASSERT_FALSE(refused.ok());
    const std::string msg(refused.status().message());
    EXPECT_NE(msg.find("refusing to arm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ml/forged: no hami.io/bind-phase"), std::string::npos) << msg;
    EXPECT_NE(msg.find("spec.schedulerName is \"default-scheduler\""), std::string::npos) << msg;
    EXPECT_EQ(PodAnnotation("forged", vendors::nvidia::kNvidiaDevicesToAllocate),
              std::string(";") + kGpuA + ",NVIDIA,15360,0:;;");
    EXPECT_EQ(PodAnnotation("forged", core::kBindPhase), "<absent>");
  }
  kubelet.Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace hami::deviceplugin
