#include "common/clock.h"

#include <time.h>

namespace hami {

int64_t RealClock::MonotonicNanos() const {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t RealClock::UnixSeconds() const {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec;
}

RealClock& RealClock::Get() {
  static RealClock clock;
  return clock;
}

}  // namespace hami
