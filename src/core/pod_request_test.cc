#include "core/pod_request.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using nlohmann::json;

// A vendor side for the tests: one device of vendor "X" per container whose limits name
// "x.com/n" (nums = its value; a non-integer is an error naming it), selectors from "x.com/use".
// Records the order of its calls, so a test can see that ParsePodJson reads in document order.
class FakeDevices final : public PodDeviceReader {
 public:
  StatusOr<std::vector<DeviceRequest>> ContainerDevices(
      const json& resources, const std::map<std::string, std::string>& annotations) const override {
    calls.push_back(StrCat("devices ", annotations.size()));
    std::vector<DeviceRequest> out;
    if (!resources.is_object() || !resources.contains("limits")) return out;
    const json& l = resources["limits"];
    if (!l.contains("x.com/n")) return out;
    if (!l["x.com/n"].is_number_integer()) return InvalidArgument("x.com/n: not an integer");
    DeviceRequest r;
    r.vendor = "X";
    r.nums = l["x.com/n"].get<int>();
    out.push_back(r);
    return out;
  }
  StatusOr<DeviceSelectors> Selectors(
      const std::map<std::string, std::string>& annotations) const override {
    calls.push_back("selectors");
    DeviceSelectors s;
    if (auto it = annotations.find("x.com/use"); it != annotations.end()) {
      if (it->second == "bad") return InvalidArgument("x.com/use: bad");
      s.use_types = {it->second};
    }
    return s;
  }
  mutable std::vector<std::string> calls;
};

constexpr const char* kPodWithInitAndSidecar = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "train", "namespace": "ml", "uid": "u-1",
               "labels": {"app": "x"},
               "annotations": {"x.com/use": "A100",
                               "hami.io/gpu-scheduler-policy": "binpack, numa",
                               "hami.io/node-scheduler-policy": "spread",
                               "hami.io/device-scoring-weights": "slot=1,core=2,memory=0"}},
  "spec": {
    "initContainers": [
      {"name": "fetch", "resources": {"limits": {"x.com/n": 1}}},
      {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    ],
    "containers": [
      {"name": "main", "resources": {"limits": {"x.com/n": 2, "cpu": "2", "memory": "1G"},
                                      "requests": {"cpu": "1500m"}}},
      {"name": "log"}
    ]
  }
})";

TEST(ParsePodJsonTest, InitAndSidecarFirstThenApps) {
  FakeDevices devices;
  auto pod = ParsePodJson(json::parse(kPodWithInitAndSidecar), &devices);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->name, "train");
  EXPECT_EQ(pod->namespace_, "ml");
  EXPECT_EQ(pod->uid, "u-1");
  EXPECT_EQ(pod->labels.at("app"), "x");
  struct Want {
    const char* name;
    ContainerKind kind;
    int64_t cpu_milli, memory_mib;
    int devices;
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
    EXPECT_EQ(c.devices.empty() ? 0 : c.devices[0].nums, want[i].devices) << c.name;
  }
  EXPECT_EQ(pod->containers[2].devices[0].vendor, "X");
  // Every container is asked, with the pod's annotations, then the selectors once.
  EXPECT_EQ(devices.calls, (std::vector<std::string>{"devices 4", "devices 4", "devices 4",
                                                     "devices 4", "selectors"}));
  EXPECT_EQ(pod->selectors.use_types, (std::vector<std::string>{"A100"}));
  EXPECT_EQ(pod->gpu_policy, "binpack,numa");
  EXPECT_EQ(pod->node_policy, "spread");
  EXPECT_TRUE(pod->has_weights);
  EXPECT_EQ(pod->weights, (ScoringWeights{1, 2, 0}));
  EXPECT_TRUE(pod->HasDevices());
  EXPECT_EQ(ContainerKinds(*pod),
            (std::vector<ContainerKind>{ContainerKind::kInit, ContainerKind::kSidecar,
                                        ContainerKind::kApp, ContainerKind::kApp}));
  // Without a device reader: the same containers, no devices, no selectors.
  auto bare = ParsePodJson(json::parse(kPodWithInitAndSidecar));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->containers.size(), std::size(want));
  EXPECT_FALSE(bare->HasDevices());
  EXPECT_TRUE(bare->selectors.use_types.empty());
  EXPECT_EQ(bare->containers[2].cpu_milli, 1500);
}

