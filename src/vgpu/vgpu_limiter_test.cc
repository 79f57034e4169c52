// The SM limiter as a pure algorithm, in simulation on a virtual device clock: a FIFO device of N
// SMs runs kernels of ceil(blocks/SMs) waves (the fake driver's model, src/fakes/README.md);
// containers launch greedily through their own limiter (one shared device entry per container) as
// the interposer does (fast path, else refill-and-wait in steps, at most VGPU_LIMITER_MAX_WAIT_NS
// per launch), blocked by the device backlog like the driver; every 100 ms the controller tick gets
// the container's busy time in the window rounded to whole percent (as NVML's per-process samples
// are) and the waves launched. Deterministic and quick: no wall clock anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "vgpu/vgpu_core.h"

namespace {

constexpr uint64_t kUs = 1000, kMs = 1000000, kSec = 1000000000;

struct Interval {
  uint64_t start, end;
};

// A kernel shape: `waves` waves of `wave_ns` each (the fake's kernel time is waves x wave time).
struct Shape {
  uint64_t waves, wave_ns;
};

struct Container {
  uint32_t pct = 0;
  vgpu_device_entry entry{};
  uint64_t next_try = 0, waited = 0;
  std::vector<Interval> busy;  // increasing, non-overlapping
  size_t cal_from = 0;         // first interval that may overlap the next window
  uint64_t last_cal = 0, last_waves = 0;
};

// Busy time of `c` in (a, b]; intervals before a are skipped for good (windows only move forward).
uint64_t BusyInWindow(Container& c, uint64_t a, uint64_t b) {
  while (c.cal_from < c.busy.size() && c.busy[c.cal_from].end <= a) c.cal_from++;
  uint64_t s = 0;
  for (size_t i = c.cal_from; i < c.busy.size() && c.busy[i].start < b; i++) {
    uint64_t lo = std::max(c.busy[i].start, a), hi = std::min(c.busy[i].end, b);
    if (hi > lo) s += hi - lo;
  }
  return s;
}

// Busy time of another container `c` in (a, b], without moving its cursor (binary search).
uint64_t BusyInWindowOf(const Container& c, uint64_t a, uint64_t b) {
  auto it = std::partition_point(c.busy.begin(), c.busy.end(),
                                 [a](const Interval& iv) { return iv.end <= a; });
  uint64_t s = 0;
  for (; it != c.busy.end() && it->start < b; ++it) {
    uint64_t lo = std::max(it->start, a), hi = std::min(it->end, b);
    if (hi > lo) s += hi - lo;
  }
  return s;
}

// Runs the containers until `horizon` and returns each one's share of device time over [from,
// horizon), in percent. `shape(k, rng)` is the k-th container's next kernel.
std::vector<double> Simulate(uint32_t sms, const std::vector<uint32_t>& pcts, uint64_t from,
                             uint64_t horizon,
                             const std::function<Shape(size_t, std::mt19937&)>& shape,
                             unsigned seed) {
  std::vector<Container> cs(pcts.size());
  for (size_t i = 0; i < pcts.size(); i++) cs[i].pct = pcts[i];
  std::mt19937 rng(seed);
  const uint64_t kBacklog = 20 * kMs, kCal = 100 * kMs, kHost = 2 * kUs;
  uint64_t busy_until = 0;
  for (;;) {
    size_t k = 0;
    for (size_t i = 1; i < cs.size(); i++) {
      if (cs[i].next_try < cs[k].next_try) k = i;
    }
    Container& c = cs[k];
    uint64_t now = c.next_try;
    if (now >= horizon) break;
    while (c.last_cal + kCal <=
           now) {  // the calibration thread's tick (NVML: whole percent of the window)
      uint64_t a = c.last_cal, b = c.last_cal + kCal;
      uint64_t pct = (BusyInWindow(c, a, b) * 100 + kCal / 2) / kCal, others = 0;
      for (const Container& o : cs) {
        if (&o != &c) others += (BusyInWindowOf(o, a, b) * 100 + kCal / 2) / kCal;
      }
      uint64_t waves = c.entry.waves_launched;
      vgpu_limiter_tick(&c.entry, c.pct, pct * kCal / 100, others * kCal / 100,
                        waves - c.last_waves, kCal);
      c.last_waves = waves;
      c.last_cal = b;
    }
    Shape sh = shape(k, rng);
    uint64_t blocks = (sh.waves - 1) * sms + 1 + rng() % sms;  // any grid that takes sh.waves waves
    uint64_t waves = (blocks + sms - 1) / sms;
    // As in the interposer: the clock is read only when the bucket is empty; waits are bounded.
    uint64_t wait =
        vgpu_limiter_take(&c.entry, waves) ? 0 : vgpu_limiter_try(&c.entry, c.pct, waves, now);
    if (wait && c.waited < VGPU_LIMITER_MAX_WAIT_NS) {
      c.waited += wait;
      c.next_try = now + wait;
      continue;
    }
    c.waited = 0;
    uint64_t start = std::max(now, busy_until);
    busy_until = start + waves * sh.wave_ns;
    if (!c.busy.empty() && c.busy.back().end == start) {
      c.busy.back().end = busy_until;
    } else {
      c.busy.push_back({start, busy_until});
    }
    // The launch returns at once unless the backlog is too deep; some host work per launch.
    c.next_try = std::max(now + kHost, busy_until > kBacklog ? busy_until - kBacklog : 0);
  }
  std::vector<double> shares;
  for (Container& c : cs) {
    c.cal_from = 0;
    shares.push_back(100.0 * static_cast<double>(BusyInWindow(c, from, horizon)) /
                     static_cast<double>(horizon - from));
  }
  return shares;
}

TEST(VgpuLimiter, HoldsTargetsIndependentOfSmCount) {
  struct Case {
    uint32_t sms;
    std::vector<uint32_t> pcts;
  } cases[] = {
      {20, {30}},     {20, {50}},      {20, {70}},      {132, {30}},
      {132, {50}},    {132, {70}},     {20, {30, 70}},  {20, {50, 50}},
      {20, {70, 30}}, {132, {30, 70}}, {132, {50, 50}}, {132, {70, 30}},
  };
  for (const Case& c : cases) {
    // Random grids of up to 8 waves of 250 us: a wave cost different from the limiter's prior (100
    // us).
    auto shape = [](size_t, std::mt19937& rng) { return Shape{1 + rng() % 8, 250 * kUs}; };
    std::vector<double> got = Simulate(c.sms, c.pcts, 0, 10 * kSec, shape, c.sms);
    for (size_t i = 0; i < c.pcts.size(); i++) {
      EXPECT_NEAR(got[i], c.pcts[i], 3.0)
          << c.sms << " SMs, container " << i << " target " << c.pcts[i];
      std::printf("sms=%u containers=%zu target=%u achieved=%.2f\n", c.sms, c.pcts.size(),
                  c.pcts[i], got[i]);
    }
  }
}

// Kernel-length sweep: kernels of 10 us to 2 s (one long wave, or many 250 us waves), and a mix of
// short and long kernels in one container, and graph launches; 20, 132 and 188 SMs; one container
// at 30/50/70 % and two at 30/70. Each run lasts long enough for ~60 cycles of its longest kernel;
// the share is measured after the first 10 s. The limit holds within 2 points everywhere.
TEST(VgpuLimiter, KernelLengthSweepHoldsWithinTwoPoints) {
  const uint64_t lengths[] = {10 * kUs,  100 * kUs, 1 * kMs, 10 * kMs,
                              100 * kMs, 500 * kMs, 2 * kSec};
  struct Kind {
    const char* name;
    uint64_t longest;
    std::function<Shape(size_t, std::mt19937&)> shape;
    std::function<void()> reset = [] {};  // called before each run
  };
  std::vector<Kind> kinds;
  for (uint64_t len : lengths) {
    kinds.push_back({"one wave", len, [len](size_t, std::mt19937&) { return Shape{1, len}; }});
    if (len > 250 * kUs) {
      kinds.push_back({"250us waves", len, [len](size_t, std::mt19937&) {
                         return Shape{len / (250 * kUs), 250 * kUs};
                       }});
    }
  }
  // CUDA graphs: a graph launch is charged one device-wide wave, whatever its kernels take; three
  // graphs of 2, 30 and 300 ms.
  kinds.push_back({"graphs", 300 * kMs, [](size_t, std::mt19937& rng) {
                     const uint64_t len[] = {2 * kMs, 30 * kMs, 300 * kMs};
                     return Shape{1, len[rng() % 3]};
                   }});
  // A phase change: 10 us kernels for about 20 s (the calibration then holds the weight of ~10^6
  // short waves), then 500 ms kernels; the measured time keeps the share while the estimate moves.
  auto launched = std::make_shared<std::vector<uint64_t>>(2, 0);
  kinds.push_back({"phases", 500 * kMs,
                   [launched](size_t k, std::mt19937&) {
                     uint64_t& n = (*launched)[k];
                     if (n < 600000 / (k + 1)) {
                       n++;
                       return Shape{1, 10 * kUs};
                     }
                     return Shape{1, 500 * kMs};
                   },
                   [launched] { std::fill(launched->begin(), launched->end(), 0); }});
  kinds.push_back({"mixed", 500 * kMs, [](size_t, std::mt19937& rng) {
                     switch (rng() % 4) {
                       case 0:
                         return Shape{1, 20 * kUs};
                       case 1:
                         return Shape{40, 250 * kUs};
                       case 2:
                         return Shape{1 + rng() % 8, 100 * kUs};
                       default:
                         return Shape{1, 500 * kMs};
                     }
                   }});
  const std::vector<std::vector<uint32_t>> configs = {{30}, {50}, {70}, {30, 70}};
  int runs = 0;
  for (uint32_t sms : {20u, 132u, 188u}) {
    for (const Kind& kind : kinds) {
      for (const auto& pcts : configs) {
        uint64_t horizon = std::clamp<uint64_t>(kind.longest * 200, 30 * kSec, 500 * kSec);
        kind.reset();
        std::vector<double> got = Simulate(sms, pcts, 10 * kSec, horizon, kind.shape, sms + runs);
        runs++;
        for (size_t i = 0; i < pcts.size(); i++) {
          EXPECT_NEAR(got[i], pcts[i], 2.0)
              << sms << " SMs, " << kind.name << " kernels of up to " << kind.longest / kUs
              << " us, container " << i << " of " << pcts.size();
          std::printf("sms=%u kernels=%s longest_us=%llu containers=%zu target=%u achieved=%.2f\n",
                      sms, kind.name, static_cast<unsigned long long>(kind.longest / kUs),
                      pcts.size(), pcts[i], got[i]);
        }
      }
    }
  }
}

TEST(VgpuLimiter, WaitsAreBoundedAndUnlimitedPassesImmediately) {
  vgpu_device_entry d{};
  EXPECT_EQ(vgpu_limiter_try(&d, 10, 1, 1000), 0u);  // the first launch has a full burst
  uint64_t w = 0;
  for (int i = 0; i < 1000 && !w; i++)
    w = vgpu_limiter_try(&d, 10, 1000000, 1000);  // huge launches
  EXPECT_GT(w, 0u);
  EXPECT_LE(w, VGPU_LIMITER_MAX_SLEEP_NS);
  // A calibration sample replaces the prior, later samples are averaged.
  d.ns_per_wave = 0;
  vgpu_limiter_calibrate(&d, 1000000, 10);
  EXPECT_EQ(d.ns_per_wave, 100000u);
  // Ratio of decayed sums: (100 us x 10 x 7/8 + 3 ms) / (10 x 7/8 + 10 waves).
  vgpu_limiter_calibrate(&d, 3000000, 10);
  EXPECT_EQ(d.ns_per_wave, (100000u * 2240 + 3000000u * 256) / 4800);
  vgpu_limiter_calibrate(&d, 0, 10);  // idle tick: no information
  EXPECT_EQ(d.ns_per_wave, (100000u * 2240 + 3000000u * 256) / 4800);
  // One long kernel among many short waves moves the estimate by its share of the waves.
  d.ns_per_wave = 0;
  vgpu_limiter_calibrate(&d, 100 * 10000, 100);  // 100 waves of 10 us
  vgpu_limiter_calibrate(&d, 500000000, 1);      // then one wave of 500 ms
  EXPECT_LT(d.ns_per_wave, 6000000u);
  // A weight past its bound (a tampered file) is dropped: the sample replaces the estimate.
  d.cal_weight = ~0ull;
  vgpu_limiter_calibrate(&d, 1000000, 10);
  EXPECT_EQ(d.ns_per_wave, 100000u);
  EXPECT_EQ(d.cal_weight, 2560u);
}

// A launch that charges the bucket while another thread refills it keeps its charge: the refill's
// clamp to the burst must not overwrite it.
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
  // Either order of refill and charge is fine (14-40+30 = 4, or 15-40 = -25), less this launch's 1
  // ms.
  EXPECT_LE(d.tokens_ns, 3 * kMs) << "the concurrent 40 ms charge was lost";
  EXPECT_EQ(d.waves_launched, 41u);
}

// The clamp of a bucket above the burst (the burst decays each tick) keeps a launch's charge made
// between its load and its store.
TEST(VgpuLimiter, ClampToTheBurstKeepsAConcurrentCharge) {
  const int64_t kMs = 1000000;
  vgpu_device_entry d{};
  d.ns_per_wave = kMs;
  d.tokens_ns = 16 * kMs;  // above the 15 ms burst at 30 %
  vgpu_limiter_refill_hook = ChargeFortyWaves;
  vgpu_limiter_clamp(&d, 30);
  EXPECT_EQ(vgpu_limiter_refill_hook, nullptr) << "the race window was not reached";
  EXPECT_EQ(d.tokens_ns, -24 * kMs) << "the concurrent 40 ms charge was lost";
  vgpu_limiter_clamp(&d, 30);  // below the burst: unchanged
  EXPECT_EQ(d.tokens_ns, -24 * kMs);
  d.tokens_ns = 100 * kMs;
  vgpu_limiter_clamp(&d, 30);
  EXPECT_EQ(d.tokens_ns, 15 * kMs);
}

}  // namespace
