#include "scheduler/policies/fgd/fgd.h"

#include "gtest/gtest.h"
#include "scheduler/policies/fgd/fgd_common.h"
#include "scheduler/policies/fgd/fragmentation.h"
#include "scheduler/policies/fgd/shape_model.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;

// A typical set by hand: (gpus, milli per GPU, weight ppm). Sim-like devices: 16 MiB per milli.
std::shared_ptr<const fgd::TypicalSet> SetOf(std::vector<std::tuple<int, int, int64_t>> shapes) {
  auto set = std::make_shared<fgd::TypicalSet>();
  static uint64_t membership = 1'000'000;
  set->membership = ++membership;
  for (auto [gpus, milli, w] : shapes) {
    fgd::TypicalShape t;
    t.shape.gpus = gpus;
    t.shape.memreq_mib = gpus ? kSimGpuMem * milli / 1000 : 0;
    t.shape.coresreq = milli / 10;
    t.shape.cpu_milli = 1000;
    t.weight_ppm = w;
    set->shapes.push_back(t);
  }
  return set;
}

NodeState NodeWithFree(std::vector<int> free_milli) {
  NodeState n = NodeState::Make(SimNode("n", static_cast<int>(free_milli.size())).Build());
  PodDelta delta;
  for (size_t d = 0; d < free_milli.size(); ++d) {
    const int used = 1000 - free_milli[d];
    if (used > 0)
      delta.devices.push_back({static_cast<int>(d), 1, kSimGpuMem * used / 1000, used / 10});
  }
  n.Apply(delta, +1);
  return n;
}

struct FragCase {
  std::string name;
  std::vector<int> free;
  std::vector<std::tuple<int, int, int64_t>> shapes;
  int64_t want_milli;  // F in milli-GPUs (weights are whole shares of 1'000'000 below)
};
class FragmentationTest : public ::testing::TestWithParam<FragCase> {};

TEST_P(FragmentationTest, MatchesHandComputed) {
  const FragCase& c = GetParam();
  fgd::FragmentationView view(SetOf(c.shapes));
  NodeState n = NodeWithFree(c.free);
  EXPECT_EQ(view.Fragmentation(n, n.free_milli, n.cpu_free(), n.mem_free()),
            c.want_milli * 1'000'000);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FragmentationTest,
    ::testing::Values(
        // Both shapes fit on gpu0 only; gpu1's 300 is stranded for both => 300.
        FragCase{"share_and_whole", {1000, 300}, {{1, 500, 500'000}, {1, 1000, 500'000}}, 300},
        // Half-GPU tasks fit on both GPUs (0 stranded); whole-GPU tasks strand gpu1's 600 =>
        // 0.5*600.
        FragCase{"half_fits_everywhere", {1000, 600}, {{1, 500, 500'000}, {1, 1000, 500'000}}, 300},
        // 300 free cannot hold a 500 task: stranded for both shapes.
        FragCase{"all_share", {300, 300}, {{1, 500, 1'000'000}}, 600},
        // A 2-GPU task cannot run with one free GPU: all free milli is fragment.
        FragCase{"multi_gpu_cannot_run", {1000, 400}, {{2, 1000, 1'000'000}}, 1400},
        // CPU-only tasks count all free GPU milli.
        FragCase{"cpu_only", {1000, 400}, {{0, 0, 1'000'000}}, 1400},
        // A full node has nothing to fragment.
        FragCase{"full", {0, 0}, {{1, 500, 1'000'000}}, 0}),
    [](const auto& i) { return i.param.name; });

TEST(FragmentationTest, ChangesAreIncremental) {
  fgd::FragmentationView view(SetOf({{1, 500, 500'000}, {1, 1000, 500'000}}));
  NodeState n = NodeWithFree({1000, 600});
  // Putting 500 on gpu0 leaves {500, 600}: both hold a half task, no whole GPU left => 0.5*1100.
  std::vector<fgd::FreeChange> on0{{0, 500}};
  EXPECT_EQ(view.FragmentationAfter(n, n.free_milli, n.cpu_free(), n.mem_free(), on0, n.cpu_free(),
                                    n.mem_free()),
            550 * 1'000'000);
  // On gpu1 it leaves {1000, 100}: 100 stranded for both shapes => 100.
  std::vector<fgd::FreeChange> on1{{1, 100}};
  EXPECT_EQ(view.FragmentationAfter(n, n.free_milli, n.cpu_free(), n.mem_free(), on1, n.cpu_free(),
                                    n.mem_free()),
            100 * 1'000'000);
  // And the measured node itself is unchanged: whole-GPU tasks strand gpu1's 600 => 0.5*600.
  EXPECT_EQ(view.Fragmentation(n, n.free_milli, n.cpu_free(), n.mem_free()), 300 * 1'000'000);
}

TEST(FragmentationTest, CpuShortageMakesAShapeUnrunnable) {
  fgd::FragmentationView view(SetOf({{1, 500, 1'000'000}}));
  NodeState n = NodeWithFree({1000, 200});
  // With 999 milli-CPU left the 1000 milli-CPU shape cannot run: all 1200 free milli is fragment.
  EXPECT_EQ(
      view.FragmentationAfter(n, n.free_milli, n.cpu_free(), n.mem_free(), {}, 999, n.mem_free()),
      1200 * 1'000'000);
}

