#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;

struct Case {
  std::string name;
  std::vector<core::NodeInfo> nodes;
  std::vector<core::PodRequest> existing;
  core::PodRequest pod;
  std::string want;
};
class BestFitTest : public ::testing::TestWithParam<Case> {};

TEST_P(BestFitTest, Chooses) {
  const Case& c = GetParam();
  auto s = MakeCluster("best-fit", c.nodes, c.existing);
  auto d = s->Schedule(c.pod, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BestFitTest,
    ::testing::Values(
        // b has fewer GPUs left after placement.
        Case{"fuller_node",
             {SimNode("a", 8), SimNode("b", 8)},
             {SimPod("x", 6, 1000)
                  .UseUuid("b-gpu0")
                  .UseUuid("b-gpu1")
                  .UseUuid("b-gpu2")
                  .UseUuid("b-gpu3")
                  .UseUuid("b-gpu4")
                  .UseUuid("b-gpu5")},
             SimPod("p", 1, 1000),
             "b:b-gpu6"},
        // Same GPUs left: less CPU left wins.
        Case{"less_cpu_left",
             {SimNode("a", 2, 64000), SimNode("b", 2, 32000)},
             {},
             SimPod("p", 1, 500),
             "b:b-gpu0"},
        // Share pod: the tightest GPU that still fits (gpu0 has 400 free, gpu1 800).
        Case{"tightest_gpu",
             {SimNode("a", 2)},
             {SimPod("x", 1, 600).UseUuid("a-gpu0"), SimPod("y", 1, 200).UseUuid("a-gpu1")},
             SimPod("p", 1, 300),
             "a:a-gpu0"},
        // Whole GPUs: lowest-index fully free ones.
        Case{"whole_lowest_index",
             {SimNode("a", 4)},
             {SimPod("x", 1, 100).UseUuid("a-gpu0")},
             SimPod("p", 2, 1000),
             "a:a-gpu1,a-gpu2"}),
    [](const auto& i) { return i.param.name; });

TEST(BestFitTest, ScoresAreMinMaxNormalized) {
  Decision d = Explain("best-fit", {SimNode("a", 8), SimNode("b", 4), SimNode("c", 2)}, {},
                       SimPod("p", 1, 1000));
  // a has the most left (0), c the least (100).
  ASSERT_EQ(ScoresOf(d).size(), 3u);
  EXPECT_EQ(ScoresOf(d)[0], 0);
  EXPECT_EQ(ScoresOf(d)[2], 100);
  EXPECT_EQ(d.node, "c");
}

}  // namespace
}  // namespace hami::scheduler
