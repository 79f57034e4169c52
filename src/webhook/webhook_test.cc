// AdmissionReview v1 conformance (docs/upstream-contract.md#admission-webhooks) and upstream's
// defaulting/denials (docs/upstream-contract.md#life-of-a-gpu-pod, #resource-model).
#include "webhook/webhook.h"

#include <gtest/gtest.h>

#include <functional>

namespace hami::webhook {
namespace {

std::string Review(const Json& pod, const std::string& op = "CREATE",
                   const std::string& ns = "ml") {
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
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}, {"namespace", "ml"}}},
              {"spec", spec}};
}

Json Ctr(const std::string& name, const Json& limits, const Json& extra = Json::object()) {
  Json c{{"name", name}, {"image", "cuda"}};
  if (!limits.is_null()) c["resources"] = Json{{"limits", limits}};
  for (const auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

Json WithAnnotation(Json pod, const std::string& key, const std::string& value) {
  pod["metadata"]["annotations"][key] = value;
  return pod;
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
  opts.quota_check = [](const std::string& ns, const std::map<std::string, int64_t>& d) -> Status {
    const int64_t mem = d.count("nvidia.com/gpumem") ? d.at("nvidia.com/gpumem") : 0;
    if (ns == "ml" && mem > 20000)
      return ResourceExhausted(
          "exceeding resource quota ml/q: limits.nvidia.com/gpumem is 20000 MiB");
    return OkStatus();
  };
  opts.gpu_core_policy = "force";
  Webhook wh(opts);
  const std::vector<Case> cases = {
      {"bare gpu gets exclusive cores and our scheduler",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})})),
       "CREATE",
       true,
       true,
       "",
       {{"/spec/schedulerName", "hami-scheduler"},
        {"/spec/containers/0/resources/limits/nvidia.com~1gpucores", "100"},
        {"/spec/containers/0/env/0/name", "GPU_CORE_UTILIZATION_POLICY"}}},
      {"gpumem only gets a gpu count",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpumem", "3000"}},
                            {{"env", Json::array({{{"name", "A"}, {"value", "1"}}})}})})),
       "CREATE",
       true,
       true,
       "",
       {{"/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"},
        {"/spec/containers/0/env/0/name", "A"},
        {"/spec/containers/0/env/1/value", "force"}}},
      {"priority injected, init container defaulted",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"},
                                  {"nvidia.com/gpumem", "1000"},
                                  {"nvidia.com/priority", "1"}})}),
           {{"initContainers", Json::array({Ctr("i", {{"nvidia.com/gpucores", "20"}})})},
            {"schedulerName", "default-scheduler"}}),
       "CREATE",
       true,
       true,
       "",
       {{"/spec/schedulerName", "hami-scheduler"},
        {"/spec/initContainers/0/resources/limits/nvidia.com~1gpu", "1"},
        {"/spec/containers/0/env/0/value", "1"}}},
      {"no devices: untouched",
       Pod(Json::array({Ctr("c", {{"cpu", "1"}})})),
       "CREATE",
       true,
       false,
       "",
       {}},
      {"update: untouched",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})})),
       "UPDATE",
       true,
       false,
       "",
       {}},
      {"other scheduler: skipped",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})}), {{"schedulerName", "volcano"}}),
       "CREATE",
       true,
       false,
       "",
       {}},
      {"privileged container requesting gpus: denied",
       Pod(Json::array(
           {Ctr("c", {{"nvidia.com/gpu", "1"}}, {{"securityContext", {{"privileged", true}}}})})),
       "CREATE",
       false,
       false,
       "privileged",
       {}},
      {"privileged sidecar of a gpu container: denied (it sees the node's GPUs too)",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}}),
                        Ctr("s", nullptr, {{"securityContext", {{"privileged", true}}}})})),
       "CREATE",
       false,
       false,
       "container \"s\" is privileged",
       {}},
      {"unprivileged sidecar of a gpu container: fine",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}}),
                        Ctr("s", nullptr, {{"securityContext", {{"privileged", false}}}})})),
       "CREATE",
       true,
       true,
       "",
       {}},
      {"nodeName preset: denied",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})}), {{"nodeName", "n1"}}),
       "CREATE",
       false,
       false,
       "spec.nodeName",
       {}},
      {"quota exceeded: denied",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "12000"}})})),
       "CREATE",
       false,
       false,
       "exceeding resource quota",
       {}},
      {"MIG profile preference in the allowlist: admitted",
       WithAnnotation(Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})})),
                      "nvidia.com/mig-profile-preference", "3g.20gb"),
       "CREATE",
       true,
       true,
       "",
       {{"/spec/schedulerName", "hami-scheduler"}}},
      {"MIG profile preference outside the allowlist: denied, naming the entry",
       WithAnnotation(Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})})),
                      "nvidia.com/mig-profile-preference", "3g, 5g.30gb"),
       "CREATE",
       false,
       false,
       "nvidia.com/mig-profile-preference: entry \"5g.30gb\" matches no profile",
       {}},
      {"invalid request: denied with the field",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4.5"}})})),
       "CREATE",
       false,
       false,
       "gpumem",
       {}},
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
    if (!c.allowed) {
      EXPECT_EQ(reply["response"]["status"]["code"], 403);
    }
    EXPECT_EQ(r->patch.has_value(), c.patched);
    if (r->patch) {
      EXPECT_EQ(reply["response"]["patchType"], "JSONPatch");
      Json patched = c.pod.patch(*r->patch);  // RFC 6902 application must succeed
      for (const auto& [ptr, v] : c.want) EXPECT_EQ(patched.at(Json::json_pointer(ptr)), v) << ptr;
    }
  }
}