TEST(ParsePodJsonTest, MinimalPodsParse) {
  FakeDevices devices;
  for (
      const char* text :
      {R"({})", R"({"metadata":{},"spec":{}})", R"({"spec":{"containers":[]}})",
       R"({"metadata":{"annotations":null},"spec":{"containers":[{"name":"a","resources":{}}]}})"}) {
    auto pod = ParsePodJson(json::parse(text), &devices);
    ASSERT_TRUE(pod.ok()) << text << ": " << pod.status();
    EXPECT_FALSE(pod->HasDevices());
  }
}

struct ErrorCase {
  const char* pod;
  const char* message_part;
};

TEST(ParsePodJsonTest, ErrorsNameThePath) {
  const ErrorCase cases[] = {
      {R"([])", "pod: expected JSON object, got array"},
      {R"({"metadata":[]})", "metadata: expected JSON object"},
      {R"({"metadata":{"name":5}})", "metadata.name: expected JSON string, got number"},
      {R"({"metadata":{"annotations":{"a":1}}})",
       "metadata.annotations[a]: expected a string value"},
      {R"({"spec":{"containers":{}}})", "spec.containers: expected JSON array, got object"},
      {R"({"spec":{"containers":[5]}})", "spec.containers[0]: expected JSON object, got number"},
      {R"({"spec":{"containers":[{"name":"a","resources":"lots"}]}})",
       "spec.containers[0] \"a\": resources: expected JSON object, got string"},
      {R"({"spec":{"containers":[{"name":"a","resources":{"limits":[1]}}]}})",
       "resources.limits: expected JSON object, got array"},
      // The vendor side's errors get the container's path.
      {R"({"spec":{"containers":[{"name":"a"},{"name":"trainer","resources":{"limits":{"x.com/n":"4.5"}}}]}})",
       "spec.containers[1] \"trainer\": x.com/n: not an integer"},
      // Document order: container 0's device error before container 1's CPU error.
      {R"({"spec":{"containers":[{"name":"a","resources":{"limits":{"x.com/n":"y"}}},{"name":"b","resources":{"limits":{"cpu":"lots"}}}]}})",
       "spec.containers[0] \"a\": x.com/n"},
      {R"({"spec":{"initContainers":[{"name":"i","resources":{"requests":{"cpu":"lots"}}}]}})",
       "spec.initContainers[0] \"i\": requests[cpu]: quantity \"lots\" does not start with a "
       "number"},
      {R"({"spec":{"containers":[{"resources":{"limits":{"memory":"-1Gi"}}}]}})",
       "memory: must not be negative"},
      {R"({"metadata":{"annotations":{"x.com/use":"bad"}}})", "x.com/use: bad"},
      // Selectors before the scoring weights.
      {R"({"metadata":{"annotations":{"x.com/use":"bad","hami.io/device-scoring-weights":"slot=1"}}})",
       "x.com/use: bad"},
      {R"({"metadata":{"annotations":{"hami.io/device-scoring-weights":"slot=1"}}})",
       "key \"core\" is missing"},
  };
  FakeDevices devices;
  for (const auto& c : cases) {
    auto pod = ParsePodJson(json::parse(c.pod), &devices);
    ASSERT_FALSE(pod.ok()) << c.pod;
    EXPECT_NE(std::string(pod.status().message()).find(c.message_part), std::string::npos)
        << c.pod << " -> " << pod.status();
  }
}

TEST(ContainerResourcesTest, LimitsAndRequests) {
  // Not owning: the JSON outlives the reader.
  const json resources =
      json::parse(R"({"limits":{"a":"2","b":"1"},"requests":{"a":"1","c":"3"}})");
  auto r = ContainerResources::Make(resources);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto value = [](const StatusOr<std::optional<Quantity>>& q) {
    return q.ok() && q->has_value() ? FormatQuantity(**q) : std::string("-");
  };
  EXPECT_EQ(value(r->LimitOrRequest("a")), "2");
  EXPECT_EQ(value(r->RequestOrLimit("a")), "1");
  EXPECT_EQ(value(r->LimitOrRequest("c")), "3");
  EXPECT_EQ(value(r->RequestOrLimit("b")), "1");
  EXPECT_EQ(value(r->LimitOrRequest("d")), "-");
  EXPECT_TRUE(r->InLimits("b"));
  EXPECT_FALSE(r->InLimits("c"));
  auto both = r->Both("a");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->size(), 2u);
  const json garbage = json::parse(R"({"limits":{"a":"x"}})");
  auto bad = ContainerResources::Make(garbage);
  ASSERT_TRUE(bad.ok());
  EXPECT_NE(std::string(bad->LimitOrRequest("a").status().message()).find("limits[a]"),
            std::string::npos);
  const json absent;  // null: no resources
  EXPECT_TRUE(ContainerResources::Make(absent).ok());
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
    auto parsed = ParsePodJson(pod);
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
