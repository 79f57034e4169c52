// The dra-stock sim policy (sim/dra_stock.h) over the reference allocator.
#include "sim/dra_stock.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

TEST(DraStockPolicyTest, FeasibleNodesToFind) {
  struct Case {
    int64_t nodes, want;
  };
  // kube-scheduler: all below 100; else max(100, n * max(5, 50 - n/125) / 100).
  for (const Case& c : std::vector<Case>{{10, 10},
                                         {99, 99},
                                         {100, 100},
                                         {200, 100},
                                         {1000, 420},
                                         {1213, 497},
                                         {1523, 578},
                                         {5000, 500},
                                         {10000, 500}}) {
    EXPECT_EQ(FeasibleNodesToFind(c.nodes), c.want) << c.nodes;
  }
}

// On a small cluster the stock model packs each GPU first-fit and leaves the node choice to
// CPU/memory scoring: two 0.5-GPU tasks of a node with two GPUs share gpu-0.
TEST(DraStockPolicyTest, RunsATrace) {
  std::vector<TraceNode> nodes = {{"n1", 32000, 128000, 2, "A100"},
                                  {"n2", 32000, 128000, 2, "A100"}};
  std::vector<TraceTask> tasks = {{"t1", 1000, 1000, 1, 500, {}},
                                  {"t2", 1000, 1000, 1, 500, {}},
                                  {"t3", 1000, 1000, 2, 1000, {}}};
  RunConfig cfg;
  cfg.policy = std::string(kDraStockPolicy);
  cfg.seed = 1;
  cfg.inflation = 1.0;
  cfg.record_placements = true;
  auto r = RunInflation(nodes, tasks, cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->policy, "dra-stock");
  EXPECT_EQ(r->tasks_arrived, r->tasks_scheduled + r->tasks_failed);
  EXPECT_GT(r->tasks_scheduled, 0);
  EXPECT_EQ(r->curve.size(), static_cast<size_t>(kCurveMax + 1));
  EXPECT_TRUE(CheckPolicy("dra-stock").ok());
  EXPECT_TRUE(CheckPolicy("default").ok());
  EXPECT_FALSE(CheckPolicy("dra-nope").ok());
  // MIG nodes are outside the model.
  nodes[0].mig = "a100-40gb";
  nodes[0].mig_gpus = 1;
  EXPECT_FALSE(RunInflation(nodes, tasks, cfg).ok());
}

}  // namespace
}  // namespace hami::sim
