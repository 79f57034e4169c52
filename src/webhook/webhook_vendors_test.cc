// Webhook defaulting per vendor: per vendor a pod in, the exact JSONPatch (or denial) out.
#include <gtest/gtest.h>

#include <memory>
#include <span>

#include "vendors/testing/mixed_config.h"
#include "webhook/webhook.h"

namespace hami::webhook {
namespace {

const std::string kConfig =
    std::string(vendors::testing::kMixedConfig) +
    "mthreads: {}\nkunlun: {}\nawsneuron: {}\nvastai: {}\nbiren: {}\nintel: {}\n"
    "enflamevgcu: {}\n";

Json Pod(const Json& limits, const Json& annotations = Json::object()) {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"annotations", annotations}}},
      {"spec",
       {{"containers", Json::array({Json{{"name", "c"}, {"resources", {{"limits", limits}}}}})}}}};
}

AdmissionRequest Req(const Json& pod) {
  AdmissionRequest r;
  r.uid = "u";
  r.namespace_ = "ml";
  r.operation = "CREATE";
  r.kind = "Pod";
  r.object = pod;
  return r;
}

Json Add(const std::string& path, const Json& value) {
  return Json{{"op", "add"}, {"path", path}, {"value", value}};
}
const Json kScheduler = Add("/spec/schedulerName", "hami-scheduler");
const std::string kLimits = "/spec/containers/0/resources/limits/";

// One row of a per-vendor admission table: a pod in, the exact JSONPatch (or a denial) out.
struct PatchCase {
  const char* name;
  Json pod;
  Json patch;               // null: no patch
  const char* denial = "";  // substring of the denial; "" = allowed
};

void ExpectPatches(const Webhook& wh, std::span<const PatchCase> cases) {
  for (const PatchCase& c : cases) {
    SCOPED_TRACE(c.name);
    const AdmissionResponse r = wh.Review(Req(c.pod));
    if (*c.denial) {
      EXPECT_FALSE(r.allowed);
      EXPECT_NE(r.message.find(c.denial), std::string::npos) << r.message;
      continue;
    }
    EXPECT_TRUE(r.allowed) << r.message;
    if (c.patch.is_null()) {
      EXPECT_FALSE(r.patch.has_value()) << r.patch->dump();
      continue;
    }
    ASSERT_TRUE(r.patch.has_value());
    EXPECT_EQ(*r.patch, c.patch) << r.patch->dump();
  }
}

// A webhook over the vendors a device-config.yaml text enables (the test fails on a bad text).
struct ConfiguredWebhook {
  explicit ConfiguredWebhook(const std::string& yaml) {
    auto loaded = vendors::VendorSet::Load(yaml);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) set = std::move(*loaded);
    WebhookOptions opts;
    opts.vendors = set.get();
    wh = std::make_unique<Webhook>(opts);
  }
  std::unique_ptr<vendors::VendorSet> set;
  std::unique_ptr<Webhook> wh;
};

