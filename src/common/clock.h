#pragma once
// Injected time: production code takes a Clock&, tests and the simulator pass a FakeClock.
#include <atomic>
#include <cstdint>

namespace hami {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds (for durations, timeouts).
  virtual int64_t MonotonicNanos() const = 0;
  // Wall-clock Unix seconds (for annotations such as hami.io/vgpu-time).
  virtual int64_t UnixSeconds() const = 0;
};

class RealClock final : public Clock {
 public:
  int64_t MonotonicNanos() const override;
  int64_t UnixSeconds() const override;
  static RealClock& Get();
};

// A clock that only moves when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t unix_seconds = 1'700'000'000) : nanos_(0), unix_(unix_seconds) {}
  int64_t MonotonicNanos() const override { return nanos_.load(); }
  int64_t UnixSeconds() const override { return unix_.load() + nanos_.load() / 1'000'000'000; }
  void AdvanceNanos(int64_t n) { nanos_ += n; }
  void AdvanceSeconds(int64_t s) { nanos_ += s * 1'000'000'000; }

 private:
  std::atomic<int64_t> nanos_;
  std::atomic<int64_t> unix_;
};

}  // namespace hami
