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
  std::vector<int> want_scores;  // per node, name order
};
class GpuPackingTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuPackingTest, Scores) {
  const Case& c = GetParam();
  EXPECT_EQ(ScoresOf(Explain("gpu-packing", c.nodes, c.existing, c.pod)), c.want_scores);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GpuPackingTest,
    ::testing::Values(
        // a empty (33 - 8), b has gpu0 at 300 used: a share pod lands on it: 100 - 70/10 = 93.
        Case{"share_on_partly_used",
             {SimNode("a", 8), SimNode("b", 8)},
             {SimPod("x", 1, 300).UseUuid("b-gpu0")},
             SimPod("p", 1, 200),
             {25, 93}},
        // A whole GPU on a used node: 50 - 1; an empty 2-GPU node: 33 - 2.
        Case{"whole_on_used_node",
             {SimNode("a", 2), SimNode("b", 8)},
             {SimPod("x", 1, 300).UseUuid("b-gpu0")},
             SimPod("p", 1, 1000),
             {31, 49}},
        // CPU-only pods score 0.
        Case{"cpu_only", {SimNode("a", 2)}, {}, SimPod("p", 0, 0), {0}}),
    [](const auto& i) { return i.param.name; });

}  // namespace
}  // namespace hami::scheduler
