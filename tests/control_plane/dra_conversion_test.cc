// The webhook's DRA conversion end to end on the fake API server (its resource.k8s.io/v1 strategy
// validates the templates and claims): HAMi-style pods go through the webhook, the templates it
// creates are stored, the resourceclaim controller's step (a claim per pod entry, from the
// template) is done here, stock DRA's allocation is the reference allocator's
// (scheduler/dra_allocator.h) over the slice the DRA plugin publishes (dra/slice.h), and the
// plugin's claim reader (dra/claim.h) reads what each container will be armed with.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "common/rng.h"
#include "dra/claim.h"
#include "dra/slice.h"
#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"
#include "scheduler/dra_allocator.h"
#include "webhook/dra_convert.h"
#include "webhook/dra_template_gc.h"
#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

constexpr char kDriver[] = "hami-core-gpu.project-hami.io";

Json SharePod(const std::string& name, const Json& limits) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", name + "-uid"}}},
          {"spec",
           {{"containers",
             Json::array(
                 {{{"name", "main"}, {"image", "cuda"}, {"resources", {{"limits", limits}}}}})}}}};
}

// A template someone else made, without our label, asking for a whole GPU.
Json WholeGpuTemplate(const std::string& name) {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaimTemplate"},
      {"metadata", {{"name", name}, {"namespace", "ml"}}},
      {"spec",
       {{"spec",
         {{"devices",
           {{"requests",
             Json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", kDriver}}}}})}}}}}}}};
}

std::string Review(const Json& pod, bool dry_run = false) {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "u-" + pod["metadata"]["name"].get<std::string>()},
                {"namespace", "ml"},
                {"operation", "CREATE"},
                {"object", pod},
                {"dryRun", dry_run}}}}
      .dump();
}

class DraConvertK8sTest : public ::testing::Test {
 protected:
  void Start(int kube_minor, const std::map<std::string, bool>& gates = {}) {
    k8s::testing::FakeApiServerOptions o;
    o.kube_minor = kube_minor;
    o.feature_gates = gates;
    api_ = std::make_unique<k8s::testing::FakeApiServer>(o);
    ASSERT_TRUE(api_->Start().ok());
    k8s::ClientConfig cfg;
    cfg.server = api_->url();
    auto client = k8s::Client::Create(cfg);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    store_ = std::make_unique<K8sDraTemplateStore>(client_.get());
    sizes_ = std::make_unique<K8sDraDeviceSizes>(client_.get(), kDriver);
    WebhookOptions wo;
    wo.dra.namespaces = {"ml"};
    wo.dra_templates = store_.get();
    wo.dra_sizes = sizes_.get();
    webhook_ = std::make_unique<Webhook>(wo);
  }

  // Admits `pod`; on success returns the patched pod, created on the server.
  StatusOr<Json> Admit(const Json& pod, bool dry_run = false) {
    auto resp = ParseAdmissionResponse(webhook_->Handle(Review(pod, dry_run)));
    if (!resp.ok()) return resp.status();
    if (!resp->allowed) return absl::PermissionDeniedError(resp->message);
    Json patched = resp->patch ? pod.patch(*resp->patch) : pod;
    if (dry_run) return patched;
    return client_->Create(k8s::kPods, "ml", patched);
  }

  // A refused admission whose denial says `what`, leaving no template and no pod behind.
  void ExpectRefusedLeavingNothing(const StatusOr<Json>& pod, const char* what) {
    ASSERT_FALSE(pod.ok());
    EXPECT_NE(pod.status().message().find(what), std::string::npos) << pod.status();
    EXPECT_TRUE(api_->List("resourceclaimtemplates").empty());
    EXPECT_TRUE(api_->List("pods").empty());
  }

  // The resourceclaim controller's part: one claim per spec.resourceClaims entry, from its
  // template, owned by the pod. Returns the claims.
  std::vector<Json> MakeClaims(const Json& pod) {
    std::vector<Json> out;
    for (const Json& e : pod["spec"]["resourceClaims"]) {
      auto tpl = client_->Get(k8s::kResourceClaimTemplates, "ml",
                              e["resourceClaimTemplateName"].get<std::string>());
      EXPECT_TRUE(tpl.ok()) << tpl.status();
      if (!tpl.ok()) continue;
      Json claim = {{"apiVersion", "resource.k8s.io/v1"},
                    {"kind", "ResourceClaim"},
                    {"metadata",
                     {{"name", StrCat(pod["metadata"]["name"].get<std::string>(), "-",
                                      e["name"].get<std::string>())},
                      {"namespace", "ml"},
                      {"ownerReferences", Json::array({{{"apiVersion", "v1"},
                                                        {"kind", "Pod"},
                                                        {"name", pod["metadata"]["name"]},
                                                        {"uid", pod["metadata"]["uid"]},
                                                        {"controller", true}}})}}},
                    {"spec", (*tpl)["spec"]["spec"]}};
      auto created = client_->Create(k8s::kResourceClaims, "ml", claim);
      EXPECT_TRUE(created.ok()) << created.status();
      if (created.ok()) out.push_back(*created);
    }
    return out;
  }

  // Stock DRA's allocation of `claim` on node n1 (the reference allocator, firstAvailable and the
  // webhook's device.capacity selectors included), written to its status
  // as kube-scheduler would; returns the allocated claim, or the allocator's refusal.
  StatusOr<Json> Allocate(Json claim) {
    auto alloc =
        scheduler::dra::AllocateClaimJson({slice_}, {DeviceClass()}, allocated_, claim, "n1", rng_);
    if (!alloc.ok()) return alloc.status();
    claim["status"] = {{"allocation", *alloc}};
    auto written = client_->Update(k8s::kResourceClaims, "ml", claim, "status");
    if (!written.ok()) return written.status();
    allocated_.push_back(*written);
    return *written;
  }

  static Json DeviceClass() {
    return {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "DeviceClass"},
        {"metadata", {{"name", kDriver}}},
        {"spec",
         {{"selectors", Json::array({{{"cel",
                                       {{"expression", StrCat("device.driver == \"", kDriver,
                                                              "\" && device.attributes[\"", kDriver,
                                                              "\"].type == \"hami-gpu\"")}}}}})}}}};
  }

  void PublishOneGpu(bool shared) {
    gpu::GpuInfo g;
    g.index = 0;
    g.uuid = "GPU-00000000-0000-0000-0000-000000000001";
    g.model = "NVIDIA A16";
    g.memory_mib = 16384;
    dra::SliceOptions so;
    so.node_name = "n1";
    so.node_uid = "n1-uid";
    so.shared = shared;
    auto slice = dra::BuildResourceSlice({g}, {}, so);
    ASSERT_TRUE(slice.ok()) << slice.status();
    slice_ = *slice;
    devices_ = *dra::DeviceCapacities({g}, 1.0);
  }

  // A 16 GiB and a 40 GiB GPU on n1, published on the API server as the plugin does.
  void PublishTwoSizes() {
    std::vector<gpu::GpuInfo> gpus(2);
    gpus[0].index = 0;
    gpus[0].uuid = "GPU-00000000-0000-0000-0000-000000000016";
    gpus[0].model = "NVIDIA A16";
    gpus[0].memory_mib = 16384;
    gpus[1].index = 1;
    gpus[1].uuid = "GPU-00000000-0000-0000-0000-000000000040";
    gpus[1].model = "NVIDIA A100-PCIE-40GB";
    gpus[1].memory_mib = 40960;
    dra::SliceOptions so;
    so.node_name = "n1";
    so.node_uid = "n1-uid";
    so.shared = true;
    auto slice = dra::BuildResourceSlice(gpus, {}, so);
    ASSERT_TRUE(slice.ok()) << slice.status();
    auto stored = client_->Create(k8s::kResourceSlices, "", *slice);
    ASSERT_TRUE(stored.ok()) << stored.status();
    slice_ = *stored;
    devices_ = *dra::DeviceCapacities(gpus, 1.0);
  }

  // What the DRA plugin reads from an allocated claim for GPU 0.
  dra::Usage UsageOf(const Json& claim) {
    const dra::ClaimRef ref{"ml", claim["metadata"]["name"].get<std::string>(),
                            claim["metadata"]["uid"].get<std::string>()};
    auto parsed = dra::ParseClaim(claim, ref, kDriver, "n1", devices_);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? parsed->ByDevice().begin()->second : dra::Usage{};
  }

  std::unique_ptr<k8s::testing::FakeApiServer> api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<K8sDraTemplateStore> store_;
  std::unique_ptr<K8sDraDeviceSizes> sizes_;
  std::unique_ptr<Webhook> webhook_;
  Json slice_;
  std::vector<dra::DeviceCapacity> devices_;
  std::vector<Json> allocated_;
  Rng rng_{7};
};

TEST_F(DraConvertK8sTest, SharesLandOnOneGpuUntilItIsFull) {
  Start(36);
  PublishOneGpu(/*shared=*/true);
  const Json limits = {{"nvidia.com/gpumem", "4096"}, {"nvidia.com/gpucores", "25"}};
  std::set<std::string> share_ids, templates;
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    auto pod = Admit(SharePod(StrCat("p", i), limits));
    ASSERT_TRUE(pod.ok()) << pod.status();
    EXPECT_FALSE(
        (*pod)["spec"]["containers"][0]["resources"]["limits"].contains("nvidia.com/gpumem"));
    templates.insert(
        (*pod)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].get<std::string>());
    auto claims = MakeClaims(*pod);
    ASSERT_EQ(claims.size(), 1u);
    auto allocated = Allocate(claims[0]);
    if (i == 4) {  // 4 x 4 GiB fill the 16 GiB GPU
      EXPECT_FALSE(allocated.ok());
      break;
    }
    ASSERT_TRUE(allocated.ok()) << allocated.status();
    const Json& result = (*allocated)["status"]["allocation"]["devices"]["results"][0];
    EXPECT_EQ(result["device"], "gpu-0");
    share_ids.insert(result["shareID"].get<std::string>());
    EXPECT_EQ(UsageOf(*allocated), (dra::Usage{4096, 25}));
  }
  EXPECT_EQ(share_ids.size(), 4u);  // one device, four shares
  EXPECT_EQ(templates.size(), 1u);  // one template serves every pod asking the same
  EXPECT_EQ(api_->List("resourceclaimtemplates").size(), 1u);
}

