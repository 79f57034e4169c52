#include "sim/bound.h"

#include "common/rng.h"
#include "gtest/gtest.h"

namespace hami::sim {
namespace {

TraceNode Node(const std::string& name, int64_t cpu, int gpus, const std::string& model = "T4") {
  return TraceNode{name, cpu, 1 << 20, gpus, model};
}
TraceTask Task(const std::string& name, int64_t cpu, int num_gpu, int milli,
               std::vector<std::string> spec = {}) {
  TraceTask t;
  t.name = name;
  t.cpu_milli = cpu;
  t.memory_mib = 1024;
  t.num_gpu = num_gpu;
  t.gpu_milli = milli;
  t.gpu_spec = std::move(spec);
  return t;
}
std::vector<int> All(const std::vector<TraceTask>& t) {
  std::vector<int> v(t.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
  return v;
}

// Two tasks of 600 milli on one GPU: pooled milli alone would allow 1000; only one fits.
TEST(PackingUpperBoundTest, TwoLargeSharesNeverShareAGpu) {
  std::vector<TraceNode> nodes{Node("n", 64000, 1)};
  std::vector<TraceTask> tasks{Task("a", 1000, 1, 600), Task("b", 1000, 1, 600)};
  auto b = PackingUpperBound(nodes, tasks, All(tasks), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->demand_milli, 1200);
  EXPECT_DOUBLE_EQ(b->lp_milli, 600);
  EXPECT_EQ(b->task_shapes, 1);
  EXPECT_EQ(b->node_classes, 1);
}

// The node's CPU taken by a task without GPUs strands both GPUs, once that task must be placed.
TEST(PackingUpperBoundTest, CpuOnlyTasksStrandGpusWhenTheyMustBePlaced) {
  std::vector<TraceNode> nodes{Node("n", 4000, 2)};
  std::vector<TraceTask> tasks{Task("cpu", 4000, 0, 0), Task("g1", 1000, 1, 1000),
                               Task("g2", 1000, 1, 1000)};
  auto free = PackingUpperBound(nodes, tasks, All(tasks), {});
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_DOUBLE_EQ(free->lp_milli, 2000);
  BoundOptions o;
  o.place_cpu_only = true;
  auto forced = PackingUpperBound(nodes, tasks, All(tasks), o);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_DOUBLE_EQ(forced->lp_milli, 0);
  // Two such tasks cannot both be placed: no packing exists.
  tasks.push_back(Task("cpu2", 4000, 0, 0));
  EXPECT_EQ(PackingUpperBound(nodes, tasks, All(tasks), o).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PackingUpperBoundTest, ModelConstraintsAndRepeatedTasks) {
  std::vector<TraceNode> nodes{Node("p", 64000, 1, "P100"), Node("t", 64000, 1, "T4")};
  std::vector<TraceTask> tasks{Task("t4", 1000, 1, 1000, {"t4"}), Task("any", 1000, 1, 1000)};
  // Three copies of the T4-only task share one T4 GPU; the flexible one takes the P100.
  auto b = PackingUpperBound(nodes, tasks, {0, 0, 0, 1}, {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->demand_milli, 4000);
  EXPECT_DOUBLE_EQ(b->lp_milli, 2000);
  EXPECT_DOUBLE_EQ(b->best_milli(), 2000);
  auto only_t4 = PackingUpperBound(nodes, tasks, {0, 0, 0}, {});
  ASSERT_TRUE(only_t4.ok());
  EXPECT_DOUBLE_EQ(only_t4->lp_milli, 1000);
  EXPECT_FALSE(PackingUpperBound(nodes, tasks, {5}, {}).ok());
}

// CPU allows 2.5 tasks fractionally, 2 in integers.
TEST(PackingUpperBoundTest, IntegerCountsTightenTheRelaxation) {
  std::vector<TraceNode> nodes{Node("n", 5000, 3)};
  std::vector<TraceTask> tasks{Task("g", 2000, 1, 1000)};
  BoundOptions o;
  o.integer = true;
  auto b = PackingUpperBound(nodes, tasks, {0, 0, 0}, o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(b->lp_milli, 2500, 1e-6);
  ASSERT_TRUE(b->integer_optimal);
  EXPECT_NEAR(b->integer_milli, 2000, 1e-6);
  EXPECT_NEAR(b->best_milli(), 2000, 1e-6);
}

RunPlan Plan(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& tasks,
             double inflation) {
  RunConfig c;
  c.policy = "best-fit";
  c.inflation = inflation;
  Rng rng(42);
  auto p = PlanRun(nodes, tasks, c, rng);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

// Online in any order that puts the small shares first, they take the GPU; offline, the whole-GPU
// task goes first.
TEST(PackOfflineTest, LargestFirstPlacesTheWholeGpu) {
  std::vector<TraceNode> nodes{Node("n", 64000, 1)};
  std::vector<TraceTask> tasks{Task("a", 1000, 1, 300), Task("b", 1000, 1, 300),
                               Task("w", 1000, 1, 1000), Task("c", 500, 0, 0)};
  RunPlan plan = Plan(nodes, tasks, 1.0);
  ASSERT_EQ(plan.order.size(), 4u);  // 1600 milli arrived > capacity: no resampled copies
  for (const char* order : {"gpu-desc", "cpu-first"}) {
    auto p = PackOffline(plan, tasks, 4, "best-fit", order);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->used_milli, 1000) << order;
    EXPECT_EQ(p->gpu_failed, 2) << order;
    EXPECT_EQ(p->cpu_only_failed, 0) << order;
  }
  EXPECT_FALSE(PackOffline(plan, tasks, 4, "best-fit", "sideways").ok());
  EXPECT_FALSE(PackOffline(plan, tasks, 4, "best-fit", "guided").ok());  // no guide
}

// The whole-GPU task needs the T4 node's CPU; a task without GPUs that fits both nodes goes
// where the relaxation puts it (the P100 node), not where the packer would put it first.
TEST(PackOfflineTest, GuidedFollowsTheRelaxation) {
  std::vector<TraceNode> nodes{Node("p", 8000, 1, "P100"), Node("t", 8000, 1, "T4")};
  std::vector<TraceTask> tasks{Task("cpu", 6000, 0, 0), Task("w", 6000, 1, 1000, {"t4"})};
  RunPlan plan = Plan(nodes, tasks, 1.0);
  std::vector<int> all{0, 1};
  BoundOptions o;
  o.place_cpu_only = true;
  auto b = PackingUpperBound(nodes, tasks, all, o);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_DOUBLE_EQ(b->lp_milli, 1000);
  ASSERT_EQ(b->placed.count(ShapeOf(tasks[0])), 1u);
  EXPECT_EQ(b->placed.at(ShapeOf(tasks[0])).count(ClassOf(nodes[0])), 1u);
  auto first = PackOffline(plan, tasks, 2, "best-fit", "cpu-first");
  auto guided = PackOffline(plan, tasks, 2, "best-fit", "guided", &*b);
  ASSERT_TRUE(first.ok() && guided.ok());
  EXPECT_EQ(guided->used_milli, 1000);
  EXPECT_EQ(guided->cpu_only_failed, 0);
  EXPECT_GE(guided->used_milli, first->used_milli);
}

TEST(BoundSeedTest, OnlineAndOfflineStayBelowTheBound) {
  std::vector<TraceNode> nodes{Node("a", 16000, 2), Node("b", 8000, 4, "P100"),
                               Node("c", 32000, 1)};
  std::vector<TraceTask> tasks{
      Task("w1", 6000, 1, 1000), Task("w2", 2000, 2, 1000),         Task("s1", 1000, 1, 400),
      Task("s2", 3000, 1, 700),  Task("s3", 500, 1, 250, {"p100"}), Task("c1", 7000, 0, 0),
      Task("c2", 12000, 0, 0),   Task("w3", 4000, 1, 1000, {"t4"}),
  };
  BoundSeedOptions o;
  o.policy = "default";
  for (uint64_t seed : {1, 2, 3}) {
    auto r = BoundSeed(nodes, tasks, seed, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->capacity_milli, 7000);
    EXPECT_LE(r->arrived_milli, r->capacity_milli);
    EXPECT_GT(r->events, 0u);
    const double ub = r->bound.best_milli();
    EXPECT_LE(static_cast<double>(r->online_used_milli), ub + 1e-6);
    ASSERT_EQ(r->offline.size(), 6u);
    for (const auto& p : r->offline) EXPECT_LE(static_cast<double>(p.used_milli), ub + 1e-6);
    EXPECT_LE(r->online_a100, r->a100_bound + 0.01);  // A(100) rounds each point to 0.01
    EXPECT_LE(r->a100_bound, 100.0);
  }
}

}  // namespace
}  // namespace hami::sim
