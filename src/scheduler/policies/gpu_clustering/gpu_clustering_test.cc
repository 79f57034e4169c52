#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;

struct Case {
  std::string name;
  core::PodRequest pod;
  std::vector<int> want_scores;  // a (share pod), b (1-GPU pod), c (empty), d (share + 1-GPU)
};
class GpuClusteringTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuClusteringTest, Scores) {
  const Case& c = GetParam();
  Decision d = Explain(
      "gpu-clustering", {SimNode("a", 8), SimNode("b", 8), SimNode("c", 8), SimNode("d", 8)},
      {SimPod("x", 1, 400).UseUuid("a-gpu0"), SimPod("y", 1, 1000).UseUuid("b-gpu0"),
       SimPod("z1", 1, 400).UseUuid("d-gpu0"), SimPod("z2", 1, 1000).UseUuid("d-gpu1")},
      c.pod);
  EXPECT_EQ(ScoresOf(d), c.want_scores);
}

// Free milli: a 7600, b 7000, c 8000, d 6600 -> 25*(8000-free)/8000 = 1, 3, 0, 4.
INSTANTIATE_TEST_SUITE_P(
    Cases, GpuClusteringTest,
    ::testing::Values(Case{"share_pod", SimPod("p", 1, 200), {76, 3, 25, 54}},
                      Case{"one_gpu_pod", SimPod("p", 1, 1000), {1, 78, 25, 54}},
                      Case{"two_gpu_pod", SimPod("p", 2, 1000), {1, 3, 25, 4}},
                      Case{"cpu_only", SimPod("p", 0, 0), {0, 0, 0, 0}}),
    [](const auto& i) { return i.param.name; });

}  // namespace
}  // namespace hami::scheduler
