#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;

struct Case {
  std::string name;
  std::vector<core::NodeInfo> nodes;
  core::PodRequest pod;
  std::string want_node;
  int want_score;  // of the chosen node
};
class DotProductTest : public ::testing::TestWithParam<Case> {};

TEST_P(DotProductTest, Chooses) {
  const Case& c = GetParam();
  auto s = MakeCluster("dot-product", c.nodes);
  auto d = s->Schedule(c.pod, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, c.want_node);
  EXPECT_EQ(d->score, c.want_score);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DotProductTest,
    ::testing::Values(
        // a: dot = 64000*16000/128000^2 + 2000*1000/8000^2 = 0.0625 + 0.03125 -> int(100*(1 -
        // 0.046875)) = 95; b: 32000*16000/128000^2 + 0.03125 = 0.0625 -> int(96.875) = 96.
        Case{"less_cpu_free",
             {SimNode("a", 2, 64000), SimNode("b", 2, 32000)},
             SimPod("p", 1, 1000, 16000),
             "b",
             96},
        // Same CPU: fewer free GPUs (b: 2 vs a: 8) give the smaller dot product.
        Case{"fewer_gpus_free",
             {SimNode("a", 8), SimNode("b", 2)},
             SimPod("p", 1, 1000, 0),
             "b",
             98}),
    [](const auto& i) { return i.param.name; });

}  // namespace
}  // namespace hami::scheduler
