#include "scheduler/policies/fgd_balance/fgd_balance.h"

#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;
using fgd_balance::BalanceScorer;
using fgd_balance::CpuDemand;
using fgd_balance::ModelDemand;
using fgd_balance::ModelPressure;
using fgd_balance::StrandedMilli;

NodeBuilder ModelNode(const std::string& name, int gpus, const std::string& model, int64_t cpu) {
  return NodeBuilder(name).Cpu(cpu).Memory(262144).Gpus(gpus, kSimGpuMem, model, 1000, 100);
}

TEST(FgdBalanceTest, StrandedMilli) {
  struct Case {
    int64_t gpu_free, cpu_free;
    CpuDemand::Ratio ratio;
    int64_t want;
  };
  const Case cases[] = {
      {2000, 8000, {2000, 1000}, 0},     // 2 cores per GPU: 8 cores serve 4 GPUs
      {2000, 2000, {2000, 1000}, 1000},  // one GPU's worth of CPU left for two free GPUs
      {2000, 0, {2000, 1000}, 2000},     // no CPU: every free milli stranded
      {2000, -500, {2000, 1000}, 2000},  // overcommitted CPU counts as none
      {500, 600, {12000, 1000}, 450},    // 12 cores per GPU: 0.6 cores serve 50 milli
      {0, 0, {2000, 1000}, 0},           // nothing free, nothing stranded
      {2000, 0, {0, 1000}, 0},           // GPU pods asked no CPU: nothing measured
      {2000, 0, {0, 0}, 0},              // no GPU pod seen yet
      {2000, int64_t{1} << 62, {int64_t{1} << 30, int64_t{1} << 30}, 0},  // huge node: no overflow
  };
  for (const auto& c : cases)
    EXPECT_EQ(StrandedMilli(c.gpu_free, c.cpu_free, c.ratio), c.want)
        << c.gpu_free << " " << c.cpu_free;
}

TEST(FgdBalanceTest, LearnsCpuPerGpuFromGpuPodsOnly) {
  CpuDemand d;
  EXPECT_EQ(d.Get().milli, 0);
  d.Observe(SimPod("cpu", 0, 0, 64000).Build());  // CPU-only: not a GPU pod
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
  // One FGD level is about 40 milli of fragmentation near zero; a stranded milli weighs 1e6
  // ppm*milli.
  struct Case {
    int64_t delta_a, stranded_a, delta_b, stranded_b;
    bool a_wins;
  };
  const Case cases[] = {
      {0, 0, 0, 1, true},  // same level: less stranding wins
      {0, 5, 0, 1, false},
      {0, 0, 400'000'000, 0, false},    // FGD prefers b by 400 milli
      {0, 0, 400'000'000, 500, true},   // ... but b strands 500 milli for lack of CPU
      {-200'000'000, 0, 0, 200, true},  // equal combined change: a strands less
  };
  for (const auto& c : cases) {
    const int64_t a = BalanceScorer::Combine(c.delta_a, c.stranded_a);
    const int64_t b = BalanceScorer::Combine(c.delta_b, c.stranded_b);
    if (c.a_wins)
      EXPECT_GT(a, b) << c.delta_a << " " << c.stranded_a << " vs " << c.delta_b << " "
                      << c.stranded_b;
    else
      EXPECT_LT(a, b) << c.delta_a << " " << c.stranded_a << " vs " << c.delta_b << " "
                      << c.stranded_b;
  }
}

