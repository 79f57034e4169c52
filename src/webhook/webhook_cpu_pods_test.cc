// The opt-in for pods without devices (WebhookOptions::cpu_pods, phases::TakesOverCpuPod): each
// case is a pod and a configuration, and the /spec/schedulerName op the review answers (or none).
#include <gtest/gtest.h>

#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

Json Pod(const Json& limits, const Json& extra_spec = Json::object(),
         const Json& extra_meta = Json::object()) {
  Json c{{"name", "c"}, {"image", "busybox"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  Json spec{{"containers", Json::array({c})}};
  for (const auto& [k, v] : extra_spec.items()) spec[k] = v;
  Json meta{{"name", "p"}, {"namespace", "ml"}};
  for (const auto& [k, v] : extra_meta.items()) meta[k] = v;
  return Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

const Json kCpu = {{"cpu", "2"}, {"memory", "1Gi"}};
const Json kGpu = {{"nvidia.com/gpu", "1"}};
const Json kNone = nullptr;
const Json kDefault = {{"schedulerName", "default-scheduler"}};

CpuPodOptIn Namespaces(std::vector<std::string> ns) {
  return CpuPodOptIn{std::move(ns), {}};
}
CpuPodOptIn Labels(std::vector<std::pair<std::string, std::string>> l) {
  return CpuPodOptIn{{}, std::move(l)};
}

Json Owner(const std::string& kind, bool controller) {
  return {{"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                            {"kind", kind},
                                            {"name", "o"},
                                            {"uid", "u"},
                                            {"controller", controller}}})}};
}

