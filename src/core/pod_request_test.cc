#include "core/pod_request.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using nlohmann::json;

DeviceRequest Req(int nums, int64_t mem, int pct, int cores, int priority = -1) {
  DeviceRequest r;
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
  DeviceRequest want;
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
    auto got = ParseContainerDevices(resources, c.config);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), c.has_request ? 1u : 0u);
    if (c.has_request) {
      EXPECT_EQ((*got)[0], c.want);
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
  auto got = ParseContainerDevices(resources, cfg);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0], Req(1, 512, 0, 0));
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
    auto got = ParseContainerDevices(json::parse(c.resources), ResourceConfig{});
    ASSERT_FALSE(got.ok()) << c.resources;
    EXPECT_NE(std::string(got.status().message()).find(c.message_part), std::string::npos)
        << c.resources << " -> " << got.status();
  }
  // memoryFactor overflow is reported with both numbers.
  auto big = ParseContainerDevices(
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

TEST(ParsePodJsonTest, InitAndSidecarFirstThenApps) {
  auto pod = ParsePodJson(json::parse(kPodWithInitAndSidecar), ResourceConfig{});
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->name, "train");
  EXPECT_EQ(pod->namespace_, "ml");
  EXPECT_EQ(pod->uid, "u-1");
  EXPECT_EQ(pod->labels.at("app"), "x");
  struct Want {
    const char* name;
    ContainerKind kind;
    int64_t cpu_milli, memory_mib;
    int gpus;
  };
  const Want want[] = {
      {"fetch", ContainerKind::kInit, 0, 0, 1},
      {"proxy", ContainerKind::kSidecar, 100, 64, 0},
      {"main", ContainerKind::kApp, 1500, 954, 2},  // requests win; 1G = 953.7 MiB rounded up
      {"log", ContainerKind::kApp, 0, 0, 0},
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
  EXPECT_EQ(pod->weights, (ScoringWeights{1, 2, 0}));
  EXPECT_TRUE(pod->HasDevices());
  EXPECT_EQ(ContainerKinds(*pod),
            (std::vector<ContainerKind>{ContainerKind::kInit, ContainerKind::kSidecar,
                                        ContainerKind::kApp, ContainerKind::kApp}));
}

TEST(ParsePodJsonTest, MinimalPodsParse) {
  for (
      const char* text :
      {R"({})", R"({"metadata":{},"spec":{}})", R"({"spec":{"containers":[]}})",
       R"({"metadata":{"annotations":null},"spec":{"containers":[{"name":"a","resources":{}}]}})"}) {
    auto pod = ParsePodJson(json::parse(text), ResourceConfig{});
    ASSERT_TRUE(pod.ok()) << text << ": " << pod.status();
    EXPECT_FALSE(pod->HasDevices());
  }
}

TEST(ParsePodJsonTest, ErrorsNameThePath) {
  const ErrorCase cases[] = {
      {R"([])", "pod: expected JSON object, got array"},
      {R"({"metadata":[]})", "metadata: expected JSON object"},
      {R"({"metadata":{"name":5}})", "metadata.name: expected JSON string, got number"},
      {R"({"metadata":{"annotations":{"a":1}}})",
       "metadata.annotations[a]: expected a string value"},
      {R"({"spec":{"containers":{}}})", "spec.containers: expected JSON array, got object"},
      {R"({"spec":{"containers":[5]}})", "spec.containers[0]: expected JSON object, got number"},
      {R"({"spec":{"containers":[{"name":"a"},{"name":"trainer","resources":{"limits":{"nvidia.com/gpumem":"4.5"}}}]}})",
       "spec.containers[1] \"trainer\": nvidia.com/gpumem: quantity 4500m must be a whole number"},
      {R"({"spec":{"initContainers":[{"name":"i","resources":{"requests":{"cpu":"lots"}}}]}})",
       "spec.initContainers[0] \"i\": requests[cpu]: quantity \"lots\" does not start with a "
       "number"},
      {R"({"spec":{"containers":[{"resources":{"limits":{"memory":"-1Gi"}}}]}})",
       "memory: must not be negative"},
      {R"({"metadata":{"annotations":{"nvidia.com/vgpu-mode":"time-slice"}}})",
       "is not a sharing mode"},
      {R"({"metadata":{"annotations":{"hami.io/device-scoring-weights":"slot=1"}}})",
       "key \"core\" is missing"},
  };
  for (const auto& c : cases) {
    auto pod = ParsePodJson(json::parse(c.resources), ResourceConfig{});
    ASSERT_FALSE(pod.ok()) << c.resources;
    EXPECT_NE(std::string(pod.status().message()).find(c.message_part), std::string::npos)
        << c.resources << " -> " << pod.status();
  }
}

TEST(AnnotationTest, GpuSchedulerPolicy) {
  struct Case {
    const char* value;
    bool ok;
    std::vector<std::string> keys;
    const char* error;
  };
  const Case cases[] = {
      {"binpack", true, {"binpack"}, ""},
      {"spread", true, {"spread"}, ""},
      {"topology-aware", true, {"topology-aware"}, ""},
      {"mutex", true, {"mutex"}, ""},
      {" binpack , numa ", true, {"binpack", "numa"}, ""},
      {"numa,spread", true, {"numa", "spread"}, ""},
      // Upstream's TestIsValidGPUSchedulerPolicy (pkg/util), every row.
      {"numa", true, {"numa"}, ""},
      {"binpack,numa", true, {"binpack", "numa"}, ""},
      {"binpack, numa", true, {"binpack", "numa"}, ""},
      {"mutex,topology-aware", true, {"mutex", "topology-aware"}, ""},
      {"", false, {}, "empty policy name"},
      {"   ", false, {}, "empty policy name"},
      {"binpakc", false, {}, "unknown policy \"binpakc\""},
      {"Binpack", false, {}, "unknown policy \"Binpack\""},
      {"binpack,nmua", false, {}, "unknown policy \"nmua\""},
      {"binpack,", false, {}, "empty policy name"},
      // Chains upstream accepts: a list of sort keys, repeats and binpack next to spread included.
      {"binpack,binpack", true, {"binpack", "binpack"}, ""},
      {"binpack,spread", true, {"binpack", "spread"}, ""},
      {"spread,numa,binpack", true, {"spread", "numa", "binpack"}, ""},
      {"fgd", true, {"fgd"}, ""},
      {" default ", true, {"default"}, ""},
      {"fgd,numa", false, {}, "\"fgd\" cannot be chained"},
      {"binpack,default", false, {}, "\"default\" cannot be chained"},
      {"FGD", false, {}, "unknown policy \"FGD\""},
  };
  for (const auto& c : cases) {
    auto got = ParseGpuSchedulerPolicy(c.value);
    ASSERT_EQ(got.ok(), c.ok) << c.value << ": " << got.status();
    if (c.ok) {
      EXPECT_EQ(*got, c.keys) << c.value;
    } else {
      EXPECT_NE(std::string(got.status().message()).find(c.error), std::string::npos)
          << got.status();
      EXPECT_NE(std::string(got.status().message()).find("expected a comma list"),
                std::string::npos);
    }
  }
}

// Upstream's TestGetGPUSchedulerPolicyByPodUnrecognizedValue and TestIsValidNodeSchedulerPolicy
// (pkg/util): an annotation upstream does not recognise is ignored and the configured policy stands
// ("" here). The pod still parses, so it is scheduled rather than left Pending on a /filter error.
TEST(AnnotationTest, UnrecognisedPolicyAnnotationsAreIgnored) {
  struct Case {
    const char* key;
    const char* value;
    const char* want;  // node_policy or gpu_policy after parsing; "" = the configured default
  };
  const Case cases[] = {
      {kGpuSchedulerPolicy, "spread", "spread"},
      {kGpuSchedulerPolicy, "binpack,numa", "binpack,numa"},
      {kGpuSchedulerPolicy, "topology-aware", "topology-aware"},
      {kGpuSchedulerPolicy, "binpack,spread", "binpack,spread"},
      {kGpuSchedulerPolicy, "binpakc", ""},
      {kGpuSchedulerPolicy, "", ""},
      {kGpuSchedulerPolicy, "binpack,nmua", ""},
      {kNodeSchedulerPolicy, "binpack", "binpack"},
      {kNodeSchedulerPolicy, " spread ", "spread"},
      {kNodeSchedulerPolicy, "", ""},
      {kNodeSchedulerPolicy, "binpakc", ""},
      {kNodeSchedulerPolicy, "Spread", ""},
      {kNodeSchedulerPolicy, "binpack,spread", ""},
      {kNodeSchedulerPolicy, "numa", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.key) + "=" + c.value);
    json pod = {{"metadata", {{"annotations", {{c.key, c.value}}}}}};
    auto parsed = ParsePodJson(pod, ResourceConfig{});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const bool gpu = std::string_view(c.key) == kGpuSchedulerPolicy;
    EXPECT_EQ(gpu ? parsed->gpu_policy : parsed->node_policy, c.want);
    EXPECT_TRUE((gpu ? parsed->node_policy : parsed->gpu_policy).empty());
    // The webhook warns about exactly the ignored ones, naming the annotation.
    const auto warnings = IgnoredAnnotations(parsed->annotations);
    ASSERT_EQ(warnings.size(), std::string_view(c.want).empty() ? 1u : 0u);
    if (!warnings.empty()) {
      EXPECT_NE(warnings[0].find(c.key), std::string::npos) << warnings[0];
      EXPECT_NE(warnings[0].find("configured"), std::string::npos) << warnings[0];
    }
  }
}

