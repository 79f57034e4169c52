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

// The scheduler's reading of one container (ParseContainerRequest) and the webhook's
// (ComputeAdmissionDefaults) against one row.
void ExpectDefaulting(const DefaultingCase& c) {
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
    return;
  }
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, c.added);
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
      // The scheduler clamps a pod that skipped the webhook; the webhook denies it (upstream PR
      // #2784: out-of-range cores are rejected, no longer clamped).
      {"cores above 100 are clamped",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":250}})",
       true,
       Req(1, 0, 100, 100),
       {},
       {},
       "nvidia.com/gpucores: 250 is outside 0..100"},
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
  for (const auto& c : cases) ExpectDefaulting(c);
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

// Upstream's pkg/device/nvidia/device_test.go request tests (TestGenerateResourceRequests and its
// _MemoryFactor/_DefaultMemory variants, Test_GenerateResourceRequests_MemoryPercentageValidation,
// Test_MutateAdmission_MemoryPercentageValidation, TestMutateAdmissionDefaultsExclusiveCore,
// TestZeroMemoryPercentageIsAccountedAsWholeCard), one row per upstream case. Where hami-cpp
// differs, the row says so and docs/migration.md ("Pod requests and the admission webhook") has
// the reason: a bare count books 100 cores (upstream 0 when the webhook was skipped), and
// out-of-range percentages that skipped the webhook are clamped or ignored (upstream: no card
// fits).
TEST(NvidiaUpstream, TestGenerateResourceRequests) {
  const DefaultingCase cases[] = {
      {"gpu count only — defaults to 100% memory (ours: 100 cores too)",
       R"({"limits":{"nvidia.com/gpu":1}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      {"gpu count + explicit memory",
       R"({"limits":{"nvidia.com/gpu":2,"nvidia.com/gpumem":4096}})",
       true,
       Req(2, 4096, 0, 0),
       {}},
      {"gpu count + memory percentage",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":50}})",
       true,
       Req(1, 0, 50, 0),
       {}},
      {"gpu count + memory percentage above 100 — rejected (ours: denied, else clamped)",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":150}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "150 is outside 0..100"},
      {"gpu count + memory percentage beyond int32 range — rejected (ours: denied, else clamped)",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":"4294967346"}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "4294967346 is outside 0..100"},
      {"gpu count + memory percentage equal to sentinel 101 — rejected (ours: denied, else "
       "clamped)",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":101}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "101 is outside 0..100"},
      {"gpu count + explicit cores",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":50}})",
       true,
       Req(1, 0, 100, 50),
       {}},
      {"no gpu resource — returns empty request", R"({"limits":{}})", false, {}, {}},
      {"gpu in Requests (not Limits) — falls back to Requests (ours: 100 cores too)",
       R"({"requests":{"nvidia.com/gpu":1}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      {"gpu count + memory percentage of 0 — treated as unset",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":0}})",
       true,
       Req(1, 0, 100, 0),
       {}},
      {"memory percentage of 0 in Requests — treated as unset",
       R"({"requests":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":0}})",
       true,
       Req(1, 0, 100, 0),
       {}},
      {"negative memory percentage — rejected (ours: denied, else ignored)",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem-percentage":-1}})",
       true,
       Req(1, 0, 100, 0),
       {},
       {},
       "-1 is outside 0..100"},
      {"memory percentage of 0 + explicit memory — explicit memory wins",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":2000,"nvidia.com/gpumem-percentage":0}})",
       true,
       Req(1, 2000, 0, 0),
       {}},
      // TestGenerateResourceRequests_DefaultMemory
      {"TestGenerateResourceRequests_DefaultMemory/bare count (ours: 100 cores too)",
       R"({"limits":{"nvidia.com/gpu":1}})",
       true,
       Req(1, 512, 0, 100),
       {{"nvidia.com/gpucores", 100}},
       WithDefaults(512, 0, 1)},
      {"TestGenerateResourceRequests_DefaultMemory/count with cores 0",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":0}})",
       true,
       Req(1, 512, 0, 0),
       {},
       WithDefaults(512, 0, 1)},
      {"TestGenerateResourceRequests_DefaultMemory/percentage 0 lands on defaultMemory",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":0,"nvidia.com/gpumem-percentage":0}})",
       true,
       Req(1, 512, 0, 0),
       {},
       WithDefaults(512, 0, 1)},
      {"TestGenerateResourceRequests_DefaultMemory/gpumem 0 lands on defaultMemory",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpucores":0,"nvidia.com/gpumem":0}})",
       true,
       Req(1, 512, 0, 0),
       {},
       WithDefaults(512, 0, 1)},
      {"TestGenerateResourceRequests_MemoryFactor",
       R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":1024}})",
       true,
       Req(1, 2048, 0, 0),
       {},
       WithDefaults(0, 0, 1, 2)},
      // Test_GenerateResourceRequests_MemoryPercentageValidation and
      // Test_MutateAdmission_MemoryPercentageValidation (limits; the requests side is below).
      {"percentage 50 is accepted",
       R"({"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem-percentage":"50"}})",
       true,
       Req(1, 0, 50, 0),
       {}},
      {"percentage 100 is accepted",
       R"({"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem-percentage":"100"}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      // TestMutateAdmissionDefaultsExclusiveCore
      {"exclusive via percentage in requests only",
       R"({"requests":{"nvidia.com/gpu":"1","nvidia.com/gpumem-percentage":"100"}})",
       true,
       Req(1, 0, 100, 100),
       {{"nvidia.com/gpucores", 100}}},
      {"explicit cores remains unchanged",
       R"({"limits":{"nvidia.com/gpu":"1","nvidia.com/gpucores":"70"}})",
       true,
       Req(1, 0, 100, 70),
       {}},
      {"explicit cores in requests remains unchanged",
       R"({"requests":{"nvidia.com/gpu":"1","nvidia.com/gpucores":"55"}})",
       true,
       Req(1, 0, 100, 55),
       {}},
      {"memory size present treated as shareable",
       R"({"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"8192"}})",
       true,
       Req(1, 8192, 0, 0),
       {}},
      // Test_FitCoreLimit ("fit success: but core limit can't exceed 100" of TestDevices_Fit)
      {"core limit can't exceed 100",
       R"({"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"512","nvidia.com/gpucores":"120"}})",
       true,
       Req(1, 512, 0, 100),
       {},
       {},
       "nvidia.com/gpucores: 120 is outside 0..100"},
  };
  for (const auto& c : cases) ExpectDefaulting(c);

  // Fractional percentages (50m, 50.5, 99.1): upstream's scheduler reads them as a request no card
  // fits; ours reports them as an error of the pod (and the webhook denies them), in limits and in
  // requests alike.
  for (const char* pct : {"50m", "50.5", "99.1"}) {
    SCOPED_TRACE(pct);
    const std::string value = std::string(R"("nvidia.com/gpumem-percentage":")") + pct + "\"";
    const json in_limits = json::parse(R"({"limits":{"nvidia.com/gpu":"1",)" + value + "}}");
    const json in_requests =
        json::parse(R"({"limits":{"nvidia.com/gpu":"1"},"requests":{)" + value + "}}");
    EXPECT_FALSE(ComputeAdmissionDefaults(in_limits, {}).ok());
    EXPECT_FALSE(ComputeAdmissionDefaults(in_requests, {}).ok());
    EXPECT_FALSE(ParseContainerRequest(in_limits, {}).ok());
  }
  // Test_MutateAdmission_MemoryPercentageValidation, requests side: 0, 50 and 100 are admitted,
  // 101, 150 and -1 denied.
  for (const auto& [pct, ok] : std::vector<std::pair<const char*, bool>>{{"0", true},
                                                                         {"50", true},
                                                                         {"100", true},
                                                                         {"101", false},
                                                                         {"150", false},
                                                                         {"-1", false}}) {
    const json resources = json::parse(
        std::string(
            R"({"limits":{"nvidia.com/gpu":"1"},"requests":{"nvidia.com/gpumem-percentage":")") +
        pct + R"("}})");
    EXPECT_EQ(ComputeAdmissionDefaults(resources, {}).ok(), ok) << pct;
  }
  // 16Gi / 16.0Gi / 1Gi of gpumem (a byte quantity, not MiB): upstream drops the request (the
  // container gets no device); ours reports the resource (docs/migration.md).
  for (const char* mem : {"16Gi", "16.0Gi"}) {
    const json resources = json::parse(
        std::string(R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":")") + mem + R"("}})");
    auto got = ParseContainerRequest(resources, {});
    ASSERT_FALSE(got.ok()) << mem;
    EXPECT_NE(std::string(got.status().message()).find("nvidia.com/gpumem"), std::string::npos);
  }
  EXPECT_FALSE(ParseContainerRequest(
                   json::parse(R"({"limits":{"nvidia.com/gpu":1,"nvidia.com/gpumem":"1Gi"}})"),
                   WithDefaults(0, 0, 1, 2))
                   .ok());
}

