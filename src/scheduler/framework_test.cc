// Filter semantics of the framework (upstream HAMi's device checks), as a table of cases run with
// the "hami" policy (node binpack, GPU spread).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"

namespace hami::scheduler {
namespace {

using testing::Describe;
using testing::MakeCluster;
using testing::NodeBuilder;
using testing::PodBuilder;

struct FilterCase {
  std::string name;
  std::vector<core::NodeInfo> nodes;
  std::vector<core::PodRequest> existing;
  core::PodRequest pod;
  std::string want;          // Describe() of the decision; "" = no node fits
  std::string want_failure;  // failure reason of the first node when nothing fits
  bool want_retryable = true;
};

class FilterTest : public ::testing::TestWithParam<FilterCase> {};

TEST_P(FilterTest, Decides) {
  const FilterCase& c = GetParam();
  auto s = MakeCluster("hami", c.nodes, c.existing);
  ScheduleOptions o;
  o.explain = true;
  auto d = s->Schedule(c.pod, nullptr, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), c.want);
  if (c.want.empty()) {
    ASSERT_FALSE(d->failures.empty());
    EXPECT_EQ(d->failures[0].reason, c.want_failure);
    EXPECT_EQ(d->failures[0].retryable, c.want_retryable);
  }
}

FilterCase Fits(std::string name, std::vector<core::NodeInfo> nodes,
                std::vector<core::PodRequest> existing, core::PodRequest pod, std::string want) {
  return FilterCase{std::move(name),
                    std::move(nodes),
                    std::move(existing),
                    std::move(pod),
                    std::move(want),
                    "",
                    true};
}

NodeBuilder N1() {
  return NodeBuilder("n1").Gpus(2, 16000);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FilterTest,
    ::testing::Values(Fits("fits_spread_takes_least_used", {N1()},
                           {PodBuilder("a").Gpu(1, 4000, 10).UseUuid("n1-gpu0")},
                           PodBuilder("p").Gpu(1, 4000, 10), "n1:n1-gpu1"),
                      FilterCase{"memory_too_big_never",
                                 {N1()},
                                 {},
                                 PodBuilder("p").Gpu(1, 20000, 0),
                                 "",
                                 "2/2 CardInsufficientMemory",
                                 false},
                      FilterCase{"memory_busy_retryable",
                                 {N1()},
                                 {PodBuilder("a").Gpu(2, 12000, 0)},
                                 PodBuilder("p").Gpu(1, 8000, 0),
                                 "",
                                 "2/2 CardInsufficientMemory",
                                 true},
                      FilterCase{"cores_busy",
                                 {N1()},
                                 {PodBuilder("a").Gpu(2, 1000, 60)},
                                 PodBuilder("p").Gpu(1, 1000, 50),
                                 "",
                                 "2/2 CardInsufficientCore",
                                 true},
                      FilterCase{"type_mismatch",
                                 {N1()},
                                 {},
                                 PodBuilder("p").Gpu(1, 1000, 0).UseType("a100"),
                                 "",
                                 "2/2 CardTypeMismatch",
                                 false},
                      Fits("type_substring_case_insensitive", {N1()}, {},
                           PodBuilder("p").Gpu(1, 1000, 0).UseType("t4"), "n1:n1-gpu1"),
                      FilterCase{"nouse_type",
                                 {N1()},
                                 {},
                                 PodBuilder("p").Gpu(1, 1000, 0).NoUseType("Tesla"),
                                 "",
                                 "2/2 CardTypeMismatch",
                                 false},
                      Fits("use_uuid_pins", {N1()}, {},
                           PodBuilder("p").Gpu(1, 1000, 0).UseUuid("n1-gpu1"), "n1:n1-gpu1"),
                      FilterCase{"nouse_uuid",
                                 {N1()},
                                 {},
                                 PodBuilder("p").Gpu(2, 1000, 0).NoUseUuid("n1-gpu1"),
                                 "",
                                 "1/2 CardUuidMismatch",
                                 false},
                      FilterCase{"exclusive_conflict",
                                 {NodeBuilder("n1").Gpus(1)},
                                 {PodBuilder("a").Gpu(1, 1000, 0)},
                                 PodBuilder("p").Gpu(1, 1000, 100),
                                 "",
                                 "1/1 ExclusiveDeviceAllocateConflict",
                                 true},
                      FilterCase{"compute_units_exhausted",
                                 {NodeBuilder("n1").Gpus(1)},
                                 {PodBuilder("a").Gpu(1, 1000, 100)},
                                 PodBuilder("p").Gpu(1, 1000, 0),
                                 "",
                                 "1/1 CardComputeUnitsExhausted",
                                 true},
                      FilterCase{"slots_exhausted",
                                 {NodeBuilder("n1").Gpus(1, 16000, "T4", 1)},
                                 {PodBuilder("a").Gpu(1, 1000, 0)},
                                 PodBuilder("p").Gpu(1, 1000, 0),
                                 "",
                                 "1/1 CardTimeSlicingExhausted",
                                 true},
                      FilterCase{"unhealthy_and_cordoned",
                                 {N1().Unhealthy(0).Cordon(1)},
                                 {},
                                 PodBuilder("p").Gpu(1, 1000, 0),
                                 "",
                                 "1/2 CardNotHealth, 1/2 CardCordoned",
                                 true},
                      FilterCase{"too_few_devices",
                                 {N1()},
                                 {},
                                 PodBuilder("p").Gpu(3, 1000, 0),
                                 "",
                                 "NodeInsufficientDevice",
                                 false},
                      FilterCase{"node_cpu",
                                 {N1().Cpu(4000)},
                                 {},
                                 PodBuilder("p").Gpu(1, 1000, 0, 8000),
                                 "",
                                 "Insufficient cpu",
                                 false},
                      FilterCase{"node_memory_busy",
                                 {N1().Memory(8000)},
                                 {PodBuilder("a").Cpu(100, 6000)},
                                 PodBuilder("p").Cpu(100, 4000),
                                 "",
                                 "Insufficient memory",
                                 true},
                      Fits("multi_gpu_distinct_cards", {N1()}, {}, PodBuilder("p").Gpu(2, 1000, 0),
                           "n1:n1-gpu1,n1-gpu0"),
                      FilterCase{"later_container_sees_earlier",
                                 {NodeBuilder("n1").Gpus(1)},
                                 {},
                                 PodBuilder("p").Gpu(1, 10000, 0).Gpu(1, 10000, 0),
                                 "",
                                 "1/1 CardInsufficientMemory",
                                 true},
                      Fits("two_containers_two_cards", {N1()}, {},
                           PodBuilder("p").Gpu(1, 10000, 0).Gpu(1, 10000, 0), "n1:n1-gpu1|n1-gpu0"),
                      Fits("init_peak_not_summed", {NodeBuilder("n1").Gpus(1)}, {},
                           PodBuilder("p").Init(1, 12000, 0).Gpu(1, 8000, 0), "n1:n1-gpu0|n1-gpu0"),
                      Fits("numa_bind_one_numa", {NodeBuilder("n1").Gpus(4).Numa(2, 1).Numa(3, 1)},
                           {PodBuilder("a").Gpu(1, 16000, 0).UseUuid("n1-gpu0")},
                           PodBuilder("p").Gpu(2, 1000, 0).NumaBind(), "n1:n1-gpu3,n1-gpu2"),
                      FilterCase{"numa_bind_not_fit",
                                 {NodeBuilder("n1").Gpus(4).Numa(2, 1).Numa(3, 1)},
                                 {},
                                 PodBuilder("p").Gpu(3, 1000, 0).NumaBind(),
                                 "",
                                 "NumaNotFit",
                                 true}),
    [](const auto& info) { return info.param.name; });

TEST(FilterTest, InitContainerUsageIsPeakNotSum) {
  auto s = MakeCluster("hami", {NodeBuilder("n1").Gpus(1)},
                       {PodBuilder("a").Init(1, 12000, 0).Gpu(1, 8000, 0)});
  auto st = s->cache().Snapshot("n1");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->usage[0].usedmem_mib, 12000);
  EXPECT_EQ(st->usage[0].used, 1);
}

