// The extender's DRA hook end to end on the fake API server: slices, classes and claims written
// through the API, stock DRA's allocations written into allocated claims (the reference
// allocator's AllocateClaimJson), the hook's informers reading them back; /filter and /prioritize
// answered from request bodies as kube-scheduler sends them.
#include "extender/dra_hook.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"
#include "scheduler/dra_allocator.h"
#include "scheduler/testing/dra_objects.h"

namespace hami::extender {
namespace {

using k8s::testing::Eventually;
using k8s::testing::FakeApiServer;

constexpr char kDriver[] = "hami-core-gpu.project-hami.io";

Json Gpu(const std::string& name) {
  return scheduler::testing::DraGpu(name, "NVIDIA A100", "GPU-" + name);
}

// The node's slice as the plugin publishes it: one pool named as the node, `gpus` shared GPUs.
Json Slice(const std::string& node, int gpus, const std::string& driver = kDriver) {
  Json devices = Json::array();
  for (int i = 0; i < gpus; ++i) devices.push_back(Gpu("gpu-" + std::to_string(i)));
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-" + driver}}},
          {"spec",
           {{"driver", driver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

Json Class(const std::string& name, const std::string& driver) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"selectors", {{{"cel", {{"expression", "device.driver == \"" + driver + "\""}}}}}}}}};
}

Json Claim(const std::string& name, const std::string& memory, int cores,
           const std::string& device_class = kDriver) {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "ml"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"},
             {"exactly",
              {{"deviceClassName", device_class},
               {"count", 1},
               {"capacity",
                {{"requests", {{"memory", memory}, {"cores", std::to_string(cores)}}}}}}}}}}}}}}};
}

// A pod with claim entries: {entry, object} names a claim; {entry, "template:"} a template whose
// claim the resourceclaim controller generated as `object` after the colon.
Json Pod(const std::string& name, const std::vector<std::pair<std::string, std::string>>& claims) {
  Json pod = k8s::testing::MakePod("ml", name);
  pod["metadata"]["uid"] = "uid-" + name;
  pod["spec"]["schedulerName"] = "hami-scheduler";
  pod["spec"]["resourceClaims"] = Json::array();
  for (const auto& [entry, object] : claims) {
    if (object.rfind("template:", 0) == 0) {
      pod["spec"]["resourceClaims"].push_back(
          {{"name", entry}, {"resourceClaimTemplateName", "tpl"}});
      const std::string generated = object.substr(9);
      if (!generated.empty())
        pod["status"]["resourceClaimStatuses"].push_back(
            {{"name", entry}, {"resourceClaimName", generated}});
    } else {
      pod["spec"]["resourceClaims"].push_back({{"name", entry}, {"resourceClaimName", object}});
    }
  }
  if (claims.empty()) pod["spec"].erase("resourceClaims");
  return pod;
}

Json WithHamiGpu(Json pod) {
  pod["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "1"}};
  return pod;
}

std::string Args(const Json& pod, const std::vector<std::string>& nodes) {
  return Json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump();
}

class DraHookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    k8s::ClientConfig cfg;
    cfg.server = api_.url();
    cfg.qps = 0;
    client_ = std::move(*k8s::Client::Create(cfg));
  }
  void TearDown() override {
    if (hook_) hook_->Stop();
  }
  void Put(const std::string& plural, Json obj) {
    auto r = api_.Upsert(plural, std::move(obj));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // A claim allocated on `node` as stock DRA would (first fit given the claims allocated so far).
  void Allocated(Json claim, const std::string& node) {
    std::vector<Json> slices = {slices_.begin(), slices_.end()};
    auto alloc = scheduler::dra::AllocateClaimJson(slices, {Class(kDriver, kDriver)}, allocated_,
                                                   claim, node, rng_);
    ASSERT_TRUE(alloc.ok()) << alloc.status();
    claim["status"]["allocation"] = *alloc;
    allocated_.push_back(claim);
    Put("resourceclaims", claim);
  }
  void StartHook() {
    hook_ = std::make_unique<DraHook>(*client_, DraHookOptions{});
    hook_->Start();
    ASSERT_TRUE(Eventually([&] { return hook_->Synced(); }, std::chrono::seconds(20)));
  }
  // Waits until the hook's claim informer has `name`.
  void AwaitClaim(const std::string& name) {
    ASSERT_TRUE(Eventually(
        [&] {
          auto r = hook_->Filter(*ParseExtenderArgs(Args(Pod("probe", {{"c", name}}), {"n1"})));
          return !r || r->error.find("not in hami-scheduler's cache") == std::string::npos;
        },
        std::chrono::seconds(20)));
  }

  FakeApiServer api_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<DraHook> hook_;
  std::vector<Json> slices_, allocated_;
  Rng rng_{5};
};