TEST_F(DraConvertK8sTest, PercentageSharesTakeTheSmallCardFirstThenTheLarge) {
  Start(36);
  PublishTwoSizes();
  const Json limits = {{"nvidia.com/gpumem-percentage", "50"}, {"nvidia.com/gpucores", "10"}};
  struct Step {
    const char* device;  // null: does not fit
    const char* request;
    dra::Usage usage;
  };
  const Step steps[] = {
      {"gpu-0", "gpu/mib16384", {8192, 10}},   // 50 % of the 16 GiB card
      {"gpu-0", "gpu/mib16384", {8192, 10}},   // it is full by memory now
      {"gpu-1", "gpu/mib40960", {20480, 10}},  // 50 % of the 40 GiB card
      {"gpu-1", "gpu/mib40960", {20480, 10}}, {nullptr, nullptr, {}},
  };
  std::set<std::string> templates;
  for (size_t i = 0; i < std::size(steps); ++i) {
    SCOPED_TRACE(i);
    auto pod = Admit(SharePod(StrCat("p", i), limits));
    ASSERT_TRUE(pod.ok()) << pod.status();
    EXPECT_FALSE((*pod)["spec"]["containers"][0]["resources"]["limits"].contains(
        "nvidia.com/gpumem-percentage"));
    templates.insert(
        (*pod)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].get<std::string>());
    auto claims = MakeClaims(*pod);
    ASSERT_EQ(claims.size(), 1u);
    auto allocated = Allocate(claims[0]);  // firstAvailable: the allocator takes the first fit
    if (steps[i].device == nullptr) {
      EXPECT_FALSE(allocated.ok());
      break;
    }
    ASSERT_TRUE(allocated.ok()) << allocated.status();
    const Json& result = (*allocated)["status"]["allocation"]["devices"]["results"][0];
    EXPECT_EQ(result["device"], steps[i].device);
    EXPECT_EQ(result["request"], steps[i].request);
    EXPECT_EQ(UsageOf(*allocated), steps[i].usage);
  }
  EXPECT_EQ(templates.size(), 1u);
}