TEST(SigmoidScoreTest, Table) {
  EXPECT_EQ(fgd::SigmoidScore(0), 50);
  EXPECT_EQ(fgd::SigmoidScore(-1), 49);
  EXPECT_EQ(fgd::SigmoidScore(int64_t{1} << 62), 99);
  EXPECT_EQ(fgd::SigmoidScore(-(int64_t{1} << 62)), 0);
  // sigmoid(1 GPU) = 0.731 -> 73; sigmoid(-1 GPU) = 0.269 -> 26.
  EXPECT_EQ(fgd::SigmoidScore(1'000'000'000), 73);
  EXPECT_EQ(fgd::SigmoidScore(-1'000'000'000), 26);
}

TEST(ShapeModelTest, TypicalSetCoversTheHeaviestShapes) {
  fgd::ShapeModel model(fgd::ShapeModelOptions{.coverage_pct = 90});
  auto pod = [](int milli) { return SimPod("p", 1, milli).Build(); };
  for (int i = 0; i < 6; ++i) model.Observe(pod(500));
  for (int i = 0; i < 3; ++i) model.Observe(pod(250));
  model.Observe(pod(100));
  auto set = model.Snapshot();
  ASSERT_EQ(set->shapes.size(), 2u);  // 6 + 3 = 90 % of 10
  int64_t total = 0;
  for (const auto& s : set->shapes) total += s.weight_ppm;
  EXPECT_EQ(total, 1'000'000);
  EXPECT_EQ(set->shapes[0].shape.coresreq, 50);  // first seen first
  EXPECT_NEAR(set->shapes[0].weight_ppm, 666'667, 1);
  EXPECT_EQ(set->observed, 10);
}

TEST(ShapeModelTest, MembershipChangesOnlyWithTheList) {
  fgd::ShapeModel model;
  model.Observe(SimPod("a", 1, 500).Build());
  const uint64_t m1 = model.Snapshot()->membership;
  model.Observe(SimPod("b", 1, 500).Build());
  EXPECT_EQ(model.Snapshot()->membership, m1);  // same shape: weights only
  model.Observe(SimPod("c", 1, 300).Build());
  EXPECT_NE(model.Snapshot()->membership, m1);  // a new typical shape
}

TEST(ShapeModelTest, DecayForgetsOldShapes) {
  fgd::ShapeModel model(fgd::ShapeModelOptions{.coverage_pct = 50, .half_life = 10});
  for (int i = 0; i < 100; ++i) model.Observe(SimPod("old", 1, 500).Build());
  for (int i = 0; i < 40; ++i) model.Observe(SimPod("new", 1, 250).Build());
  auto set = model.Snapshot();
  ASSERT_EQ(set->shapes.size(), 1u);
  EXPECT_EQ(set->shapes[0].shape.coresreq, 25);
}

TEST(ShapeModelTest, UnobserveTakesBackExactlyWhatWasAdded) {
  for (double half_life : {0.0, 10.0}) {
    fgd::ShapeModel model(fgd::ShapeModelOptions{.coverage_pct = 90, .half_life = half_life});
    for (int i = 0; i < 6; ++i) model.Observe(SimPod("a", 1, 500).Build());
    model.Observe(SimPod("b", 1, 250).Build());
    auto weights = [&] {
      std::vector<std::pair<int, int64_t>> w;
      for (const auto& s : model.Snapshot()->shapes) w.push_back({s.shape.coresreq, s.weight_ppm});
      return w;
    };
    const auto before = weights();
    const int64_t observed = model.Snapshot()->observed;
    model.Observe("r1", SimPod("r1", 1, 500).Build());  // a known shape
    model.Observe("r2", SimPod("r2", 1, 120).Build());  // a new one
    model.Observe("r2", SimPod("r2", 1, 130).Build());  // replaces r2's first observation
    EXPECT_EQ(model.recorded(), 2u);
    EXPECT_NE(weights(), before);
    model.Unobserve("r1");
    model.Unobserve("r2");
    model.Unobserve("r2");     // already taken back: nothing
    model.Unobserve("never");  // unknown: nothing
    EXPECT_EQ(weights(), before) << half_life;
    EXPECT_EQ(model.Snapshot()->observed, observed);
    // Forget keeps the weight (the pod left after running), and a later Unobserve finds nothing.
    model.Observe("r3", SimPod("r3", 1, 120).Build());
    const auto learned = weights();
    model.Forget("r3");
    model.Unobserve("r3");
    EXPECT_EQ(weights(), learned);
    EXPECT_EQ(model.recorded(), 0u);
  }
}

TEST(FgdPolicyTest, PicksTheGpuThatStrandsLeast) {
  // gpu0 has 600 free, gpu1 350. Learned shapes, 1/3 each: 400, 650 and 300 milli.
  //   300 on gpu0 -> free {300, 350}: 400 and 650 cannot run (650 each), 300 fits both (0) => F =
  //   433. 300 on gpu1 -> free {600, 50}: 400 strands 50, 650 cannot run (650), 300 strands 50  =>
  //   F = 250.
  auto s =
      MakeCluster("fgd", {SimNode("a", 2)},
                  {SimPod("x", 1, 400).UseUuid("a-gpu0"), SimPod("y", 1, 650).UseUuid("a-gpu1")});
  auto d = s->Schedule(SimPod("p", 1, 300).Build(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), "a:a-gpu1");
}

TEST(FgdPolicyTest, PrefersTheNodeWhereTheTaskFillsAHole) {
  // Node a has a GPU with exactly 500 free; node b is empty. A 500 task closes a's hole.
  auto s = MakeCluster("fgd", {SimNode("a", 2), SimNode("b", 2)},
                       {SimPod("x", 1, 500).UseUuid("a-gpu0")});
  auto d = s->Schedule(SimPod("p", 1, 500).Build(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), "a:a-gpu0");
}

}  // namespace
}  // namespace hami::scheduler
