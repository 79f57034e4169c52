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

// Quota-aware card choice (ScheduleOptions::quota; upstream's fitQuota inside Fit, its
// Test_ResourceQuota): a card whose grant would take the pod past what its namespace's quotas leave
// is skipped like one without the memory, counting every device of a request and the containers
// before it. One node of upstream's four cards: 2000, 8000, 4000 and 6000 MiB.
struct QuotaCase {
  std::string name;
  core::PodRequest pod;
  QuotaRoom room;
  std::string want;          // Describe() of the decision; "" = no node fits
  std::string want_failure;  // when nothing fits
  bool want_retryable = true;
};

QuotaRoom Room(int64_t mem_mib, int64_t cores = QuotaRoom::kUnlimited,
               std::string vendor = core::kNvidiaVendor) {
  return QuotaRoom{{{std::move(vendor), mem_mib, cores}}};
}

TEST(FilterTest, QuotaAwareCardChoice) {
  const core::NodeInfo node =
      NodeBuilder("n1").Gpus(1, 2000).Gpus(1, 8000).Gpus(1, 4000).Gpus(1, 6000);
  const QuotaCase cases[] = {
      // Without a quota the policy takes the card registered last for a whole card (a tie).
      {"no quota: the policy's card", PodBuilder("p").Gpu(1, 0, 0), {}, "n1:n1-gpu3", ""},
      {"another vendor's quota does not count", PodBuilder("p").Gpu(1, 0, 0), Room(1, 1, "Hygon"),
       "n1:n1-gpu3", ""},
      // Test_ResourceQuota "unspecified device Resourcequota pass" / "... deny".
      {"a whole card: the one the quota leaves room for", PodBuilder("p").Gpu(1, 0, 0),
       Room(2000, 100), "n1:n1-gpu0", ""},
      {"a whole card: none within the quota", PodBuilder("p").Gpu(1, 0, 0), Room(1500, 100), "",
       "4/4 ResourceQuotaNotFit"},
      // Test_ResourceQuota "multi device Resourcequota pass" / "... deny": every device counts.
      {"two devices within the quota", PodBuilder("p").Gpu(2, 2000, 100), Room(4000, 200),
       "n1:n1-gpu1,n1-gpu3", ""},
      // 3000 MiB fits three cards alone, no two of them together (the 2000 MiB card never holds
      // it).
      {"two devices past the memory quota", PodBuilder("p").Gpu(2, 3000, 60), Room(4000, 200), "",
       "1/4 CardInsufficientMemory, 3/4 ResourceQuotaNotFit", false},
      {"two devices past the cores quota", PodBuilder("p").Gpu(2, 1000, 60), Room(8000, 100), "",
       "4/4 ResourceQuotaNotFit"},
      // Two whole cards within 9000 MiB: the policy's pair (6000 + 4000) is over; its order with
      // each card that would pass the room skipped (upstream's loop) gives 6000 + 2000.
      {"two whole cards: the policy's order within the quota", PodBuilder("p").Gpu(2, 0, 0),
       Room(9000), "n1:n1-gpu3,n1-gpu0", ""},
      // 8000 and 6000 MiB alone are over; 4000 + 2000 together.
      {"two whole cards: no pair within the quota", PodBuilder("p").Gpu(2, 0, 0), Room(5000), "",
       "4/4 ResourceQuotaNotFit"},
      // Within 6000 MiB the policy's order (6000 first) leaves no second card: the smallest pair.
      {"two whole cards: only the smallest pair within the quota", PodBuilder("p").Gpu(2, 0, 0),
       Room(6000), "n1:n1-gpu0,n1-gpu2", ""},
      // Containers add up: the second whole card must fit what the first left.
      {"two containers: the second takes what the first left",
       PodBuilder("p").Gpu(1, 0, 0).Gpu(1, 0, 0), Room(8000), "n1:n1-gpu3|n1-gpu0", ""},
      // The first container leaves room for the second's smallest whole card (2000 MiB).
      {"two containers: the first leaves room for the second",
       PodBuilder("p").Gpu(1, 0, 0).Gpu(1, 0, 0), Room(6000), "n1:n1-gpu2|n1-gpu0", ""},
      {"two containers past the quota together", PodBuilder("p").Gpu(1, 3000, 0).Gpu(1, 3000, 0),
       Room(5000), "", "1/4 CardInsufficientMemory, 3/4 ResourceQuotaNotFit", false},
  };
  auto s = MakeCluster("hami", {node});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ScheduleOptions o;
    o.explain = true;
    o.quota = &c.room;
    auto d = s->Schedule(c.pod, nullptr, o);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(Describe(*d), c.want);
    if (c.want.empty()) {
      ASSERT_EQ(d->failures.size(), 1u);
      EXPECT_EQ(d->failures[0].reason, c.want_failure);
      // The quota's refusal is retryable (the namespace's usage may go down); a card too small
      // for the request is not.
      EXPECT_EQ(d->failures[0].retryable, c.want_retryable);
    }
  }
}

// A vendor with its own rules (Grant decides the take): the quota sees the vendor's grant.
class WholeCardRules final : public VendorRules {
 public:
  bool Covers(const std::string& vendor) const override { return vendor == "X"; }
  std::unique_ptr<const PodState> Prepare(const core::PodRequest&) const override {
    return std::make_unique<PodState>();
  }
  Verdict Check(const PodState&, const core::DeviceRequest&, const core::DeviceInfo&,
                const core::DeviceUsage& u) const override {
    if (u.used > 0) return {Reason::kCardTimeSlicingExhausted, false};
    return {};
  }
  Take Grant(const core::DeviceRequest&, const core::DeviceInfo& d) const override {
    return {d.devmem_mib, 100};
  }
  bool Pick(const PodState&, const core::DeviceRequest&, std::span<const core::DeviceInfo>,
            std::span<const core::DeviceUsage>, std::span<const int>,
            std::vector<int>*) const override {
    return false;
  }
};

TEST(FilterTest, QuotaAwareCardChoiceOfAVendorWithRules) {
  WholeCardRules rules;
  SchedulerOptions so;
  so.vendor_rules = &rules;
  auto s = Scheduler::Create(so);
  ASSERT_TRUE(s.ok()) << s.status();
  core::NodeInfo node = NodeBuilder("x1").Gpus(1, 2000).Gpus(1, 8000);
  for (auto& d : node.devices) d.vendor = "X";
  (*s)->UpsertNode(node);
  core::PodRequest pod = PodBuilder("p").Gpu(1, 0, 0).Build();
  pod.containers[0].devices[0].vendor = "X";
  ScheduleOptions o;
  o.explain = true;
  const QuotaRoom none, room = Room(2000, QuotaRoom::kUnlimited, "X"), tight = Room(8000, 99, "X");
  struct Case {
    const char* name;
    const QuotaRoom* room;
    std::string want;
  } const cases[] = {
      {"no quota", &none, "x1:x1-gpu1"},
      {"memory quota", &room, "x1:x1-gpu0"},
      {"cores quota", &tight, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    o.quota = c.room;
    auto d = (*s)->Schedule(pod, nullptr, o);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(Describe(*d), c.want);
    if (c.want.empty()) {
      ASSERT_EQ(d->failures.size(), 1u);
      EXPECT_EQ(d->failures[0].reason, "2/2 ResourceQuotaNotFit");
    }
  }
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
