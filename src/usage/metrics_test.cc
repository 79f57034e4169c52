#include "usage/metrics.h"

#include <gtest/gtest.h>

namespace hami::usage {
namespace {

// Pods given as per-minute (duty %, mem MiB) from minute `first`.
PodSeries P(const char* name, int32_t first, std::vector<std::pair<int, int>> rows) {
  PodSeries p;
  p.name = name;
  p.first = first;
  for (auto [d, m] : rows) {
    p.duty.push_back(d * 100);
    p.mem_mib.push_back(m);
  }
  return p;
}

UsageTrace Trace(std::vector<PodSeries> pods) {
  UsageTrace t;
  t.workloads = {""};
  for (auto& p : pods) t.minutes = std::max(t.minutes, p.last() + 1);
  t.pods = std::move(pods);
  return t;
}

TEST(UsageMetrics, TableOfPlacements) {
  // Two minutes after a warm-up of 1 (minute 0 is not counted).
  const UsageTrace t = Trace({
      P("a", 0, {{0, 10}, {60, 30}, {0, 40}}),
      P("b", 0, {{0, 10}, {50, 60}, {30, 70}}),
      P("c", 1, {{10, 5}, {0, 5}}),
  });
  struct Case {
    const char* name;
    Placement placement;
    Metrics want;
  };
  auto seg = [](int gpu, int64_t mem, int cores, int32_t from = 1) {
    return Segment{from, gpu, mem, cores};
  };
  const Case cases[] = {
      {"whole cards",
       {{seg(0, 100, 0)}, {seg(1, 100, 0)}, {seg(2, 100, 0)}},
       // minute 1: gpus a 60, b 50, c 10; minute 2: a 0, b 30, c 0 -> 150 / (3 x 2)
       {.gpus = 3, .peak_pods = 3, .pods_per_gpu = 1, .util_pct = 25, .util_ratio = 1}},
      {"a and b share: contended at minute 1, over 100 MiB at minute 2",
       {{seg(0, 100, 0)}, {seg(0, 100, 0)}, {seg(1, 100, 0)}},
       // GPU 0: min(100, 110) + 30 = 130; GPU 1: 10 -> 140 / (2 x 2) = 35
       {.gpus = 2,
        .peak_pods = 3,
        .pods_per_gpu = 1.5,
        .util_pct = 35,
        .util_ratio = 35.0 / 25.0,
        .contended_pct = 25,
        .over_cap_pct = 25}},
      {"limits below usage: a and b OOM, c not",
       {{seg(0, 35, 0)}, {seg(1, 65, 0)}, {seg(2, 5, 0)}},
       {.gpus = 3,
        .peak_pods = 3,
        .pods_per_gpu = 1,
        .util_pct = 25,
        .util_ratio = 1,
        .oom_pods = 2}},
      {"cores 40 throttle a at minute 1 (b busy too), not b at 2 (a idle)",
       {{seg(0, 100, 40)}, {seg(0, 100, 40)}, {seg(1, 100, 0)}},
       // busy pod-minutes: a 1, b 2, c 1 = 4; throttled: a at 1 (60 > 40), b at 1 (50 > 40)
       {.gpus = 2,
        .peak_pods = 3,
        .pods_per_gpu = 1.5,
        .util_pct = 35,
        .util_ratio = 35.0 / 25.0,
        .contended_pct = 25,
        .over_cap_pct = 25,
        .throttled_pct = 50}},
      {"c moves to GPU 0 at minute 2",
       {{seg(0, 100, 0)}, {seg(1, 100, 0)}, {seg(1, 100, 0), seg(0, 100, 0, 2)}},
       {.gpus = 2,
        .peak_pods = 3,
        .pods_per_gpu = 1.5,
        .util_pct = 150.0 / 4,
        .util_ratio = 1.5,
        .contended_pct = 0}},
  };
  for (const auto& c : cases) {
    auto m = Evaluate(t, c.placement, 100, 1);
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.status();
    EXPECT_EQ(m->gpus, c.want.gpus) << c.name;
    EXPECT_EQ(m->peak_pods, c.want.peak_pods) << c.name;
    EXPECT_DOUBLE_EQ(m->pods_per_gpu, c.want.pods_per_gpu) << c.name;
    EXPECT_DOUBLE_EQ(m->util_pct, c.want.util_pct) << c.name;
    EXPECT_DOUBLE_EQ(m->util_ratio, c.want.util_ratio) << c.name;
    EXPECT_DOUBLE_EQ(m->contended_pct, c.want.contended_pct) << c.name;
    EXPECT_EQ(m->oom_pods, c.want.oom_pods) << c.name;
    EXPECT_DOUBLE_EQ(m->over_cap_pct, c.want.over_cap_pct) << c.name;
    EXPECT_DOUBLE_EQ(m->throttled_pct, c.want.throttled_pct) << c.name;
    EXPECT_EQ(m->minutes, 2) << c.name;
  }
}

TEST(UsageMetrics, ALivePodWithoutAPlacementIsAnError) {
  const UsageTrace t = Trace({P("a", 0, {{0, 1}, {0, 1}}), P("b", 0, {{0, 1}})});
  // b left before warm-up (minute 1): it needs no segment; a does.
  EXPECT_TRUE(Evaluate(t, {{Segment{1, 0, 1, 0}}, {}}, 10, 1).ok());
  EXPECT_FALSE(Evaluate(t, {{}, {}}, 10, 1).ok());
  EXPECT_FALSE(Evaluate(t, {{Segment{2, 0, 1, 0}}, {}}, 10, 1).ok());  // placed too late
  EXPECT_FALSE(Evaluate(t, {{Segment{1, 0, 1, 0}}}, 10, 1).ok());      // wrong size
  EXPECT_FALSE(Evaluate(t, {{Segment{1, 0, 1, 0}, Segment{1, 1, 1, 0}}, {}}, 10, 1).ok());  // order
}

}  // namespace
}  // namespace hami::usage