TEST(FgdBalanceTest, LearnsGpuDemandPerModelSet) {
  ModelDemand d;
  d.Observe("cpu", SimPod("cpu", 0, 0, 64000).Build());  // no GPU: not counted
  d.Observe("any", SimPod("any", 2, 1000).Build());      // any model: total only
  d.Observe("p100", SimPod("p100", 1, 500).UseType("P100").Build());
  d.Observe("v100", SimPod("v100", 1, 1000).UseType("V100M16").UseType("V100M32").Build());
  ModelDemand::Sums s = d.Get();
  EXPECT_EQ(s.total, 3500);
  ASSERT_EQ(s.constrained.size(), 2u);
  EXPECT_EQ(s.constrained[0].first, (std::vector<std::string>{"P100"}));
  EXPECT_EQ(s.constrained[0].second, 500);
  EXPECT_EQ(s.constrained[1].first, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(s.constrained[1].second, 1000);
  d.Unobserve("p100");  // a rolled-back reservation takes exactly its demand back
  s = d.Get();
  EXPECT_EQ(s.total, 3000);
  ASSERT_EQ(s.constrained.size(), 1u);
  d.Forget("v100");  // the pod left: what it taught stays
  d.Unobserve("v100");
  EXPECT_EQ(d.Get().total, 3000);
}

TEST(FgdBalanceTest, ModelPressureIsTheConstrainedShareOfEachModel) {
  const GpuCapacity cap = {{"G2", 8}, {"P100", 2}};
  ModelDemand::Sums demand;
  demand.total = 1000;
  EXPECT_TRUE(ModelPressure(demand, cap).empty());  // nobody constrained
  // 10 % of the demand can only use P100, which is 20 % of the GPUs: half of P100 is theirs.
  demand.constrained = {{{"P100"}, 100}};
  EXPECT_EQ(ModelPressure(demand, cap),
            (std::vector<std::pair<std::string, int64_t>>{{"P100", 500'000}}));
  // 20 % more accept both models (all GPUs): 0.2 on each. A set naming no GPU of the cluster adds
  // nothing.
  demand.constrained.push_back({{"G2", "P100"}, 200});
  demand.constrained.push_back({{"A100"}, 300});
  EXPECT_EQ(ModelPressure(demand, cap),
            (std::vector<std::pair<std::string, int64_t>>{{"G2", 200'000}, {"P100", 700'000}}));
  // More constrained demand than the model holds: capped at one.
  demand.constrained = {{{"P100"}, 900}};
  EXPECT_EQ(ModelPressure(demand, cap),
            (std::vector<std::pair<std::string, int64_t>>{{"P100", 1'000'000}}));
  EXPECT_TRUE(ModelPressure(demand, {}).empty());
}

// Node a: one P100 GPU left and 2 free cores (a P100-only pod of 8 cores took the other); node b:
// 4 free G2 GPUs and plenty of CPU. A flexible one-GPU pod takes the last P100 under FGD (both
// nodes rate alike: the learned P100 shape runs on neither) and under the CPU-stranding term alone
// (a's GPU is stranded for lack of CPU), so the next P100-only pod fails. The pressure term knows
// P100 is all the constrained pods have: the flexible pod goes to b and both P100 pods run.
TEST(FgdBalanceTest, KeepsScarceModelsForThePodsConstrainedToThem) {
  struct Case {
    const char* policy;
    const char* flexible_node;
    bool second_p100_placed;
  };
  const Case cases[] = {
      {"fgd", "a", false},
      {"fgd-balance", "b", true},
      {"default", "b", true},
  };
  for (const auto& c : cases) {
    auto s =
        MakeCluster(c.policy, {ModelNode("a", 2, "P100", 10000), ModelNode("b", 4, "G2", 64000)},
                    {SimPod("p0", 1, 1000, 8000).UseType("P100")});
    auto f = s->ScheduleAndReserve(SimPod("flex", 1, 1000, 1000).Build(), nullptr);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->node, c.flexible_node) << c.policy;
    auto p = s->ScheduleAndReserve(SimPod("p1", 1, 1000, 1000).UseType("P100").Build(), nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(!p->node.empty(), c.second_p100_placed) << c.policy;
  }
}

// Node a: 2 free GPUs but only 8 cores. Node b: 1 free GPU (the other taken) and 62 cores. GPU pods
// ask 2 cores per GPU. A CPU-only pod of 6 cores fits both and changes no shape's fit, so FGD rates
// both alike and the node order sends it to a, leaving a 2 cores: one of a's free GPUs can no
// longer be used. fgd-balance sees that a would strand 1000 milli and sends it to b, so the three
// GPU pods that follow all fit; under FGD the third fails.
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
      auto g =
          s->ScheduleAndReserve(SimPod("g" + std::to_string(i), 1, 1000, 2000).Build(), nullptr);
      ASSERT_TRUE(g.ok()) << g.status();
      placed += !g->node.empty();
    }
    EXPECT_EQ(placed, c.gpu_pods_placed) << c.policy;
  }
}

// The bounded scan's contract, node by node: the bound is never below the score, through a run that
// drains CPU (CPU-only and CPU-heavy pods among sharing and whole-GPU ones) so stranding appears.
TEST(FgdBalanceTest, UpperBoundIsAtLeastTheScore) {
  auto s = MakeCluster("fgd-balance", {SimNode("a", 8, 24000), SimNode("b", 2, 64000),
                                       SimNode("c", 4, 16000), SimNode("d", 8, 96000)});
  const Profile& profile = s->profile();
  ASSERT_TRUE(profile.scorer->bounded());
  struct Shape {
    int gpus, milli;
    int64_t cpu;
  };
  const Shape shapes[] = {{0, 0, 8000},    {1, 1000, 4000}, {1, 500, 2000}, {1, 300, 6000},
                          {2, 1000, 3000}, {0, 0, 12000},   {1, 700, 1000}, {4, 1000, 8000}};
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
