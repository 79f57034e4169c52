// SlicePublisher and K8sClaimSource against the fake API server's resource.k8s.io/v1 (with the
// real server's dropping of gated fields).
#include "dra/publisher.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <tuple>

#include "dra/testing/builders.h"
#include "dra/testing/fake_nvml.h"
#include "gpu/nvml_discovery.h"
#include "gpu/testing/fake_nvml_hooks.h"
#include "k8s/testing/fake_apiserver.h"

namespace hami::dra {
namespace {

using Json = nlohmann::json;

gpu::GpuInfo Gpu(int index) {
  gpu::GpuInfo g;
  g.index = index;
  g.uuid = StrCat("GPU-", index);
  g.model = "NVIDIA A16";
  g.memory_mib = 16384;
  return g;
}

// A claim as the API server holds it once allocated on this node: the named requests in its spec,
// each result on gpu-0 with a UUID share id (the API server validates both on a status write).
Json ApiClaim(const std::string& name, const std::string& uid,
              const std::vector<std::tuple<std::string, std::string, std::string>>& shares) {
  testing::ClaimBuilder b("ns", name, uid);
  for (const auto& [request, memory, cores] : shares) b.Result(request, "gpu-0", memory, cores);
  Json claim = b.Json();
  Json& results = claim["status"]["allocation"]["devices"]["results"];
  for (size_t i = 0; i < results.size(); ++i) {
    claim["spec"]["devices"]["requests"].push_back(
        {{"name", results[i]["request"]}, {"exactly", {{"deviceClassName", "gpu"}, {"count", 1}}}});
    results[i]["shareID"] = StrCat("00000000-0000-4000-8000-00000000000", i + 1);
  }
  claim["status"]["allocation"]["nodeSelector"] = {
      {"nodeSelectorTerms",
       {{{"matchFields",
          {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {testing::kNode}}}}}}}}};
  return claim;
}

// `rules` in a ClusterRole bound to the plugin's service account hami/hami-dra.
Json Policy(const Json& rules) {
  return Json::array(
      {{{"kind", "ClusterRole"}, {"metadata", {{"name", "dra"}}}, {"rules", rules}},
       {{"kind", "ClusterRoleBinding"},
        {"metadata", {{"name", "dra"}}},
        {"roleRef", {{"kind", "ClusterRole"}, {"name", "dra"}}},
        {"subjects",
         {{{"kind", "ServiceAccount"}, {"name", "hami-dra"}, {"namespace", "hami"}}}}}});
}

DriverOptions DriverOpts(const std::string& dir) {
  DriverOptions o;
  o.node_name = testing::kNode;
  o.plugin_dir = dir + "/plugin";
  o.cdi_root = dir + "/cdi";
  o.boot_id = "boot-1";
  o.vgpu.region_root = dir + "/regions";
  o.vgpu.libvgpu_host_path = dir + "/libvgpu.so";
  return o;
}