// Upstream's assertNuma (pkg/device/nvidia): nvidia.com/numa-bind is enforced only when Go's
// ParseBool reads true; a value it cannot read leaves binding off instead of failing the pod.
TEST(AnnotationTest, NumaBindIsLenient) {
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
    ASSERT_EQ(warnings.size(), c.warned ? 1u : 0u);
    if (c.warned) {
      EXPECT_NE(warnings[0].find("NUMA binding is off"), std::string::npos) << warnings[0];
    }
  }
}

TEST(AnnotationTest, ScoringWeights) {
  struct Case {
    const char* value;
    bool ok;
    ScoringWeights want;
    const char* error;
  };
  const Case cases[] = {
      {"slot=1,core=1,memory=1", true, {1, 1, 1}, ""},
      {"memory=3, slot=0 ,core=2", true, {0, 2, 3}, ""},
      {"slot=0,core=0,memory=5", true, {0, 0, 5}, ""},
      {"slot=0,core=0,memory=0", false, {}, "all weights are 0"},
      {"slot=1,core=1", false, {}, "key \"memory\" is missing"},
      {"slot=1,core=1,memory=1,gpu=2", false, {}, "unknown key \"gpu\""},
      {"slot=1,slot=2,core=1,memory=1", false, {}, "given twice"},
      {"slot=-1,core=1,memory=1", false, {}, "slot must be >= 0"},
      {"slot=1.5,core=1,memory=1", false, {}, "slot=\"1.5\" is not an integer"},
      {"slot,core=1,memory=1", false, {}, "is not key=value"},
      {"", false, {}, "is not key=value"},
  };
  for (const auto& c : cases) {
    auto got = ParseScoringWeights(c.value);
    ASSERT_EQ(got.ok(), c.ok) << c.value << ": " << got.status();
    if (c.ok) {
      EXPECT_EQ(*got, c.want) << c.value;
    } else {
      EXPECT_NE(std::string(got.status().message()).find(c.error), std::string::npos)
          << got.status();
    }
  }
}