TEST(WebhookCpuPods, Table) {
  struct Case {
    const char* name;
    Json pod;
    CpuPodOptIn opt_in;
    const char* want;  // "" = no schedulerName op; else "add" or "replace"
    std::string ns = "ml";
    bool force_default = true;
    std::string operation = "CREATE";
    bool dry_run = false;
  };
  const CpuPodOptIn ml = Namespaces({"ml", "batch"});
  const CpuPodOptIn team = Labels({{"team", "ml"}, {"tier", "batch"}});
  const Json team_labels = {{"labels", {{"team", "ml"}, {"tier", "batch"}, {"app", "x"}}}};
  const Case cases[] = {
      // Off by default: a CPU-only pod stays with its scheduler, as before.
      {"off: cpu pod untouched", Pod(kCpu), {}, ""},
      {"off: pod without resources untouched", Pod(kNone, kDefault), {}, ""},
      {"off: gpu pod as today", Pod(kGpu), {}, "add"},
      // By namespace.
      {"listed namespace, no schedulerName", Pod(kCpu), ml, "add"},
      {"listed namespace, default-scheduler", Pod(kCpu, kDefault), ml, "replace"},
      {"listed namespace, no resources at all", Pod(kNone, kDefault), ml, "replace"},
      {"second listed namespace", Pod(kCpu), ml, "add", "batch"},
      {"namespace not listed", Pod(kCpu, kDefault), ml, "", "web"},
      {"metadata.namespace when the request has none", Pod(kCpu), ml, "add", ""},
      {"names hami-scheduler already", Pod(kCpu, {{"schedulerName", "hami-scheduler"}}), ml, ""},
      {"another scheduler left alone", Pod(kCpu, {{"schedulerName", "volcano"}}), ml, ""},
      {"default-scheduler kept without force", Pod(kCpu, kDefault), ml, "", "ml", false},
      {"hami.io/webhook=ignore", Pod(kCpu, kDefault, {{"labels", {{"hami.io/webhook", "ignore"}}}}),
       ml, ""},
      {"nodeName preset: nothing to place", Pod(kCpu, {{"nodeName", "n1"}}), ml, ""},
      {"DaemonSet pod left to the default scheduler", Pod(kCpu, kDefault, Owner("DaemonSet", true)),
       ml, ""},
      {"ReplicaSet pod taken", Pod(kCpu, kDefault, Owner("ReplicaSet", true)), ml, "replace"},
      {"DaemonSet owner that is not the controller", Pod(kCpu, kDefault, Owner("DaemonSet", false)),
       ml, "replace"},
      {"UPDATE: schedulerName is immutable", Pod(kCpu, kDefault), ml, "", "ml", true, "UPDATE"},
      {"dry run answers the same patch", Pod(kCpu, kDefault), ml, "replace", "ml", true, "CREATE",
       true},
      // GPU pods as today, whatever the opt-in says.
      {"gpu pod outside the namespaces", Pod(kGpu, kDefault), ml, "replace", "web"},
      {"gpu pod naming another scheduler", Pod(kGpu, {{"schedulerName", "volcano"}}), ml, ""},
      // By pod labels: every key=value must be there.
      {"all labels match", Pod(kCpu, kDefault, team_labels), team, "replace", "web"},
      {"one label missing", Pod(kCpu, kDefault, {{"labels", {{"team", "ml"}}}}), team, "", "web"},
      {"label value differs",
       Pod(kCpu, kDefault, {{"labels", {{"team", "ml"}, {"tier", "online"}}}}), team, "", "web"},
      {"label selector alone matches no unlabelled pod", Pod(kCpu, kDefault), team, "", "ml"},
      // Both: either one selects.
      {"labels select outside the namespaces", Pod(kCpu, kDefault, team_labels),
       CpuPodOptIn{{"ml"}, team.match_labels}, "replace", "web"},
      {"namespace selects without the labels", Pod(kCpu, kDefault),
       CpuPodOptIn{{"ml"}, team.match_labels}, "replace", "ml"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    opts.cpu_pods = c.opt_in;
    opts.force_overwrite_default_scheduler = c.force_default;
    Webhook wh(opts);
    AdmissionRequest req;
    req.uid = "u1";
    req.namespace_ = c.ns;
    req.operation = c.operation;
    req.kind = "Pod";
    req.username = "admin";
    req.object = c.pod;
    if (c.operation == "UPDATE") req.old_object = c.pod;
    req.dry_run = c.dry_run;
    const AdmissionResponse r = wh.Review(req);
    ASSERT_TRUE(r.allowed) << r.message;
    std::vector<Json> ops;
    if (r.patch) {
      for (const Json& op : *r.patch)
        if (op["path"] == "/spec/schedulerName") ops.push_back(op);
    }
    if (*c.want == '\0') {
      EXPECT_TRUE(ops.empty()) << Json(ops).dump();
      // A pod without devices that is not taken over gets no patch at all (no overwriteEnv here).
      if (c.pod["spec"]["containers"][0].value("resources", Json::object()).dump().find("nvidia") ==
          std::string::npos) {
        EXPECT_FALSE(r.patch.has_value()) << r.patch->dump();
      }
    } else {
      ASSERT_EQ(ops.size(), 1u);
      EXPECT_EQ(ops[0]["op"], c.want);
      EXPECT_EQ(ops[0]["value"], "hami-scheduler");
    }
  }
}

TEST(WebhookCpuPods, OverwriteEnvAndSchedulerNameTogether) {
  WebhookOptions opts;
  opts.overwrite_env = true;
  opts.cpu_pods = Namespaces({"ml"});
  AdmissionRequest req;
  req.uid = "u1";
  req.namespace_ = "ml";
  req.operation = "CREATE";
  req.object = Pod(kCpu, kDefault);
  const AdmissionResponse r = Webhook(opts).Review(req);
  ASSERT_TRUE(r.patch.has_value());
  std::vector<std::string> paths;
  for (const Json& op : *r.patch) paths.push_back(op["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{"/spec/containers/0/env", "/spec/schedulerName"}));
}

TEST(WebhookCpuPods, ParseMatchLabels) {
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  struct Case {
    const char* text;
    Pairs want;
    const char* error = "";  // part of the error message
  };
  const Case cases[] = {
      {"", {}},
      {"  ", {}},
      {"team=ml", {{"team", "ml"}}},
      {"team=ml, hami.io/cpu-pods=true", {{"team", "ml"}, {"hami.io/cpu-pods", "true"}}},
      {"empty=", {{"empty", ""}}},
      {"team", {}, "\"team\" is not key=value"},
      {"=ml", {}, "\"=ml\" has no key"},
      {"team=ml,", {}, "\"\" is not key=value"},
      {"team=a,team=b", {}, "names \"team\" twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseMatchLabels(c.text);
    if (*c.error == '\0') {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, c.want);
    } else {
      ASSERT_FALSE(got.ok());
      EXPECT_NE(got.status().message().find(c.error), std::string::npos) << got.status();
    }
  }
}

}  // namespace
}  // namespace hami::webhook