// TestCheckUUID (pkg/device) and TestCheckType / Test_checkType / TestCheckGPUtype_* of
// pkg/device/nvidia: how the selector annotations are read (blanks trimmed, empty items and empty
// or blank values no constraint). The matching itself (use list first, then the no-use list; type
// by case-insensitive substring) is the scheduler's: Hami tests below and
// scheduler/framework_test.cc.
TEST(NvidiaUpstream, TestCheckUUIDAndTypeAnnotations) {
  struct Case {
    const char* name;
    std::map<std::string, std::string> annotations;
    std::vector<std::string> use_uuids, nouse_uuids, use_types, nouse_types;
  };
  const Case cases[] = {
      {"don't set GPUUseUUID and GPUNoUseUUID annotation", {}, {}, {}, {}, {}},
      {"use set GPUUseUUID", {{"nvidia.com/use-gpuuuid", "abc,123"}}, {"abc", "123"}, {}, {}, {}},
      {"use don't set GPUUseUUID set GPUNoUseUUID",
       {{"nvidia.com/nouse-gpuuuid", "abc,123"}},
       {},
       {"abc", "123"},
       {},
       {}},
      {"use list with spaces around uuids, device matches after trim",
       {{"nvidia.com/use-gpuuuid", " abc , 123 "}},
       {"abc", "123"},
       {},
       {},
       {}},
      {"empty GPUUseUUID annotation should not filter out any device",
       {{"nvidia.com/use-gpuuuid", ""}},
       {},
       {},
       {},
       {}},
      {"whitespace-only GPUUseUUID annotation should not filter out any device",
       {{"nvidia.com/use-gpuuuid", "   "}},
       {},
       {},
       {},
       {}},
      {"empty GPUNoUseUUID annotation should not exclude any device",
       {{"nvidia.com/nouse-gpuuuid", ""}},
       {},
       {},
       {},
       {}},
      {"empty use value is no constraint", {{"nvidia.com/use-gputype", ""}}, {}, {}, {}, {}},
      {"whitespace-only nouse value excludes nothing",
       {{"nvidia.com/nouse-gputype", "   "}},
       {},
       {},
       {},
       {}},
      {"nouse with trailing comma only excludes named type",
       {{"nvidia.com/nouse-gputype", "V100,"}},
       {},
       {},
       {},
       {"V100"}},
      {"nouse with leading comma only excludes named type",
       {{"nvidia.com/nouse-gputype", ",V100"}},
       {},
       {},
       {},
       {"V100"}},
      {"use with trailing comma matches named type only",
       {{"nvidia.com/use-gputype", "V100,"}},
       {},
       {},
       {"V100"},
       {}},
      {"use list matches by substring",
       {{"nvidia.com/use-gputype", "A100,V100"}},
       {},
       {},
       {"A100", "V100"},
       {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = ParseDeviceSelectors(c.annotations);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->use_uuids, c.use_uuids);
    EXPECT_EQ(s->nouse_uuids, c.nouse_uuids);
    EXPECT_EQ(s->use_types, c.use_types);
    EXPECT_EQ(s->nouse_types, c.nouse_types);
  }
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
