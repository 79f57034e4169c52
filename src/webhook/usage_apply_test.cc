// Usage recommendations at admission and the trust rule of hami.io/usage-profile (usage_apply.h),
// as tables: the recommendations file, the workload a pod belongs to, CREATE reviews (what the
// patched pod carries, the Event, the warnings) and UPDATE reviews.
#include "webhook/usage_apply.h"

#include <gtest/gtest.h>

#include "usage/profile.h"
#include "usage/recommend.h"
#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

std::string ProfileText(int32_t mem_mib) {
  usage::PodSeries s;
  s.name = "p";
  s.duty.assign(60, 1500);
  s.mem_mib.assign(60, mem_mib);
  return usage::FormatUsageProfile(usage::ProfileOf(s, 60));
}

const std::string kRecProfile = ProfileText(20000);
const std::string kUserProfile = ProfileText(100);

std::string RecommendationsJson() {
  return Json{{"workloads",
               {{"ml/web", {{"gpumem_mib", 30720}, {"gpucores", 0}, {"profile", kRecProfile}}},
                {"ml/capped", {{"gpumem_mib", 8192}, {"gpucores", 40}, {"profile", kRecProfile}}},
                {"open/web", {{"gpumem_mib", 30720}, {"profile", kRecProfile}}}}},
              {"pods", Json::object()}}
      .dump();
}

TEST(UsageRecommendations, Parse) {
  struct Case {
    const char* name;
    std::string text;
    std::string error;  // "" = parses
  };
  const Json ok{{"gpumem_mib", 1024}, {"profile", kRecProfile}};
  auto with = [&](const char* key, const Json& v) {
    Json w = ok;
    w[key] = v;
    return Json{{"workloads", {{"ns/w", w}}}}.dump();
  };
  const Case cases[] = {
      {"hami recommend's output", RecommendationsJson(), ""},
      {"not JSON", "{\"workloads\": ", "not JSON"},
      {"no workloads", "{\"pods\": {}}", "no \"workloads\" object"},
      {"workloads is a list", "{\"workloads\": []}", "no \"workloads\" object"},
      {"a trace without workload column names its workload \"\"",
       Json{{"workloads", {{"", ok}}}}.dump(), "must be <namespace>/<workload>"},
      {"no namespace", Json{{"workloads", {{"web", ok}}}}.dump(), "must be <namespace>/"},
      {"namespace not DNS-1123", Json{{"workloads", {{"ML/web", ok}}}}.dump(), "<namespace>/"},
      {"name with a space", Json{{"workloads", {{"ml/we b", ok}}}}.dump(), "<namespace>/"},
      {"entry not an object", Json{{"workloads", {{"ml/w", 3}}}}.dump(), "not an object"},
      {"gpumem 0", with("gpumem_mib", 0), "gpumem_mib must be an integer"},
      {"gpumem a string", with("gpumem_mib", "1024"), "gpumem_mib must be an integer"},
      {"gpumem past 16 TiB", with("gpumem_mib", int64_t{1} << 40), "gpumem_mib must be"},
      {"gpucores 101", with("gpucores", 101), "gpucores must be an integer in 0..100"},
      {"gpucores -1", with("gpucores", -1), "gpucores must be"},
      {"no profile", with("profile", nullptr), "profile must be a string"},
      {"a profile that does not parse", with("profile", "v1;n=garbage"),
       "workload \"ns/w\": profile: "},
      {"too big", std::string(kMaxRecommendationsBytes + 1, ' '), "more than the"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseUsageRecommendations(c.text);
    if (c.error.empty()) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->size(), 3u);
      EXPECT_EQ(r->at("ml/capped"), (UsageRecommendation{8192, 40, kRecProfile}));
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find(c.error), std::string::npos) << r.status();
    }
  }
}

Json Owner(const std::string& kind, const std::string& name, bool controller = true) {
  return Json{{"apiVersion", "apps/v1"},
              {"kind", kind},
              {"name", name},
              {"uid", "u-" + name},
              {"controller", controller}};
}

