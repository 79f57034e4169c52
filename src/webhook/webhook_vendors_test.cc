// Webhook defaulting per vendor: per vendor a pod in, the exact JSONPatch (or denial) out.
#include <gtest/gtest.h>

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

TEST(WebhookVendors, DefaultingPerVendor) {
  auto set = vendors::VendorSet::Load(kConfig);
  ASSERT_TRUE(set.ok()) << set.status();
  WebhookOptions opts;
  opts.vendors = set->get();
  Webhook wh(opts);
  struct Case {
    const char* name;
    Json pod;
    Json patch;               // null: no patch
    const char* denial = "";  // substring of the denial; "" = allowed
  };
  const Case cases[] = {
      {"nvidia: bare count is a whole card", Pod({{"nvidia.com/gpu", "1"}}),
       Json::array({Add(kLimits + "nvidia.com~1gpucores", "100"), kScheduler})},
      {"hygon: memory alone gets a count", Pod({{"hygon.com/dcumem", "2000"}}),
       Json::array({Add(kLimits + "hygon.com~1dcunum", "1"), kScheduler})},
      {"hygon: bare count is a whole DCU", Pod({{"hygon.com/dcunum", "1"}}),
       Json::array({Add(kLimits + "hygon.com~1dcucores", "100"), kScheduler})},
      // upstream's Cambricon admission adds nothing (the scheduler books 100 cores by default)
      {"cambricon: bare count needs nothing but the scheduler", Pod({{"cambricon.com/vmlu", "1"}}),
       Json::array({kScheduler})},
      {"mthreads: a whole device is 16 core units and 96 memory units",
       Pod({{"mthreads.com/vgpu", "1"}}),
       Json::array({Add(kLimits + "mthreads.com~1sgpu-core", "16"),
                    Add(kLimits + "mthreads.com~1sgpu-memory", "96"), kScheduler})},
      {"ascend: memory alone gets a count, no cores (template decides)",
       Pod({{"huawei.com/Ascend910B3-memory", "10000"}}),
       Json::array({Add(kLimits + "huawei.com~1Ascend910B3", "1"), kScheduler})},
      {"ascend: explicit count and memory need nothing but the scheduler",
       Pod({{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "10000"}}),
       Json::array({kScheduler})},
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
  for (const Case& c : cases) {
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

TEST(WebhookVendors, WithoutVendorsOtherResourcesAreIgnored) {
  Webhook wh(WebhookOptions{});
  const AdmissionResponse r = wh.Review(Req(Pod({{"hygon.com/dcunum", "1"}})));
  EXPECT_TRUE(r.allowed);
  EXPECT_FALSE(r.patch.has_value()) << "NVIDIA-only configuration: a DCU pod is not ours";
}

}  // namespace
}  // namespace hami::webhook