TEST(AnnotationTest, Selectors) {
  auto s = ParseDeviceSelectors({{"nvidia.com/use-gpuuuid", "GPU-a,GPU-b"},
                                 {"nvidia.com/nouse-gpuuuid", " GPU-c "},
                                 {"nvidia.com/nouse-gputype", "T4"},
                                 {"nvidia.com/vgpu-mode", "mig"},
                                 {"nvidia.com/numa-bind", "0"},
                                 {"unrelated", "x"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->use_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(s->nouse_uuids, (std::vector<std::string>{"GPU-c"}));
  EXPECT_EQ(s->nouse_types, (std::vector<std::string>{"T4"}));
  EXPECT_TRUE(s->use_types.empty());
  EXPECT_EQ(s->vgpu_mode, "mig");
  EXPECT_FALSE(s->numa_bind);
}

TEST(EffectivePodRequestTest, KubernetesFormula) {
  using K = ContainerKind;
  struct C {
    K kind;
    int64_t cpu, mem;
  };
  struct Case {
    const char* name;
    std::vector<C> containers;
    CpuMemory want;
  };
  const Case cases[] = {
      {"apps sum", {{K::kApp, 100, 10}, {K::kApp, 200, 20}}, {300, 30}},
      {"init peak wins", {{K::kInit, 1000, 5}, {K::kApp, 200, 20}}, {1000, 20}},
      {"init containers do not add",
       {{K::kInit, 500, 0}, {K::kInit, 700, 0}, {K::kApp, 100, 0}},
       {700, 0}},
      {"sidecar adds to apps", {{K::kSidecar, 50, 5}, {K::kApp, 200, 20}}, {250, 25}},
      {"sidecar runs next to later init",
       {{K::kSidecar, 50, 5}, {K::kInit, 1000, 0}, {K::kApp, 10, 0}},
       {1050, 5}},
      {"init before sidecar does not see it",
       {{K::kInit, 1000, 0}, {K::kSidecar, 50, 5}, {K::kApp, 10, 0}},
       {1000, 5}},
      {"empty pod", {}, {0, 0}},
  };
  for (const auto& c : cases) {
    PodRequest pod;
    for (const auto& x : c.containers) {
      ContainerRequest r;
      r.kind = x.kind;
      r.cpu_milli = x.cpu;
      r.memory_mib = x.mem;
      pod.containers.push_back(r);
    }
    EXPECT_EQ(EffectivePodRequest(pod), c.want) << c.name;
  }
}

ContainerDevice Dev(const char* uuid, int64_t mem, int cores) {
  ContainerDevice d;
  d.uuid = uuid;
  d.usedmem_mib = mem;
  d.usedcores = cores;
  return d;
}

TEST(EffectiveUsageTest, InitSidecarAndAppCollapse) {
  using K = ContainerKind;
  struct Case {
    const char* name;
    std::vector<K> kinds;
    std::vector<std::vector<ContainerDevice>> containers;
    bool init_finished;
    std::map<std::string, DeviceUsage> want;
  };
  const Case cases[] = {
      {"apps sum",
       {K::kApp, K::kApp},
       {{Dev("g", 1000, 10)}, {Dev("g", 2000, 20)}},
       false,
       {{"g", {2, 3000, 30}}}},
      {"init peak larger than apps",
       {K::kInit, K::kApp},
       {{Dev("g", 8000, 50)}, {Dev("g", 2000, 20)}},
       false,
       {{"g", {1, 8000, 50}}}},
      {"apps larger than init",
       {K::kInit, K::kApp, K::kApp},
       {{Dev("g", 1000, 10)}, {Dev("g", 2000, 20)}, {Dev("g", 3000, 0)}},
       false,
       {{"g", {2, 5000, 20}}}},
      {"max is per dimension",
       {K::kInit, K::kApp},
       {{Dev("g", 8000, 0)}, {Dev("g", 1000, 60)}},
       false,
       {{"g", {1, 8000, 60}}}},
      {"init containers do not add up",
       {K::kInit, K::kInit, K::kApp},
       {{Dev("g", 3000, 0)}, {Dev("g", 4000, 0)}, {}},
       false,
       {{"g", {1, 4000, 0}}}},
      {"init finished leaves apps",
       {K::kInit, K::kApp},
       {{Dev("g", 8000, 50)}, {Dev("g", 2000, 20)}},
       true,
       {{"g", {1, 2000, 20}}}},
      {"init only, finished: nothing", {K::kInit, K::kApp}, {{Dev("g", 8000, 50)}, {}}, true, {}},
      {"sidecar runs with later init and with apps",
       {K::kSidecar, K::kInit, K::kApp},
       {{Dev("g", 1000, 10)}, {Dev("g", 6000, 0)}, {Dev("g", 2000, 20)}},
       false,
       {{"g", {2, 7000, 30}}}},
      {"init before sidecar does not see it",
       {K::kInit, K::kSidecar, K::kApp},
       {{Dev("g", 6000, 0)}, {Dev("g", 1000, 10)}, {Dev("g", 2000, 20)}},
       false,
       {{"g", {2, 6000, 30}}}},
      {"sidecar survives init completion",
       {K::kSidecar, K::kInit, K::kApp},
       {{Dev("g", 1000, 10)}, {Dev("g", 6000, 0)}, {Dev("g", 2000, 20)}},
       true,
       {{"g", {2, 3000, 30}}}},
      {"devices are independent",
       {K::kInit, K::kApp},
       {{Dev("a", 5000, 0)}, {Dev("b", 1000, 0)}},
       false,
       {{"a", {1, 5000, 0}}, {"b", {1, 1000, 0}}}},
      {"trailing surplus empty entry ignored",
       {K::kInit, K::kApp},
       {{Dev("g", 500, 0)}, {Dev("g", 100, 0)}, {}},
       false,
       {{"g", {1, 500, 0}}}},
      {"short allocation aligned to the end",
       {K::kInit, K::kApp, K::kApp},
       {{Dev("g", 500, 0)}, {Dev("g", 100, 0)}},
       false,
       {{"g", {2, 600, 0}}}},
      {"entries beyond kinds count as apps",
       {K::kInit},
       {{Dev("g", 500, 0)}, {Dev("g", 400, 0)}, {Dev("g", 300, 0)}},
       false,
       {{"g", {2, 700, 0}}}},
  };
  for (const auto& c : cases) {
    PodAllocation a;
    a.containers = c.containers;
    EXPECT_EQ(EffectiveDeviceUsage(c.kinds, a, c.init_finished), c.want) << c.name;
  }
}

}  // namespace
// The webhook's quota demand is the scheduler's effective-usage formula over the fewest devices:
// a sidecar declared before an init container runs next to it (was: max(init peak, the others)).
TEST(RequestedDeviceTotals, SameFormulaAsTheScheduler) {
  using K = ContainerKind;
  auto ctr = [](K kind, int nums, int64_t mem, int cores, const char* vendor = kNvidiaVendor) {
    ContainerRequest c;
    c.kind = kind;
    DeviceRequest d;
    d.vendor = vendor;
    d.nums = nums;
    d.memreq_mib = mem;
    d.coresreq = cores;
    c.devices.push_back(d);
    return c;
  };
  PodRequest pod;
  pod.containers = {ctr(K::kSidecar, 1, 2048, 10), ctr(K::kInit, 1, 4096, 30),
                    ctr(K::kApp, 1, 3072, 20)};
  EXPECT_EQ(RequestedDeviceTotals(pod, kNvidiaVendor),
            (DeviceTotals{6144, 40}));  // init 4096 + sidecar 2048
  // Two devices each: per device max(init phase, sidecar + app), summed over the two.
  pod.containers = {ctr(K::kInit, 2, 1000, 50), ctr(K::kApp, 2, 300, 10)};
  EXPECT_EQ(RequestedDeviceTotals(pod, kNvidiaVendor), (DeviceTotals{2000, 100}));
  // Other vendors' devices do not count against NVIDIA's quota keys.
  pod.containers = {ctr(K::kApp, 1, 500, 5), ctr(K::kApp, 1, 700, 7, "Ascend")};
  EXPECT_EQ(RequestedDeviceTotals(pod, kNvidiaVendor), (DeviceTotals{500, 5}));
  EXPECT_EQ(RequestedDeviceTotals(PodRequest{}, kNvidiaVendor), (DeviceTotals{}));
}

// Every vendor's totals at once (what the webhook maps onto each vendor's quota keys), and the same
// per-vendor split of a placed pod: each vendor counts its own devices, all of them.
TEST(RequestedDeviceTotals, ByVendor) {
  using K = ContainerKind;
  auto ctr = [](K kind, std::vector<DeviceRequest> devs) {
    ContainerRequest c;
    c.kind = kind;
    c.devices = std::move(devs);
    return c;
  };
  auto dev = [](const char* vendor, int nums, int64_t mem, int cores) {
    DeviceRequest d;
    d.vendor = vendor;
    d.nums = nums;
    d.memreq_mib = mem;
    d.coresreq = cores;
    return d;
  };
  PodRequest pod;
  pod.containers = {ctr(K::kInit, {dev("DCU", 2, 1000, 10)}),
                    ctr(K::kApp, {dev("DCU", 2, 300, 5), dev(kNvidiaVendor, 1, 700, 7)}),
                    ctr(K::kApp, {dev("MLU", 3, 256, 20)})};
  const std::map<std::string, DeviceTotals> want = {
      {"DCU", {2000, 20}}, {kNvidiaVendor, {700, 7}}, {"MLU", {768, 60}}};
  EXPECT_EQ(RequestedDeviceTotalsByVendor(pod), want);
  EXPECT_EQ(RequestedDeviceTotals(pod, "DCU"), (DeviceTotals{2000, 20}));
  EXPECT_EQ(RequestedDeviceTotalsByVendor(PodRequest{}), (std::map<std::string, DeviceTotals>{}));

  PodAllocation placed;
  placed.containers = {{{"dcu-0", "DCU", 1000, 10}, {"dcu-1", "DCU", 1000, 10}},
                       {{"dcu-0", "DCU", 300, 5}, {"gpu-0", kNvidiaVendor, 700, 7}}};
  const std::vector<ContainerKind> kinds = {K::kInit, K::kApp};
  EXPECT_EQ(DeviceTotalsByVendor(kinds, placed),
            (std::map<std::string, DeviceTotals>{{"DCU", {2000, 20}}, {kNvidiaVendor, {700, 7}}}));
  // Once the init container has succeeded only the app containers count.
  EXPECT_EQ(DeviceTotalsByVendor(kinds, placed, /*init_finished=*/true),
            (std::map<std::string, DeviceTotals>{{"DCU", {300, 5}}, {kNvidiaVendor, {700, 7}}}));
}

}  // namespace hami::core
