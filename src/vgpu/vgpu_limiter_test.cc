// The SM limiter as a pure algorithm, in simulation with an injected clock: a FIFO device of N SMs runs
// kernels of ceil(blocks/SMs) waves; containers launch greedily through their own limiter (one shared
// device entry per container), blocked by the device backlog like the real driver; calibration gets each
// container's measured busy time every 100 ms, as the NVML watcher does. The achieved share over 10 s of
// simulated time must be within 3 points of each target, on 20 and 132 SMs, for 1 and 2 containers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "vgpu/vgpu_core.h"

namespace {

struct Interval {
  uint64_t start, end;
};

struct Container {
  uint32_t pct = 0;
  vgpu_device_entry entry{};
  uint64_t next_try = 0;  // time the launcher acts next
  std::vector<Interval> busy;
  uint64_t last_cal = 0, last_waves = 0;
};

uint64_t BusyIn(const std::vector<Interval>& v, uint64_t a, uint64_t b) {
  uint64_t s = 0;
  for (const Interval& i : v) {
    uint64_t lo = std::max(i.start, a), hi = std::min(i.end, b);
    if (hi > lo) s += hi - lo;
  }
  return s;
}

// Returns each container's share of device time over [0, horizon), in percent.
std::vector<double> Simulate(uint32_t sms, uint64_t wave_ns, std::vector<uint32_t> pcts, uint64_t horizon,
                             unsigned seed) {
  std::vector<Container> cs;
  for (uint32_t p : pcts) {
    Container c;
    c.pct = p;
    cs.push_back(c);
  }
  std::mt19937 rng(seed);
  const uint64_t kBacklog = 20000000, kCal = 100000000;
  uint64_t busy_until = 0;
  for (;;) {
    size_t k = 0;
    for (size_t i = 1; i < cs.size(); i++) {
      if (cs[i].next_try < cs[k].next_try) k = i;
    }
    Container& c = cs[k];
    uint64_t now = c.next_try;
    if (now >= horizon) break;
    while (c.last_cal + kCal <= now) {  // the watcher's calibration tick
      uint64_t a = c.last_cal, b = c.last_cal + kCal;
      uint64_t waves = c.entry.waves_launched;
      vgpu_limiter_calibrate(&c.entry, BusyIn(c.busy, a, b), waves - c.last_waves);
      c.last_waves = waves;
      c.last_cal = b;
    }
    uint64_t blocks = 1 + rng() % (8 * sms);
    uint64_t waves = (blocks + sms - 1) / sms;
    // As in the interposer: the clock is read only when the bucket is empty.
    uint64_t wait = vgpu_limiter_take(&c.entry, waves) ? 0 : vgpu_limiter_try(&c.entry, c.pct, waves, now);
    if (wait) {
      c.next_try = now + wait;
      continue;
    }
    uint64_t start = std::max(now, busy_until);
    busy_until = start + waves * wave_ns;
    c.busy.push_back({start, busy_until});
    // The launch returns at once unless the backlog is too deep; 2 us of host work per launch.
    c.next_try = std::max(now + 2000, busy_until > kBacklog ? busy_until - kBacklog : 0);
  }
  std::vector<double> shares;
  for (const Container& c : cs) shares.push_back(100.0 * BusyIn(c.busy, 0, horizon) / horizon);
  return shares;
}

TEST(VgpuLimiter, HoldsTargetsIndependentOfSmCount) {
  struct Case {
    uint32_t sms;
    std::vector<uint32_t> pcts;
  } cases[] = {
      {20, {30}},      {20, {50}},      {20, {70}},      {132, {30}},     {132, {50}},     {132, {70}},
      {20, {30, 70}},  {20, {50, 50}},  {20, {70, 30}},  {132, {30, 70}}, {132, {50, 50}}, {132, {70, 30}},
  };
  for (const Case& c : cases) {
    // A wave cost different from the limiter's prior (100 us), so calibration has to work.
    std::vector<double> got = Simulate(c.sms, 250000, c.pcts, 10000000000ull, c.sms);
    for (size_t i = 0; i < c.pcts.size(); i++) {
      EXPECT_NEAR(got[i], c.pcts[i], 3.0) << c.sms << " SMs, container " << i << " target " << c.pcts[i];
      std::printf("sms=%u containers=%zu target=%u achieved=%.2f\n", c.sms, c.pcts.size(), c.pcts[i], got[i]);
    }
  }
}

TEST(VgpuLimiter, WaitsAreBoundedAndUnlimitedPassesImmediately) {
  vgpu_device_entry d{};
  EXPECT_EQ(vgpu_limiter_try(&d, 10, 1, 1000), 0u);  // the first launch has a full burst
  uint64_t w = 0;
  for (int i = 0; i < 1000 && !w; i++) w = vgpu_limiter_try(&d, 10, 1000000, 1000);  // huge launches
  EXPECT_GT(w, 0u);
  EXPECT_LE(w, VGPU_LIMITER_MAX_SLEEP_NS);
  // A calibration sample replaces the prior, later samples are averaged.
  vgpu_limiter_calibrate(&d, 1000000, 10);
  EXPECT_EQ(d.ns_per_wave, 100000u);
  vgpu_limiter_calibrate(&d, 3000000, 10);
  EXPECT_EQ(d.ns_per_wave, 200000u);
  vgpu_limiter_calibrate(&d, 0, 10);  // idle tick: no information
  EXPECT_EQ(d.ns_per_wave, 200000u);
}

// A launch that charges the bucket while another thread refills it keeps its charge: the refill's clamp to
// the burst must not overwrite it.
void ChargeFortyWaves(vgpu_device_entry* d) {
  vgpu_limiter_refill_hook = nullptr;
  EXPECT_EQ(vgpu_limiter_take(d, 40), 1);
}

TEST(VgpuLimiter, RefillClampKeepsAConcurrentCharge) {
  const int64_t kMs = 1000000;
  vgpu_device_entry d{};
  d.ns_per_wave = kMs;
  d.refill_ns = 1000 * kMs;
  d.tokens_ns = 14 * kMs;  // the burst at 30 % is 15 ms
  vgpu_limiter_refill_hook = ChargeFortyWaves;
  // 100 ms later: +30 ms, clamped to 15 ms; meanwhile 40 ms are charged; then this launch's 1 ms.
  EXPECT_EQ(vgpu_limiter_try(&d, 30, 1, 1100 * kMs), 0u);
  EXPECT_EQ(vgpu_limiter_refill_hook, nullptr) << "the race window was not reached";
  // Either order of refill and charge is fine (14-40+30 = 4, or 15-40 = -25), less this launch's 1 ms.
  EXPECT_LE(d.tokens_ns, 3 * kMs) << "the concurrent 40 ms charge was lost";
  EXPECT_EQ(d.waves_launched, 41u);
}

}  // namespace