class PublisherTest : public ::testing::Test {
 protected:
  void Serve(k8s::testing::FakeApiServerOptions o = {}) {
    api_ = std::make_unique<k8s::testing::FakeApiServer>(o);
    ASSERT_TRUE(api_->Start().ok());
    auto node = api_->Upsert(
        "nodes",
        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", testing::kNode}}}});
    ASSERT_TRUE(node.ok());
    node_uid_ = (*node)["metadata"]["uid"];
    k8s::ClientConfig cfg;
    cfg.server = api_->url();
    auto c = k8s::Client::Create(cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  SliceOptions Opts() {
    SliceOptions o;
    o.node_name = testing::kNode;
    return o;
  }
  std::optional<Json> Slice() {
    return api_->Get("resourceslices", "", SliceName(testing::kNode, kDefaultDriverName));
  }

  std::unique_ptr<k8s::testing::FakeApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
  std::string node_uid_;
};

TEST_F(PublisherTest, CreatesKeepsBumpsAndRecreates) {
  Serve();
  SlicePublisher one(client_.get(), Opts(), {Gpu(0)});
  using A = SlicePublisher::Action;
  struct Step {
    SlicePublisher* p;
    bool delete_first;
    A action;
    int64_t generation;
  };
  SlicePublisher two(client_.get(), Opts(), {Gpu(0), Gpu(1)});
  const Step steps[] = {
      {&one, false, A::kCreated, 1}, {&one, false, A::kNone, 1},   {&two, false, A::kUpdated, 2},
      {&two, false, A::kNone, 2},    {&two, true, A::kCreated, 1},  // the kubelet wiped it
  };
  int i = 0;
  for (const auto& s : steps) {
    if (s.delete_first) {
      ASSERT_TRUE(
          api_->Delete("resourceslices", "", SliceName(testing::kNode, kDefaultDriverName)).ok());
    }
    auto o = s.p->Reconcile();
    ASSERT_TRUE(o.ok()) << i << ": " << o.status();
    EXPECT_EQ(o->action, s.action) << i;
    EXPECT_EQ(o->generation, s.generation) << i;
    EXPECT_TRUE(o->shared) << i;
    auto stored = Slice();
    ASSERT_TRUE(stored.has_value()) << i;
    EXPECT_EQ((*stored)["spec"]["pool"]["generation"], s.generation) << i;
    EXPECT_EQ((*stored)["metadata"]["ownerReferences"][0]["uid"], node_uid_) << i;
    EXPECT_EQ((*stored)["spec"]["devices"][0]["allowMultipleAllocations"], true) << i;
    ++i;
  }
}

TEST_F(PublisherTest, GateOffFallsBackToExclusiveDevices) {
  k8s::testing::FakeApiServerOptions o;
  o.kube_minor = 35;  // DRAConsumableCapacity alpha, off
  Serve(o);
  SlicePublisher p(client_.get(), Opts(), {Gpu(0)});
  auto out = p.Reconcile();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->shared);
  EXPECT_FALSE(p.shared());
  auto stored = Slice();
  ASSERT_TRUE(stored.has_value());
  const Json& d = (*stored)["spec"]["devices"][0];
  EXPECT_FALSE(d.contains("allowMultipleAllocations"));
  EXPECT_FALSE(d["capacity"]["memory"].contains("requestPolicy"));
  // Later passes keep it exclusive and unchanged.
  auto again = p.Reconcile();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->action, SlicePublisher::Action::kNone);
  EXPECT_FALSE(again->shared);
}

TEST_F(PublisherTest, GateOnIn135KeepsSharing) {
  k8s::testing::FakeApiServerOptions o;
  o.kube_minor = 35;
  o.feature_gates["DRAConsumableCapacity"] = true;
  Serve(o);
  SlicePublisher p(client_.get(), Opts(), {Gpu(0)});
  auto out = p.Reconcile();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->shared);
}

TEST_F(PublisherTest, ClaimSourceReadsClaims) {
  Serve();
  ASSERT_TRUE(
      api_->Upsert("resourceclaims",
                   testing::MakeClaim("ns", "c1", "x").Result("gpu", "gpu-0", "4Gi", "30").Json())
          .ok());
  K8sClaimSource src(client_.get());
  auto c = src.GetClaim("ns", "c1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"],
            "4Gi");
  EXPECT_TRUE(absl::IsNotFound(src.GetClaim("ns", "none").status()));
}

