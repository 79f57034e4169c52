#include "sim/experiment.h"

#include "common/rng.h"
#include "gtest/gtest.h"

namespace hami::sim {
namespace {

// Capacity 2 GPUs = 2000 milli. Events (arrived, used) -> arrive% = round(100*a/2000),
// alloc% = round(100*u/2000, 2):
//   (0, 0)       -> k=0,  0.00
//   (500, 500)   -> k=25, 25.00
//   (1000, 500)  -> k=50, 25.00   (a failed pod still arrives)
//   (1010, 1010) -> k=51 (50.5 rounds up), 50.50
//   (1990, 1333) -> k=100 (99.5 rounds up), 66.65
//   (2000, 1400) -> k=100, 70.00
TEST(AllocationCurveTest, MeanPerArrivedPercentWithFallback) {
  AllocationCurve c(2000);
  c.Record(0, 0);
  c.Record(500, 500);
  c.Record(1000, 500);
  c.Record(1010, 1010);
  c.Record(1990, 1333);
  c.Record(2000, 1400);
  auto a = c.Points();
  ASSERT_EQ(a.size(), 131u);
  EXPECT_DOUBLE_EQ(a[0], 0.0);
  EXPECT_DOUBLE_EQ(a[25], 25.0);
  EXPECT_DOUBLE_EQ(a[26], 25.0);  // no event at 26: fallback 25..27
  EXPECT_DOUBLE_EQ(a[50], 25.0);
  EXPECT_DOUBLE_EQ(a[51], 50.5);
  EXPECT_DOUBLE_EQ(a[52], 50.5);  // fallback 51..53
  EXPECT_DOUBLE_EQ(a[60], 50.5);  // nothing near: previous point
  EXPECT_NEAR(a[100], (66.65 + 70.0) / 2, 1e-9);
  EXPECT_NEAR(a[99], (66.65 + 70.0) / 2, 1e-9);  // fallback 98..100
  EXPECT_NEAR(a[130], a[100], 1e-9);
}

std::vector<TraceTask> Tasks(std::initializer_list<std::tuple<const char*, int, int>> spec) {
  std::vector<TraceTask> out;
  for (auto [name, num, milli] : spec) {
    TraceTask t;
    t.name = name;
    t.cpu_milli = 1000;
    t.num_gpu = num;
    t.gpu_milli = milli;
    out.push_back(t);
  }
  return out;
}

TEST(ArrivalOrderTest, OriginalTraceThenResampledUntilTheStoppingRule) {
  // Capacity 4000 milli, inflation 1.3 -> limit 5200. Trace total = 1000 + 2000 + 500 = 3500.
  auto tasks = Tasks({{"c", 1, 1000}, {"a", 2, 1000}, {"b", 1, 500}});
  Rng rng(1);
  std::vector<int> rank;
  auto order = ArrivalOrder(tasks, 4000, 1.3, 5, rng, &rank);
  ASSERT_GE(order.size(), 3u);
  std::vector<int> first(order.begin(), order.begin() + 3);
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, (std::vector<int>{0, 1, 2}));  // every original task once, shuffled
  int64_t sum = 3500;
  for (size_t i = 3; i < order.size(); ++i) sum += tasks[order[i]].total_gpu_milli();
  // The rule checks sum + per-GPU milli <= limit before adding the total: the last copy may
  // overshoot only through a multi-GPU task; and one more draw must have failed.
  int64_t before_last = sum - (order.size() > 3 ? tasks[order.back()].total_gpu_milli() : 0);
  if (order.size() > 3) {
    EXPECT_LE(before_last + tasks[order.back()].gpu_milli, 5200);
  }
  EXPECT_GT(sum + 500, 5200 - 1000);  // close to the limit
  std::vector<int> r = rank;
  std::sort(r.begin(), r.end());
  EXPECT_EQ(r, (std::vector<int>{0, 1, 2, 3, 4}));
  // Same seed, same order.
  Rng again(1);
  std::vector<int> rank2;
  EXPECT_EQ(ArrivalOrder(tasks, 4000, 1.3, 5, again, &rank2), order);
  EXPECT_EQ(rank2, rank);
}

TEST(RunInflationTest, TinyClusterHandComputed) {
  // One node with 2 GPUs. Tasks: 1 x 1000, 1 x 600, 1 x 600 (third fails whichever order except
  // when both 600s go to different GPUs: then the 1000 fails). Total 2200 > capacity 2000.
  std::vector<TraceNode> nodes = {{"n", 64000, 262144, 2, "T4"}};
  auto tasks = Tasks({{"a", 1, 1000}, {"b", 1, 600}, {"c", 1, 600}});
  auto r = RunInflation(nodes, tasks, {"best-fit", 42, 1.0});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tasks_arrived, 3);  // 2200 > 1.0 * 2000: no resampled copy fits the rule
  EXPECT_EQ(r->tasks_scheduled + r->tasks_failed, 3);
  EXPECT_EQ(r->tasks_scheduled, 2);
  // Final event: arrived 2200 -> 110 %, used 1600 or 1600 -> 80 %.
  EXPECT_DOUBLE_EQ(r->curve[110], 80.0);
}

TEST(MappingTest, MilliMapsExactlyToMemoryAndCores) {
  TraceTask t;
  t.name = "p";
  t.cpu_milli = 6000;
  t.memory_mib = 12288;
  t.num_gpu = 1;
  t.gpu_milli = 460;
  t.gpu_spec = {"V100M16", "V100M32"};
  auto p = ToPodRequest(t, "u");
  ASSERT_EQ(p.containers.size(), 1u);
  ASSERT_EQ(p.containers[0].devices.size(), 1u);
  EXPECT_EQ(p.containers[0].devices[0].memreq_mib, 460 * kMibPerMilli);
  EXPECT_EQ(p.containers[0].devices[0].coresreq, 46);
  EXPECT_EQ(p.containers[0].cpu_milli, 6000);
  EXPECT_EQ(p.selectors.use_types, t.gpu_spec);
  auto n = ToNodeInfo({"x", 1000, 1000, 2, "T4"}, "0007-x");
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_EQ(n.devices[1].devmem_mib, kSimGpuMemMib);
  EXPECT_EQ(n.devices[1].type, "T4");
}

}  // namespace
}  // namespace hami::sim
