#include "scheduler/policies/fgd_balance/fgd_balance.h"

#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;
using fgd_balance::BalanceScorer;
using fgd_balance::CpuDemand;
using fgd_balance::StrandedMilli;

TEST(FgdBalanceTest, StrandedMilli) {
  struct Case {
    int64_t gpu_free, cpu_free;
    CpuDemand::Ratio ratio;
    int64_t want;
  };
  const Case cases[] = {
      {2000, 8000, {2000, 1000}, 0},      // 2 cores per GPU: 8 cores serve 4 GPUs
      {2000, 2000, {2000, 1000}, 1000},   // one GPU's worth of CPU left for two free GPUs
      {2000, 0, {2000, 1000}, 2000},      // no CPU: every free milli stranded
      {2000, -500, {2000, 1000}, 2000},   // overcommitted CPU counts as none
      {500, 600, {12000, 1000}, 450},     // 12 cores per GPU: 0.6 cores serve 50 milli
      {0, 0, {2000, 1000}, 0},            // nothing free, nothing stranded
      {2000, 0, {0, 1000}, 0},            // GPU pods asked no CPU: nothing measured
      {2000, 0, {0, 0}, 0},               // no GPU pod seen yet
      {2000, int64_t{1} << 62, {int64_t{1} << 30, int64_t{1} << 30}, 0},   // huge node: no overflow
  };
  for (const auto& c : cases)
    EXPECT_EQ(StrandedMilli(c.gpu_free, c.cpu_free, c.ratio), c.want) << c.gpu_free << " " << c.cpu_free;
}

TEST(FgdBalanceTest, LearnsCpuPerGpuFromGpuPodsOnly) {
  CpuDemand d;
  EXPECT_EQ(d.Get().milli, 0);
  d.Observe(SimPod("cpu", 0, 0, 64000).Build());      // CPU-only: not a GPU pod
  EXPECT_EQ(d.Get().milli, 0);
  d.Observe(SimPod("whole", 1, 1000, 12000).Build());
  d.Observe(SimPod("half", 1, 500, 3000).Build());
  d.Observe(SimPod("two", 2, 1000, 9000).Build());
  EXPECT_EQ(d.Get().cpu, 24000);
  EXPECT_EQ(d.Get().milli, 3500);
  // Long runs halve both sums: the ratio stays, nothing overflows.
  for (int i = 0; i < 200'000; ++i) d.Observe(SimPod("big", 8, 1000, 1'000'000).Build());
  const CpuDemand::Ratio r = d.Get();
  EXPECT_LE(r.milli, int64_t{1} << 30);
  EXPECT_NEAR(static_cast<double>(r.cpu) / r.milli, 125.0, 1.0);
}

TEST(FgdBalanceTest, FgdLevelFirstThenLessStranding) {
  // One FGD level is about 40 milli of fragmentation near zero; a stranded milli weighs 1e6 ppm*milli.
  struct Case {
    int64_t delta_a, stranded_a, delta_b, stranded_b;
    bool a_wins;
  };
  const Case cases[] = {
      {0, 0, 0, 1, true},                          // same level: less stranding wins
      {0, 5, 0, 1, false},
      {0, 0, 400'000'000, 0, false},               // FGD prefers b by 400 milli
      {0, 0, 400'000'000, 500, true},              // ... but b strands 500 milli for lack of CPU
      {-200'000'000, 0, 0, 200, true},             // equal combined change: a strands less
  };
  for (const auto& c : cases) {
    const int64_t a = BalanceScorer::Combine(c.delta_a, c.stranded_a);
    const int64_t b = BalanceScorer::Combine(c.delta_b, c.stranded_b);
    if (c.a_wins) EXPECT_GT(a, b) << c.delta_a << " " << c.stranded_a << " vs " << c.delta_b << " " << c.stranded_b;
    else EXPECT_LT(a, b) << c.delta_a << " " << c.stranded_a << " vs " << c.delta_b << " " << c.stranded_b;
  }
}

// Node a: 2 free GPUs but only 8 cores. Node b: 1 free GPU (the other taken) and 62 cores. GPU pods
// ask 2 cores per GPU. A CPU-only pod of 6 cores fits both and changes no shape's fit, so FGD rates
// both alike and the node order sends it to a, leaving a 2 cores: one of a's free GPUs can no longer
// be used. fgd-balance sees that a would strand 1000 milli and sends it to b, so the three GPU pods
// that follow all fit; under FGD the third fails.
TEST(FgdBalanceTest, KeepsCpuNextToFreeGpus) {
  struct Case {
    const char* policy;
    const char* cpu_pod_node;
    int gpu_pods_placed;
  };
  const Case cases[] = {
      {"fgd", "a", 2},
      {"fgd-balance", "b", 3},
  };
  for (const auto& c : cases) {
    auto s = MakeCluster(c.policy, {SimNode("a", 2, 8000), SimNode("b", 2, 64000)},
                         {SimPod("pinned", 1, 1000, 2000).UseUuid("b-gpu0")});
    auto d = s->ScheduleAndReserve(SimPod("cpu", 0, 0, 6000).Build(), nullptr);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->node, c.cpu_pod_node) << c.policy;
    int placed = 0;
    for (int i = 0; i < 3; ++i) {
      auto g = s->ScheduleAndReserve(SimPod("g" + std::to_string(i), 1, 1000, 2000).Build(), nullptr);
      ASSERT_TRUE(g.ok()) << g.status();
      placed += !g->node.empty();
    }
    EXPECT_EQ(placed, c.gpu_pods_placed) << c.policy;
  }
}

// The bounded scan's contract, node by node: the bound is never below the score, through a run that
// drains CPU (CPU-only and CPU-heavy pods among sharing and whole-GPU ones) so stranding appears.
TEST(FgdBalanceTest, UpperBoundIsAtLeastTheScore) {
  auto s = MakeCluster("fgd-balance", {SimNode("a", 8, 24000), SimNode("b", 2, 64000), SimNode("c", 4, 16000),
                                       SimNode("d", 8, 96000)});
  const Profile& profile = s->profile();
  ASSERT_TRUE(profile.scorer->bounded());
  struct Shape {
    int gpus, milli;
    int64_t cpu;
  };
  const Shape shapes[] = {{0, 0, 8000}, {1, 1000, 4000}, {1, 500, 2000}, {1, 300, 6000}, {2, 1000, 3000},
                          {0, 0, 12000}, {1, 700, 1000}, {4, 1000, 8000}};
  Rng rng(7);
  int checked = 0, bounded = 0;
  for (int i = 0; i < 60; ++i) {
    const Shape& sh = shapes[i % std::size(shapes)];
    const core::PodRequest pod = SimPod("p" + std::to_string(i), sh.gpus, sh.milli, sh.cpu).Build();
    ExpectBoundsHold(*s, pod, rng, "pod " + std::to_string(i), &checked, &bounded);
    ASSERT_TRUE(s->ScheduleAndReserve(pod, nullptr).ok());
  }
  EXPECT_GT(checked, 60);
  EXPECT_GT(bounded, checked / 2);
}

}  // namespace
}  // namespace hami::scheduler
