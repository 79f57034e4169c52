// The webhook as a trust boundary: scheduler-owned annotations cannot be written by pod creators or
// editors, privileged neighbours of a GPU container are refused, the quota namespace cannot be
// dodged.
#include <gtest/gtest.h>

#include "core/annotations.h"
#include "vendors/config.h"
#include "vendors/nvidia/annotations.h"
#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

constexpr char kScheduler[] = "system:serviceaccount:hami-system:hami-scheduler";
constexpr char kAgent[] = "system:serviceaccount:hami-system:hami-node-agent";
const std::string kDecision = "GPU-aaa,NVIDIA,1200,0:;";

Json Pod(const Json& limits, const Json& annotations = Json::object(),
         const Json& labels = Json::object()) {
  Json c{{"name", "c"}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "p"}, {"namespace", "ml"}, {"annotations", annotations}, {"labels", labels}}},
      {"spec", {{"containers", Json::array({c})}}}};
}
const Json kGpu = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}};

AdmissionRequest Req(const std::string& op, const Json& pod, const Json& old = nullptr,
                     const std::string& user = "alice") {
  AdmissionRequest r;
  r.uid = "u";
  r.namespace_ = "ml";
  r.operation = op;
  r.kind = "Pod";
  r.username = user;
  r.object = pod;
  r.old_object = old;
  return r;
}

WebhookOptions Options() {
  WebhookOptions o;
  o.scheduler_users = {kScheduler};
  o.node_agent_users = {kAgent};
  return o;
}

TEST(SchedulerOwnedKeys, EveryRegisteredVendorsDecisionKeys) {
  const OwnedKeys k = SchedulerOwnedKeys(vendors::VendorSet::NvidiaOnly());
  for (const char* key :
       {vendors::nvidia::kNvidiaDevicesAllocated, vendors::nvidia::kNvidiaDevicesToAllocate,
        core::kVgpuNode, core::kBindPhase, core::kBindTime, core::kVgpuTime,
        vendors::nvidia::kMigAllocations})
    EXPECT_TRUE(k.annotations.count(key)) << key;
  EXPECT_TRUE(k.labels.count(core::kVgpuNode));
  int vendors = 0;
  for (const auto& v : vendors::AllVendorsWithDefaults()) {
    ++vendors;
    EXPECT_TRUE(k.annotations.count(v->keys().allocated)) << v->common_word();
    EXPECT_FALSE(k.node_agent.count(v->keys().allocated))
        << "the permanent record is the scheduler's alone";
    if (!v->keys().to_allocate.empty()) {
      EXPECT_TRUE(k.node_agent.count(v->keys().to_allocate)) << v->common_word();
    }
    // Whatever else the vendor writes with a decision is owned too (Cambricon's lock, Ascend's
    // template).
    core::PodAllocation a;
    a.containers = {{core::ContainerDevice{"x-1", v->common_word(), 2048, 50, 1}}};
    auto enc = v->EncodeDecision(a, 1700000000);
    ASSERT_TRUE(enc.ok()) << enc.status();
    for (const auto& [key, _] : *enc)
      EXPECT_TRUE(k.annotations.count(key)) << v->common_word() << " " << key;
  }
  EXPECT_GT(vendors, 5);
  // A configured name that the defaults do not have (an Ascend chip) is owned once it is enabled.
  auto set = vendors::VendorSet::Load(
      "vnpus:\n  - chipName: 999Z\n    commonWord: Ascend999Z\n    memoryAllocatable: 32768\n"
      "    memoryCapacity: 32768\n    aiCore: 20\n    templates:\n"
      "      - name: vir05\n        memory: 16384\n        aiCore: 10\n");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE(k.annotations.count("hami.io/Ascend999Z-devices-allocated"));
  EXPECT_TRUE(SchedulerOwnedKeys(**set).annotations.count("hami.io/Ascend999Z-devices-allocated"));
}