TEST_F(DraConvertK8sTest, PercentageWithoutPublishedGpusOrWithoutPrioritizedListIsRefused) {
  Start(36);  // no slice published
  ExpectRefusedLeavingNothing(Admit(SharePod("n", {{"nvidia.com/gpumem-percentage", "50"}})),
                              "no ResourceSlice of driver");
  Start(36, {{"DRAPrioritizedList", false}});
  PublishTwoSizes();
  ExpectRefusedLeavingNothing(Admit(SharePod("o", {{"nvidia.com/gpumem-percentage", "50"}})),
                              "DRAPrioritizedList feature gate is off");
  // gpumem in MiB needs no firstAvailable: it converts with the gate off.
  EXPECT_TRUE(Admit(SharePod("m", {{"nvidia.com/gpumem", "4096"}})).ok());
}

TEST_F(DraConvertK8sTest, MemoryWithoutCoresSharesWithoutSmLimitAndWholeCardIsExclusive) {
  Start(36);
  PublishOneGpu(/*shared=*/true);
  auto mem_only = Admit(SharePod("m", {{"nvidia.com/gpumem", "1024"}}));
  ASSERT_TRUE(mem_only.ok()) << mem_only.status();
  auto a = Allocate(MakeClaims(*mem_only).at(0));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(UsageOf(*a), (dra::Usage{1024, 0}));  // cores 0: no SM limit armed
  auto whole = Admit(SharePod("w", {{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_FALSE(Allocate(MakeClaims(*whole).at(0)).ok());  // the card is not whole any more
}

TEST_F(DraConvertK8sTest, DryRunCreatesNothing) {
  Start(36);
  auto pod = Admit(SharePod("d", {{"nvidia.com/gpumem", "4096"}}), /*dry_run=*/true);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_TRUE((*pod)["spec"].contains("resourceClaims"));
  EXPECT_TRUE(api_->List("resourceclaimtemplates").empty());
}

TEST_F(DraConvertK8sTest, GateOffRefusesSharesAndLeavesNoTemplate) {
  Start(35);  // DRAConsumableCapacity off: the server drops capacity requests
  ExpectRefusedLeavingNothing(Admit(SharePod("g", {{"nvidia.com/gpumem", "4096"}})),
                              "DRAConsumableCapacity feature gate is off");
  // A whole card needs no capacity: it converts on 1.35 too.
  PublishOneGpu(/*shared=*/false);
  auto whole = Admit(SharePod("w", {{"nvidia.com/gpu", "1"}}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(Allocate(MakeClaims(*whole).at(0)).ok());
}

TEST_F(DraConvertK8sTest, ATemplateOfOurNameWithAnotherSpecIsNotUsed) {
  Start(36);
  auto first = Admit(SharePod("a", {{"nvidia.com/gpumem", "4096"}}), /*dry_run=*/true);
  ASSERT_TRUE(first.ok());
  const std::string name = (*first)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"];
  // Someone made a template of that name asking for a whole GPU.
  ASSERT_TRUE(client_->Create(k8s::kResourceClaimTemplates, "ml", WholeGpuTemplate(name)).ok());
  auto pod = Admit(SharePod("a", {{"nvidia.com/gpumem", "4096"}}));
  ASSERT_FALSE(pod.ok());
  EXPECT_NE(pod.status().message().find("exists with another spec"), std::string::npos)
      << pod.status();
  EXPECT_TRUE(api_->List("pods").empty());
}

TEST_F(DraConvertK8sTest, TemplatesNoPodNamesForTheGraceAreDeleted) {
  Start(36);
  int64_t now = 1000;
  DraTemplateGc gc(client_.get(), {.grace_s = 3600, .page = 2}, [&] { return now; });
  auto name_of = [](const StatusOr<Json>& pod) {
    return (*pod)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].get<std::string>();
  };
  // kept: pending pod "a" names it (no node, no phase)
  auto a = Admit(SharePod("a", {{"nvidia.com/gpumem", "4096"}}));
  ASSERT_TRUE(a.ok()) << a.status();
  // freed: pod "b" goes away
  auto b = Admit(SharePod("b", {{"nvidia.com/gpumem", "2048"}}));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(client_->Delete(k8s::kPods, "ml", "b").ok());
  // back in use: pod "c" goes away, then "c2" names the same template within the grace
  auto c = Admit(SharePod("c", {{"nvidia.com/gpumem", "1024"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(client_->Delete(k8s::kPods, "ml", "c").ok());
  // not ours: no label, never named by a pod
  ASSERT_TRUE(client_->Create(k8s::kResourceClaimTemplates, "ml", WholeGpuTemplate("theirs")).ok());
  auto names = [&] {
    std::set<std::string> out;
    for (const Json& t : api_->List("resourceclaimtemplates"))
      out.insert(t["metadata"]["name"].get<std::string>());
    return out;
  };
  const std::set<std::string> all = {name_of(a), name_of(b), name_of(c), "theirs"};
  ASSERT_EQ(names(), all);
  struct Step {
    int64_t at;
    bool readmit_c;  // a pod naming c's template again, before the pass
    int deleted;
    std::set<std::string> left;
  };
  const Step steps[] = {
      {1000, false, 0, all},                                 // b and c seen unreferenced from now
      {4599, false, 0, all},                                 // 1 s short of the grace
      {4600, true, 1, {name_of(a), name_of(c), "theirs"}},   // b's grace is over; c named again
      {8200, false, 0, {name_of(a), name_of(c), "theirs"}},  // c's time started again
  };
  for (const Step& st : steps) {
    SCOPED_TRACE(st.at);
    now = st.at;
    if (st.readmit_c) {
      ASSERT_TRUE(Admit(SharePod("c2", {{"nvidia.com/gpumem", "1024"}})).ok());
    }
    auto deleted = gc.RunOnce();
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    EXPECT_EQ(*deleted, st.deleted);
    EXPECT_EQ(names(), st.left);
  }
  // Over the list bound nothing is deleted.
  ASSERT_TRUE(client_->Delete(k8s::kPods, "ml", "a").ok());
  DraTemplateGc bounded(client_.get(), {.grace_s = 0, .page = 1, .max_pages = 1},
                        [&] { return now; });
  auto over = bounded.RunOnce();
  EXPECT_TRUE(absl::IsResourceExhausted(over.status())) << over.status();
  EXPECT_EQ(names().size(), 3u);
  // Within it, a zero grace deletes a's template at once; c2's stays, theirs is never touched.
  DraTemplateGc quick(client_.get(), {.grace_s = 0}, [&] { return now; });
  EXPECT_EQ(*quick.RunOnce(), 1);
  EXPECT_EQ(names(), (std::set<std::string>{name_of(c), "theirs"}));
}

}  // namespace
}  // namespace hami::webhook