// n1: its one GPU full; n2: gpu-0 half used, gpu-1 free; n3: one free GPU; n4: another driver's.
TEST_F(DraHookTest, FiltersFullNodesAndPrefersTheBinpackNode) {
  Put("deviceclasses", Class(kDriver, kDriver));
  Put("deviceclasses", Class("other-gpu", "gpu.example.com"));
  // Another driver's class in CEL the model does not parse (||) changes nothing.
  Json odd = Class("odd-gpu", "gpu.odd.com");
  odd["spec"]["selectors"][0]["cel"]["expression"] =
      "device.driver == 'gpu.odd.com' || device.attributes['gpu.odd.com'].type == 'gpu'";
  Put("deviceclasses", odd);
  for (const auto& [node, gpus] :
       std::vector<std::pair<std::string, int>>{{"n1", 1}, {"n2", 2}, {"n3", 1}}) {
    slices_.push_back(Slice(node, gpus));
    Put("resourceslices", slices_.back());
  }
  Put("resourceslices", Slice("n4", 4, "gpu.example.com"));
  Allocated(Claim("full", "16Gi", 100), "n1");
  Allocated(Claim("half", "8Gi", 50), "n2");
  Put("resourceclaims", Claim("want", "4Gi", 25));
  Put("resourceclaims", Claim("big", "12Gi", 60));
  Put("resourceclaims", Claim("foreign", "4Gi", 25, "other-gpu"));
  // As the conversion writes a percentage (50 %): one subrequest per published GPU size, the
  // largest size (no such GPU here) never matching, so the 16 GiB one takes 8 GiB.
  Json first_available = Claim("sizes", "4Gi", 25);
  Json& req = first_available["spec"]["devices"]["requests"][0];
  auto sub = [&](const std::string& size, const std::string& share) {
    return Json{
        {"name", "mib" + size},
        {"deviceClassName", kDriver},
        {"count", 1},
        {"selectors",
         {{{"cel",
            {{"expression", std::string("device.capacity[\"") + kDriver +
                                "\"].memory.compareTo(quantity(\"" + size + "\")) == 0"}}}}}},
        {"capacity", {{"requests", {{"memory", share}, {"cores", "50"}}}}}};
  };
  req["firstAvailable"] = {sub("40Gi", "20Gi"), sub("16Gi", "8Gi")};
  req.erase("exactly");
  Put("resourceclaims", first_available);
  StartHook();
  AwaitClaim("foreign");
  AwaitClaim("sizes");

  const std::vector<std::string> nodes = {"n1", "n2", "n3", "n4"};
  struct Case {
    std::string name;
    Json pod;
    bool ours;
    std::vector<std::string> kept;    // /filter's NodeNames
    std::vector<std::string> failed;  // /filter's FailedNodes
    std::string best;                 // the node /prioritize scores 10 ("" = all 0)
    std::string error;                // part of /filter's Error
  };
  const std::vector<Case> cases = {
      {"4Gi/25: n1 full, n4 has no GPU of ours; the half-used GPU of n2 wins (binpack)",
       Pod("a", {{"gpu", "want"}}),
       true,
       {"n2", "n3"},
       {"n1", "n4"},
       "n2",
       ""},
      {"the same claim through a template's generated claim",
       Pod("b", {{"gpu", "template:want"}}),
       true,
       {"n2", "n3"},
       {"n1", "n4"},
       "n2",
       ""},
      {"12Gi/60 does not fit n2's half-used GPU, but its free gpu-1 and n3 take it",
       Pod("c", {{"gpu", "big"}}),
       true,
       {"n2", "n3"},
       {"n1", "n4"},
       "",
       ""},
      {"two claims allocated one after the other: on n3 both share its GPU (16Gi exactly)",
       Pod("d", {{"a", "want"}, {"b", "big"}}),
       true,
       {"n2", "n3"},
       {"n1", "n4"},
       "",
       ""},
      {"another driver's claim: not ours", Pod("e", {{"gpu", "foreign"}}), false, {}, {}, "", ""},
      {"no claims: not ours", Pod("f", {}), false, {}, {}, "", ""},
      {"also nvidia.com/gpu: the usual decision for the HAMi devices, the claims kube-scheduler's",
       WithHamiGpu(Pod("n", {{"gpu", "want"}})),
       false,
       {},
       {},
       "",
       ""},
      {"firstAvailable: its 16 GiB choice, 8Gi/50, fits the half-used GPU of n2 (binpack) and n3",
       Pod("s", {{"gpu", "sizes"}}),
       true,
       {"n2", "n3"},
       {"n1", "n4"},
       "n2",
       ""},
      {"an allocated claim only: already placed, not ours",
       Pod("g", {{"gpu", "half"}}),
       false,
       {},
       {},
       "",
       ""},
      {"a template whose claim is not generated yet: retry",
       Pod("h", {{"gpu", "template:"}}),
       true,
       {},
       {},
       "",
       "has no ResourceClaim yet"},
      {"a claim not in the cache: retry",
       Pod("i", {{"gpu", "nope"}}),
       true,
       {},
       {},
       "",
       "not in hami-scheduler's cache"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::optional<std::string> filtered = hook_->HandleFilter(Args(c.pod, nodes));
    ASSERT_EQ(filtered.has_value(), c.ours);
    const HttpResponse prio = hook_->HandlePrioritize(Args(c.pod, nodes));
    if (!c.ours) {
      EXPECT_EQ(prio.status, 200);
      for (const Json& h : Json::parse(prio.body)) EXPECT_EQ(h["Score"], 0) << h;
      continue;
    }
    auto got = ParseExtenderFilterResult(*filtered);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!c.error.empty()) {
      EXPECT_NE(got->error.find(c.error), std::string::npos) << got->error;
      EXPECT_EQ(prio.status, 503) << prio.body;
      continue;
    }
    EXPECT_EQ(got->error, "");
    EXPECT_EQ(got->node_names.value_or(std::vector<std::string>{}), c.kept);
    std::vector<std::string> failed;
    for (const auto& [n, why] : got->failed_nodes) failed.push_back(n);
    EXPECT_EQ(failed, c.failed);
    ASSERT_EQ(prio.status, 200) << prio.body;
    std::map<std::string, int64_t> score;
    for (const Json& h : Json::parse(prio.body)) score[h["Host"]] = h["Score"];
    EXPECT_EQ(score.size(), nodes.size());
    EXPECT_EQ(score["n1"], 0);
    EXPECT_EQ(score["n4"], 0);
    if (!c.best.empty()) {
      EXPECT_EQ(score[c.best], 10);
      for (const auto& n : c.kept)
        if (n != c.best) {
          EXPECT_LT(score[n], 10) << n;
        }
    }
  }
}

