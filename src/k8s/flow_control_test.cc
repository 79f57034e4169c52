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
