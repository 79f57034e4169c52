#include "core/pod_request.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/testing/harness.h"

namespace hami::scheduler {
namespace {
using namespace testing;

struct Case {
  std::string name;
  std::string policy;
  std::vector<core::NodeInfo> nodes;
  std::vector<core::PodRequest> existing;
  core::PodRequest pod;
  std::string want;
};
class HamiTest : public ::testing::TestWithParam<Case> {};

TEST_P(HamiTest, Chooses) {
  const Case& c = GetParam();
  auto s = MakeCluster(c.policy, c.nodes, c.existing);
  auto d = s->Schedule(c.pod, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), c.want);
}

NodeBuilder Two(const std::string& n) {
  return NodeBuilder(n).Gpus(2, 16000);
}
PodBuilder Used(const std::string& uid, const std::string& uuid, int64_t mem) {
  return PodBuilder(uid).Gpu(1, mem, 10).UseUuid(uuid);
}
NodeBuilder Topo() {
  // gpu0-gpu1 and gpu2-gpu3 are NVLink pairs; cross pairs are PCIe.
  return NodeBuilder("t")
      .Gpus(4)
      .Link(0, 1, 200)
      .Link(2, 3, 200)
      .Link(0, 2, 10)
      .Link(0, 3, 10)
      .Link(1, 2, 10)
      .Link(1, 3, 10);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HamiTest,
    ::testing::Values(
        Case{"hami_node_binpack",
             "hami",
             {Two("a"), Two("b")},
             {Used("x", "b-gpu0", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10),
             "b:b-gpu1"},
        Case{"hami_spread_node",
             "hami-spread",
             {Two("a"), Two("b")},
             {Used("x", "a-gpu0", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10),
             "b:b-gpu1"},
        Case{"hami_binpack_gpu",
             "hami-binpack",
             {Two("a")},
             {Used("x", "a-gpu1", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10),
             "a:a-gpu1"},
        Case{"pod_annotation_overrides",
             "hami",
             {Two("a"), Two("b")},
             {Used("x", "b-gpu0", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10).NodePolicy("spread").GpuPolicy("binpack"),
             "a:a-gpu1"},
        Case{"mutex_only_idle_cards",
             "hami",
             {Two("a")},
             {Used("x", "a-gpu0", 1000)},
             PodBuilder("p").Gpu(1, 1000, 10).GpuPolicy("binpack,mutex"),
             "a:a-gpu1"},
        Case{"numa_key_highest_first",
             "hami",
             {NodeBuilder("a").Gpus(2).Numa(0, 1)},
             {},
             PodBuilder("p").Gpu(1, 1000, 10).GpuPolicy("numa"),
             "a:a-gpu0"},
        Case{"weights_memory_only",
             "hami-binpack",
             {Two("a")},
             {PodBuilder("x").Gpu(1, 8000, 0).UseUuid("a-gpu0"),
              PodBuilder("y").Gpu(1, 1000, 60).UseUuid("a-gpu1")},
             PodBuilder("p").Gpu(1, 1000, 0).Weights(0, 0, 1),
             "a:a-gpu0"},
        Case{"weights_core_only",
             "hami-binpack",
             {Two("a")},
             {PodBuilder("x").Gpu(1, 8000, 0).UseUuid("a-gpu0"),
              PodBuilder("y").Gpu(1, 1000, 60).UseUuid("a-gpu1")},
             PodBuilder("p").Gpu(1, 1000, 0).Weights(0, 1, 0),
             "a:a-gpu1"},
        Case{"topology_pair",
             "hami",
             {Topo()},
             {Used("x", "t-gpu0", 1000)},
             PodBuilder("p").Gpu(2, 1000, 10).GpuPolicy("topology-aware"),
             "t:t-gpu3,t-gpu2"},
        Case{"topology_single_least_connected",
             "hami",
             {Topo().Link(1, 3, 5)},
             {Used("x", "t-gpu2", 16000)},
             PodBuilder("p").Gpu(1, 1000, 10).GpuPolicy("topology-aware"),
             "t:t-gpu3"}),
    [](const auto& i) { return i.param.name; });

// Upstream HAMi's GPU choice (pkg/scheduler/policy/gpu_policy.go's sort, which Fit walks from the
// end; pkg/device/nvidia's topology search), each case named after the upstream test it comes
// from. Pods are pinned with UseUuid to give devices the usage (and so the score) the upstream case
// sets directly. Device names: "n-gpu<i>" in registration order.
TEST(Hami, UpstreamCases) {
  const auto on = [](const std::string& uuid, int64_t mem, int cores) {
    return PodBuilder("u" + uuid + std::to_string(mem)).Gpu(1, mem, cores).UseUuid(uuid).Build();
  };
  const auto pod = [](int nums) { return PodBuilder("p").Gpu(nums, 1000, 10); };
  const NodeBuilder three = NodeBuilder("n").Gpus(3);
  const std::vector<Case> cases = {
      // Upstream's behaviour: without numa-bind the score decides across NUMA nodes (P idlest on
      // NUMA 0).
      {"TestScorePrimarySelectsAcrossNuma",
       "hami",
       {NodeBuilder(three).Numa(1, 1).Numa(2, 1)},
       {on("n-gpu1", 12000, 80), on("n-gpu2", 8000, 50)},
       pod(1),
       "n:n-gpu0"},
      // numa-bind keeps the request on one NUMA node: only NUMA 0 has two cards.
      {"TestNumaBindSortPreservesAffinity",
       "hami",
       {NodeBuilder(three).Numa(2, 1)},
       {on("n-gpu0", 8000, 50), on("n-gpu2", 4000, 30)},
       pod(2).NumaBind(),
       "n:n-gpu1,n-gpu0"},
      // Spread, equal NUMA: the lower score (less used card) wins.
      {"TestDeviceUsageList_Less/Spread policy with same Numa",
       "hami",
       {NodeBuilder("n").Gpus(2)},
       {on("n-gpu1", 4000, 20)},
       pod(1),
       "n:n-gpu0"},
      // Binpack, equal NUMA: the higher score (busier card) wins.
      {"TestDeviceUsageList_Less/Binpack policy with same Numa",
       "hami",
       {NodeBuilder("n").Gpus(2)},
       {on("n-gpu0", 4000, 20)},
       pod(1).GpuPolicy("binpack"),
       "n:n-gpu0"},
      // Score first, NUMA only on equal scores: binpack takes the busier card, not the lower NUMA.
      {"TestDeviceUsageList_Less/Binpack policy with different Numa",
       "hami",
       {NodeBuilder("n").Gpus(2).Numa(0, 1)},
       {on("n-gpu0", 4000, 20)},
       pod(1).GpuPolicy("binpack"),
       "n:n-gpu0"},
      // Equal scores: the highest NUMA node, whatever the registration order.
      {"TestDeviceUsageList_Less/Spread policy equal scores: highest NUMA",
       "hami",
       {NodeBuilder(three).Numa(1, 1)},
       {},
       pod(1),
       "n:n-gpu1"},
      // Equal scores and NUMA: the card registered last (Fit walks the sorted list from the end).
      {"TestDeviceUsageList_Less/Spread policy equal scores and NUMA: last card",
       "hami",
       {three},
       {},
       pod(1),
       "n:n-gpu2"},
      {"TestDeviceUsageList_Less/Binpack policy equal scores and NUMA: last card",
       "hami",
       {three},
       {},
       pod(1).GpuPolicy("binpack"),
       "n:n-gpu2"},
      // mutex: idle cards only; among them the highest NUMA node, then the last card.
      {"TestDeviceUsageList_Less/mutex: idle card on the highest NUMA",
       "hami",
       {NodeBuilder(three).Numa(1, 1)},
       {on("n-gpu0", 1000, 0)},
       pod(1).GpuPolicy("mutex"),
       "n:n-gpu1"},
      // Chains: keys in the order written, then the last card; "numa" prefers the highest node.
      {"TestDeviceUsageList_Less/chain numa,binpack",
       "hami",
       {NodeBuilder(three).Numa(2, 1)},
       {on("n-gpu0", 4000, 20)},
       pod(1).GpuPolicy("numa,binpack"),
       "n:n-gpu2"},
      {"TestDeviceUsageList_Less/chain binpack,numa",
       "hami",
       {NodeBuilder(three).Numa(2, 1)},
       {on("n-gpu0", 4000, 20)},
       pod(1).GpuPolicy("binpack,numa"),
       "n:n-gpu0"},
      // A chain's last key is the device index, highest preferred, whatever the registration
      // order (issue 31: a node registering index 5 then index 2 gives index 5).
      {"TestDeviceUsageList_Less/chain binpack,numa: equal keys, highest index",
       "hami",
       {NodeBuilder("n").Gpus(2).Index(0, 5).Index(1, 2)},
       {},
       PodBuilder("p").Gpu(1, 100, 0).GpuPolicy("binpack,numa"),
       "n:n-gpu0"},
      {"TestDeviceUsageList_Less/chain spread,numa: equal keys, highest index",
       "hami",
       {NodeBuilder("n").Gpus(3).Index(0, 6).Index(1, 0).Index(2, 1)},
       {},
       pod(1).GpuPolicy("spread,numa"),
       "n:n-gpu0"},
      {"TestDeviceUsageList_Less/chain numa: equal NUMA, highest index",
       "hami",
       {NodeBuilder("n").Gpus(3).Index(0, 1).Index(1, 7).Index(2, 3)},
       {},
       pod(1).GpuPolicy("numa"),
       "n:n-gpu1"},
      // Two cards from a chain: the index order, highest first.
      {"TestDeviceUsageList_Less/chain binpack,numa: two cards by index",
       "hami",
       {NodeBuilder("n").Gpus(3).Index(0, 4).Index(1, 0).Index(2, 9)},
       {},
       pod(2).GpuPolicy("binpack,numa"),
       "n:n-gpu2,n-gpu0"},
      // A single value keeps upstream's own order: equal scores and NUMA, the card registered last.
      {"TestDeviceUsageList_Less/Binpack policy equal scores and NUMA: last card, not the index",
       "hami",
       {NodeBuilder("n").Gpus(2).Index(0, 5).Index(1, 2)},
       {},
       pod(1).GpuPolicy("binpack"),
       "n:n-gpu1"},
      // The score reads the memory request before the percentage, as Fit does (upstream's v2.11
      // line, PR #3106): 1000 MiB is the smaller share of the 16000 MiB card, so spread takes it;
      // read as 50 % both cards would tie and the card registered last would win.
      {"TestComputeScore/memory request before the percentage",
       "hami",
       {NodeBuilder("n").Gpus(1, 16000).Gpus(1, 8000)},
       {},
       [] {
         core::PodRequest p = PodBuilder("p").Gpu(1, 1000, 10);
         p.containers[0].devices[0].mem_percentage = 50;
         return p;
       }(),
       "n:n-gpu0"},
      {"TestDeviceUsageList_Less/chain without sort keys falls back to spread",
       "hami",
       {NodeBuilder(three).Numa(0, 1)},
       {on("n-gpu1", 4000, 20)},
       pod(1).GpuPolicy("mutex,topology-aware"),
       "n:n-gpu2"},
      // numa-bind with spread tries the highest NUMA node first, binpack the lowest.
      {"TestNumaBindSortPreservesAffinity/spread: highest NUMA first",
       "hami",
       {NodeBuilder("n").Gpus(4).Numa(2, 1).Numa(3, 1)},
       {},
       pod(2).NumaBind(),
       "n:n-gpu3,n-gpu2"},
      {"TestNumaBindSortPreservesAffinity/binpack: lowest NUMA first",
       "hami",
       {NodeBuilder("n").Gpus(4).Numa(2, 1).Numa(3, 1)},
       {},
       pod(2).NumaBind().GpuPolicy("binpack"),
       "n:n-gpu1,n-gpu0"},
      // gpu0 sums 300, gpu1 250, gpu2 350: one card goes to the least connected, gpu1.
      {"TestComputeWorstSingleCard",
       "hami",
       {NodeBuilder(three).Link(0, 1, 100).Link(0, 2, 200).Link(1, 2, 150)},
       {},
       pod(1).GpuPolicy("topology-aware"),
       "n:n-gpu1"},
      // [gpu0,gpu1]=100, [gpu0,gpu2]=200, [gpu1,gpu2]=150: two cards go to gpu0 and gpu2.
      {"TestComputeBestCombination",
       "hami",
       {NodeBuilder(three).Link(0, 1, 100).Link(0, 2, 200).Link(1, 2, 150)},
       {},
       pod(2).GpuPolicy("topology-aware"),
       "n:n-gpu2,n-gpu0"},
      // Negative pair scores: the best pair is still chosen when every pair is negative.
      {"TestComputeBestCombination/all pair scores negative",
       "hami",
       {NodeBuilder(three).Link(0, 1, -10).Link(0, 2, -5).Link(1, 2, -20)},
       {},
       pod(2).GpuPolicy("topology-aware"),
       "n:n-gpu2,n-gpu0"},
      {"TestComputeWorstSingleCard/all pair scores negative",
       "hami",
       {NodeBuilder(three).Link(0, 1, -10).Link(0, 2, -5).Link(1, 2, -20)},
       {},
       pod(1).GpuPolicy("topology-aware"),
       "n:n-gpu1"},
      // Equal topology: the first combination in the spread order (last cards first).
      {"TestComputeBestCombination/ties keep the policy order",
       "hami",
       {NodeBuilder("n").Gpus(4)},
       {},
       pod(2).GpuPolicy("topology-aware"),
       "n:n-gpu3,n-gpu2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = MakeCluster(c.policy, c.nodes, c.existing);
    auto d = s->Schedule(c.pod, nullptr);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(Describe(*d), c.want);
  }
}

// Upstream's pkg/device/nvidia/device_test.go Fit tests (TestDevices_Fit and the TestFit_* tests
// of non-MIG devices), one row per upstream case, through the scheduler: the chosen devices, or
// upstream's reason when nothing fits. Usage upstream sets on a device directly comes from pods
// pinned there (UseUuid). Device names: "n-gpu<i>" in registration order; every node is one
// NVIDIA node of `count` 100 slots unless the row says otherwise. Upstream's uuid rows ask 2 GPUs
// of a 1-GPU node, and its AllocatedCardsInsufficientRequest rows more GPUs than the node has:
// upstream's scheduler (score.go) refuses such a node before Fit, with NodeInsufficientDevice, and
// so does ours; the uuid rows here ask one GPU to reach the per-card check.
TEST(HamiUpstream, TestDevices_Fit) {
  struct Row {
    std::string name;
    std::vector<core::NodeInfo> nodes;
    std::vector<core::PodRequest> existing;
    core::PodRequest pod;
    std::string want;    // Describe() of the decision, "" when nothing fits
    std::string reason;  // the node's failure reason when nothing fits
  };
  const auto gpus = [](int n, int64_t mem, int split = 100) {
    return NodeBuilder("n").Gpus(n, mem, "NVIDIA-Tesla T4", split);
  };
  const auto on = [](const std::string& uuid, int64_t mem, int cores) {
    return PodBuilder("u" + uuid + std::to_string(mem) + "-" + std::to_string(cores))
        .Gpu(1, mem, cores)
        .UseUuid(uuid)
        .Build();
  };
  const auto pod = [](int nums, int64_t mem, int cores) {
    return PodBuilder("p").Gpu(nums, mem, cores);
  };
  core::PodRequest percentage = pod(1, 0, 20);
  percentage.containers[0].devices[0].mem_percentage = 10;
  const std::vector<Row> rows = {
      {"fit success", {gpus(2, 128)}, {}, pod(1, 64, 50), "n:n-gpu1", ""},
      {"fit fail: memory not enough",
       {gpus(1, 128)},
       {},
       pod(1, 512, 50),
       "",
       "1/1 CardInsufficientMemory"},
      {"fit fail: core not enough",
       {gpus(1, 1024)},
       {on("n-gpu0", 1, 100)},
       pod(1, 512, 50),
       "",
       "1/1 CardInsufficientCore"},
      // Upstream: a request of another vendor's type; ours: a type selector no device matches.
      {"fit fail: type mismatch",
       {gpus(1, 128)},
       {},
       pod(1, 64, 50).UseType("OtherType"),
       "",
       "1/1 CardTypeMismatch"},
      {"fit fail: user assign use uuid mismatch",
       {gpus(1, 1280)},
       {},
       pod(1, 512, 50).UseUuid("n-gpu9"),
       "",
       "1/1 CardUuidMismatch"},
      {"fit fail: user assign no use uuid match",
       {gpus(1, 1280)},
       {},
       pod(1, 512, 50).NoUseUuid("n-gpu0"),
       "",
       "1/1 CardUuidMismatch"},
      {"fit fail: card overused",
       {gpus(1, 1280, 1)},
       {on("n-gpu0", 1, 0)},
       pod(1, 512, 50),
       "",
       "1/1 CardTimeSlicingExhausted"},
      {"fit fail:  card exclusively",
       {gpus(1, 1280)},
       {on("n-gpu0", 1, 0)},
       pod(1, 512, 100),
       "",
       "1/1 ExclusiveDeviceAllocateConflict"},
      {"fit fail:  CardComputeUnitsExhausted",
       {gpus(1, 1280)},
       {on("n-gpu0", 1, 100)},
       pod(1, 512, 0),
       "",
       "1/1 CardComputeUnitsExhausted"},
      {"fit fail:  AllocatedCardsInsufficientRequest",
       {gpus(1, 1280)},
       {on("n-gpu0", 1, 10)},
       pod(2, 512, 20),
       "",
       "NodeInsufficientDevice"},
      {"fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards",
       {gpus(2, 1280)},
       {},
       pod(3, 512, 20),
       "",
       "NodeInsufficientDevice"},
      {"fit success:  memory percentage",
       {gpus(1, 1280)},
       {on("n-gpu0", 1, 10)},
       percentage,
       "n:n-gpu0",
       ""},
      {"fit fail:  CardNotHealth",
       {gpus(1, 1280).Unhealthy(0)},
       {},
       pod(1, 0, 20),
       "",
       "1/1 CardNotHealth"},
      {"TestFit_DeviceCordon/cordoned device is skipped, healthy sibling still fits",
       {gpus(2, 128).Cordon(1)},
       {},
       pod(1, 64, 50),
       "n:n-gpu0",
       ""},
      {"TestFit_DeviceCordon/all devices cordoned fails with CardCordoned reason",
       {gpus(2, 128).Cordon(0).Cordon(1)},
       {},
       pod(1, 64, 50),
       "",
       "2/2 CardCordoned"},
      {"TestFit_DeviceCordon/running pods on a cordoned device are unaffected",
       {gpus(2, 128).Cordon(1)},
       {},  // a cordoned device takes no new pod; its usage is kept (cluster state tests)
       pod(1, 64, 50),
       "n:n-gpu0",
       ""},
      {"TestFit_NumaSwitching",
       {NodeBuilder("n").Gpus(3, 8192, "NVIDIA-Tesla T4", 10).Numa(0, 1).Numa(1, 1)},
       {},
       pod(2, 100, 10).NumaBind(),
       "n:n-gpu1,n-gpu0",
       ""},
      {"TestFit_MutexPolicy/one card: the idle one",
       {NodeBuilder("n").Gpus(2, 8192)},
       {on("n-gpu0", 100, 10)},
       pod(1, 100, 10).GpuPolicy("mutex"),
       "n:n-gpu1",
       ""},
      {"TestFit_MutexPolicy/two cards: only one is idle",
       {NodeBuilder("n").Gpus(2, 8192)},
       {on("n-gpu0", 100, 10)},
       pod(2, 100, 10).GpuPolicy("mutex"),
       "",
       "1/2 ExclusiveDeviceAllocateConflict"},
      {"TestFit_TopologyExactMatch",
       {NodeBuilder("n").Gpus(2, 8192)},
       {},
       pod(2, 100, 10).GpuPolicy("topology-aware"),
       "n:n-gpu1,n-gpu0",
       ""},
      {"TestFit_TopologyNegativeScores/SingleGPU",
       {NodeBuilder("n").Gpus(3, 8192).Link(0, 1, -5).Link(0, 2, -3).Link(1, 2, -1)},
       {},
       pod(1, 100, 10).GpuPolicy("topology-aware"),
       "n:n-gpu0",
       ""},
      {"TestFit_TopologyNegativeScores/MultiGPU",
       {NodeBuilder("n").Gpus(3, 8192).Link(0, 1, -5).Link(0, 2, -3).Link(1, 2, -1)},
       {},
       pod(2, 100, 10).GpuPolicy("topology-aware"),
       "n:n-gpu2,n-gpu1",
       ""},
      {"TestFit_TopologyBestCombinationZeroScores",
       {NodeBuilder("n").Gpus(3, 8192).Link(0, 1, 0).Link(0, 2, 0).Link(1, 2, 0)},
       {},
       pod(2, 100, 10).GpuPolicy("topology-aware"),
       "n:n-gpu2,n-gpu1",
       ""},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const Decision d = Explain("hami", r.nodes, r.existing, r.pod);
    EXPECT_EQ(Describe(d), r.want);
    if (r.want.empty()) {
      ASSERT_EQ(d.failures.size(), 1u);
      EXPECT_EQ(d.failures[0].reason, r.reason);
    }
  }
}

// Selector matching: TestCheckUUID (pkg/device), TestCheckType, Test_checkType,
// TestCheckType_AllocateMode and TestCheckGPUtype_* (pkg/device/nvidia). A device fits when the
// row says so; the annotations' parsing is in vendors/nvidia/request_test.cc.
TEST(HamiUpstream, TestCheckUUIDAndType) {
  struct Row {
    std::string name;
    std::string type;  // the device's type
    std::string mode;  // the device's mode ("" = hami-core)
    std::vector<std::string> use_uuids, nouse_uuids, use_types, nouse_types;
    std::string vgpu_mode;
    bool fits;
  };
  const std::vector<Row> rows = {
      {"TestCheckUUID/no annotation", "NVIDIA-A100", "", {}, {}, {}, {}, "", true},
      {"TestCheckUUID/use list, device match",
       "NVIDIA-A100",
       "",
       {"n-gpu0", "123"},
       {},
       {},
       {},
       "",
       true},
      {"TestCheckUUID/use list, device don't match",
       "NVIDIA-A100",
       "",
       {"1abc", "123"},
       {},
       {},
       {},
       "",
       false},
      {"TestCheckUUID/nouse list, device match",
       "NVIDIA-A100",
       "",
       {},
       {"n-gpu0", "123"},
       {},
       {},
       "",
       false},
      {"TestCheckUUID/nouse list, device don't match",
       "NVIDIA-A100",
       "",
       {},
       {"1abc"},
       {},
       {},
       "",
       true},
      {"TestCheckUUID/both set, device in use list but also in nouse list",
       "NVIDIA-A100",
       "",
       {"n-gpu0", "123"},
       {"n-gpu0"},
       {},
       {},
       "",
       false},
      {"TestCheckUUID/both set, device in use list and not in nouse list",
       "NVIDIA-A100",
       "",
       {"n-gpu0", "123"},
       {"456"},
       {},
       {},
       "",
       true},
      {"TestCheckType/use list matches by substring",
       "NVIDIA-A100",
       "",
       {},
       {},
       {"A100", "V100"},
       {},
       "",
       true},
      {"TestCheckType/use list does not match", "NVIDIA-A100", "", {}, {}, {"V100"}, {}, "", false},
      {"TestCheckType/nouse list matches excludes the device",
       "NVIDIA-A100",
       "",
       {},
       {},
       {},
       {"A100"},
       "",
       false},
      {"TestCheckType/nouse list does not match keeps the device",
       "NVIDIA-A100",
       "",
       {},
       {},
       {},
       {"V100"},
       "",
       true},
      {"TestCheckType/use satisfied and nouse matches still excludes",
       "NVIDIA-A100",
       "",
       {},
       {},
       {"A100"},
       {"A100"},
       "",
       false},
      {"Test_checkType/use A10 on an A100 (substring)",
       "NVIDIA A100",
       "",
       {},
       {},
       {"A10"},
       {},
       "",
       true},
      {"Test_checkType/use A10, nouse A100, on an A100",
       "NVIDIA A100",
       "",
       {},
       {},
       {"A10"},
       {"A100"},
       "",
       false},
      {"Test_checkType/use A10, nouse A100, on an A10",
       "NVIDIA A10",
       "",
       {},
       {},
       {"A10"},
       {"A100"},
       "",
       true},
      {"TestCheckGPUtype_InUseMismatch", "NVIDIA-V100", "", {}, {}, {"A100"}, {}, "", false},
      {"TestCheckType_AllocateMode/mps on a hami-core device",
       "NVIDIA-A100",
       "hami-core",
       {},
       {},
       {},
       {},
       "mps",
       false},
      {"TestCheckType_AllocateMode/hami-core on a hami-core device",
       "NVIDIA-A100",
       "hami-core",
       {},
       {},
       {},
       {},
       "hami-core",
       true},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    core::NodeInfo node = NodeBuilder("n").Gpus(1, 16000, r.type);
    node.devices[0].mode = r.mode;
    core::PodRequest pod = PodBuilder("p").Gpu(1, 1000, 10);
    pod.selectors.use_uuids = r.use_uuids;
    pod.selectors.nouse_uuids = r.nouse_uuids;
    pod.selectors.use_types = r.use_types;
    pod.selectors.nouse_types = r.nouse_types;
    pod.selectors.vgpu_mode = r.vgpu_mode;
    const Decision d = Explain("hami", {node}, {}, pod);
    EXPECT_EQ(Describe(d), r.fits ? "n:n-gpu0" : "");
  }
}

// pkg/scheduler/scheduler_test.go Test_Filter: node policy x GPU policy on two nodes of two 8000
// MiB GPUs, device1 (node1) 25% used, device4 (node2) 75% used; the pod asks 1 GPU, 1000 MiB, 20
// cores.
TEST(HamiUpstream, Test_Filter) {
  const std::vector<core::NodeInfo> nodes = {NodeBuilder("node1").Gpus(2, 8000),
                                             NodeBuilder("node2").Gpus(2, 8000)};
  const std::vector<core::PodRequest> existing = {
      PodBuilder("pod1").Gpu(1, 2000, 25).UseUuid("node1-gpu0"),
      PodBuilder("pod2").Gpu(1, 6000, 75).UseUuid("node2-gpu1")};
  struct Row {
    const char* name;
    const char* node_policy;
    const char* gpu_policy;
    const char* want;
  };
  const Row rows[] = {
      {"node use binpack gpu use binpack policy", "binpack", "binpack", "node2:node2-gpu1"},
      {"node use binpack gpu use spread policy", "binpack", "spread", "node2:node2-gpu0"},
      {"node use spread gpu use binpack policy", "spread", "binpack", "node1:node1-gpu0"},
      {"node use spread gpu use spread policy", "spread", "spread", "node1:node1-gpu1"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const core::PodRequest pod =
        PodBuilder("test").Gpu(1, 1000, 20).NodePolicy(r.node_policy).GpuPolicy(r.gpu_policy);
    EXPECT_EQ(Describe(Explain("hami", nodes, existing, pod)), r.want);
  }
}

// pkg/scheduler/score_test.go Test_calcScore: the card each case chooses (its node scores are
// upstream's internal floats). GPU policy spread, cards of 8000 MiB and 10 slots; the pod asks 1
// GPU, 1000 MiB, 30 cores; "50%" is a card with 4000 MiB and 50 cores in use.
TEST(HamiUpstream, Test_calcScore) {
  const auto half = [](const std::string& uuid) {
    return PodBuilder("half-" + uuid).Gpu(1, 4000, 50).UseUuid(uuid).Build();
  };
  struct Row {
    const char* name;
    int gpus;
    std::vector<core::PodRequest> existing;
    const char* want;
  };
  const std::vector<Row> rows = {
      {"one node one device one pod one container use one device.", 1, {}, "node1:node1-gpu0"},
      {"one node one device one pod one container use one device,but this device before having "
       "use.",
       1,
       {half("node1-gpu0")},
       "node1:node1-gpu0"},
      {"one node two device one pod one container use one device", 2, {}, "node1:node1-gpu1"},
      {"one node two device one pod one container use one device,but having use 50%",
       2,
       {half("node1-gpu1")},
       "node1:node1-gpu0"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const core::PodRequest pod = PodBuilder("test1").Gpu(1, 1000, 30).GpuPolicy("spread");
    EXPECT_EQ(Describe(Explain("hami", {NodeBuilder("node1").Gpus(r.gpus, 8000)}, r.existing, pod)),
              r.want);
  }
}

// pkg/scheduler/policy_fallback_placement_test.go TestPlacementUnderUnrecognizedPolicy: with no
// hami.io/gpu-scheduler-policy, or one upstream does not recognise ("binpakc", dropped when the pod
// is read), the card is the configured policy's (hami-binpack or hami-spread); a valid annotation
// overrides it. Cards: idle, mid (2 pods, 50 cores, 4096 MiB), busy (3 pods, 75 cores, 6144 MiB).
TEST(HamiUpstream, TestPlacementUnderUnrecognizedPolicy) {
  const NodeBuilder node = NodeBuilder("n").Gpus(3, 8192);
  std::vector<core::PodRequest> existing;
  for (int i = 0; i < 2; ++i)
    existing.push_back(
        PodBuilder("mid" + std::to_string(i)).Gpu(1, 2048, 25).UseUuid("n-gpu1").Build());
  for (int i = 0; i < 3; ++i)
    existing.push_back(
        PodBuilder("busy" + std::to_string(i)).Gpu(1, 2048, 25).UseUuid("n-gpu2").Build());
  const auto place = [&](const std::string& configured, const char* annotation) {
    core::PodRequest pod = PodBuilder("fallback-pod").Gpu(1, 1024, 10);
    if (annotation != nullptr) {
      auto parsed = core::ParsePodJson(nlohmann::json{
          {"metadata", {{"annotations", {{"hami.io/gpu-scheduler-policy", annotation}}}}}});
      EXPECT_TRUE(parsed.ok()) << parsed.status();
      if (parsed.ok()) pod.gpu_policy = parsed->gpu_policy;
    }
    return Describe(Explain(configured, {node}, existing, pod));
  };
  EXPECT_EQ(place("hami-binpack", "binpack"), "n:n-gpu2");
  EXPECT_EQ(place("hami-binpack", "spread"), "n:n-gpu0");
  for (const auto& [configured, want] : std::vector<std::pair<std::string, std::string>>{
           {"hami-binpack", "n:n-gpu2"}, {"hami-spread", "n:n-gpu0"}}) {
    SCOPED_TRACE("cluster default " + configured);
    EXPECT_EQ(place(configured, nullptr), want);    // no annotation
    EXPECT_EQ(place(configured, "binpakc"), want);  // unrecognized: the configured default
    EXPECT_EQ(place(configured, ""), want);         // empty: the configured default
  }
}

// pkg/scheduler/score_model_type_test.go TestBinpackPacksSmallerCardOnMixedCapacityNode: binpack
// ranks cards by their usage after placement, so a 20 GiB request goes to the idle 40 GB card
// (0.90 used after) rather than the 80 GB one already in use (0.85 after).
TEST(HamiUpstream, TestBinpackPacksSmallerCardOnMixedCapacityNode) {
  const core::NodeInfo node = NodeBuilder("n")
                                  .Gpus(1, 40960, "NVIDIA A100-SXM4-40GB")
                                  .Gpus(1, 81920, "NVIDIA A100-SXM4-80GB");
  const core::PodRequest used = PodBuilder("used").Gpu(1, 4096, 5).UseUuid("n-gpu1");
  const core::PodRequest trainer = PodBuilder("trainer").Gpu(1, 20480, 30).GpuPolicy("binpack");
  EXPECT_EQ(Describe(Explain("hami", {node}, {used}, trainer)), "n:n-gpu0");
}

}  // namespace
}  // namespace hami::scheduler