// Upstream's own webhook cases, one row each, named after the upstream test
// (pkg/scheduler/webhook_test.go, and pkg/device/nvidia's MutateAdmission rules:
// validateMemoryPercentage, overwriteEnv).
struct UpstreamCase {
  const char* name;
  Json pod;
  bool allowed;
  const char* message_part = "";
  std::vector<std::pair<std::string, Json>> want =
      {};  // JSON pointer -> value after the patch; null = absent
  std::function<void(WebhookOptions&)> tweak = nullptr;
  const char* warning_part = nullptr;  // a warning that must be returned (none when null)
};

TEST(Webhook, UpstreamCases) {
  // TestFitResourceQuota's namespace: gpumem used 1000 of 2000 MiB, gpucores used 200 of 400.
  const auto quota = [](const std::string& ns, const std::map<std::string, int64_t>& d) -> Status {
    const int64_t mem = d.count("nvidia.com/gpumem") ? d.at("nvidia.com/gpumem") : 0;
    const int64_t cores = d.count("nvidia.com/gpucores") ? d.at("nvidia.com/gpucores") : 0;
    if (ns == "ml" && (1000 + mem > 2000 || 200 + cores > 400))
      return ResourceExhausted("exceeding resource quota");
    return OkStatus();
  };
  const Json gpu1 = {{"nvidia.com/gpu", "1"}};
  const Json priv = {{"securityContext", {{"privileged", true}}}};
  const Json visible_all = {
      {"env", Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}})}};
  const auto overwrite = [](WebhookOptions& o) { o.overwrite_env = true; };
  const auto annotated = [](Json pod, const char* key, const char* value) {
    pod["metadata"]["annotations"] = {{key, value}};
    return pod;
  };
  const auto both = [](Json pod, const char* pod_value, const char* containers) {
    pod["metadata"]["annotations"] = {{"hami.io/overwrite-env", pod_value},
                                      {"hami.io/overwrite-env-containers", containers}};
    return pod;
  };
  const std::vector<UpstreamCase> cases = {
      {"TestHandle", Pod(Json::array({Ctr("container1", gpu1)})), true},
      {"TestPodHasNodeName",
       Pod(Json::array({Ctr("container1", gpu1)}), {{"nodeName", "test-node"}}), false, "nodeName"},
      {"TestPodHasDifferentScheduler",
       Pod(Json::array({Ctr("container1", gpu1)}), {{"schedulerName", "different-scheduler"}}),
       true,
       "",
       {{"/spec/schedulerName", "different-scheduler"}}},
      {"TestFitResourceQuota/quota passed",
       Pod(Json::array(
           {Ctr("container1", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "100"}})})),
       true},
      {"TestFitResourceQuota/quota exceeded",
       Pod(Json::array(
           {Ctr("container1", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}})})),
       false, "exceeding resource quota"},
      {"TestFitResourceQuota/request multiple gpus",
       Pod(Json::array(
           {Ctr("container1", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "1024"}})})),
       false, "exceeding resource quota"},
      {"TestFitResourceQuota/request multiple gpus within quota",
       Pod(Json::array(
           {Ctr("container1", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "400"}})})),
       true},
      {"TestFitResourceQuota/request ascend (not an NVIDIA resource)",
       Pod(Json::array({Ctr("container1", {{"huawei.com/Ascend910B", "1"},
                                           {"huawei.com/Ascend910B-memory", "1024"}})})),
       true},
      // The quota counts the pod as admitted: a bare card books the 100 cores the webhook adds.
      {"TestFitResourceQuota/exclusive cards count their added cores",
       Pod(Json::array({Ctr("container1", {{"nvidia.com/gpu", "3"}})})), false,
       "exceeding resource quota"},
      {"TestNonGPUPodAllowedAdmission",
       Pod(Json::array({Ctr("cpu-only", {{"cpu", "1"}, {"memory", "256Mi"}})})),
       true,
       "",
       {},
       [](WebhookOptions& o) { o.force_overwrite_default_scheduler = false; }},
      {"TestEmptyContainersDenied", Pod(Json::array()), false, "no containers"},
      {"TestEmptyContainersDenied/no containers key",
       Json{{"metadata", {{"name", "p"}}}, {"spec", Json::object()}}, false, "no containers"},
      {"TestEmptyContainersDenied/other scheduler",
       Pod(Json::array(), {{"schedulerName", "volcano"}}), false, "no containers"},
      {"TestSchedulerNameEmptyNoOverwrite",
       Pod(Json::array({Ctr("container1", gpu1)})),
       true,
       "",
       {{"/spec/schedulerName", "hami-scheduler"}},
       [](WebhookOptions& o) { o.force_overwrite_default_scheduler = false; }},
      {"TestPrivilegedContainerDenied/privileged container only without gpu",
       Pod(Json::array({Ctr("privileged", nullptr, priv)})), true},
      {"TestPrivilegedContainerDenied/privileged sidecar with gpu workload",
       Pod(Json::array({Ctr("privileged-sidecar", nullptr, priv), Ctr("gpu-workload", gpu1)})),
       false, "is privileged"},
      {"TestPrivilegedContainerDenied/privileged init container with gpu workload",
       Pod(Json::array({Ctr("gpu-workload", gpu1)}),
           {{"initContainers", Json::array({Ctr("privileged-init", nullptr, priv)})}}),
       false, "is privileged"},
      {"TestPrivilegedContainerDenied/privileged pod with different scheduler",
       Pod(Json::array({Ctr("privileged", nullptr, priv)}), {{"schedulerName", "other-scheduler"}}),
       true},
      {"TestMutateAdmissionMultiContainerAndInitContainers",
       Pod(Json::array({Ctr("app-main", gpu1), Ctr("sidecar-logging", Json::object())}),
           {{"initContainers", Json::array({Ctr("init-downloader", gpu1)})}}),
       true,
       "",
       {{"/spec/initContainers/0/resources/limits/nvidia.com~1gpucores", "100"},
        {"/spec/containers/0/resources/limits/nvidia.com~1gpucores", "100"},
        {"/spec/containers/1/resources/limits/nvidia.com~1gpucores", nullptr}}},
      // pkg/device/nvidia Test_MutateAdmission: a count, or gpumem/%/cores that get defaultGPUNum
      // (1).
      {"Test_MutateAdmission/having ResourceName set to resource limits",
       Pod(Json::array({Ctr("test", gpu1)})),
       true,
       "",
       {{"/spec/schedulerName", "hami-scheduler"}}},
      {"Test_MutateAdmission/ResourceCores only",
       Pod(Json::array({Ctr("test", {{"nvidia.com/gpucores", "1"}})})),
       true,
       "",
       {{"/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"},
        {"/spec/schedulerName", "hami-scheduler"}}},
      {"Test_MutateAdmission/ResourceMem only",
       Pod(Json::array({Ctr("test", {{"nvidia.com/gpumem", "1"}})})),
       true,
       "",
       {{"/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"}}},
      {"Test_MutateAdmission/ResourceMemPercentage only",
       Pod(Json::array({Ctr("test", {{"nvidia.com/gpumem-percentage", "1"}})})),
       true,
       "",
       {{"/spec/containers/0/resources/limits/nvidia.com~1gpu", "1"}}},
      {"Test_MutateAdmission/no GPU resources",
       Pod(Json::array({Ctr("test", Json::object())})),
       true,
       "",
       {{"/spec/schedulerName", nullptr},
        {"/spec/containers/0/resources/limits/nvidia.com~1gpu", nullptr}}},
      // pkg/device/nvidia validateMemoryPercentage: outside 0..100 is an error, so the pod is
      // denied.
      {"validateMemoryPercentage/150",
       Pod(Json::array(
           {Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}})})),
       false, "/spec/containers/0 \"c\": nvidia.com/gpumem-percentage: 150 is outside 0..100"},
      {"validateMemoryPercentage/-1",
       Pod(Json::array(
           {Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "-1"}})})),
       false, "-1 is outside 0..100"},
      {"validateMemoryPercentage/past int32",
       Pod(Json::array(
           {Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "3000000000"}})})),
       false, "3000000000 is outside 0..100"},
      // Upstream PR #2784 (v2.11 line): gpucores above 100 is rejected, no longer clamped.
      {"reject GPU core percentage requests out of range/150",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "150"}})})),
       false, "/spec/containers/0 \"c\": nvidia.com/gpucores: 150 is outside 0..100"},
      {"reject GPU core percentage requests out of range/101 without a count",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpucores", "101"}})})), false,
       "nvidia.com/gpucores: 101 is outside 0..100"},
      {"validateMemoryPercentage/init container",
       Pod(Json::array({Ctr("c", gpu1)}),
           {{"initContainers",
             Json::array({Ctr("i", {{"nvidia.com/gpumem-percentage", "101"}})})}}),
       false, "/spec/initContainers/0 \"i\""},
      {"validateMemoryPercentage/a container that gets no device",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpumem-percentage", "150"}})})),
       false,
       "150 is outside 0..100",
       {},
       [](WebhookOptions& o) {
         static const vendors::VendorSet* const kSet =
             vendors::VendorSet::Load("nvidia:\n  defaultGPUNum: 0\n")->release();
         o.vendors = kSet;
       }},
      {"validateMemoryPercentage/100",
       Pod(Json::array({Ctr("c", {{"nvidia.com/gpumem-percentage", "100"}})})),
       true,
       "",
       {{"/spec/containers/0/resources/limits/nvidia.com~1gpucores", "100"}}},
      {"validateMemoryPercentage/0",
       Pod(Json::array(
           {Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "0"}})})),
       true},
      // pkg/device/nvidia overwriteEnv: every container that names no NVIDIA resource, GPU pod or
      // not.
      {"overwriteEnv/cpu-only pod",
       Pod(Json::array({Ctr("a", nullptr), Ctr("b", {{"cpu", "1"}})})),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"},
        {"/spec/containers/1/env/0/name", "NVIDIA_VISIBLE_DEVICES"},
        {"/spec/schedulerName", nullptr}},
       overwrite},
      {"overwriteEnv/gpu pod: only the container without a gpu",
       Pod(Json::array({Ctr("gpu", gpu1), Ctr("side", nullptr)}),
           {{"initContainers", Json::array({Ctr("i", nullptr)})}}),
       true,
       "",
       {{"/spec/containers/0/env", nullptr},
        {"/spec/containers/1/env/0/value", "none"},
        {"/spec/initContainers/0/env/0/value", "none"}},
       overwrite},
      {"overwriteEnv/nvidia.com/gpu: 0 names the resource",
       Pod(Json::array({Ctr("z", {{"nvidia.com/gpu", "0"}})})),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}},
       overwrite},
      {"overwriteEnv/the pod's own value is overwritten",
       Pod(Json::array({Ctr("a", nullptr, visible_all)})),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}, {"/spec/containers/0/env/1", nullptr}},
       overwrite},
      {"overwriteEnv/other scheduler untouched",
       Pod(Json::array({Ctr("a", nullptr)}), {{"schedulerName", "volcano"}}),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}},
       overwrite},
      {"overwriteEnv/off by default",
       Pod(Json::array({Ctr("a", nullptr)})),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}}},
      // pkg/util/overwrite_env_test.go: hami.io/overwrite-env (pod) and
      // hami.io/overwrite-env-containers (container name -> boolean) with overwriteEnv off. Ours
      // differs where overwriteEnv is on: an annotation cannot turn it off (last rows).
      {"Test_OverwriteEnvDecision_PodLevel/true",
       annotated(Pod(Json::array({Ctr("main", nullptr)})), "hami.io/overwrite-env", "true"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}}},
      {"Test_OverwriteEnvDecision_PodLevel/t",
       annotated(Pod(Json::array({Ctr("main", nullptr)})), "hami.io/overwrite-env", "t"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}}},
      {"Test_OverwriteEnvDecision_PodLevel/0",
       annotated(Pod(Json::array({Ctr("main", nullptr)})), "hami.io/overwrite-env", "0"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}}},
      {"Test_OverwriteEnvDecision_PodLevel/invalid-yes",
       annotated(Pod(Json::array({Ctr("main", nullptr)})), "hami.io/overwrite-env", "yes"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}},
       nullptr,
       "hami.io/overwrite-env: \"yes\" is not true or false; ignored"},
      {"Test_OverwriteEnvDecision_ContainerOverridesPod/reverse-pod-false-ctr-true",
       both(Pod(Json::array({Ctr("main", nullptr)})), "false", R"({"main":"true"})"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}}},
      {"Test_OverwriteEnvDecision_ContainerOverridesPod/reverse-pod-true-ctr-false",
       both(Pod(Json::array({Ctr("main", nullptr)})), "true", R"({"main":"false"})"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}}},
      {"Test_OverwriteEnvDecision_ContainerOnly",
       annotated(Pod(Json::array({Ctr("main", nullptr)})), "hami.io/overwrite-env-containers",
                 R"({"main":"true"})"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}}},
      {"Test_OverwriteEnvDecision_InvalidContainerValueFallsBackToPod",
       both(Pod(Json::array({Ctr("main", nullptr)})), "false", R"({"main":"yes"})"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}},
       nullptr,
       "the value for container \"main\" is not true or false"},
      {"Test_OverwriteEnvDecision_MalformedJSONFallsBackToPod",
       both(Pod(Json::array({Ctr("main", nullptr)})), "true", "not-json"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}},
       nullptr,
       "hami.io/overwrite-env-containers: expected a JSON object"},
      {"Test_OverwriteEnvDecision_UnlistedContainerFallsBackToPod",
       both(Pod(Json::array({Ctr("main", nullptr)})), "false", R"({"other":"true"})"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}}},
      {"Test_OverwriteEnvDecision_MultiContainerJSON",
       annotated(Pod(Json::array({Ctr("main", nullptr), Ctr("sidecar", nullptr)})),
                 "hami.io/overwrite-env-containers", R"({"main":"true","sidecar":"false"})"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}, {"/spec/containers/1/env", nullptr}}},
      {"Test_OverwriteEnvDecision_NoWildcard",
       annotated(Pod(Json::array({Ctr("main", nullptr)})), "hami.io/overwrite-env-containers",
                 R"({"*":"true"})"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}}},
      {"overwrite-env annotations turn on only where a GPU container is not",
       annotated(Pod(Json::array({Ctr("gpu", gpu1), Ctr("side", nullptr)})),
                 "hami.io/overwrite-env", "true"),
       true,
       "",
       {{"/spec/containers/0/env", nullptr}, {"/spec/containers/1/env/0/value", "none"}}},
      {"ours: with overwriteEnv on, the pod cannot turn it off",
       both(Pod(Json::array({Ctr("main", nullptr)})), "false", R"({"main":"false"})"),
       true,
       "",
       {{"/spec/containers/0/env/0/value", "none"}},
       overwrite,
       "a pod cannot turn it off"},
      // Annotations upstream reads leniently: admitted, with a warning where they will be ignored.
      {"assertNuma/non-boolean numa-bind is admitted, not enforced",
       annotated(Pod(Json::array({Ctr("c", gpu1)})), "nvidia.com/numa-bind", "yes"),
       true,
       "",
       {},
       nullptr,
       "NUMA binding is off"},
      {"TestIsValidGPUSchedulerPolicy/binpack,spread is a chain",
       annotated(Pod(Json::array({Ctr("c", gpu1)})), "hami.io/gpu-scheduler-policy",
                 "binpack,spread"),
       true},
      {"TestGetGPUSchedulerPolicyByPodUnrecognizedValue",
       annotated(Pod(Json::array({Ctr("c", gpu1)})), "hami.io/gpu-scheduler-policy", "binpakc"),
       true,
       "",
       {},
       nullptr,
       "configured GPU policy applies"},
      // pkg/util TestGetDeviceScoringWeightsByPod "invalid annotation": the webhook denies it
      // (upstream's v2.11 line validates the annotation at admission).
      {"TestGetDeviceScoringWeightsByPod/invalid annotation",
       annotated(Pod(Json::array({Ctr("c", gpu1)})), "hami.io/device-scoring-weights",
                 "slot=1,core=-1,memory=3"),
       false, "core must be >= 0"},
      {"TestGetDeviceScoringWeightsByPod/valid annotation",
       annotated(Pod(Json::array({Ctr("c", gpu1)})), "hami.io/device-scoring-weights",
                 "slot=1,core=2,memory=3"),
       true},
      {"TestIsValidNodeSchedulerPolicy/binpack,spread is ignored",
       annotated(Pod(Json::array({Ctr("c", gpu1)})), "hami.io/node-scheduler-policy",
                 "binpack,spread"),
       true,
       "",
       {},
       nullptr,
       "configured node policy applies"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    WebhookOptions opts;
    opts.quota_check = quota;
    if (c.tweak) c.tweak(opts);
    Webhook wh(opts);
    auto r = ParseAdmissionResponse(wh.Handle(Review(c.pod)));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->allowed, c.allowed) << r->message;
    EXPECT_NE(r->message.find(c.message_part), std::string::npos) << r->message;
    if (!c.allowed) {
      EXPECT_FALSE(r->patch.has_value());
    }
    const Json patched = r->patch ? c.pod.patch(*r->patch) : c.pod;
    for (const auto& [ptr, v] : c.want) {
      const Json::json_pointer at(ptr);
      if (v.is_null()) {
        EXPECT_FALSE(patched.contains(at)) << ptr << " = " << patched.value(at, Json()).dump();
      } else {
        ASSERT_TRUE(patched.contains(at)) << ptr;
        EXPECT_EQ(patched.at(at), v) << ptr;
      }
    }
    std::string warnings;
    for (const auto& w : r->warnings) warnings += w + "\n";
    if (c.warning_part != nullptr) {
      EXPECT_NE(warnings.find(c.warning_part), std::string::npos) << warnings;
    } else {
      EXPECT_TRUE(warnings.empty()) << warnings;
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
      {R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}})",
       "want admission.k8s.io/v1"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"Other"})", "kind"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "request is missing"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}})",
       "uid is empty"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":[]}})",
       "request.object"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":"yes"}})",
       "dryRun"},
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
  r.patch =
      Json::array({{{"op", "add"}, {"path", "/spec/schedulerName"}, {"value", "hami-scheduler"}}});
  const Json j = ToJson(r);
  EXPECT_EQ(j["response"]["patch"],
            "W3sib3AiOiJhZGQiLCJwYXRoIjoiL3NwZWMvc2NoZWR1bGVyTmFtZSIsInZhbHVlIjoiaGFtaS1zY2hlZHVsZX"
            "IifV0=");
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
  const std::string body =
      "{\"apiVersion\":\"admission.k8s.io/"
      "v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
      "\"object\":{\"metadata\":{\"annotations\":" +
      deep + "}}}}";
  auto parsed = ParseAdmissionReview(body);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(
      std::string(parsed.status().message()).find("AdmissionReview: JSON nested deeper than 1000"),
      std::string::npos);
  Webhook wh({});
  auto resp = ParseAdmissionResponse(wh.Handle(body));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_FALSE(resp->allowed);
  EXPECT_EQ(resp->code, 400);
  EXPECT_NE(resp->message.find("nested deeper"), std::string::npos) << resp->message;
}

// hami.io/numa-alignment (upstream webhook.go: invalid values are denied at admission, so a typo
// reaches the user instead of a device-plugin log).
TEST(Webhook, NumaAlignmentAnnotation) {
  Webhook wh({});
  const Json gpu = Pod(Json::array({Ctr("c", {{"nvidia.com/gpu", "1"}})}));
  const struct {
    const char* value;
    bool allowed;
  } cases[] = {
      {"best-effort", true}, {" Strict ", true}, {"", false}, {"required", false}, {"true", false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.value);
    auto resp = ParseAdmissionResponse(
        wh.Handle(Review(WithAnnotation(gpu, "hami.io/numa-alignment", c.value))));
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->allowed, c.allowed) << resp->message;
    if (!c.allowed) {
      EXPECT_NE(resp->message.find("hami.io/numa-alignment"), std::string::npos) << resp->message;
      EXPECT_NE(resp->message.find("best-effort"), std::string::npos) << resp->message;
    }
  }
}

}  // namespace
}  // namespace hami::webhook
