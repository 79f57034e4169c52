// The NUMA refit's scheduler side against a fake API server that speaks the real wire format:
// Extender::Refit (tables after upstream pkg/scheduler/numa_refit_handler_test.go,
// TestRefitNumaAllocation*) and the /refit route over real HTTP with TokenReview authentication
// (after upstream pkg/scheduler/routes/numa_refit_route_test.go, TestNumaRefitRoute_*,
// TestBearerToken).
#include "scheduler/refit.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>

#include "extender/extender.h"
#include "extender/refit_auth.h"
#include "http/server.h"
#include "k8s/testing/fake_apiserver.h"
#include "vendors/nvidia/annotations.h"

namespace hami::extender {
namespace {

using k8s::testing::FakeApiServer;

constexpr char kUid[] = "refit-pod-uid";
constexpr char kPod[] = "refit-pod";
constexpr char kNode[] = "node-1";
constexpr char kToAllocate[] = "hami.io/vgpu-devices-to-allocate";
constexpr char kAllocated[] = "hami.io/vgpu-devices-allocated";

Json NodeJson(int64_t gpu_b_mem) {
  Json devs = Json::array({{{"id", "GPU-a"},
                            {"index", 0},
                            {"count", 10},
                            {"devmem", 40000},
                            {"devcore", 100},
                            {"type", "NVIDIA-A100"},
                            {"numa", 1},
                            {"health", true}},
                           {{"id", "GPU-b"},
                            {"index", 1},
                            {"count", 10},
                            {"devmem", gpu_b_mem},
                            {"devcore", 100},
                            {"type", "NVIDIA-A100"},
                            {"numa", 0},
                            {"health", true}}});
  return Json{
      {"metadata",
       {{"name", kNode}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}}};
}

Json Ctr(const std::string& name, int mem, int cores) {
  return Json{{"name", name},
              {"resources",
               {{"limits",
                 {{"nvidia.com/gpu", "1"},
                  {"nvidia.com/gpumem", std::to_string(mem)},
                  {"nvidia.com/gpucores", std::to_string(cores)}}}}}};
}

// A bound pod whose decision waits for Allocate: `pending` and `allocated` are the annotations.
Json PodJson(const std::string& uid, const std::string& name, Json containers,
             const std::string& pending, const std::string& allocated, Json init = Json::array()) {
  Json spec{{"schedulerName", "hami-scheduler"}, {"nodeName", kNode}, {"containers", containers}};
  if (!init.empty()) spec["initContainers"] = init;
  return Json{{"metadata",
               {{"name", name},
                {"namespace", "default"},
                {"uid", uid},
                {"annotations",
                 {{"hami.io/vgpu-node", kNode},
                  {"hami.io/bind-phase", "allocating"},
                  {kToAllocate, pending},
                  {kAllocated, allocated}}}}},
              {"spec", spec},
              {"status", {{"phase", "Pending"}}}};
}

core::RefitRequest Request(std::vector<std::string> allowed, const std::string& uid = kUid,
                           const std::string& name = kPod) {
  core::RefitRequest r;
  r.pod_uid = uid;
  r.pod_namespace = "default";
  r.pod_name = name;
  r.node_name = kNode;
  r.container_index = 0;
  r.device_type = "NVIDIA";
  r.allowed_device_uuids = std::move(allowed);
  return r;
}

class RefitTest : public ::testing::Test {
 protected:
  void Build(int64_t gpu_b_mem) {
    ASSERT_TRUE(fake_.Start().ok());
    k8s::ClientConfig cfg;
    cfg.server = fake_.url();
    k8s::ClientOptions co;
    co.sleep = [](int64_t) {};
    auto c = k8s::Client::Create(cfg, co);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    state_ = std::make_unique<ClusterState>(*sched_, StateOptions{});
    state_->OnNode(NodeJson(gpu_b_mem));
    ExtenderOptions eo;
    eo.synced = [this] { return synced_; };
    eo.success_events = false;
    ext_ = std::make_unique<Extender>(*sched_, *state_, client_.get(), eo);
  }
  // Stores the pod on the fake API server and lets the informer path charge it.
  Json AddPod(const Json& pod) {
    auto stored = fake_.Upsert("pods", pod);
    EXPECT_TRUE(stored.ok()) << stored.status();
    state_->OnPod(*stored);
    EXPECT_TRUE(state_->Find(pod["metadata"]["uid"]).has_value());
    return *stored;
  }
  void AddSinglePod(int mem = 20000, int cores = 30, const std::string& uid = kUid,
                    const std::string& name = kPod) {
    const std::string grant = StrCat("GPU-a,NVIDIA,", mem, ",", cores, ":;");
    AddPod(PodJson(uid, name, Json::array({Ctr("main", mem, cores)}), grant, grant));
  }
  std::string Tracked(const std::string& uid = kUid, size_t container = 0) {
    auto r = state_->Find(uid);
    if (!r || r->allocation.containers.size() <= container ||
        r->allocation.containers[container].empty())
      return "";
    return r->allocation.containers[container][0].uuid;
  }
  int64_t UsedMem(const std::string& uuid) {
    int64_t used = -1;
    sched_->cache().WithNode(kNode, [&](const scheduler::NodeState& n) {
      for (size_t i = 0; i < n.info.devices.size(); ++i)
        if (n.info.devices[i].uuid == uuid) used = n.usage[i].usedmem_mib;
    });
    return used;
  }
  std::string Annotation(const char* key, const std::string& name = kPod) {
    auto p = fake_.Get("pods", "default", name);
    if (!p) return "<no pod>";
    return (*p)["metadata"]["annotations"].value(key, "");
  }
  int64_t Patches() { return fake_.CountRequests("PATCH", "/pods/"); }

