// Usage recommendations from admission to placement (issue 27 part 2) through the production
// control plane on the fake API server: the webhook sets a workload's recommended gpumem and usage
// profile on its pods (docs/utilization.md, "Applying recommendations at admission"), and the
// extender's usage rule packs them by that profile past the card's memory. Without the opt-in the
// same pods get no profile and the third does not fit.
#include <gtest/gtest.h>

#include <mutex>

#include "extender/state.h"
#include "harness.h"
#include "usage/profile.h"
#include "usage/recommend.h"

namespace hami::controlplane {
namespace {

using k8s::testing::FakeApiServer;

constexpr int64_t kCardMib = 81920;

Json OneGpuNode(const std::string& name) {
  const Json devs = Json::array({{{"id", name + "-gpu0"},
                                  {"index", 0},
                                  {"count", 16},
                                  {"devmem", kCardMib},
                                  {"devcore", 100},
                                  {"type", "NVIDIA-A100-SXM4-80GB"},
                                  {"health", true},
                                  {"mode", "hami-core"}}});
  const Json alloc{{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "16"}};
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", name}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}},
              {"status", {{"capacity", alloc}, {"allocatable", alloc}}}};
}

// A serving replica as a Deployment makes it: owned by its ReplicaSet, asking one GPU.
Json WebPod(const std::string& name, const Json& limits) {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "ml"},
        {"labels", {{"pod-template-hash", "5d4f8c7b9"}}},
        {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "web-5d4f8c7b9"},
                                          {"uid", "rs-1"},
                                          {"controller", true}}})}}},
      {"spec",
       {{"containers",
         Json::array({{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", limits}}}}})}}}};
}

// What `hami recommend` says of a workload that holds 8 GiB, loads up to 12 GiB and is busy 10 %
// of the time: 30 GiB a pod would be the careful request; three do not fit an 80 GiB card by
// limits, and fit easily by usage.
std::string Recommendations() {
  usage::PodSeries s;
  s.name = "p";
  s.duty.assign(24 * 60, 0);
  s.mem_mib.assign(24 * 60, 8192);
  for (size_t m = 0; m < s.duty.size(); m += 10) s.duty[m] = 5000;
  s.mem_mib[100] = 12288;
  const std::string profile = usage::FormatUsageProfile(usage::ProfileOf(s, 24 * 60));
  return Json{
      {"workloads", {{"ml/web", {{"gpumem_mib", 30720}, {"gpucores", 0}, {"profile", profile}}}}}}
      .dump();
}

TEST(UsageAdmission, WebhookAppliesTheRecommendationAndTheExtenderPacksByIt) {
  struct Case {
    const char* name;
    std::vector<std::string> apply_namespaces;
    Json limits;
    int placed;  // of three replicas, on the one 80 GiB card
  };
  const Case cases[] = {
      {"namespace opted in: the webhook sets 30720 MiB and the profile; 3 fit one 81920 MiB card",
       {"ml"},
       {{"nvidia.com/gpu", "1"}},
       3},
      {"no opt-in, the same 30720 MiB asked by the user, no profile: 2 fit",
       {},
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "30720"}},
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeApiServer api;
    ASSERT_TRUE(api.Start().ok());
    ASSERT_TRUE(api.Upsert("nodes", OneGpuNode("node-a")).ok());
    ReplicaOptions ro;
    ro.usage.overcommit_pct = 200;
    ro.usage.namespaces = {"ml"};
    auto recs = webhook::ParseUsageRecommendations(Recommendations());
    ASSERT_TRUE(recs.ok()) << recs.status();
    ro.usage_apply.recommendations =
        std::make_shared<const webhook::UsageRecommendations>(std::move(*recs));
    ro.usage_apply.apply_namespaces = c.apply_namespaces;
    std::mutex mu;
    std::vector<k8s::EventSpec> events;
    ro.usage_apply.record_event = [&](k8s::EventSpec e) {
      std::lock_guard<std::mutex> l(mu);
      events.push_back(std::move(e));
    };
    auto rep = StartSynced(api, 1, ro);
    KubeScheduler ks(rep->port());
    int placed = 0;
    for (const char* name : {"web-5d4f8c7b9-x2x7k", "web-5d4f8c7b9-q8vzt", "web-5d4f8c7b9-m4nnb"}) {
      SCOPED_TRACE(name);
      std::string why;
      Json admitted = ks.Admit(WebPod(name, c.limits), "ml", &why);
      ASSERT_FALSE(admitted.is_null()) << why;
      const Json& ann = admitted["metadata"].value("annotations", Json::object());
      EXPECT_EQ(ann.contains("hami.io/usage-profile"), !c.apply_namespaces.empty());
      auto created = rep->client->Create(k8s::kPods, "ml", admitted);
      ASSERT_TRUE(created.ok()) << created.status();
      std::string err;
      extender::ExtenderFilterResult res;
      const std::string node = ks.Filter(*created, {"node-a"}, &err, &res);
      if (node.empty()) {
        std::printf("[ usage ] %s not placed: %s%s\n", name, err.c_str(),
                    Json(res.failed_nodes).dump().c_str());
        continue;
      }
      ASSERT_EQ(ks.Bind(*created, node), "");
      auto stored = api.Get("pods", "ml", name);
      ASSERT_TRUE(stored.has_value());
      auto held = extender::HeldAllocation(*stored);
      ASSERT_TRUE(held.has_value());
      // What is booked is the limit the webhook set, not the profile.
      EXPECT_EQ(held->containers[0][0].usedmem_mib, 30720);
      ++placed;
    }
    EXPECT_EQ(placed, c.placed);
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(events.size(), c.apply_namespaces.empty() ? 0u : 3u);
    for (const k8s::EventSpec& e : events) {
      EXPECT_EQ(e.reason, "UsageRecommendationApplied");
      EXPECT_NE(e.message.find("nvidia.com/gpumem 30720 (was unset)"), std::string::npos)
          << e.message;
    }
  }
}

}  // namespace
}  // namespace hami::controlplane
