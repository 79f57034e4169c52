#include "vendors/nvidia/request.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "vendors/vendor_set.h"

namespace hami::vendors::nvidia {
namespace {

using nlohmann::json;

core::DeviceRequest Req(int nums, int64_t mem, int pct, int cores, int priority = -1) {
  core::DeviceRequest r;
  r.nums = nums;
  r.memreq_mib = mem;
  r.mem_percentage = pct;
  r.coresreq = cores;
  r.priority = priority;
  return r;
}

// One row per defaulting bullet of docs/upstream-contract.md#resource-model (and the edges around
// it).
struct DefaultingCase {
  const char* name;
  const char* resources;  // container.resources JSON
  bool has_request;
  core::DeviceRequest want;
  std::map<std::string, int64_t> added;  // what the webhook adds to the limits
  ResourceConfig config = {};
  const char* admission_error = nullptr;  // the webhook denies the container with this message part
};

ResourceConfig WithDefaults(int64_t mem, int cores, int num, int64_t factor = 1) {
  ResourceConfig c;
  c.default_memory_mib = mem;
  c.default_cores = cores;
  c.default_gpu_num = num;
  c.memory_factor = factor;
  return c;
}

TEST(DefaultingTest, UpstreamRules) {
  const DefaultingCase cases[] = {
      {"bare gpu is an exclusive whole card",
       R"({"limits":{"nvidia.com/gpu":"1"}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      {"gpu count 2 bare",
       R"({"limits":{"nvidia.com/gpu":2}})",
       true,
       Req(2, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      // Upstream's scheduler would book defaultCores (30) for this pod when it skipped the webhook;
      // we book what the webhook's gpucores=100 says (a deliberate difference, docs/migration.md).
      {"bare gpu books 100 cores whatever defaultCores",
       R"({"limits":{"nvidia.com/gpu":1}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}},
       WithDefaults(0, 30, 1)},
      {"gpumem shares a card without compute cap",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":3000}})",
       true,
       Req(1, 3000, 0, 0),
       {}},
      {"gpumem + cores",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":"4000","nvidia.com/gpucores":"30"}})",
       true,
       Req(1, 4000, 0, 30),
       {}},
      {"gpumem without gpu gets defaultGPUNum",
       R"({"limits":{"nvidia.com/gpumem":3000}})",
       true,
       Req(1, 3000, 0, 0),
       {{"nvidia.com/gpu", 1}}},
      {"cores without gpu gets defaultGPUNum",
       R"({"limits":{"nvidia.com/gpucores":20}})",
       true,
       Req(1, 0, 100, 20),
       {{"nvidia.com/gpu", 1}}},
      {"percentage without gpu gets defaultGPUNum",
       R"({"limits":{"nvidia.com/gpumem-percentage":50}})",
       true,
       Req(1, 0, 50, 0),
       {{"nvidia.com/gpu", 1}}},
      {"percentage 100 alone is exclusive",
       R"({"limits":{"nvidia.com/gpumem-percentage":100}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpu", 1}, {"nvidia.com/gpucores", 100}}},
      {"percentage 100 with gpumem: gpumem wins, still exclusive",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":2000,"nvidia.com/gpumem-percentage":100}})",
       true,
       Req(1, 2000, 0, 100),
       {{"nvidia.com/gpucores", 100}}},
      {"percentage used only when gpumem absent",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":2000,"nvidia.com/gpumem-percentage":30}})",
       true,
       Req(1, 2000, 0, 0),
       {}},
      {"gpumem 0 falls back to percentage",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":0,"nvidia.com/gpumem-percentage":30}})",
       true,
       Req(1, 0, 30, 0),
       {}},
      // gpumem-percentage outside 0..100: the webhook denies it; the scheduler (a pod that skipped
      // the webhook) clamps values above 100 and ignores values below 1, as upstream's does.
      {"percentage above 100 is clamped",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":150}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "150 is outside 0..100"},
      {"percentage past int32 is clamped",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":"3000000000"}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "3000000000 is outside 0..100"},
      {"percentage 1e18 is clamped",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":"1e18"}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "1000000000000000000 is outside 0..100"},
      {"percentage -1 is ignored",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":"-1"}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "-1 is outside 0..100"},
      {"percentage -1 is ignored: defaultMemory applies",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":"-1"}})",
       true,
       Req(1, 2048, 0, 0),
       {},
       WithDefaults(2048, 0, 1),
       "-1 is outside 0..100"},
      {"percentage 0 is ignored",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":0}})",
       true,
       Req(1, 0, 100, 0),
       {}},
      // The webhook checks the value in requests too (upstream's validateMemoryPercentage reads
      // both).
      {"percentage: limits win, an out-of-range request is denied at admission",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":50},"requests":{"nvidia.com/gpumem-percentage":150}})",
       true,
       Req(1, 0, 50, 0),
       {},
       {},
       "150 is outside 0..100"},
      {"percentage: a fraction in requests is denied at admission",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":50},"requests":{"nvidia.com/gpumem-percentage":"50.5"}})",
       true,
       Req(1, 0, 50, 0),
       {},
       {},
       "must be a whole number"},
      {"cores above 100 are clamped",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":250}})",
       true,
       Req(1, 0, 100, 100),
       {}},
      {"explicit cores 0 is kept (no SM limit)",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":0}})",
       true,
       Req(1, 0, 100, 0),
       {}},
      {"defaultMemory used when no gpumem and no percentage",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":10}})",
       true,
       Req(1, 2048, 0, 10),
       {},
       WithDefaults(2048, 0, 1)},
      {"defaultCores used when cores absent and not exclusive",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":1000}})",
       true,
       Req(1, 1000, 0, 25),
       {},
       WithDefaults(0, 25, 1)},
      {"memoryFactor scales gpumem",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":10}})",
       true,
       Req(1, 10240, 0, 0),
       {},
       WithDefaults(0, 0, 1, 1024)},
      {"defaultGPUNum 0 disables count defaulting",
       R"({"limits":{"nvidia.com/gpumem":3000}})",
       false,
       {},
       {},
       WithDefaults(0, 0, 0)},
      {"defaultGPUNum 2",
       R"({"limits":{"nvidia.com/gpumem":3000}})",
       true,
       Req(2, 3000, 0, 0),
       {{"nvidia.com/gpu", 2}},
       WithDefaults(0, 0, 2)},
      {"limits win over requests",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":1000},"requests":{"nvidia.com/gpu":1,"nvidia.com/gpumem":5000}})",
       true,
       Req(1, 1000, 0, 0),
       {}},
      {"requests used when limits lack the key",
       R"({"limits":{"nvidia.com/gpu":1},"requests":{"nvidia.com/gpumem":5000}})",
       true,
       Req(1, 5000, 0, 0),
       {}},
      {"count only in requests still counts",
       R"({"requests":{"nvidia.com/gpu":1}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      {"gpumem only in requests does not default the count",
       R"({"requests":{"nvidia.com/gpumem":1000}})",
       false,
       {},
       {}},
      {"priority",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":1000,"nvidia.com/priority":1}})",
       true,
       Req(1, 1000, 0, 0, 1),
       {}},
      {"gpu 0 asks for nothing", R"({"limits":{"nvidia.com/gpu":0}})", false, {}, {}},
      {"no resources", R"({})", false, {}, {}},
      {"null resources", R"(null)", false, {}, {}},
      {"cpu only", R"({"limits":{"cpu":"2"}})", false, {}, {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json resources = json::parse(c.resources);
    auto got = ParseContainerRequest(resources, c.config);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->has_value(), c.has_request);
    if (c.has_request) {
      EXPECT_EQ(**got, c.want);
    }
    auto added = ComputeAdmissionDefaults(resources, c.config);
    if (c.admission_error != nullptr) {
      ASSERT_FALSE(added.ok());
      EXPECT_NE(added.status().message().find(c.admission_error), std::string::npos)
          << added.status();
      EXPECT_NE(added.status().message().find("nvidia.com/gpumem-percentage"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(added.ok()) << added.status();
    EXPECT_EQ(*added, c.added);
  }
}

TEST(DefaultingTest, CustomResourceNames) {
  ResourceConfig cfg;
  cfg.nvidia.count = "example.com/vgpu";
  cfg.nvidia.memory = "example.com/vgpu-memory";
  const json resources = json::parse(
      R"({"limits":{"example.com/vgpu":1,"example.com/vgpu-memory":512,"nvidia.com/gpu":3}})");
  auto got = ParseContainerRequest(resources, cfg);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, Req(1, 512, 0, 0));
}

struct ErrorCase {
  const char* resources;
  const char* message_part;
};

TEST(DefaultingTest, BadResourceValuesAreActionableErrors) {
  const ErrorCase cases[] = {
      {R"({"limits":{"nvidia.com/gpu":"1.5"}})",
       "nvidia.com/gpu: quantity 1500m must be a whole number"},
      {R"({"limits":{"nvidia.com/gpu":"500m"}})", "must be a whole number"},
      {R"({"limits":{"nvidia.com/gpu":"-1"}})", "nvidia.com/gpu: must not be negative"},
      {R"({"limits":{"nvidia.com/gpu":"2000"}})", "larger than the supported maximum 1024"},
      {R"({"limits":{"nvidia.com/gpu":"x"}})",
       "limits[nvidia.com/gpu]: quantity \"x\" does not start with a number"},
      {R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":"4.5"}})",
       "nvidia.com/gpumem: quantity 4500m must be a whole number"},
      {R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":"3000000000"}})",
       "larger than the supported maximum"},
      {R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":"50.5"}})",
       "nvidia.com/gpumem-percentage: quantity \"50500m\" must be a whole number"},
      {R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":"-1"}})",
       "gpucores: must not be negative"},
      {R"({"limits":{"nvidia.com/gpu":true}})", "quantity must be a string"},
      {R"({"limits":[1]})", "resources.limits: expected JSON object, got array"},
      {R"("lots")", "resources: expected JSON object"},
  };
  for (const auto& c : cases) {
    auto got = ParseContainerRequest(json::parse(c.resources), ResourceConfig{});
    ASSERT_FALSE(got.ok()) << c.resources;
    EXPECT_NE(std::string(got.status().message()).find(c.message_part), std::string::npos)
        << c.resources << " -> " << got.status();
  }
  // memoryFactor overflow is reported with both numbers.
  auto big = ParseContainerRequest(
      json::parse(R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":3000000}})"),
      WithDefaults(0, 0, 1, 1024));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(std::string(big.status().message()).find("times memoryFactor 1024"), std::string::npos)
      << big.status();
}

TEST(DefaultingTest, ConfigValidation) {
  ResourceConfig bad;
  bad.nvidia.memory.clear();
  EXPECT_NE(std::string(bad.Validate().message()).find("resourceMemoryName"), std::string::npos);
  EXPECT_FALSE(WithDefaults(-1, 0, 1).Validate().ok());
  EXPECT_FALSE(WithDefaults(0, 101, 1).Validate().ok());
  EXPECT_FALSE(WithDefaults(0, 0, -1).Validate().ok());
  EXPECT_FALSE(WithDefaults(0, 0, 1, 0).Validate().ok());
  EXPECT_TRUE(ResourceConfig{}.Validate().ok());
}

constexpr const char* kPodWithInitAndSidecar = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "train", "namespace": "ml", "uid": "u-1",
               "labels": {"app": "x"},
               "annotations": {"nvidia.com/use-gputype": "A100, H100,", "nvidia.com/numa-bind": "true",
                               "hami.io/gpu-scheduler-policy": "binpack, numa",
                               "hami.io/node-scheduler-policy": "spread",
                               "hami.io/device-scoring-weights": "slot=1,core=2,memory=0"}},
  "spec": {
    "initContainers": [
      {"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}}},
      {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    ],
    "containers": [
      {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "2", "memory": "1G"},
                                      "requests": {"cpu": "1500m"}}},
      {"name": "log"}
    ]
  }
})";

// The whole pod through the vendor set of a default install: core's neutral parse with NVIDIA's
// requests and selectors read by NvidiaVendor.
TEST(NvidiaParsePodTest, InitAndSidecarFirstThenApps) {
  auto pod = VendorSet::NvidiaOnly().ParsePod(json::parse(kPodWithInitAndSidecar));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->name, "train");
  EXPECT_EQ(pod->namespace_, "ml");
  EXPECT_EQ(pod->uid, "u-1");
  EXPECT_EQ(pod->labels.at("app"), "x");
  struct Want {
    const char* name;
    core::ContainerKind kind;
    int64_t cpu_milli, memory_mib;
    int gpus;
  };
  const Want want[] = {
      {"fetch", core::ContainerKind::kInit, 0, 0, 1},
      {"proxy", core::ContainerKind::kSidecar, 100, 64, 0},
      {"main", core::ContainerKind::kApp, 1500, 954, 2},  // requests win; 1G = 953.7 MiB rounded up
      {"log", core::ContainerKind::kApp, 0, 0, 0},
  };
  ASSERT_EQ(pod->containers.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    const auto& c = pod->containers[i];
    EXPECT_EQ(c.name, want[i].name);
    EXPECT_EQ(c.kind, want[i].kind) << c.name;
    EXPECT_EQ(c.cpu_milli, want[i].cpu_milli) << c.name;
    EXPECT_EQ(c.memory_mib, want[i].memory_mib) << c.name;
    EXPECT_EQ(c.devices.empty() ? 0 : c.devices[0].nums, want[i].gpus) << c.name;
  }
  EXPECT_EQ(pod->containers[0].devices[0], Req(1, 1000, 0, 0));
  EXPECT_EQ(pod->containers[2].devices[0], Req(2, 0, 100, 100));
  EXPECT_EQ(pod->selectors.use_types, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_TRUE(pod->selectors.numa_bind);
  EXPECT_EQ(pod->gpu_policy, "binpack,numa");
  EXPECT_EQ(pod->node_policy, "spread");
  EXPECT_TRUE(pod->has_weights);
  EXPECT_EQ(pod->weights, (core::ScoringWeights{1, 2, 0}));
  EXPECT_TRUE(pod->HasDevices());
  EXPECT_EQ(
      core::ContainerKinds(*pod),
      (std::vector<core::ContainerKind>{core::ContainerKind::kInit, core::ContainerKind::kSidecar,
                                        core::ContainerKind::kApp, core::ContainerKind::kApp}));
}

// NVIDIA's errors reach the pod parse with the container's path, in document order.
TEST(NvidiaParsePodTest, ErrorsNameThePath) {
  const ErrorCase cases[] = {
      {R"({"spec":{"containers":[{"name":"a"},{"name":"trainer","resources":{"limits":{"nvidia.com/gpumem":"4.5"}}}]}})",
       "spec.containers[1] \"trainer\": nvidia.com/gpumem: quantity 4500m must be a whole number"},
      // The first error in the document wins: container 0's GPU count before container 1's CPU.
      {R"({"spec":{"containers":[{"name":"a","resources":{"limits":{"nvidia.com/gpu":"x"}}},{"name":"b","resources":{"limits":{"cpu":"lots"}}}]}})",
       "spec.containers[0] \"a\": limits[nvidia.com/gpu]"},
      {R"({"metadata":{"annotations":{"nvidia.com/vgpu-mode":"time-slice"}}})",
       "is not a sharing mode"},
  };
  for (const auto& c : cases) {
    auto pod = VendorSet::NvidiaOnly().ParsePod(json::parse(c.resources));
    ASSERT_FALSE(pod.ok()) << c.resources;
    EXPECT_NE(std::string(pod.status().message()).find(c.message_part), std::string::npos)
        << c.resources << " -> " << pod.status();
  }
  // Without NVIDIA in the set its resources and annotations are nobody's: no devices, no error.
  VendorSet none(std::vector<std::unique_ptr<Vendor>>{});
  auto pod = none.ParsePod(json::parse(cases[0].resources));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_FALSE(pod->HasDevices());
  EXPECT_TRUE(none.ParsePod(json::parse(cases[2].resources)).ok());
}

// Upstream's assertNuma (pkg/device/nvidia): nvidia.com/numa-bind is enforced only when Go's
// ParseBool reads true; a value it cannot read leaves binding off instead of failing the pod.
TEST(SelectorTest, NumaBindIsLenient) {
  struct Case {
    const char* value;
    bool bind;
    bool warned;
  };
  const Case cases[] = {
      {"true", true, false}, {"1", true, false},      {"T", true, false},
      {"TRUE", true, false}, {"false", false, false}, {"0", false, false},
      {"yes", false, true},  {"", false, true},       {"on", false, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.value);
    const std::map<std::string, std::string> annotations = {{kNumaBind, c.value}};
    auto s = ParseDeviceSelectors(annotations);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->numa_bind, c.bind);
    const auto warnings = IgnoredAnnotations(annotations);
    // The webhook reads them through the vendor set.
    EXPECT_EQ(VendorSet::NvidiaOnly().IgnoredAnnotations(annotations), warnings);
    ASSERT_EQ(warnings.size(), c.warned ? 1u : 0u);
    if (c.warned) {
      EXPECT_NE(warnings[0].find("NUMA binding is off"), std::string::npos) << warnings[0];
    }
  }
}

TEST(SelectorTest, Selectors) {
  auto s = ParseDeviceSelectors({{"nvidia.com/use-gpuuuid", "GPU-a,GPU-b"},
                                 {"nvidia.com/nouse-gpuuuid", " GPU-c "},
                                 {"nvidia.com/nouse-gputype", "T4"},
                                 {"nvidia.com/vgpu-mode", "mig"},
                                 {"nvidia.com/numa-bind", "0"},
                                 {"nvidia.com/mig-profile-preference", " 4g , 3g.20gb,4g,"},
                                 {"unrelated", "x"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->use_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(s->nouse_uuids, (std::vector<std::string>{"GPU-c"}));
  EXPECT_EQ(s->nouse_types, (std::vector<std::string>{"T4"}));
  EXPECT_TRUE(s->use_types.empty());
  EXPECT_EQ(s->vgpu_mode, "mig");
  EXPECT_FALSE(s->numa_bind);
  EXPECT_EQ(s->mig_profile_preference, (std::vector<std::string>{"4g", "3g.20gb"}));
  // Read leniently: the webhook checks the entries against the allowlist, not the parser.
  auto lenient = ParseDeviceSelectors({{"nvidia.com/mig-profile-preference", " , "}});
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_TRUE(lenient->mig_profile_preference.empty());
}

}  // namespace
}  // namespace hami::vendors::nvidia
