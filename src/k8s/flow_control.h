#pragma once
// Client-side flow control: a token-bucket rate limiter (qps/burst, as client-go's) and a capped
// exponential backoff with jitter. Both take their clock and randomness from the caller so tests
// can drive them deterministically.
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/rng.h"

namespace hami::k8s {

// Token bucket: `burst` tokens, refilled at `qps` per second. Reserve() takes one token and returns
// how long the caller must wait before using it (0 when a token was available). Reservations may
// run the bucket negative, so concurrent callers queue fairly behind each other. qps <= 0 disables
// limiting. Thread-safe.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst, const Clock& clock);
  // Nanoseconds to wait before the reserved request may go.
  int64_t Reserve();
  // Takes a token only if one is available now.
  bool TryAcquire();
  // For background requests (Client's BackgroundRequests): takes a token only if more than `keep`
  // tokens stay in the bucket after it and returns 0; otherwise takes nothing and returns how long
  // until that may be so (the caller sleeps and asks again). Background requests therefore never
  // run the bucket below `keep` nor make a Reserve() wait; `keep` is capped at burst - 1.
  int64_t TryReserveAbove(double keep);

 private:
  void RefillLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const double qps_;
  const double burst_;
  const Clock& clock_;
  Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  int64_t last_ns_ ABSL_GUARDED_BY(mu_);
};

struct BackoffOptions {
  int64_t initial_ns = 100'000'000;  // 100 ms
  int64_t max_ns = 30'000'000'000;   // 30 s
  double factor = 2.0;
  double jitter = 0.2;  // each delay is scaled by a uniform factor in [1 - jitter, 1 + jitter]
};

// Capped exponential backoff: delays initial, initial*factor, ... up to max, each jittered.
// Not thread-safe (one per retry loop).
class Backoff {
 public:
  Backoff(BackoffOptions opts, Rng& rng) : opts_(opts), rng_(rng), next_(opts.initial_ns) {}
  int64_t NextDelayNanos();
  void Reset() { next_ = opts_.initial_ns; }

 private:
  BackoffOptions opts_;
  Rng& rng_;
  int64_t next_;
};

}  // namespace hami::k8s
