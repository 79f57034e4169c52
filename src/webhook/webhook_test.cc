// AdmissionReview v1 conformance (k8s-wire.md §2) and upstream's defaulting/denials (hami.md §1.4, §2).
#include "webhook/webhook.h"

#include <gtest/gtest.h>

namespace hami::webhook {
namespace {

std::string Review(const Json& pod, const std::string& op = "CREATE", const std::string& ns = "ml") {
  return Json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                {"namespace", ns},
                {"operation", op},
                {"userInfo", {{"username", "admin"}}},
                {"object", pod}}}}
      .dump();
}

Json Pod(const Json& containers, const Json& extra_spec = Json::object()) {
  Json spec{{"containers", containers}};
  for (const auto& [k, v] : extra_spec.items()) spec[k] = v;
  return Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", "ml"}}}, {"spec", spec}};
}

Json Ctr(const std::string& name, const Json& limits, const Json& extra = Json::object()) {
  Json c{{"name", name}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  for (const auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

struct Case {
  const char* name;
  Json pod;
  std::string op = "CREATE";
  bool allowed = true;
  bool patched = true;
  const char* message_part = "";
  // Checks on the pod after applying the patch.
  std::vector<std::pair<std::string, Json>> want;  // JSON pointer -> value
};

TEST(Webhook, Table) {
  WebhookOptions opts;
  opts.quota_check = [](const std::string& ns, int64_t mem, int64_t cores) -> Status {
    if (ns == "ml" && mem > 20000) return ResourceExhausted("exceeding resource quota ml/q: limits.nvidia.com/gpumem is 20000 MiB");
    return OkStatus();
  };
  opts.gpu_core_policy = "force";
  Webhook wh(opts);
  const std::vector<Case> cases = {
      {"bare gpu gets exclusive cores and our scheduler",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})})), "CREATE", true, true, "",
       {{"/spec/schedulerName", "hami-scheduler"},
        {"/spec/containers/0/resources/limits/nvidia.com~1gpucores", "100"},
        {"/spec/containers/0/env/0/name", "GPU_CORE_UTILIZATION_POLICY"}}},
      {"gpumem only gets a gpu count",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpumem", "3000"}}, {{"env", Json::array({{{"name", "A"}, {"value", "1"}}})}})})),
       "CREATE", true, true, "",
       {{"/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"},
        {"/spec/containers/0/env/0/name", "A"},
        {"/spec/containers/0/env/1/value", "force"}}},
      {"priority injected, init container defaulted",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}, {"nvidia.com/priority", "1"}})}),
           {{"initContainers", Json::array({Ctr("i", {{"nvidia.com/gpucores", "20"}})})}, {"schedulerName", "default-scheduler"}}),
       "CREATE", true, true, "",
       {{"/spec/schedulerName", "hami-scheduler"},
        {"/spec/initContainers/0/resources/limits/nvidia.com~1gpu", "1"},
        {"/spec/containers/0/env/0/value", "1"}}},
      {"no devices: untouched", Pod(Json::array({Ctr("c", {{"cpu", "1"}})})), "CREATE", true, false, "", {}},
      {"update: untouched", Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})})), "UPDATE", true, false, "", {}},
      {"other scheduler: skipped",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})}), {{"schedulerName", "volcano"}}), "CREATE", true, false, "", {}},
      {"privileged container requesting gpus: denied",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}}, {{"securityContext", {{"privileged", true}}}})})), "CREATE",
       false, false, "privileged", {}},
      {"privileged sidecar of a gpu container: denied (it sees the node's GPUs too)",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}}), Ctr("s", nullptr, {{"securityContext", {{"privileged", true}}}})})),
       "CREATE", false, false, "container \"s\" is privileged", {}},
      {"unprivileged sidecar of a gpu container: fine",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}}), Ctr("s", nullptr, {{"securityContext", {{"privileged", false}}}})})),
       "CREATE", true, true, "", {}},
      {"nodeName preset: denied", Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})}), {{"nodeName", "n1"}}), "CREATE",
       false, false, "spec.nodeName", {}},
      {"quota exceeded: denied",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "12000"}})})), "CREATE", false, false,
       "exceeding resource quota", {}},
      {"invalid request: denied with the field",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4.5"}})})), "CREATE", false, false,
       "gpumem", {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string body = wh.Handle(Review(c.pod, c.op));
    const Json reply = Json::parse(body);
    EXPECT_EQ(reply["apiVersion"], "admission.k8s.io/v1");
    EXPECT_EQ(reply["kind"], "AdmissionReview");
    EXPECT_EQ(reply["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    auto r = ParseAdmissionResponse(body);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->allowed, c.allowed) << r->message;
    EXPECT_NE(r->message.find(c.message_part), std::string::npos) << r->message;
    if (!c.allowed) { EXPECT_EQ(reply["response"]["status"]["code"], 403); }
    EXPECT_EQ(r->patch.has_value(), c.patched);
    if (r->patch) {
      EXPECT_EQ(reply["response"]["patchType"], "JSONPatch");
      Json patched = c.pod.patch(*r->patch);  // RFC 6902 application must succeed
      for (const auto& [ptr, v] : c.want) EXPECT_EQ(patched.at(Json::json_pointer(ptr)), v) << ptr;
    }
  }
}

TEST(AdmissionReview, ParseErrors) {
  struct E {
    const char* body;
    const char* part;
  };
  const E cases[] = {
      {"{", "not valid JSON"},
      {R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}})", "want admission.k8s.io/v1"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"Other"})", "kind"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "request is missing"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}})", "uid is empty"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":[]}})", "request.object"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":"yes"}})", "dryRun"},
  };
  Webhook wh(WebhookOptions{});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    auto r = ParseAdmissionReview(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find(c.part), std::string::npos) << r.status();
    auto reply = ParseAdmissionResponse(wh.Handle(c.body));
    ASSERT_TRUE(reply.ok());
    EXPECT_FALSE(reply->allowed);
  }
}

TEST(AdmissionReview, PatchIsBase64OfJsonPatch) {
  AdmissionResponse r;
  r.uid = "u";
  r.patch = Json::array({{{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", "hami-scheduler"}}});
  const Json j = ToJson(r);
  EXPECT_EQ(j["response"]["patch"],
            "W3sib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvc2NoZWR1bGVyTmFtZSIsInZhbHVlIjoiaGFtaS1zY2hlZHVsZXIifV0=");
  EXPECT_EQ(j["response"]["patchType"], "JSONPatch");
  EXPECT_FALSE(j["response"].contains("status"));
}

TEST(EscapePointer, Rfc6901) {
  EXPECT_EQ(EscapePointer("nvidia.com/gpu"), "nvidia.com~1gpu");
  EXPECT_EQ(EscapePointer("a~b/c"), "a~0b~1c");
}

TEST(AdmissionReview, DeepNestingIsDeniedNotCrashed) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(100000, '}');
  const std::string body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
                           "\"object\":{\"metadata\":{\"annotations\":" + deep + "}}}}";
  auto parsed = ParseAdmissionReview(body);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(std::string(parsed.status().message()).find("AdmissionReview: JSON nested deeper than 1000"), std::string::npos);
  Webhook wh({});
  auto resp = ParseAdmissionResponse(wh.Handle(body));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_FALSE(resp->allowed);
  EXPECT_EQ(resp->code, 400);
  EXPECT_NE(resp->message.find("nested deeper"), std::string::npos) << resp->message;
}

}  // namespace
}  // namespace hami::webhook