  FakeApiServer fake_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<Extender> ext_;
  bool synced_ = true;
};

TEST_F(RefitTest, TestRefitNumaAllocationMovesReservation) {
  Build(40000);
  AddSinglePod();
  ASSERT_EQ(UsedMem("GPU-a"), 20000);
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  ASSERT_TRUE(r.succeeded) << r.failure_reason;
  EXPECT_EQ(r.container_devices, "GPU-b,NVIDIA,20000,30:");
  // Both annotations moved in one patch, their shape kept byte for byte.
  EXPECT_EQ(Patches(), 1);
  EXPECT_EQ(Annotation(kToAllocate), "GPU-b,NVIDIA,20000,30:;");
  EXPECT_EQ(Annotation(kAllocated), "GPU-b,NVIDIA,20000,30:;");
  // The reservation moved with them.
  EXPECT_EQ(Tracked(), "GPU-b");
  EXPECT_EQ(UsedMem("GPU-a"), 0);
  EXPECT_EQ(UsedMem("GPU-b"), 20000);
  // The informer's copies: the one from before the patch is stale, the patched one confirms it;
  // neither is reported as a decision changed after bind.
  state_->OnPod(PodJson(kUid, kPod, Json::array({Ctr("main", 20000, 30)}),
                        "GPU-a,NVIDIA,20000,30:;", "GPU-a,NVIDIA,20000,30:;"));
  state_->OnPod(*fake_.Get("pods", "default", kPod));
  EXPECT_TRUE(state_->RejectedDecisions().empty());
  EXPECT_EQ(Tracked(), "GPU-b");
  EXPECT_EQ(UsedMem("GPU-b"), 20000);
  EXPECT_EQ(ext_->counters().refit_moved.load(), 1);
}

TEST_F(RefitTest, TestRefitNumaAllocationNoOpWhenAlreadyAllowed) {
  Build(40000);
  AddSinglePod();
  const core::RefitResponse r = ext_->Refit(Request({"GPU-a", "GPU-b"}));
  ASSERT_TRUE(r.succeeded) << r.failure_reason;
  EXPECT_EQ(r.container_devices, "GPU-a,NVIDIA,20000,30:");
  EXPECT_EQ(Patches(), 0);
  EXPECT_EQ(Tracked(), "GPU-a");
}

TEST_F(RefitTest, TestRefitNumaAllocationInsufficientCapacity) {
  Build(16000);
  AddSinglePod();
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  EXPECT_FALSE(r.succeeded);
  EXPECT_NE(r.failure_reason.find("no allowed device fits"), std::string::npos) << r.failure_reason;
  EXPECT_EQ(Patches(), 0);
  EXPECT_EQ(Tracked(), "GPU-a");
  EXPECT_EQ(UsedMem("GPU-a"), 20000);
  EXPECT_EQ(UsedMem("GPU-b"), 0);
}

TEST_F(RefitTest, TestRefitNumaAllocationUnmatchedAllowedSet) {
  Build(40000);
  AddSinglePod();
  const core::RefitResponse r = ext_->Refit(Request({"GPU-a-0", "GPU-a-1"}));
  EXPECT_FALSE(r.succeeded);
  EXPECT_NE(r.failure_reason.find(scheduler::kAllowedSetUnmatched), std::string::npos)
      << r.failure_reason;
}

TEST_F(RefitTest, TestRefitNumaAllocationPatchFailureLeavesStateUntouched) {
  Build(40000);
  AddSinglePod();
  fake_.InjectErrors("PATCH", "/pods/refit-pod$", 422, 1);
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  EXPECT_FALSE(r.succeeded);
  EXPECT_NE(r.failure_reason.find("cannot patch pod annotations"), std::string::npos)
      << r.failure_reason;
  EXPECT_EQ(Tracked(), "GPU-a");
  EXPECT_EQ(UsedMem("GPU-a"), 20000);
  EXPECT_EQ(UsedMem("GPU-b"), 0);
  EXPECT_EQ(Annotation(kAllocated), "GPU-a,NVIDIA,20000,30:;");
}

TEST_F(RefitTest, TestRefitNumaAllocationStaleResourceVersionIsRefused) {
  // Allocate consumed the entry between the read and the patch: the resourceVersion precondition
  // refuses the patch instead of writing over it.
  Build(40000);
  AddSinglePod();
  fake_.InjectErrors("PATCH", "/pods/refit-pod$", 409, 1);
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(Tracked(), "GPU-a");
}

TEST_F(RefitTest, TestRefitNumaAllocationConsumedAllocation) {
  Build(40000);
  AddPod(
      PodJson(kUid, kPod, Json::array({Ctr("main", 20000, 30)}), ";", "GPU-a,NVIDIA,20000,30:;"));
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  EXPECT_FALSE(r.succeeded);
  EXPECT_NE(r.failure_reason.find("no pending"), std::string::npos) << r.failure_reason;
  EXPECT_EQ(Tracked(), "GPU-a");
}

TEST_F(RefitTest, TestRefitNumaAllocationValidation) {
  Build(40000);
  AddSinglePod();
  const struct {
    const char* name;
    std::function<void(core::RefitRequest&)> mutate;
    const char* want;
  } cases[] = {
      {"unknown pod", [](auto& r) { r.pod_uid = "other-uid"; }, "not tracked"},
      {"pod identity mismatch", [](auto& r) { r.pod_name = "other-name"; }, "does not match"},
      {"wrong node", [](auto& r) { r.node_name = "node-2"; }, "tracked on node"},
      {"unknown device type", [](auto& r) { r.device_type = "NoSuchVendor"; },
       "unknown device type"},
      {"container index out of range", [](auto& r) { r.container_index = 3; },
       "outside the pod's containers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    core::RefitRequest req = Request({"GPU-b"});
    c.mutate(req);
    const core::RefitResponse r = ext_->Refit(req);
    EXPECT_FALSE(r.succeeded);
    EXPECT_NE(r.failure_reason.find(c.want), std::string::npos) << r.failure_reason;
    EXPECT_EQ(Patches(), 0);
    EXPECT_EQ(Tracked(), "GPU-a");
  }
  // The wire's own refusals (empty allowed set, negative index, incomplete request) are
  // RefitWireTest.RefusesBadRequests; through HandleRefit they come back in-band.
  auto r = core::ParseRefitResponse(ext_->HandleRefit("{not-json"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->succeeded);
  EXPECT_FALSE(r->failure_reason.empty());
}

TEST_F(RefitTest, TestRefitNumaAllocationSeedsExistingAllocations) {
  // Container 0 consumed its to-allocate entry, container 1 is pending: only container 1 moves,
  // container 0's blank slot and its allocated record stay as they were.
  Build(40000);
  AddPod(PodJson(kUid, kPod, Json::array({Ctr("first", 5000, 10), Ctr("second", 20000, 30)}),
                 ";GPU-a,NVIDIA,20000,30:;", "GPU-a,NVIDIA,5000,10:;GPU-a,NVIDIA,20000,30:;"));
  core::RefitRequest req = Request({"GPU-b"});
  req.container_index = 1;
  req.container_name = "second";
  const core::RefitResponse r = ext_->Refit(req);
  ASSERT_TRUE(r.succeeded) << r.failure_reason;
  EXPECT_EQ(Annotation(kToAllocate), ";GPU-b,NVIDIA,20000,30:;");
  EXPECT_EQ(Annotation(kAllocated), "GPU-a,NVIDIA,5000,10:;GPU-b,NVIDIA,20000,30:;");
  EXPECT_EQ(Tracked(kUid, 0), "GPU-a");
  EXPECT_EQ(Tracked(kUid, 1), "GPU-b");
  EXPECT_EQ(UsedMem("GPU-a"), 5000);
  EXPECT_EQ(UsedMem("GPU-b"), 20000);
}

TEST_F(RefitTest, TestRefitNumaAllocationCompetingRefits) {
  // GPU-b has room for one of the two reservations only.
  Build(20000);
  AddSinglePod(15000, 10, "pod-1-uid", "pod-1");
  AddSinglePod(15000, 10, "pod-2-uid", "pod-2");
  const core::RefitResponse first = ext_->Refit(Request({"GPU-b"}, "pod-1-uid", "pod-1"));
  ASSERT_TRUE(first.succeeded) << first.failure_reason;
  const core::RefitResponse second = ext_->Refit(Request({"GPU-b"}, "pod-2-uid", "pod-2"));
  EXPECT_FALSE(second.succeeded);
  EXPECT_NE(second.failure_reason.find("no allowed device fits"), std::string::npos)
      << second.failure_reason;
  EXPECT_EQ(Tracked("pod-2-uid"), "GPU-a");
}

TEST_F(RefitTest, TestRefitNumaAllocationContainerNameMismatch) {
  Build(40000);
  AddSinglePod();
  core::RefitRequest req = Request({"GPU-b"});
  req.container_name = "sidecar";
  core::RefitResponse r = ext_->Refit(req);
  EXPECT_FALSE(r.succeeded);
  EXPECT_NE(r.failure_reason.find("is \"main\", not \"sidecar\""), std::string::npos)
      << r.failure_reason;
  EXPECT_EQ(Patches(), 0);
  req.container_name = "main";
  r = ext_->Refit(req);
  EXPECT_TRUE(r.succeeded) << r.failure_reason;
}

// An init container (index 0) and two app containers each reserve 5000 MiB of GPU-a: effective
// usage max(5000, 5000 + 5000) = 10000 MiB, counted against a gpumem quota of `limit`.
void Quota(ClusterState& state, int64_t limit) {
  state.OnQuota(Json{{"metadata", {{"name", "q"}, {"namespace", "default"}}},
                     {"spec", {{"hard", {{"limits.nvidia.com/gpumem", std::to_string(limit)}}}}}});
}

TEST_F(RefitTest, TestRefitNumaAllocationInitContainerRefitRejectedOverQuota) {
  Build(40000);
  Quota(*state_, 12000);
  const std::string grant = "GPU-a,NVIDIA,5000,10:;";
  AddPod(PodJson(kUid, kPod, Json::array({Ctr("app-0", 5000, 10), Ctr("app-1", 5000, 10)}),
                 grant + grant + grant, grant + grant + grant,
                 Json::array({Ctr("init-0", 5000, 10)})));
  ASSERT_EQ(state_->NamespaceUsage()["default"]["nvidia.com/gpumem"], 10000);
  // Moving the init container off GPU-a leaves 10000 there and adds 5000 on GPU-b: 15000 > 12000.
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  EXPECT_FALSE(r.succeeded);
  EXPECT_NE(r.failure_reason.find("quota"), std::string::npos) << r.failure_reason;
  EXPECT_EQ(Patches(), 0);
  EXPECT_EQ(Tracked(), "GPU-a");
  EXPECT_EQ(state_->NamespaceUsage()["default"]["nvidia.com/gpumem"], 10000);
  EXPECT_EQ(UsedMem("GPU-a"), 10000);
}

TEST_F(RefitTest, TestRefitNumaAllocationInitContainerRefitRecordsCollapsedUsage) {
  Build(40000);
  Quota(*state_, 20000);
  const std::string grant = "GPU-a,NVIDIA,5000,10:;";
  AddPod(PodJson(kUid, kPod, Json::array({Ctr("app-0", 5000, 10), Ctr("app-1", 5000, 10)}),
                 grant + grant + grant, grant + grant + grant,
                 Json::array({Ctr("init-0", 5000, 10)})));
  const core::RefitResponse r = ext_->Refit(Request({"GPU-b"}));
  ASSERT_TRUE(r.succeeded) << r.failure_reason;
  EXPECT_EQ(Patches(), 1);
  EXPECT_EQ(Annotation(kAllocated), "GPU-b,NVIDIA,5000,10:;" + grant + grant);
  EXPECT_EQ(UsedMem("GPU-a"), 10000);
  EXPECT_EQ(UsedMem("GPU-b"), 5000);
  EXPECT_EQ(state_->NamespaceUsage()["default"]["nvidia.com/gpumem"], 15000);
}

TEST_F(RefitTest, TestRefitNumaAllocationKeepsShrunkAccounting) {
  // The init container (30000 MiB on GPU-a) has succeeded, so only the app container's 20000 MiB is
  // charged; a refit of the app container must not charge the init container's usage again.
  Build(40000);
  Json pod = PodJson(kUid, kPod, Json::array({Ctr("main", 20000, 30)}), ";GPU-a,NVIDIA,20000,30:;",
                     "GPU-a,NVIDIA,30000,60:;GPU-a,NVIDIA,20000,30:;",
                     Json::array({Ctr("init", 30000, 60)}));
  pod["status"]["initContainerStatuses"] =
      Json::array({{{"name", "init"}, {"state", {{"terminated", {{"exitCode", 0}}}}}}});
  AddPod(pod);
  ASSERT_EQ(UsedMem("GPU-a"), 20000);
  core::RefitRequest req = Request({"GPU-b"});
  req.container_index = 1;
  req.container_name = "main";
  const core::RefitResponse r = ext_->Refit(req);
  ASSERT_TRUE(r.succeeded) << r.failure_reason;
  EXPECT_EQ(UsedMem("GPU-a"), 0);
  EXPECT_EQ(UsedMem("GPU-b"), 20000);
  EXPECT_EQ(state_->NamespaceUsage()["default"]["nvidia.com/gpumem"], 20000);
  EXPECT_TRUE(state_->Find(kUid)->init_finished);
}

TEST(ReplaceContainerEntryTest, KeepsEveryOtherByte) {
  const struct {
    const char* annotation;
    size_t index;
    const char* want;  // nullptr: refused
  } cases[] = {
      {"A:;", 0, "X:;"},       {";B:;", 1, ";X:;"},
      {"A:;B:;", 0, "X:;B:;"}, {"A:;B:", 1, "A:;X:"},  // no final separator: kept so
      {";B:;", 0, nullptr},                            // consumed
      {"A:;", 1, nullptr},                             // past the last entry
      {"", 0, nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.annotation);
    auto got = ReplaceContainerEntry(c.annotation, c.index, "X:");
    if (c.want == nullptr) {
      EXPECT_FALSE(got.ok());
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, c.want);
    }
  }
}

TEST(BearerTokenTest, TestBearerToken) {
  const struct {
    const char* name;
    const char* header;
    const char* want;
  } cases[] = {
      {"well formed", "Bearer abc.def.ghi", "abc.def.ghi"},
      {"missing", "", ""},
      {"wrong scheme", "Basic dXNlcjpwYXNz", ""},
      {"no token after prefix", "Bearer ", ""},
      {"blank inside the token", "Bearer abc def", ""},
      {"lower-case scheme", "bearer abc", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(BearerToken(c.header), c.want);
  }
}

// ---- the route over real HTTP ----

constexpr char kAgent[] = "system:serviceaccount:kube-system:hami-node-agent";

class RefitRouteTest : public RefitTest {
 protected:
  void Serve() {
    Build(40000);
    AddSinglePod();
    // The device plugin's pod on node-1 and its bound token.
    auto dp = fake_.Upsert(
        "pods",
        Json{{"metadata", {{"name", "hami-dp-x"}, {"namespace", "kube-system"}, {"uid", "dp-uid"}}},
             {"spec", {{"nodeName", kNode}, {"containers", {{{"name", "dp"}}}}}}});
    ASSERT_TRUE(dp.ok());
    auto bound = [](const std::string& user, const std::string& pod, const std::string& uid) {
      return Json{{"username", user},
                  {"extra",
                   {{"authentication.kubernetes.io/pod-name", {pod}},
                    {"authentication.kubernetes.io/pod-uid", {uid}}}}};
    };
    fake_.AddToken("dp-token", bound(kAgent, "hami-dp-x", "dp-uid"));
    fake_.AddToken("other-sa", bound("system:serviceaccount:default:app", "hami-dp-x", "dp-uid"));
    fake_.AddToken("stale-pod", bound(kAgent, "hami-dp-x", "old-uid"));
    fake_.AddToken("unbound", Json{{"username", kAgent}});
    auth_ = TokenReviewAuthenticator(client_.get(), {kAgent});
    http::HttpServerOptions o;
    server_ = std::make_unique<http::HttpServer>(o);
    server_->Route("POST", "/refit",
                   [this](const http::HttpRequest& r) { return ServeRefit(*ext_, *auth_, r); });
    ASSERT_TRUE(server_->Start().ok());
  }
  httplib::Result Post(const std::string& body, const std::string& token) {
    httplib::Client c("127.0.0.1", server_->port());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return c.Post("/refit", h, body, "application/json");
  }
  std::unique_ptr<RefitAuthenticator> auth_;
  std::unique_ptr<http::HttpServer> server_;
};

TEST_F(RefitRouteTest, TestNumaRefitRoute_NilBody) {
  Serve();
  auto res = Post("", "dp-token");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

TEST_F(RefitRouteTest, TestNumaRefitRoute_DecodeError) {
  Serve();
  auto res = Post("{not-json", "dp-token");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  auto r = core::ParseRefitResponse(res->body);
  ASSERT_TRUE(r.ok()) << res->body;
  EXPECT_FALSE(r->succeeded);
  EXPECT_FALSE(r->failure_reason.empty());
}

TEST_F(RefitRouteTest, TestNumaRefitRoute_CacheNotSynced) {
  Serve();
  synced_ = false;
  auto res = Post(core::EncodeRefitRequest(Request({"GPU-b"})), "dp-token");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  auto r = core::ParseRefitResponse(res->body);
  ASSERT_TRUE(r.ok()) << res->body;
  EXPECT_FALSE(r->succeeded);
  EXPECT_NE(r->failure_reason.find("not synced"), std::string::npos) << r->failure_reason;
  EXPECT_EQ(Tracked(), "GPU-a");
}

TEST_F(RefitRouteTest, CallerAuthentication) {
  Serve();
  const std::string body = core::EncodeRefitRequest(Request({"GPU-b"}));
  const struct {
    const char* name;
    const char* token;
    int status;
    const char* want;
  } cases[] = {
      {"no token", "", 401, "no caller credentials"},
      {"token the API server does not know", "forged", 401, "not authenticated"},
      {"another service account", "other-sa", 403, "not a device-plugin service account"},
      {"a token of a pod since replaced", "stale-pod", 403, "bound uid"},
      {"a token not bound to a pod", "unbound", 403, "not a bound pod"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto res = Post(body, c.token);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status) << res->body;
    EXPECT_NE(res->body.find(c.want), std::string::npos) << res->body;
    EXPECT_EQ(Tracked(), "GPU-a");
  }
  // The device plugin of another node may not refit this node's pods.
  core::RefitRequest elsewhere = Request({"GPU-b"});
  elsewhere.node_name = "node-2";
  auto res = Post(core::EncodeRefitRequest(elsewhere), "dp-token");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403) << res->body;
  EXPECT_EQ(Patches(), 0);
  // The device plugin of this node may.
  res = Post(body, "dp-token");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  auto r = core::ParseRefitResponse(res->body);
  ASSERT_TRUE(r.ok()) << res->body;
  EXPECT_TRUE(r->succeeded) << r->failure_reason;
  EXPECT_EQ(r->container_devices, "GPU-b,NVIDIA,20000,30:");
  EXPECT_EQ(Tracked(), "GPU-b");
}

}  // namespace
}  // namespace hami::extender
