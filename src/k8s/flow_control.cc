#include "k8s/flow_control.h"

#include <algorithm>
#include <cmath>

namespace hami::k8s {

RateLimiter::RateLimiter(double qps, int burst, const Clock& clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock),
      tokens_(burst_),
      last_ns_(clock.MonotonicNanos()) {}

void RateLimiter::RefillLocked(int64_t now) {
  if (now > last_ns_) {
    tokens_ = std::min(burst_, tokens_ + static_cast<double>(now - last_ns_) * qps_ / 1e9);
    last_ns_ = now;
  }
}

int64_t RateLimiter::Reserve() {
  if (qps_ <= 0) return 0;
  MutexLock lock(mu_);
  RefillLocked(clock_.MonotonicNanos());
  tokens_ -= 1.0;
  if (tokens_ >= 0) return 0;
  return static_cast<int64_t>(std::ceil(-tokens_ * 1e9 / qps_));
}

bool RateLimiter::TryAcquire() {
  if (qps_ <= 0) return true;
  MutexLock lock(mu_);
  RefillLocked(clock_.MonotonicNanos());
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

int64_t RateLimiter::TryReserveAbove(double keep) {
  if (qps_ <= 0) return 0;
  MutexLock lock(mu_);
  RefillLocked(clock_.MonotonicNanos());
  const double need = std::min(keep, burst_ - 1.0) + 1.0 - tokens_;
  if (need <= 0) {
    tokens_ -= 1.0;
    return 0;
  }
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(need * 1e9 / qps_)));
}

int64_t Backoff::NextDelayNanos() {
  const int64_t base = next_;
  next_ = std::min<int64_t>(opts_.max_ns,
                            static_cast<int64_t>(static_cast<double>(next_) * opts_.factor));
  const double scale = 1.0 + opts_.jitter * (2.0 * rng_.UniformDouble() - 1.0);
  return std::min<int64_t>(opts_.max_ns, static_cast<int64_t>(static_cast<double>(base) * scale));
}

}  // namespace hami::k8s
