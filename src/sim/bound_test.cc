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

// MIG GPUs hold instances, not milli: the bound refuses a trace with MIG nodes, naming the node.
TEST(PackingUpperBoundTest, MigNodesAreRefused) {
  std::vector<TraceNode> nodes{Node("plain", 64000, 1), Node("mig", 64000, 1, "A100")};
  nodes[1].mig = "A100-40GB";
  nodes[1].mig_gpus = 1;
  std::vector<TraceTask> tasks{Task("a", 1000, 1, 600)};
  auto b = PackingUpperBound(nodes, tasks, All(tasks), {});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(std::string(b.status().message()).find("node mig: MIG nodes are not modelled"),
            std::string::npos)
      << b.status();
}

// A GPU holding an 810 share keeps 190 milli, which a 380 share cannot use: pooled milli (and the
// "more than half" rule) allow all three on two GPUs, the fill patterns only the two 810s.
TEST(PackingUpperBoundTest, GpuFillPatterns) {
  std::vector<TraceNode> nodes{Node("n", 64000, 2)};
  std::vector<TraceTask> tasks{Task("a", 1000, 1, 810), Task("b", 1000, 1, 380)};
  BoundOptions pooled;
  pooled.gpu_patterns = false;
  auto loose = PackingUpperBound(nodes, tasks, {0, 0, 1}, pooled);
  ASSERT_TRUE(loose.ok()) << loose.status();
  EXPECT_DOUBLE_EQ(loose->lp_milli, 2000);
  EXPECT_EQ(loose->gpu_patterns, 0);
  auto tight = PackingUpperBound(nodes, tasks, {0, 0, 1}, {});
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_DOUBLE_EQ(tight->lp_milli, 1620);
  EXPECT_EQ(tight->gpu_patterns, 2);  // {810}, {380, 380}
  // A 190 share fits next to the 810.
  tasks.push_back(Task("c", 1000, 1, 190));
  auto fill = PackingUpperBound(nodes, tasks, {0, 0, 2, 2}, {});
  ASSERT_TRUE(fill.ok()) << fill.status();
  EXPECT_DOUBLE_EQ(fill->lp_milli, 2000);
}

// An 810 share arrives before two whole-GPU tasks on a 2-GPU node. Any placement allocates at most
// 2000 milli, but only by failing the share; one that places the share (it arrived first, with
// both GPUs free) allocates at most 1810. Reaching 2000 costs the 810 milli of the early task.
TEST(PackingUpperBoundTest, EarlyTasksThatMustBePlaced) {
  std::vector<TraceNode> nodes{Node("n", 64000, 2)};
  std::vector<TraceTask> tasks{Task("share", 1000, 1, 810), Task("whole", 1000, 1, 1000)};
  const std::vector<int> prefix{0, 1, 1};
  auto free = PackingUpperBound(nodes, tasks, prefix, {});
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_DOUBLE_EQ(free->lp_milli, 2000);

  BoundOptions first;
  first.must_place = 1;
  auto placed = PackingUpperBound(nodes, tasks, prefix, first);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_DOUBLE_EQ(placed->lp_milli, 1810);

  // The least early GPU milli failed to allocate a target.
  first.target_milli = 2000;
  auto cost = PackingUpperBound(nodes, tasks, prefix, first);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_DOUBLE_EQ(cost->lp_milli, 810);
  ASSERT_EQ(cost->failed.size(), 1u);
  EXPECT_DOUBLE_EQ(cost->failed.at(ShapeOf(tasks[0])), 1);
  first.target_milli = 1810;
  auto none = PackingUpperBound(nodes, tasks, prefix, first);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_DOUBLE_EQ(none->lp_milli, 0);
  first.target_milli = 2001;
  EXPECT_TRUE(absl::IsFailedPrecondition(PackingUpperBound(nodes, tasks, prefix, first).status()));

  // All three cannot be placed on two GPUs.
  BoundOptions all;
  all.must_place = 3;
  EXPECT_TRUE(absl::IsFailedPrecondition(PackingUpperBound(nodes, tasks, prefix, all).status()));
}