// The view follows the API: a claim allocated on n3 after start-up makes n3 full for a second one.
TEST_F(DraHookTest, FollowsAllocationsWrittenLater) {
  Put("deviceclasses", Class(kDriver, kDriver));
  slices_.push_back(Slice("n3", 1));
  Put("resourceslices", slices_.back());
  Put("resourceclaims", Claim("want", "10Gi", 25));
  StartHook();
  AwaitClaim("want");
  auto filter = [&] {
    return *ParseExtenderFilterResult(
        *hook_->HandleFilter(Args(Pod("a", {{"g", "want"}}), {"n3"})));
  };
  EXPECT_EQ(filter().node_names.value_or(std::vector<std::string>{}),
            std::vector<std::string>{"n3"});
  Allocated(Claim("first", "10Gi", 25), "n3");
  ASSERT_TRUE(
      Eventually([&] { return filter().failed_nodes.count("n3") == 1; }, std::chrono::seconds(20)));
  EXPECT_NE(filter().failed_nodes["n3"].find("DRA claims do not fit"), std::string::npos);
}

// /prioritize without --dra-placement: 0 for every candidate, whatever the pod; 400 for garbage.
TEST(DraZeroPriorities, EveryCandidateGetsZero) {
  struct Case {
    std::string body;
    int status;
    std::string reply;
  };
  const std::vector<Case> cases = {
      {Args(Pod("a", {{"gpu", "want"}}), {"n1", "n2"}), 200,
       R"([{"Host":"n1","Score":0},{"Host":"n2","Score":0}])"},
      {Args(Pod("b", {}), {}), 200, "[]"},
      {"{not json", 400, ""},
  };
  for (const Case& c : cases) {
    const HttpResponse r = ZeroPriorities(c.body);
    EXPECT_EQ(r.status, c.status) << c.body;
    if (c.status == 200) {
      EXPECT_EQ(r.body, c.reply);
    }
  }
}

}  // namespace
}  // namespace hami::extender