TEST(WebhookTrust, CreateStripsTheDecisionFromEveryPod) {
  Webhook wh(Options());
  const Json forged = {{vendors::nvidia::kNvidiaDevicesAllocated, kDecision},
                       {vendors::nvidia::kNvidiaDevicesToAllocate, kDecision},
                       {core::kVgpuNode, "node1"},
                       {core::kBindPhase, "allocating"},
                       {core::kBindTime, "1700000000"},
                       {"hami.io/dcu-devices-to-allocate", "x"},
                       {"cambricon.com/dsmlu.lock", "x"},
                       {"team", "a"}};
  const Json label = {{core::kVgpuNode, "node1"}, {"app", "x"}};
  struct Case {
    const char* name;
    Json pod;
  };
  Json other_scheduler = Pod(kGpu, forged, label);
  other_scheduler["spec"]["schedulerName"] = "volcano";
  Json ignored = Pod(kGpu, forged, label);
  ignored["metadata"]["labels"][core::kWebhookLabel] = "ignore";
  const Case cases[] = {
      {"gpu pod", Pod(kGpu, forged, label)},
      {"pod without devices", Pod(nullptr, forged, label)},
      {"pod of another scheduler", other_scheduler},
      {"pod labelled ignore", ignored},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = wh.Review(Req("CREATE", c.pod));
    ASSERT_TRUE(r.allowed) << r.message;
    ASSERT_TRUE(r.patch.has_value());
    const Json patched = c.pod.patch(*r.patch);
    const Json& ann = patched["metadata"]["annotations"];
    EXPECT_EQ(ann, Json({{"team", "a"}})) << "only the user's own annotation is left";
    EXPECT_FALSE(patched["metadata"]["labels"].contains(core::kVgpuNode));
    EXPECT_EQ(patched["metadata"]["labels"]["app"], "x");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find(vendors::nvidia::kNvidiaDevicesAllocated), std::string::npos)
        << r.warnings[0];
  }
  // Nothing to strip: no patch, no warning (a pod without devices stays untouched).
  const AdmissionResponse clean = wh.Review(Req("CREATE", Pod(nullptr, {{"team", "a"}})));
  EXPECT_FALSE(clean.patch.has_value());
  EXPECT_TRUE(clean.warnings.empty());
}