TEST(MaximalGpuPatternsTest, Cases) {
  struct Case {
    std::vector<int> sizes;
    size_t limit;
    std::vector<std::vector<int>> want;
  };
  const std::vector<Case> cases = {
      {{600, 300}, 10, {{1, 1}, {0, 3}}},
      {{600, 300}, 1, {}},  // more than the limit: none
      {{1000}, 10, {{1}}},
      {{810, 190}, 10, {{1, 1}, {0, 5}}},
      {{810, 380}, 10, {{1, 0}, {0, 2}}},
      {{}, 10, {}},
  };
  for (const Case& c : cases) EXPECT_EQ(MaximalGpuPatterns(c.sizes, c.limit), c.want);
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

// The direct packing: largest first, best fit on GPUs, the guide's classes first.
TEST(PackDirectTest, Cases) {
  struct Case {
    const char* name;
    std::vector<TraceNode> nodes;
    std::vector<TraceTask> tasks;
    bool guided;
    int64_t used, gpu_failed, cpu_only_failed;
  };
  const std::vector<Case> cases = {
      // 400, 600, 400, 600 online-first-fit could pair 400+400; decreasing + best fit pairs each
      // 600 with a 400.
      {"shares pair up",
       {Node("n", 64000, 2)},
       {Task("a", 100, 1, 400), Task("b", 100, 1, 600), Task("c", 100, 1, 400),
        Task("d", 100, 1, 600)},
       false,
       2000,
       0,
       0},
      // Three 600s on two GPUs: one fails, the 300 still fits next to a 600.
      {"large shares never share a GPU",
       {Node("n", 64000, 2)},
       {Task("a", 100, 1, 600), Task("b", 100, 1, 600), Task("c", 100, 1, 600),
        Task("d", 100, 1, 300)},
       false,
       1500,
       1,
       0},
      // The CPU-heavy task goes first and takes the node with the CPU; the light one the other.
      {"cpu-heavy first",
       {Node("small", 8000, 1), Node("big", 64000, 1)},
       {Task("light", 4000, 1, 1000), Task("heavy", 32000, 1, 1000)},
       false,
       2000,
       0,
       0},
      // A two-GPU task needs both GPUs of one node; the model constraint is kept.
      {"multi-GPU and models",
       {Node("t", 64000, 2, "T4"), Node("p", 64000, 2, "P100")},
       {Task("one", 1000, 1, 1000), Task("two", 1000, 2, 1000, {"P100"}),
        Task("t4", 1000, 1, 1000, {"T4"})},
       false,
       4000,
       0,
       0},
      // Tasks without GPUs go last, to the node with the least CPU that fits.
      {"cpu-only last",
       {Node("n", 8000, 1)},
       {Task("c", 6000, 0, 0), Task("w", 4000, 1, 1000)},
       false,
       1000,
       0,
       1},
      // Alike by size, so the flexible task (first in arrival) would take the first node, the
      // only T4; the relaxation sends it to the P100 node.
      {"unguided",
       {Node("t", 8000, 1, "T4"), Node("p", 8000, 1, "P100")},
       {Task("x", 4000, 1, 1000), Task("y", 4000, 1, 1000, {"T4"})},
       false,
       1000,
       1,
       0},
      {"guided",
       {Node("t", 8000, 1, "T4"), Node("p", 8000, 1, "P100")},
       {Task("x", 4000, 1, 1000), Task("y", 4000, 1, 1000, {"T4"})},
       true,
       2000,
       0,
       0},
  };
  for (const Case& c : cases) {
    std::vector<int> all = All(c.tasks);
    BoundOptions o;
    o.place_cpu_only = true;
    StatusOr<PackingBound> b = PackingUpperBound(c.nodes, c.tasks, all, o);
    ASSERT_TRUE(b.ok()) << c.name << ": " << b.status();
    auto p = PackDirect(c.nodes, c.tasks, all, c.guided ? &*b : nullptr);
    ASSERT_TRUE(p.ok()) << c.name << ": " << p.status();
    EXPECT_EQ(p->used_milli, c.used) << c.name;
    EXPECT_EQ(p->gpu_failed, c.gpu_failed) << c.name;
    EXPECT_EQ(p->cpu_only_failed, c.cpu_only_failed) << c.name;
    // The bound places every task without GPUs; so does a comparable packing.
    if (p->cpu_only_failed == 0) {
      EXPECT_LE(static_cast<double>(p->used_milli), b->best_milli() + 1e-6) << c.name;
    }
  }
  EXPECT_FALSE(PackDirect({Node("n", 1000, 1)}, {Task("a", 1, 1, 1)}, {3}, nullptr).ok());
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
    ASSERT_EQ(r->offline.size(), 7u);  // 2 policies x 3 orders, and the direct packing
    for (const auto& p : r->offline) EXPECT_LE(static_cast<double>(p.used_milli), ub + 1e-6);
    EXPECT_LE(r->online_a100, r->a100_bound + 0.01);  // A(100) rounds each point to 0.01
    EXPECT_LE(r->a100_bound, 100.0);
  }
}

// The online run places every task before its first failure, so it is one of the placements the
// horizon bound at that failure covers; and it reaches its own allocation failing what it failed,
// so the least early failure needed for that allocation is at most the online run's.
TEST(BoundSeedTest, OnlineRunIsOneOfThePlacementsOfItsHorizon) {
  std::vector<TraceNode> nodes{Node("a", 16000, 2), Node("b", 8000, 4, "P100"),
                               Node("c", 32000, 1)};
  std::vector<TraceTask> tasks{
      Task("w1", 6000, 1, 1000), Task("w2", 2000, 2, 1000), Task("s1", 1000, 1, 400),
      Task("s2", 3000, 1, 700),  Task("s3", 500, 1, 810),   Task("w3", 4000, 1, 1000, {"t4"}),
  };
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    BoundSeedOptions o;
    o.offline_policies.clear();
    o.no_failure_before = {30, 60, 90};
    auto first = BoundSeed(nodes, tasks, seed, o);
    ASSERT_TRUE(first.ok()) << first.status();
    // The target: what the online run left unallocated at arrival 100 %.
    o.target = 100.0 -
               100.0 * static_cast<double>(first->online_used_milli) /
                   static_cast<double>(first->capacity_milli) +
               1e-9;
    auto r = BoundSeed(nodes, tasks, seed, o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->horizons.size(), 4u);
    const auto& own = r->horizons.back();
    EXPECT_EQ(own.must_place, r->online_first_failure);
    EXPECT_DOUBLE_EQ(own.arrival, r->online_first_failure_arrival);
    ASSERT_TRUE(own.feasible);
    EXPECT_EQ(own.online_failed_milli, 0);
    EXPECT_LE(static_cast<double>(r->online_used_milli), own.milli + 1e-6);
    for (size_t h = 0; h + 1 < r->horizons.size(); ++h) {
      const auto& z = r->horizons[h];
      EXPECT_LE(z.arrival, o.no_failure_before[h] + 1e-9);
      if (z.feasible) {
        EXPECT_LE(z.milli, r->bound.best_milli() + 1e-6);  // more is asked
      }
      ASSERT_GE(z.min_failed_milli, 0) << "the online run itself reaches the target";
      EXPECT_LE(z.min_failed_milli, static_cast<double>(z.online_failed_milli) + 1e-6);
    }
  }
}

}  // namespace
}  // namespace hami::sim