TEST(WebhookVendors, DefaultingPerVendor) {
  ConfiguredWebhook w(kConfig);
  ASSERT_NE(w.set, nullptr);
  const Webhook& wh = *w.wh;
  const PatchCase cases[] = {
      {"nvidia: bare count is a whole card", Pod({{"nvidia.com/gpu", "1"}}),
       Json::array({Add(kLimits + "nvidia.com~1gpucores", "100"), kScheduler})},
      {"hygon: memory alone gets a count", Pod({{"hygon.com/dcumem", "2000"}}),
       Json::array({Add(kLimits + "hygon.com~1dcunum", "1"), kScheduler})},
      {"hygon: bare count is a whole DCU", Pod({{"hygon.com/dcunum", "1"}}),
       Json::array({Add(kLimits + "hygon.com~1dcucores", "100"), kScheduler})},
      // upstream PR #2784: cores above a whole DCU are refused, no longer clamped
      {"hygon: cores above 100 are refused",
       Pod({{"hygon.com/dcunum", "1"}, {"hygon.com/dcucores", "150"}}), nullptr,
       "hygon.com/dcucores=150: more than a whole DCU (100)"},
      {"hygon: 100 cores is a whole DCU",
       Pod({{"hygon.com/dcunum", "1"}, {"hygon.com/dcucores", "100"}}), Json::array({kScheduler})},
      // upstream's Cambricon admission adds nothing (the scheduler books 100 cores by default)
      {"cambricon: bare count needs nothing but the scheduler", Pod({{"cambricon.com/vmlu", "1"}}),
       Json::array({kScheduler})},
      {"mthreads: a whole device is 16 core units and 96 memory units",
       Pod({{"mthreads.com/vgpu", "1"}}),
       Json::array({Add(kLimits + "mthreads.com~1sgpu-core", "16"),
                    Add(kLimits + "mthreads.com~1sgpu-memory", "96"), kScheduler})},
      // The memory becomes the template that will be allocated (AscendUpstream below).
      {"ascend: memory alone gets a count and its template, no cores",
       Pod({{"huawei.com/Ascend910B3-memory", "10000"}}),
       Json::array({Add(kLimits + "huawei.com~1Ascend910B3", "1"),
                    Add(kLimits + "huawei.com~1Ascend910B3-memory", "16384"), kScheduler})},
      {"ascend: explicit count and memory: the memory becomes its template",
       Pod({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "10000"}}),
       Json::array({Add(kLimits + "huawei.com~1Ascend910B3-memory", "16384"), kScheduler})},
      {"ascend: partial memory on two vNPUs is denied",
       Pod({{"huawei.com/Ascend910B3", "2"}, {"huawei.com/Ascend910B3-memory", "10000"}}), nullptr,
       "cannot split memory across more than 1 device"},
      // as upstream: memory above the largest template takes a whole card (the scheduler checks
      // that the card holds it)
      {"ascend: memory beyond every template is admitted",
       Pod({{"huawei.com/Ascend910B3-memory", "40000"}}),
       Json::array({Add(kLimits + "huawei.com~1Ascend910B3", "1"), kScheduler})},
      {"kunlun: 3 whole XPUs is not an allowed count", Pod({{"kunlunxin.com/xpu", "3"}}), nullptr,
       "allows only 1, 2, 4, 8"},
      {"kunlun: 2 whole XPUs", Pod({{"kunlunxin.com/xpu", "2"}}), Json::array({kScheduler})},
      {"two vendors in one container: both defaulted",
       Pod({{"nvidia.com/gpumem", "3000"}, {"hygon.com/dcumem", "2000"}}),
       Json::array({Add(kLimits + "hygon.com~1dcunum", "1"), Add(kLimits + "nvidia.com~1gpu", "1"),
                    kScheduler})},
      // upstream's AWS Neuron admission: nothing added, bad core counts denied with its words
      {"awsneuron: a device count needs nothing but the scheduler",
       Pod({{"aws.amazon.com/neuron", "2"}}), Json::array({kScheduler})},
      {"awsneuron: 3 cores on 2-core devices is denied", Pod({{"aws.amazon.com/neuroncore", "3"}}),
       nullptr, "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"awsneuron: 0 cores is denied", Pod({{"aws.amazon.com/neuroncore", "0"}}), nullptr,
       "aws.amazon.com/neuroncore must be greater than 0"},
      {"vastai: a count needs nothing but the scheduler", Pod({{"vastaitech.com/va", "1"}}),
       Json::array({kScheduler})},
      {"biren: a count needs nothing but the scheduler", Pod({{"birentech.com/gpu", "1"}}),
       Json::array({kScheduler})},
      {"intel: a share with millicores needs nothing but the scheduler",
       Pod({{"gpu.intel.com/i915", "1"}, {"gpu.intel.com/millicores", "500"}}),
       Json::array({kScheduler})},
      {"intel: more than a GPU of millicores per GPU is denied",
       Pod({{"gpu.intel.com/xe", "1"}, {"gpu.intel.com/millicores", "1500"}}), nullptr,
       "more than 1000 millicores per GPU"},
      {"a disabled vendor's resources are not ours", Pod({{"amd.com/gpu", "1"}}), nullptr},
      // upstream's Test_MutateAdmission (4 shares a GCU): 15 % is one share, 25 %
      {"enflame vgcu: a percentage is rounded up to whole shares",
       Pod({{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "15"}}),
       Json::array({Add(kLimits + "enflame.com~1shared-gcu", "1"),
                    Add(kLimits + "enflame.com~1vgcu-percentage", "25"), kScheduler})},
      {"enflame vgcu: two GCUs are whole", Pod({{"enflame.com/vgcu", "2"}}),
       Json::array({Add(kLimits + "enflame.com~1shared-gcu", "8"),
                    Add(kLimits + "enflame.com~1vgcu-percentage", "100"), kScheduler})},
      {"enflame vgcu: more than 100 percent is denied",
       Pod({{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "150"}}), nullptr,
       "an Enflame vGCU percentage must be 1..100"},
      {"enflame vgcu: a requested value is changed in the requests too",
       [] {
         Json pod = Pod({{"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "60"}});
         pod["spec"]["containers"][0]["resources"]["requests"] = {
             {"enflame.com/vgcu", "1"}, {"enflame.com/vgcu-percentage", "60"}};
         return pod;
       }(),
       Json::array(
           {Add(kLimits + "enflame.com~1shared-gcu", "3"),
            Add(kLimits + "enflame.com~1vgcu-percentage", "75"),
            Json{{"op", "replace"},
                 {"path", "/spec/containers/0/resources/requests/enflame.com~1vgcu-percentage"},
                 {"value", "75"}},
            kScheduler})},
  };
  ExpectPatches(wh, cases);
}

// Upstream's pkg/device/ascend/device_test.go Test_MutateAdmission (its 910A config: templates
// 2184/4369/8738/17476 MiB, memoryAllocatable = memoryCapacity = 32768): the container's memory is
// rewritten to what will be allocated, in limits and in requests. Rows past upstream's four are
// issue 31's: 3000 -> the 4369 template, a count alone -> the whole card's allocatable.
TEST(AscendUpstream, Test_MutateAdmission) {
  ConfiguredWebhook w(
      "vnpus:\n- chipName: 910A\n  commonWord: Ascend910A\n  memoryAllocatable: 32768\n"
      "  memoryCapacity: 32768\n  aiCore: 30\n  templates:\n"
      "  - {name: vir02, memory: 2184, aiCore: 2}\n  - {name: vir04, memory: 4369, aiCore: 4}\n"
      "  - {name: vir08, memory: 8738, aiCore: 8}\n  - {name: vir16, memory: 17476, aiCore: 16}\n");
  ASSERT_NE(w.set, nullptr);
  const Webhook& wh = *w.wh;
  const std::string kMem = kLimits + "huawei.com~1Ascend910A-memory";
  const auto with_requests = [](Json pod, const Json& requests) {
    pod["spec"]["containers"][0]["resources"]["requests"] = requests;
    return pod;
  };
  const PatchCase cases[] = {
      {"no set to resources limits", Pod(Json::object()), nullptr},
      {"resourcename and resourcememoryname set to resources limits",
       Pod({{"huawei.com/Ascend910A", "2"}, {"huawei.com/Ascend910A-memory", "8738"}}), nullptr,
       "cannot split memory across more than 1 device"},
      {"resourcememoryname is invalid",
       Pod({{"huawei.com/Ascend910A", "2"}, {"huawei.com/Ascend910A-memory", "40000"}}), nullptr,
       "more than a whole Ascend910A (32768 MiB)"},
      {"resourcememoryname not within the template scope, but smaller than MemoryCapacity",
       with_requests(
           Pod({{"huawei.com/Ascend910A", "1"}, {"huawei.com/Ascend910A-memory", "20000"}}),
           {{"huawei.com/Ascend910A-memory", "20000"}}),
       Json::array(
           {Add(kMem, "32768"),
            Json{{"op", "replace"},
                 {"path", "/spec/containers/0/resources/requests/huawei.com~1Ascend910A-memory"},
                 {"value", "32768"}},
            kScheduler})},
      {"memory rounded up to its template",
       Pod({{"huawei.com/Ascend910A", "1"}, {"huawei.com/Ascend910A-memory", "3000"}}),
       Json::array({Add(kMem, "4369"), kScheduler})},
      {"memory that is a template stays",
       Pod({{"huawei.com/Ascend910A", "1"}, {"huawei.com/Ascend910A-memory", "8738"}}),
       Json::array({kScheduler})},
      {"a count alone is the whole card's allocatable", Pod({{"huawei.com/Ascend910A", "1"}}),
       Json::array({Add(kMem, "32768"), kScheduler})},
      {"two whole cards", Pod({{"huawei.com/Ascend910A", "2"}}),
       Json::array({Add(kMem, "32768"), kScheduler})},
      {"memory alone gets a count and its template", Pod({{"huawei.com/Ascend910A-memory", "100"}}),
       Json::array({Add(kLimits + "huawei.com~1Ascend910A", "1"), Add(kMem, "2184"), kScheduler})},
      // hami-core soft split takes the memory asked for: nothing is rounded.
      {"hami-core: memory is kept",
       Pod({{"huawei.com/Ascend910A", "1"}, {"huawei.com/Ascend910A-memory", "3000"}},
           {{"huawei.com/vnpu-mode", "hami-core"}}),
       Json::array({kScheduler})},
      // Upstream v2.11 (#2975): a core limit without huawei.com/vnpu-mode asks for hami-core; the
      // webhook writes the mode, and the memory is kept as hami-core keeps it.
      {"a core request implies hami-core",
       Pod({{"huawei.com/Ascend910A", "1"},
            {"huawei.com/Ascend910A-memory", "3000"},
            {"huawei.com/Ascend910A-core", "20"}}),
       Json::array({Add("/metadata/annotations/huawei.com~1vnpu-mode", "hami-core"), kScheduler})},
      {"a core request with hami-core named",
       Pod({{"huawei.com/Ascend910A", "1"},
            {"huawei.com/Ascend910A-memory", "3000"},
            {"huawei.com/Ascend910A-core", "20"}},
           {{"huawei.com/vnpu-mode", "hami-core"}}),
       Json::array({kScheduler})},
      {"a core request in template mode is denied",
       Pod({{"huawei.com/Ascend910A", "1"},
            {"huawei.com/Ascend910A-memory", "3000"},
            {"huawei.com/Ascend910A-core", "20"}},
           {{"huawei.com/vnpu-mode", "template"}}),
       nullptr, "huawei.com/Ascend910A-core: not supported for template vNPU"},
  };
  ExpectPatches(wh, cases);
}

// Upstream's pkg/device/ascend/device_test.go Test_MutateAdmission910C (superPod: true): a module
// (2 NPUs) is the smallest unit, so 1 becomes 2 (limits and requests); another odd count is
// refused. Without superPod (split mode) counts are kept as they are.
TEST(Ascend910CUpstream, Test_MutateAdmission910C) {
  const std::string chip =
      "vnpus:\n- chipName: 910C\n  commonWord: Ascend910C\n  memoryAllocatable: 65536\n"
      "  memoryCapacity: 65536\n  aiCore: 24\n  superPod: ";
  ConfiguredWebhook w(chip + "true\n"), split(chip + "false\n");
  ASSERT_NE(w.set, nullptr);
  ASSERT_NE(split.set, nullptr);
  const Webhook& wh = *w.wh;
  const std::string kCount = kLimits + "huawei.com~1Ascend910C";
  const std::string kMem = kLimits + "huawei.com~1Ascend910C-memory";
  Json one = Pod({{"huawei.com/Ascend910C", "1"}});
  one["spec"]["containers"][0]["resources"]["requests"] = {{"huawei.com/Ascend910C", "1"}};
  const PatchCase cases[] = {
      {"910C: request 1 → auto adjust to 2", one,
       Json::array({Add(kCount, "2"), Add(kMem, "65536"),
                    Json{{"op", "replace"},
                         {"path", "/spec/containers/0/resources/requests/huawei.com~1Ascend910C"},
                         {"value", "2"}},
                    kScheduler})},
      {"910C: request 3 → reject (odd number)", Pod({{"huawei.com/Ascend910C", "3"}}), nullptr,
       "huawei.com/Ascend910C=3: Ascend910C takes whole modules"},
      {"910C: request 2 → two whole NPUs", Pod({{"huawei.com/Ascend910C", "2"}}),
       Json::array({Add(kMem, "65536"), kScheduler})},
  };
  ExpectPatches(wh, cases);
  const PatchCase split_cases[] = {
      {"split: request 1 stays 1", Pod({{"huawei.com/Ascend910C", "1"}}),
       Json::array({Add(kMem, "65536"), kScheduler})},
      {"split: request 3 is admitted", Pod({{"huawei.com/Ascend910C", "3"}}),
       Json::array({Add(kMem, "65536"), kScheduler})},
  };
  ExpectPatches(*split.wh, split_cases);
}

TEST(WebhookVendors, WithoutVendorsOtherResourcesAreIgnored) {
  Webhook wh(WebhookOptions{});
  const AdmissionResponse r = wh.Review(Req(Pod({{"hygon.com/dcunum", "1"}})));
  EXPECT_TRUE(r.allowed);
  EXPECT_FALSE(r.patch.has_value()) << "NVIDIA-only configuration: a DCU pod is not ours";
}

// ---- remote GPU (upstream pkg/scheduler/remotegpu_integration_test.go,
// pkg/device/remotegpu/device_test.go): the patch applied to the pod, as the API server would ----

Json RemoteContainer(const std::string& name, int64_t mem) {
  Json limits = {{"nvidia.com/remote-gpu", "1"}};
  if (mem > 0) limits["nvidia.com/remote-gpu-memory"] = std::to_string(mem);
  return Json{{"name", name}, {"resources", {{"limits", limits}}}};
}

// The pod after the webhook's patch (fails the test on a denial).
Json Admitted(const Webhook& wh, const Json& pod) {
  const AdmissionResponse r = wh.Review(Req(pod));
  EXPECT_TRUE(r.allowed) << r.message;
  return r.patch ? pod.patch(*r.patch) : pod;
}

const Json* EnvOf(const Json& container, const std::string& name) {
  auto env = container.find("env");
  if (env == container.end() || !env->is_array()) return nullptr;
  for (const Json& e : *env)
    if (e.value("name", "") == name) return &e;
  return nullptr;
}

class RemoteGpuWebhook : public testing::Test {
 protected:
  void SetUp() override {
    auto set = vendors::VendorSet::Load("remotegpu:\n  libImage: projecthami/hami:test\n");
    ASSERT_TRUE(set.ok()) << set.status();
    set_ = std::move(*set);
    opts_.vendors = set_.get();
  }
  std::unique_ptr<vendors::VendorSet> set_;
  WebhookOptions opts_;
};

TEST_F(RemoteGpuWebhook, TestRemoteGPUWebhookCopiesLibraryBeforeInitWorkload) {
  Webhook wh(opts_);
  Json pod = Pod(Json::object());
  pod["spec"]["initContainers"] = Json::array({RemoteContainer("warmup", 2000)});
  pod["spec"]["containers"] = Json::array({Json{{"name", "app"}}});
  const Json admitted = Admitted(wh, pod);
  const Json& init = admitted["spec"]["initContainers"];
  ASSERT_EQ(init.size(), 2u) << admitted.dump();
  EXPECT_EQ(init[0]["name"], "hami-remote-gpu-lib") << "library copy must precede warmup";
  EXPECT_EQ(init[1]["name"], "warmup");
  EXPECT_EQ(init[0]["image"], "projecthami/hami:test");
  EXPECT_EQ(init[0]["command"],
            Json::array({"sh", "-c", "cp /usr/local/vgpu/libvgpu.so /hami-remote-gpu/libvgpu.so"}));
  EXPECT_EQ(admitted["spec"]["volumes"],
            Json::parse(R"([{"name":"hami-remote-gpu-lib","emptyDir":{}}])"));
  const Json& warmup = init[1];
  EXPECT_EQ(warmup["volumeMounts"],
            Json::parse(R"([{"name":"hami-remote-gpu-lib","mountPath":"/hami-remote-gpu"}])"));
  ASSERT_NE(EnvOf(warmup, "LUPINE_SERVER"), nullptr);
  EXPECT_EQ((*EnvOf(warmup, "LUPINE_SERVER"))["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['hami.io/lupine-endpoint']");
  EXPECT_EQ((*EnvOf(warmup, "LUPINE_WORKLOAD_ID"))["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.uid");
  EXPECT_EQ((*EnvOf(warmup, "LD_PRELOAD"))["value"], "/hami-remote-gpu/libvgpu.so");
  EXPECT_EQ((*EnvOf(warmup, "CUDA_DEVICE_MEMORY_LIMIT"))["value"], "2000m");
  EXPECT_EQ((*EnvOf(warmup, "CUDA_DEVICE_MEMORY_SHARED_CACHE"))["value"],
            "/hami-remote-gpu/vgpu.cache");
  EXPECT_EQ(admitted["spec"]["containers"][0].count("env"), 0u) << "app asks for nothing";
  // The endpoint is the scheduler's word: one set at creation is removed.
  Json forged = pod;
  forged["metadata"]["annotations"]["hami.io/lupine-endpoint"] = "203.0.113.9:14833";
  EXPECT_FALSE(Admitted(wh, forged)["metadata"]["annotations"].contains("hami.io/lupine-endpoint"));
  // A second admission of the admitted pod changes nothing of it.
  EXPECT_EQ(Admitted(wh, admitted), admitted);
}

TEST_F(RemoteGpuWebhook, TestMutateAdmission_ArmsTheMemoryLimit) {
  Webhook wh(opts_);
  Json pod = Pod(Json::object());
  pod["spec"]["containers"] =
      Json::array({RemoteContainer("app", 2000), RemoteContainer("sidecar", 2000)});
  const Json admitted = Admitted(wh, pod);
  // One copy for the pod, mounted into both.
  ASSERT_EQ(admitted["spec"]["initContainers"].size(), 1u);
  ASSERT_EQ(admitted["spec"]["volumes"].size(), 1u);
  for (const Json& c : admitted["spec"]["containers"]) {
    EXPECT_EQ(c["volumeMounts"].size(), 1u) << c["name"];
    EXPECT_EQ((*EnvOf(c, "CUDA_DEVICE_MEMORY_LIMIT"))["value"], "2000m");
  }
}

TEST_F(RemoteGpuWebhook, TestMutateAdmission_ReplacesLiteralServerEnv) {
  Webhook wh(opts_);
  Json ctr = RemoteContainer("app", 0);
  ctr["env"] = Json::parse(R"([{"name":"LUPINE_SERVER","value":"placeholder:14833"}])");
  Json pod = Pod(Json::object());
  pod["spec"]["containers"] = Json::array({ctr});
  const Json admitted = Admitted(wh, pod);
  const Json& c = admitted["spec"]["containers"][0];
  int servers = 0;
  for (const Json& e : c["env"]) servers += e["name"] == "LUPINE_SERVER";
  EXPECT_EQ(servers, 1) << "must replace, not duplicate";
  EXPECT_FALSE(EnvOf(c, "LUPINE_SERVER")->contains("value"));
  // No memory request: no library, nothing to enforce.
  EXPECT_FALSE(admitted["spec"].contains("initContainers"));
  EXPECT_EQ(EnvOf(c, "LD_PRELOAD"), nullptr);
}

TEST_F(RemoteGpuWebhook, PreloadIsPrependedOrTheSourceIsDenied) {
  Webhook wh(opts_);
  Json literal = RemoteContainer("app", 2000);
  literal["env"] = Json::parse(R"([{"name":"LD_PRELOAD","value":"/opt/mine.so"}])");
  Json pod = Pod(Json::object());
  pod["spec"]["containers"] = Json::array({literal});
  const Json admitted = Admitted(wh, pod);
  EXPECT_EQ((*EnvOf(admitted["spec"]["containers"][0], "LD_PRELOAD"))["value"],
            "/hami-remote-gpu/libvgpu.so /opt/mine.so");

  Json sourced = RemoteContainer("app", 2000);
  sourced["env"] = Json::parse(
      R"([{"name":"LD_PRELOAD","valueFrom":{"configMapKeyRef":{"name":"x","key":"y"}}}])");
  pod["spec"]["containers"] = Json::array({sourced});
  const AdmissionResponse r = wh.Review(Req(pod));
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("LD_PRELOAD comes from a source"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("nvidia.com/remote-gpu-memory"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace hami::webhook