// On a 1.36 API server the plugin writes each prepared claim's status.devices through
// resourceclaims/status; with the chart's rules (associated-node verbs on resourceclaims/driver
// for the driver's name, as the chart grants) the write is allowed, with resourceclaims/status
// alone it is refused (the claim stays prepared, the failure is counted). Another driver's entry is
// kept.
TEST_F(PublisherTest, PreparedClaimGetsItsDeviceStatus) {
  auto rule = [](std::string resource, Json verbs, Json names = nullptr) {
    Json r = {{"apiGroups", {"resource.k8s.io"}}, {"resources", {resource}}, {"verbs", verbs}};
    if (!names.is_null()) r["resourceNames"] = names;
    return r;
  };
  // The chart's rules for claims (deploy/helm/hami/templates/dra.yaml; helm_dra checks them).
  const Json status_rules = {rule("resourceclaims", {"get"}),
                             rule("resourceclaims/status", {"patch"})};
  Json chart_rules = status_rules;
  chart_rules.push_back(
      rule("resourceclaims/driver", {"associated-node:patch"}, {kDefaultDriverName}));
  struct Case {
    std::string name;
    Json rules;
    bool written;
  };
  const std::vector<Case> cases = {
      {"chart rules (1.36)", chart_rules, true},
      {"resourceclaims/status alone", status_rules, false},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    Serve();
    api_->AddToken("sa-token",
                   {{"username", "system:serviceaccount:hami:hami-dra"},
                    {"groups", {"system:serviceaccounts"}},
                    {"extra", {{"authentication.kubernetes.io/node-name", {testing::kNode}}}}});
    api_->Authorize(Policy(k.rules));
    Json claim = ApiClaim("c1", "uid-1", {{"a", "4Gi", "30"}, {"b", "2Gi", "20"}});
    const Json results = claim["status"]["allocation"]["devices"]["results"];
    // Another driver's device in the same claim, with the status its driver wrote.
    claim["spec"]["devices"]["requests"].push_back(
        {{"name", "nic"}, {"exactly", {{"deviceClassName", "nic"}, {"count", 1}}}});
    claim["status"]["allocation"]["devices"]["results"].push_back({{"request", "nic"},
                                                                   {"driver", "nic.example.com"},
                                                                   {"pool", testing::kNode},
                                                                   {"device", "eth0"}});
    const Json nic = {{"driver", "nic.example.com"}, {"pool", testing::kNode}, {"device", "eth0"}};
    claim["status"]["devices"] = {nic};
    ASSERT_TRUE(api_->Upsert("resourceclaims", claim).ok());

    k8s::ClientConfig cfg;
    cfg.server = api_->url();
    cfg.bearer_token = "sa-token";
    cfg.max_retries = 0;
    auto sa_client = k8s::Client::Create(cfg);
    ASSERT_TRUE(sa_client.ok());
    K8sClaimSource src(sa_client->get());
    testing::TempDir dir;
    auto driver = Driver::Create(DriverOpts(dir.path()), testing::TwoGpus(), &src);
    ASSERT_TRUE(driver.ok()) << driver.status();
    auto out = (*driver)->Prepare({{"ns", "c1", "uid-1"}});
    ASSERT_TRUE(out.at("uid-1").status.ok()) << out.at("uid-1").status;
    EXPECT_EQ((*driver)->StatusWriteFailures(), k.written ? 0 : 1);

    Json devices = (*api_->Get("resourceclaims", "ns", "c1"))["status"]["devices"];
    if (!k.written) {
      EXPECT_EQ(devices, Json::array({nic}));
      // Still refused at the next resync; written once the RBAC is fixed (the chart upgraded).
      EXPECT_EQ((*driver)->RetryStatusWrites(), 1u);
      EXPECT_EQ((*driver)->StatusWriteFailures(), 2);
      api_->Authorize(Policy(chart_rules));
      EXPECT_EQ((*driver)->RetryStatusWrites(), 0u);
      devices = (*api_->Get("resourceclaims", "ns", "c1"))["status"]["devices"];
      EXPECT_EQ(devices.size(), 3u) << devices.dump();
      EXPECT_EQ((*driver)->RetryStatusWrites(), 0u) << "nothing left to retry";
      continue;
    }
    ASSERT_EQ(devices.size(), 3u) << devices.dump();
    EXPECT_EQ(devices[0], nic);
    for (int i : {1, 2}) {
      EXPECT_EQ(devices[i]["driver"], kDefaultDriverName);
      EXPECT_EQ(devices[i]["device"], "gpu-0");
      EXPECT_EQ(devices[i]["shareID"], results[i - 1]["shareID"]);
      EXPECT_EQ(devices[i]["conditions"][0]["type"], "Ready");
      EXPECT_EQ(devices[i]["data"]["uuid"], "GPU-0");
      EXPECT_EQ(devices[i]["data"]["armed"], (Json{{"memoryMiB", 6144}, {"cores", 50}}));
    }
    EXPECT_EQ(devices[1]["data"]["consumed"], (Json{{"memoryMiB", 4096}, {"cores", 30}}));
    // Prepared again (a kubelet retry): answered from the checkpoint, nothing rewritten.
    const Json rv = (*api_->Get("resourceclaims", "ns", "c1"))["metadata"]["resourceVersion"];
    ASSERT_TRUE((*driver)->Prepare({{"ns", "c1", "uid-1"}}).at("uid-1").status.ok());
    EXPECT_EQ((*api_->Get("resourceclaims", "ns", "c1"))["metadata"]["resourceVersion"], rv);
  }
}