TEST(FilterTest, BadPolicyAnnotationIsAnError) {
  auto s = MakeCluster("hami", {N1()});
  EXPECT_FALSE(s->Schedule(PodBuilder("p").Gpu(1, 1000, 0).GpuPolicy("bogus"), nullptr).ok());
  EXPECT_FALSE(s->Schedule(PodBuilder("p").Gpu(1, 1000, 0).NodePolicy("tight"), nullptr).ok());
  EXPECT_FALSE(s->Schedule(PodBuilder("p").Gpu(1, 1000, 0).Weights(0, 0, 0), nullptr).ok());
}

TEST(FilterTest, CandidateListAndMissingNodes) {
  auto s = MakeCluster("hami", {N1(), NodeBuilder("n2").Gpus(2)});
  std::vector<std::string> cand = {"n2", "ghost"};
  ScheduleOptions o;
  o.explain = true;
  auto d = s->Schedule(PodBuilder("p").Gpu(1, 1000, 0), &cand, o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "n2");
  ASSERT_EQ(d->failures.size(), 1u);
  EXPECT_EQ(d->failures[0].node, "ghost");
}

TEST(NormalizeTest, MinMaxAndClamp) {
  std::vector<int64_t> a = {10, 20, 30};
  NormalizeScores(Normalize::kMinMax, a);
  EXPECT_EQ(a, (std::vector<int64_t>{0, 50, 100}));
  std::vector<int64_t> b = {-5, 50, 150};
  NormalizeScores(Normalize::kClamp, b);
  EXPECT_EQ(b, (std::vector<int64_t>{0, 50, 100}));
  std::vector<int64_t> c = {7, 7};
  NormalizeScores(Normalize::kMinMax, c);
  EXPECT_EQ(c, (std::vector<int64_t>{100, 100}));
}

// One vocabulary: every reason has one spelling, ParseReason reads it back, and the per-card ones
// are upstream's strings (kube-scheduler shows them).
TEST(ReasonTest, NamesRoundTripAndAreUpstreams) {
  for (int i = 0; i < kReasonCount; ++i) {
    const auto r = static_cast<Reason>(i);
    EXPECT_EQ(ParseReason(ReasonName(r)), r) << ReasonName(r);
  }
  EXPECT_STREQ(ReasonName(Reason::kCardInsufficientMemory), "CardInsufficientMemory");
  EXPECT_STREQ(ReasonName(Reason::kInsufficientCpu), "Insufficient cpu");
  EXPECT_EQ(ParseReason("Unknown"), std::nullopt);
  EXPECT_EQ(ParseReason("cardinsufficientmemory"), std::nullopt);
}

}  // namespace
}  // namespace hami::scheduler
