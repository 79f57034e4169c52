#include "k8s/flow_control.h"

#include <gtest/gtest.h>

namespace hami::k8s {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(RateLimiterTest, BurstThenSteadyRate) {
  FakeClock clock;
  RateLimiter limiter(/*qps=*/10, /*burst=*/3, clock);
  // Burst: three requests go at once; then each waits one more 1/qps (100 ms) behind the last.
  std::vector<int64_t> want = {0, 0, 0, 100 * kMs, 200 * kMs, 300 * kMs};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(limiter.Reserve(), want[i]) << "request " << i;
  // After 1 s the debt (3 tokens) is paid and 7 more accrued, capped at the burst of 3.
  clock.AdvanceNanos(1000 * kMs);
  EXPECT_EQ(limiter.Reserve(), 0);
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_FALSE(limiter.TryAcquire());
  clock.AdvanceNanos(100 * kMs);
  EXPECT_TRUE(limiter.TryAcquire());
}

// Background requests (TryReserveAbove) take tokens only above `keep`, so a foreground request
// (Reserve) finds the bucket at `keep` at worst and never waits behind them.
TEST(RateLimiterTest, BackgroundKeepsTheBucketAboveItsFloor) {
  struct Step {
    const char* what;
    int64_t advance_ms;  // fake time passed before the step
    bool background;
    int64_t want;  // the step's answer: a wait in ms (Reserve, TryReserveAbove)
  };
  // qps 10, burst 4, keep 2: two background takes leave 2 tokens; the third waits 100 ms for a
  // third token; a foreground one takes one of the two kept at once (no wait), and the next
  // background one must wait for the bucket to climb back above 2.
  const std::vector<Step> steps = {
      {"background 1", 0, true, 0},
      {"background 2", 0, true, 0},
      {"background 3: bucket at the floor", 0, true, 100},
      {"foreground: never waits behind background", 0, false, 0},
      {"background 4: 2 tokens to the floor + 1", 0, true, 200},
      {"background 4 again, 100 ms later", 100, true, 100},
      {"background 4 again, 200 ms later", 100, true, 0},
      {"foreground from the floor", 0, false, 0},
      {"foreground", 0, false, 0},
      {"foreground into debt", 0, false, 100},
      {"background behind the debt: 4 tokens short", 0, true, 400},
  };
  FakeClock clock;
  RateLimiter limiter(/*qps=*/10, /*burst=*/4, clock);
  for (const Step& s : steps) {
    clock.AdvanceNanos(s.advance_ms * kMs);
    const int64_t got = s.background ? limiter.TryReserveAbove(2) : limiter.Reserve();
    EXPECT_EQ(got, s.want * kMs) << s.what;
  }
  // A floor at or above the burst is capped at burst - 1: background requests still go.
  RateLimiter full(/*qps=*/10, /*burst=*/2, clock);
  EXPECT_EQ(full.TryReserveAbove(100), 0);
  EXPECT_EQ(full.TryReserveAbove(100), 100 * kMs);
  RateLimiter off(/*qps=*/0, /*burst=*/1, clock);
  EXPECT_EQ(off.TryReserveAbove(5), 0);
}

TEST(RateLimiterTest, DisabledWhenQpsNotPositive) {
  FakeClock clock;
  RateLimiter limiter(0, 1, clock);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.Reserve(), 0);
}

TEST(BackoffTest, GrowsCapsAndJitters) {
  Rng rng(7);
  Backoff b({.initial_ns = 100 * kMs, .max_ns = 1000 * kMs, .factor = 2.0, .jitter = 0.2}, rng);
  const int64_t bases[] = {100, 200, 400, 800, 1000, 1000};
  for (int64_t base : bases) {
    const int64_t d = b.NextDelayNanos();
    EXPECT_GE(d, base * kMs * 8 / 10);
    EXPECT_LE(d, std::min<int64_t>(1000, base * 12 / 10) * kMs);
  }
  b.Reset();
  EXPECT_LE(b.NextDelayNanos(), 120 * kMs);
}

TEST(BackoffTest, SameSeedSameDelays) {
  Rng r1(3), r2(3);
  Backoff a({}, r1), b({}, r2);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.NextDelayNanos(), b.NextDelayNanos());
}

}  // namespace
}  // namespace hami::k8s