TEST(UsageRecommendations, WorkloadKeyOf) {
  struct Case {
    const char* name;
    Json meta;
    std::string ns;
    std::string key;
  };
  const Json hash = {{"pod-template-hash", "5d4f8c7b9"}};
  const Case cases[] = {
      {"a Deployment's pod: its ReplicaSet less the template hash",
       {{"generateName", "web-5d4f8c7b9-"},
        {"labels", hash},
        {"ownerReferences", {Owner("ReplicaSet", "web-5d4f8c7b9")}}},
       "ml",
       "ml/web"},
      {"a ReplicaSet without the hash label is the workload",
       {{"ownerReferences", {Owner("ReplicaSet", "web-5d4f8c7b9")}}},
       "ml",
       "ml/web-5d4f8c7b9"},
      {"the hash is stripped only from a ReplicaSet",
       {{"labels", hash}, {"ownerReferences", {Owner("StatefulSet", "db-5d4f8c7b9")}}},
       "ml",
       "ml/db-5d4f8c7b9"},
      {"a StatefulSet's pod",
       {{"name", "db-0"}, {"ownerReferences", {Owner("StatefulSet", "db")}}},
       "ml",
       "ml/db"},
      {"an owner that is not the controller does not count",
       {{"name", "solo"}, {"ownerReferences", {Owner("ConfigMap", "cfg", false)}}},
       "ml",
       "ml/solo"},
      {"a bare pod is its own workload", {{"name", "solo"}}, "ml", "ml/solo"},
      {"a bare pod named by the API server", {{"generateName", "batch-"}}, "ml", "ml/batch"},
      {"no namespace", {{"name", "solo"}}, "", ""},
      {"nothing names it", Json::object(), "ml", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(WorkloadKeyOf(Json{{"metadata", c.meta}}, c.ns), c.key);
  }
}

// ---- Reviews ----

Json Ctr(const std::string& name, const Json& limits) {
  Json c{{"name", name}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  return c;
}

Json Pod(const Json& meta, Json containers) {
  if (!containers.is_array()) containers = Json::array({containers});  // Pod(m, {Ctr(...)})
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", meta},
              {"spec", {{"containers", containers}}}};
}

Json WebMeta(const Json& annotations = Json::object()) {
  Json m{{"generateName", "web-5d4f8c7b9-"},
         {"namespace", "ml"},
         {"labels", {{"pod-template-hash", "5d4f8c7b9"}}},
         {"ownerReferences", {Owner("ReplicaSet", "web-5d4f8c7b9")}}};
  if (!annotations.empty()) m["annotations"] = annotations;
  return m;
}

struct Reviewed {
  AdmissionResponse response;
  Json pod;  // the request's pod with the patch applied
  std::vector<k8s::EventSpec> events;
};

Reviewed Review(const Json& pod, const std::string& ns, bool dry_run = false) {
  static const auto recs = std::make_shared<const UsageRecommendations>(
      ParseUsageRecommendations(RecommendationsJson()).value());
  Reviewed out;
  WebhookOptions o;
  o.usage.trusted_namespaces = {"ml", "open"};
  o.usage.apply_namespaces = {"ml"};
  o.usage.recommendations = recs;
  o.usage.record_event = [&out](k8s::EventSpec e) { out.events.push_back(std::move(e)); };
  Webhook wh(o);
  AdmissionRequest req;
  req.uid = "u";
  req.namespace_ = ns;
  req.operation = "CREATE";
  req.kind = "Pod";
  req.object = pod;
  req.dry_run = dry_run;
  out.response = wh.Review(req);
  out.pod = out.response.patch ? pod.patch(*out.response.patch) : pod;
  return out;
}

std::string Annotation(const Json& pod, std::string_view key) {
  const Json& a = pod["metadata"].value("annotations", Json::object());
  return a.is_object() && a.contains(std::string(key)) ? a[std::string(key)].get<std::string>()
                                                       : "<none>";
}

std::string Limit(const Json& pod, const char* key, size_t container = 0) {
  const Json& l = pod["spec"]["containers"][container]["resources"]["limits"];
  return l.contains(key) ? l[key].get<std::string>() : "<none>";
}

TEST(UsageApply, CreateTable) {
  const Json gpu1 = {{"nvidia.com/gpu", "1"}};
  const Json mem47 = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "47104"}};
  const Json mem20 = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "20000"}};
  const Json opt_in = {{std::string(kUsageApplyKey), "true"}};
  const Json opt_out = {{std::string(kUsageApplyKey), "false"}};
  const Json user_profile = {{std::string(kUsageProfileKey), kUserProfile}};
  auto merged = [](Json a, const Json& b) {
    for (const auto& [k, v] : b.items()) a[k] = v;
    return a;
  };
  struct Case {
    const char* name;
    Json pod;
    std::string ns;
    std::string gpumem;   // the container's nvidia.com/gpumem after the patch
    std::string profile;  // hami.io/usage-profile after the patch ("rec", "user", "<none>")
    bool applied;         // hami.io/usage-applied written and an Event sent
    std::string said;     // in the Event's message ("" = no Event) or, without one, a warning
    std::string gpucores = "<none>";
  };
  const Case cases[] = {
      {"namespace opt-in, no gpumem: set", Pod(WebMeta(), {Ctr("main", gpu1)}), "ml", "30720",
       "rec", true, "nvidia.com/gpumem 30720 (was unset); hami.io/usage-profile set"},
      {"namespace opt-in never lowers the user's gpumem", Pod(WebMeta(), {Ctr("main", mem47)}),
       "ml", "47104", "rec", true,
       "nvidia.com/gpumem kept at 47104 (recommended 30720; lowering a limit needs"},
      {"a lower user gpumem is raised", Pod(WebMeta(), {Ctr("main", mem20)}), "ml", "30720", "rec",
       true, "nvidia.com/gpumem 30720 (was 20000)"},
      {"the workload's own opt-in may lower it", Pod(WebMeta(opt_in), {Ctr("main", mem47)}), "ml",
       "30720", "rec", true, "nvidia.com/gpumem 30720 (was 47104)"},
      {"a workload opts out of its namespace", Pod(WebMeta(opt_out), {Ctr("main", gpu1)}), "ml",
       "<none>", "<none>", false, ""},
      {"a namespace that did not opt in",
       Pod(merged(WebMeta(), {{"namespace", "open"}}), {Ctr("main", gpu1)}), "open", "<none>",
       "<none>", false, ""},
      {"a workload opts in where its namespace did not",
       Pod(merged(WebMeta(opt_in), {{"namespace", "open"}}), {Ctr("main", gpu1)}), "open", "30720",
       "rec", true, "hami.io/usage-profile set"},
      {"a trusted user's profile is kept on namespace opt-in",
       Pod(WebMeta(user_profile), {Ctr("main", gpu1)}), "ml", "30720", "user", true,
       "hami.io/usage-profile kept (the pod's own)"},
      {"and replaced on the workload's own",
       Pod(WebMeta(merged(user_profile, opt_in)), {Ctr("main", gpu1)}), "ml", "30720", "rec", true,
       "hami.io/usage-profile set"},
      {"an untrusted namespace: the forged profile goes, nothing applied",
       Pod(merged(WebMeta(user_profile), {{"namespace", "dev"}}), {Ctr("main", gpu1)}), "dev",
       "<none>", "<none>", false, "removed hami.io/usage-profile: namespace \"dev\" is not"},
      {"an untrusted namespace that opted in: the recommendation replaces the forgery",
       Pod(merged(WebMeta(merged(user_profile, opt_in)), {{"namespace", "dev"}}),
           {Ctr("main", gpu1)}),
       "dev", "<none>", "<none>", false, "no usage recommendation for workload \"dev/web\""},
      {"a forged record goes everywhere",
       Pod(WebMeta({{std::string(kUsageAppliedKey), "{}"}, {std::string(kUsageApplyKey), "false"}}),
           {Ctr("main", gpu1)}),
       "ml", "<none>", "<none>", false, "removed hami.io/usage-applied: only the webhook"},
      {"no recommendation for the workload",
       Pod(merged(WebMeta(), {{"generateName", "x-"}, {"ownerReferences", Json::array()}}),
           {Ctr("main", gpu1)}),
       "ml", "<none>", "<none>", false, ""},
      {"two GPU containers: not applied", Pod(WebMeta(), {Ctr("main", gpu1), Ctr("side", gpu1)}),
       "ml", "<none>", "<none>", false, "made for pods with one container using one NVIDIA GPU"},
      {"a container asking two GPUs: not applied",
       Pod(WebMeta(), {Ctr("main", {{"nvidia.com/gpu", "2"}})}), "ml", "<none>", "<none>", false,
       "made for pods with one container using one NVIDIA GPU"},
      {"gpumem-percentage: not applied",
       Pod(WebMeta(),
           {Ctr("main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}})}),
       "ml", "<none>", "<none>", false, "sets nvidia.com/gpumem-percentage"},
      {"a pod without GPUs: nothing to say", Pod(WebMeta(), {Ctr("main", nullptr)}), "ml", "",
       "<none>", false, ""},
      {"not a boolean", Pod(WebMeta({{std::string(kUsageApplyKey), "yes"}}), {Ctr("main", gpu1)}),
       "ml", "30720", "rec", true, "hami.io/usage-profile set"},
      {"recommended cores are set where none are",
       Pod(merged(WebMeta(), {{"ownerReferences", {Owner("StatefulSet", "capped")}}}),
           {Ctr("main", gpu1)}),
       "ml", "8192", "rec", true, "nvidia.com/gpucores 40 (was unset)", "40"},
      {"and never lower the user's (0 = no SM limit)",
       Pod(merged(WebMeta(), {{"ownerReferences", {Owner("StatefulSet", "capped")}}}),
           {Ctr("main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "0"}})}),
       "ml", "8192", "rec", true, "nvidia.com/gpucores kept at 0 (recommended 40)", "0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Reviewed r = Review(c.pod, c.ns);
    ASSERT_TRUE(r.response.allowed) << r.response.message;
    if (!c.gpumem.empty()) {
      EXPECT_EQ(Limit(r.pod, "nvidia.com/gpumem"), c.gpumem);
    }
    EXPECT_EQ(Annotation(r.pod, kUsageProfileKey), c.profile == "rec"    ? kRecProfile
                                                   : c.profile == "user" ? kUserProfile
                                                                         : c.profile);
    if (!c.gpumem.empty() && c.gpumem != "<none>") {
      EXPECT_EQ(Limit(r.pod, "nvidia.com/gpucores"), c.gpucores);
    }
    const std::string record = Annotation(r.pod, kUsageAppliedKey);
    ASSERT_EQ(record != "<none>", c.applied) << record;
    ASSERT_EQ(r.events.size(), c.applied ? 1u : 0u);
    if (c.applied) {
      const Json rec = Json::parse(record);
      EXPECT_EQ(rec["workload"], c.gpucores != "<none>" ? "ml/capped" : c.ns + "/web");
      EXPECT_EQ(std::to_string(rec["gpumem"].get<int64_t>()), c.gpumem);
      const k8s::EventSpec& e = r.events[0];
      EXPECT_EQ(e.reason, kUsageAppliedReason);
      EXPECT_EQ(e.type, "Normal");
      EXPECT_NE(e.message.find(c.said), std::string::npos) << e.message;
      EXPECT_EQ(e.involved_object["namespace"], c.ns);
    } else if (!c.said.empty()) {
      std::string all;
      for (const auto& w : r.response.warnings) all += w + "\n";
      EXPECT_NE(all.find(c.said), std::string::npos) << all;
    }
  }
}

TEST(UsageApply, EventNamesThePodOrItsController) {
  Reviewed r = Review(Pod(WebMeta(), {Ctr("main", {{"nvidia.com/gpu", "1"}})}), "ml");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].involved_object, (Json{{"apiVersion", "apps/v1"},
                                               {"kind", "ReplicaSet"},
                                               {"namespace", "ml"},
                                               {"name", "web-5d4f8c7b9"},
                                               {"uid", "u-web-5d4f8c7b9"}}));
  Json named = WebMeta();
  named["name"] = "web-5d4f8c7b9-abcde";
  r = Review(Pod(named, {Ctr("main", {{"nvidia.com/gpu", "1"}})}), "ml");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].involved_object["kind"], "Pod");
  EXPECT_EQ(r.events[0].involved_object["name"], "web-5d4f8c7b9-abcde");
  // A dry run changes the pod but sends nothing.
  r = Review(Pod(named, {Ctr("main", {{"nvidia.com/gpu", "1"}})}), "ml", /*dry_run=*/true);
  EXPECT_EQ(r.events.size(), 0u);
  EXPECT_EQ(Limit(r.pod, "nvidia.com/gpumem"), "30720");
}

TEST(UsageApply, RequestsFollowTheLimitAndTheQuotaSeesTheResult) {
  Json c = Ctr("main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "47104"}});
  c["resources"]["requests"] = {{"nvidia.com/gpumem", "47104"}};
  Json meta = WebMeta({{std::string(kUsageApplyKey), "true"}});
  const Reviewed r = Review(Pod(meta, {c}), "ml");
  ASSERT_TRUE(r.response.allowed);
  EXPECT_EQ(r.pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpumem"], "30720");
  // The quota is charged what the pod will hold after the patch.
  WebhookOptions o;
  o.usage.trusted_namespaces = {"ml"};
  o.usage.recommendations = std::make_shared<const UsageRecommendations>(
      ParseUsageRecommendations(RecommendationsJson()).value());
  int64_t charged = -1;
  o.quota_check = [&](const std::string&, const std::map<std::string, int64_t>& d) {
    charged = d.count("nvidia.com/gpumem") ? d.at("nvidia.com/gpumem") : -2;
    return OkStatus();
  };
  AdmissionRequest req;
  req.uid = "u";
  req.namespace_ = "ml";
  req.operation = "CREATE";
  req.object = Pod(meta, {c});
  ASSERT_TRUE(Webhook(o).Review(req).allowed);
  EXPECT_EQ(charged, 30720);
}

TEST(UsageApply, UpdateTable) {
  const std::string sched = "system:serviceaccount:hami-system:hami-scheduler";
  WebhookOptions o;
  o.usage.trusted_namespaces = {"ml"};
  o.scheduler_users = {sched};
  Webhook wh(o);
  auto pod = [](const std::string& ns, const Json& annotations) {
    return Pod({{"name", "p"}, {"namespace", ns}, {"annotations", annotations}},
               {Ctr("main", {{"nvidia.com/gpu", "1"}})});
  };
  const Json none = Json::object();
  const Json prof = {{std::string(kUsageProfileKey), kUserProfile}};
  const Json prof2 = {{std::string(kUsageProfileKey), kRecProfile}};
  const Json rec = {{std::string(kUsageAppliedKey), "{}"}};
  struct Case {
    const char* name;
    std::string ns;
    Json before, after;
    std::string user;
    bool allowed;
  };
  const Case cases[] = {
      {"a profile added in an untrusted namespace", "dev", none, prof, "alice", false},
      {"a profile changed in an untrusted namespace", "dev", prof, prof2, "alice", false},
      {"a profile removed in an untrusted namespace", "dev", prof, none, "alice", false},
      {"the scheduler may", "dev", none, prof, sched, true},
      {"a trusted namespace may", "ml", none, prof, "alice", true},
      {"the record is the webhook's in every namespace", "ml", none, rec, "alice", false},
      {"unchanged keys are fine", "dev", prof, prof, "alice", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    AdmissionRequest req;
    req.uid = "u";
    req.namespace_ = c.ns;
    req.operation = "UPDATE";
    req.username = c.user;
    req.object = pod(c.ns, c.after);
    req.old_object = pod(c.ns, c.before);
    const AdmissionResponse r = wh.Review(req);
    EXPECT_EQ(r.allowed, c.allowed) << r.message;
    if (!c.allowed) {
      EXPECT_NE(r.message.find("may not be changed"), std::string::npos) << r.message;
    }
  }
}

}  // namespace
}  // namespace hami::webhook