TEST(WebhookTrust, UpdateOfOwnedKeysOnlyByTheScheduler) {
  Webhook wh(Options());
  const Json bound = Pod(kGpu,
                         {{vendors::nvidia::kNvidiaDevicesAllocated, kDecision},
                          {vendors::nvidia::kNvidiaDevicesToAllocate, kDecision},
                          {core::kVgpuNode, "node1"},
                          {core::kBindPhase, "allocating"},
                          {"team", "a"}},
                         {{core::kVgpuNode, "node1"}});
  auto with = [&](const std::string& key, const Json& value) {
    Json p = bound;
    if (value.is_null())
      p["metadata"]["annotations"].erase(key);
    else
      p["metadata"]["annotations"][key] = value;
    return p;
  };
  Json relabelled = bound;
  relabelled["metadata"]["labels"][core::kVgpuNode] = "node2";
  Json ignored = bound;
  ignored["metadata"]["labels"][core::kWebhookLabel] = "ignore";
  Json ignored_and_edited = ignored;
  ignored_and_edited["metadata"]["annotations"][vendors::nvidia::kNvidiaDevicesAllocated] =
      "GPU-aaa,NVIDIA,1,0:;";
  struct Case {
    const char* name;
    Json old_pod, new_pod;
    const char* user;
    bool allowed;
  };
  const Case cases[] = {
      {"user shrinks the allocated record", bound,
       with(vendors::nvidia::kNvidiaDevicesAllocated, "GPU-aaa,NVIDIA,1,0:;"), "alice", false},
      {"user removes the allocated record", bound,
       with(vendors::nvidia::kNvidiaDevicesAllocated, nullptr), "alice", false},
      {"user writes a decision onto a pod without one", Pod(kGpu),
       with(vendors::nvidia::kNvidiaDevicesToAllocate, kDecision), "alice", false},
      {"user sets bind-phase", bound, with(core::kBindPhase, "success"), "alice", false},
      {"user moves the vgpu-node label", bound, relabelled, "alice", false},
      {"user edits a pod labelled ignore", ignored, ignored_and_edited, "alice", false},
      {"request without a username", bound, with(core::kVgpuNode, "node2"), "", false},
      {"user edits an annotation of their own", bound, with("team", "b"), "alice", true},
      {"user sets the ignore label only", bound, ignored, "alice", true},
      {"scheduler rewrites the decision", bound,
       with(vendors::nvidia::kNvidiaDevicesAllocated, nullptr), kScheduler, true},
      {"node agent consumes the to-allocate record", bound,
       with(vendors::nvidia::kNvidiaDevicesToAllocate, ";"), kAgent, true},
      {"node agent marks bind-phase", bound, with(core::kBindPhase, "success"), kAgent, true},
      {"node agent may not touch the allocated record", bound,
       with(vendors::nvidia::kNvidiaDevicesAllocated, ";"), kAgent, false},
      {"node agent may not move the pod's node", bound, relabelled, kAgent, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = wh.Review(Req("UPDATE", c.new_pod, c.old_pod, c.user));
    EXPECT_EQ(r.allowed, c.allowed) << r.message;
    EXPECT_FALSE(r.patch.has_value()) << "an UPDATE is judged, never mutated";
    if (!c.allowed) {
      EXPECT_EQ(r.code, 403);
      EXPECT_NE(r.message.find("may not change"), std::string::npos) << r.message;
    }
  }
}

TEST(WebhookTrust, PrivilegedNeighboursOfAGpuContainer) {
  WebhookOptions o = Options();
  Webhook wh(o);
  auto pod_with = [](const char* list, const Json& sc, const Json& limits = kGpu) {
    Json p = Pod(limits);
    if (!p["spec"].contains(list)) p["spec"][list] = Json::array();
    p["spec"][list].push_back({{"name", "side"}, {"image", "x"}, {"securityContext", sc}});
    return p;
  };
  const Json privileged = {{"privileged", true}};
  const Json sys_admin = {{"capabilities", {{"add", {"NET_ADMIN", "SYS_ADMIN"}}}}};
  const Json cap_sys_admin = {{"capabilities", {{"add", {"cap_sys_admin"}}}}};
  const Json all = {{"capabilities", {{"add", {"ALL"}}}}};
  const Json net_admin = {{"capabilities", {{"add", {"NET_ADMIN"}}}}};
  struct Case {
    const char* name;
    Json pod;
    const char* denial;  // "" = allowed
  };
  const Case cases[] = {
      {"privileged sidecar", pod_with("containers", privileged),
       "containers container \"side\" is privileged"},
      {"SYS_ADMIN init container", pod_with("initContainers", sys_admin), "adds CAP_SYS_ADMIN"},
      {"cap_sys_admin, any case", pod_with("initContainers", cap_sys_admin), "adds CAP_SYS_ADMIN"},
      {"capability ALL", pod_with("containers", all), "adds CAP_SYS_ADMIN"},
      {"ephemeral container in the spec", pod_with("ephemeralContainers", privileged),
       "ephemeralContainers"},
      {"NET_ADMIN is not SYS_ADMIN", pod_with("initContainers", net_admin), ""},
      {"privileged pod without devices is not ours", pod_with("containers", privileged, nullptr),
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = wh.Review(Req("CREATE", c.pod));
    EXPECT_EQ(r.allowed, !*c.denial) << r.message;
    if (*c.denial) {
      EXPECT_NE(r.message.find(c.denial), std::string::npos) << r.message;
    }
  }

  // kubectl debug adds an ephemeral container by UPDATE: a privileged one is refused in a GPU pod.
  const Json gpu = Pod(kGpu);
  const Json debugged = pod_with("ephemeralContainers", privileged);
  EXPECT_FALSE(wh.Review(Req("UPDATE", debugged, gpu)).allowed);
  EXPECT_TRUE(wh.Review(Req("UPDATE", pod_with("ephemeralContainers", net_admin), gpu)).allowed);
  EXPECT_TRUE(
      wh.Review(Req("UPDATE", pod_with("ephemeralContainers", privileged, nullptr), Pod(nullptr)))
          .allowed);
  // One that is already there (admitted before) does not block later edits of the pod.
  Json relabelled = debugged;
  relabelled["metadata"]["labels"]["x"] = "y";
  EXPECT_TRUE(wh.Review(Req("UPDATE", relabelled, debugged)).allowed);
}

TEST(WebhookTrust, QuotaNamespaceFallsBackToTheObjects) {
  WebhookOptions o = Options();
  std::vector<std::string> charged;
  o.quota_check = [&](const std::string& ns, const std::map<std::string, int64_t>& d) -> Status {
    const int64_t mem = d.count("nvidia.com/gpumem") ? d.at("nvidia.com/gpumem") : 0;
    charged.push_back(ns);
    return ns == "ml" && mem > 500 ? ResourceExhausted("exceeding resource quota ml/q")
                                   : OkStatus();
  };
  Webhook wh(o);
  AdmissionRequest r = Req("CREATE", Pod(kGpu));
  r.namespace_ = "";
  AdmissionResponse a = wh.Review(r);
  EXPECT_FALSE(a.allowed);
  EXPECT_NE(a.message.find("exceeding resource quota"), std::string::npos) << a.message;
  ASSERT_EQ(charged.size(), 1u);
  EXPECT_EQ(charged[0], "ml");

  Json nowhere = Pod(kGpu);
  nowhere["metadata"].erase("namespace");
  r.object = nowhere;
  a = wh.Review(r);
  EXPECT_FALSE(a.allowed);
  EXPECT_NE(a.message.find("namespace is unknown"), std::string::npos) << a.message;
  EXPECT_EQ(charged.size(), 1u) << "not charged to the empty namespace";
}

TEST(WebhookTrust, RegionGroupJoinsEveryGpuPod) {
  WebhookOptions o = Options();
  o.region_group = 4242;
  Webhook wh(o);
  auto with_sc = [](const Json& limits, const Json& sc) {
    Json p = Pod(limits);
    if (!sc.is_null()) p["spec"]["securityContext"] = sc;
    return p;
  };
  struct Case {
    const char* name;
    Json pod;
    Json want;  // spec.securityContext.supplementalGroups after the patch; null = none
  };
  const Case cases[] = {
      {"no securityContext", with_sc(kGpu, nullptr), {4242}},
      {"securityContext without groups", with_sc(kGpu, {{"runAsUser", 1000}}), {4242}},
      {"other groups kept", with_sc(kGpu, {{"supplementalGroups", {7}}}), {7, 4242}},
      {"already there", with_sc(kGpu, {{"supplementalGroups", {4242}}}), {4242}},
      {"pod without devices is not ours", with_sc(nullptr, nullptr), nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = wh.Review(Req("CREATE", c.pod));
    ASSERT_TRUE(r.allowed) << r.message;
    const Json patched = r.patch ? c.pod.patch(*r.patch) : c.pod;
    const Json ptr =
        patched.value(Json::json_pointer("/spec/securityContext/supplementalGroups"), Json());
    EXPECT_EQ(ptr, c.want) << patched["spec"].dump();
  }
}

TEST(WebhookTrust, ParsesUserInfoAndOldObject) {
  const std::string body = Json{
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", "u"},
        {"operation", "UPDATE"},
        {"subResource", "ephemeralcontainers"},
        {"userInfo", {{"username", "bob"}, {"groups", {"system:authenticated"}}}},
        {"object", Pod(kGpu)},
        {"oldObject",
         Pod(nullptr)}}}}.dump();
  auto r = ParseAdmissionReview(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->username, "bob");
  EXPECT_EQ(r->sub_resource, "ephemeralcontainers");
  EXPECT_EQ(r->old_object, Pod(nullptr));
  for (const char* bad :
       {R"("userInfo":"bob")", R"("userInfo":{"username":7})", R"("oldObject":[])"}) {
    SCOPED_TRACE(bad);
    auto e = ParseAdmissionReview(StrCat(
        R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)",
        bad, "}}"));
    EXPECT_FALSE(e.ok());
  }
}

TEST(ServiceAccountUsername, Forms) {
  struct Case {
    const char* in;
    const char* want;  // "" = error
  };
  const Case cases[] = {
      {"hami-system:hami-scheduler", "system:serviceaccount:hami-system:hami-scheduler"},
      {"system:serviceaccount:kube-system:hami", "system:serviceaccount:kube-system:hami"},
      {"hami-scheduler", ""},
      {":hami", ""},
      {"ns:", ""},
      {"a:b:c", ""},
      {"", ""},
  };
  for (const Case& c : cases) {
    auto r = ServiceAccountUsername(c.in);
    if (*c.want) {
      ASSERT_TRUE(r.ok()) << c.in << ": " << r.status();
      EXPECT_EQ(*r, c.want);
    } else {
      EXPECT_FALSE(r.ok()) << c.in;
    }
  }
}

}  // namespace
}  // namespace hami::webhook