// A GPU that NVML reports failed (the fake NVML's injected Xid, through the health watch the
// plugin runs) leaves the node's slice with the pool generation bumped, so kube-scheduler stops
// allocating it; healthy again, it is published again.
TEST_F(PublisherTest, UnhealthyGpuLeavesTheSliceUntilHealthy) {
  testing::TempDir dir;
  auto fake = testing::OpenFakeNvml(HAMI_FAKE_NVML, dir.path() + "/fakegpu",
                                    "NVIDIA A16:16384:40;NVIDIA A16:16384:40");
  ASSERT_TRUE(fake.error.empty()) << fake.error;
  ASSERT_EQ(fake.gpus.size(), 2u);
  std::vector<HealthBoard::Device> devs;
  for (const auto& g : fake.gpus) devs.push_back({DeviceName(g), g.uuid});
  HealthBoard board(testing::kNode, devs);
  auto watch = fake.nvml->WatchHealth([&](const gpu::HealthEvent& ev) { board.Apply(ev); });
  ASSERT_TRUE(watch.ok()) << watch.status();
  Serve();
  SlicePublisher p(client_.get(), Opts(), fake.gpus, {}, &board);

  using A = SlicePublisher::Action;
  struct Step {
    std::string name;
    std::function<void()> event;  // before the pass
    A action;
    int64_t generation;
    std::vector<std::string> devices;
  };
  const std::vector<Step> steps = {
      {"both healthy", [] {}, A::kCreated, 1, {"gpu-0", "gpu-1"}},
      {"Xid 48 on GPU 1",
       [&] {
         ASSERT_EQ(fake.hooks.inject_xid(1, 48), 0);
         ASSERT_TRUE(testing::WaitUnhealthy(board, "gpu-1"));
       },
       A::kUpdated,
       2,
       {"gpu-0"}},
      {"still failed", [] {}, A::kNone, 2, {"gpu-0"}},
      {"recovered",
       [&] {
         board.Apply({fake.gpus[1].uuid, true, 0, "reset"});
       },
       A::kUpdated,
       3,
       {"gpu-0", "gpu-1"}},
      {"an event for every GPU",
       [&] {
         board.Apply({"", false, 79, "GPU lost"});
       },
       A::kUpdated,
       4,
       {}},
  };
  for (const auto& k : steps) {
    SCOPED_TRACE(k.name);
    k.event();
    auto o = p.Reconcile();
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->action, k.action);
    EXPECT_EQ(o->generation, k.generation);
    auto stored = Slice();
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ((*stored)["spec"]["pool"]["generation"], k.generation);
    std::vector<std::string> names;
    for (const auto& d : (*stored)["spec"]["devices"]) names.push_back(d["name"]);
    EXPECT_EQ(names, k.devices);
  }
}

// Prepare as the plugin runs it against an API server (the fake, on loopback): the claim's GET,
// and with the status write its GET and merge patch; each claim unprepared after. Printed for
// docs/benchmarks.md; the bound only catches a pathology (the kubelet's timeout is 45 s).
TEST_F(PublisherTest, PrepareLatencyWithTheApiServer) {
  Serve();
  // Reads claims from the API server but writes no status: the cost of the write is the difference.
  struct ReadOnly final : ClaimSource {
    explicit ReadOnly(K8sClaimSource* s) : src(s) {}
    StatusOr<Json> GetClaim(const std::string& ns, const std::string& name) override {
      return src->GetClaim(ns, name);
    }
    StatusOr<Json> GetPod(const std::string& ns, const std::string& name) override {
      return src->GetPod(ns, name);
    }
    K8sClaimSource* src;
  };
  // No client-side rate limit: at the default 50 qps, 300 back-to-back prepares of 1 or 3 requests
  // would measure the limiter's 20 ms per request once its burst is spent.
  k8s::ClientConfig cfg;
  cfg.server = api_->url();
  cfg.qps = 0;
  auto unlimited = k8s::Client::Create(cfg);
  ASSERT_TRUE(unlimited.ok());
  K8sClaimSource with_status(unlimited->get());
  ReadOnly without_status(&with_status);
  constexpr int kCalls = 300;
  for (ClaimSource* src : std::vector<ClaimSource*>{&without_status, &with_status}) {
    testing::TempDir dir;
    auto driver = Driver::Create(DriverOpts(dir.path()), testing::TwoGpus(), src);
    ASSERT_TRUE(driver.ok()) << driver.status();
    std::vector<int64_t> us;
    for (int i = 0; i < kCalls; ++i) {
      const std::string name = StrCat("l", i), uid = StrCat("uid-l", i);
      ASSERT_TRUE(api_->Upsert("resourceclaims", ApiClaim(name, uid, {{"gpu", "64Mi", "1"}})).ok());
      auto t0 = std::chrono::steady_clock::now();
      auto r = (*driver)->Prepare({{"ns", name, uid}});
      auto t1 = std::chrono::steady_clock::now();
      ASSERT_TRUE(r.at(uid).status.ok()) << r.at(uid).status;
      ASSERT_TRUE((*driver)->Unprepare({{"ns", name, uid}}).at(uid).ok());
      us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
    }
    EXPECT_EQ((*driver)->StatusWriteFailures(), 0);
    std::sort(us.begin(), us.end());
    std::printf(
        "Prepare with the API server, %s status write, over %d calls: p50 %lld us, p99 %lld us\n",
        src == &with_status ? "with" : "without", kCalls, static_cast<long long>(us[us.size() / 2]),
        static_cast<long long>(us[us.size() * 99 / 100]));
    EXPECT_LT(us[us.size() * 99 / 100], 5'000'000);
  }
  EXPECT_TRUE((*api_->Get("resourceclaims", "ns", "l0"))["status"].contains("devices"))
      << "the second pass writes each claim's status";
}

}  // namespace
}  // namespace hami::dra
