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
#include <utility>
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

// What a run adds to greedy containers under a limiter that is always on (policy force).
struct Scenario {
  // When container k wants to launch again if it does not at t (returns t when it does): it is
  // idle in between. Null: always.
  std::function<uint64_t(size_t k, uint64_t t)> next_wanted;
  // The node monitor's feedback under policy default (src/monitor/feedback.cc): every `feedback`
  // ns (phase `feedback_phase`), each container's switch becomes 1 when two or more containers were
  // busy on the device in the past interval (NVML's window), else 0; launches of a container whose
  // switch is 0 bypass the limiter (not charged, not counted), and its watcher calls
  // vgpu_limiter_unlimited before each tick, as the interposer does. 0: no monitor.
  uint64_t feedback = 0, feedback_phase = 0;
};

struct Result {
  std::vector<double> shares;          // device time over [from, horizon), percent
  std::vector<uint64_t> longest_wait;  // longest time one launch waited in the limiter, ns
  std::vector<int> switched_off;       // times the monitor turned the container's limit off
};

// Runs the containers until `horizon`. `shape(k, rng)` is the k-th container's next kernel.
Result RunScenario(uint32_t sms, const std::vector<uint32_t>& pcts, uint64_t from, uint64_t horizon,
                   const std::function<Shape(size_t, std::mt19937&)>& shape, unsigned seed,
                   const Scenario& sc = {}) {
  std::vector<Container> cs(pcts.size());
  for (size_t i = 0; i < pcts.size(); i++) cs[i].pct = pcts[i];
  // Switch history: (time from which it holds, value), per container; it starts at 1 (region init).
  std::vector<std::vector<std::pair<uint64_t, bool>>> sw(cs.size(), {{0, true}});
  auto switch_at = [&](size_t k, uint64_t t) {
    bool on = true;
    for (const auto& [at, v] : sw[k]) {
      if (at > t) break;
      on = v;
    }
    return on || sc.feedback == 0;
  };
  uint64_t next_feedback = sc.feedback ? sc.feedback_phase + sc.feedback : ~0ull;
  std::vector<uint64_t> longest(cs.size(), 0), first_try(cs.size(), 0);
  Result res;
  res.switched_off.assign(cs.size(), 0);
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
    while (next_feedback <= now) {  // the monitor's tick: every launch before it is known
      int active = 0;
      for (const Container& o : cs) {
        active += BusyInWindowOf(o, next_feedback - sc.feedback, next_feedback) > 0;
      }
      for (size_t i = 0; i < sw.size(); i++) {
        if (sw[i].back().second && active < 2) res.switched_off[i]++;
        sw[i].emplace_back(next_feedback, active >= 2);
      }
      next_feedback += sc.feedback;
    }
    while (c.last_cal + kCal <=
           now) {  // the calibration thread's tick (NVML: whole percent of the window)
      uint64_t a = c.last_cal, b = c.last_cal + kCal;
      uint64_t pct = (BusyInWindow(c, a, b) * 100 + kCal / 2) / kCal, others = 0;
      for (const Container& o : cs) {
        if (&o != &c) others += (BusyInWindowOf(o, a, b) * 100 + kCal / 2) / kCal;
      }
      if (!switch_at(k, b)) vgpu_limiter_unlimited(&c.entry, c.pct);
      uint64_t waves = c.entry.waves_launched;
      vgpu_limiter_tick(&c.entry, c.pct, pct * kCal / 100, others * kCal / 100,
                        waves - c.last_waves, kCal);
      c.last_waves = waves;
      c.last_cal = b;
    }
    if (sc.next_wanted && c.waited == 0) {
      uint64_t t = sc.next_wanted(k, now);
      if (t > now) {  // idle until t
        c.next_try = t;
        continue;
      }
    }
    Shape sh = shape(k, rng);
    uint64_t blocks = (sh.waves - 1) * sms + 1 + rng() % sms;  // any grid that takes sh.waves waves
    uint64_t waves = (blocks + sms - 1) / sms;
    // As in the interposer: the clock is read only when the bucket is empty; waits are bounded; no
    // limiter at all while the switch is off.
    uint64_t wait = 0;
    if (switch_at(k, now) && !vgpu_limiter_take(&c.entry, waves)) {
      wait = vgpu_limiter_try(&c.entry, c.pct, waves, now);
    }
    if (wait && c.waited < VGPU_LIMITER_MAX_WAIT_NS) {
      if (c.waited == 0) first_try[k] = now;
      c.waited += wait;
      c.next_try = now + wait;
      continue;
    }
    if (c.waited) longest[k] = std::max(longest[k], now - first_try[k]);
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
  for (Container& c : cs) {
    c.cal_from = 0;
    res.shares.push_back(100.0 * static_cast<double>(BusyInWindow(c, from, horizon)) /
                         static_cast<double>(horizon - from));
  }
  res.longest_wait = std::move(longest);
  return res;
}

// Each container's share of device time over [from, horizon), in percent, limiter always on.
std::vector<double> Simulate(uint32_t sms, const std::vector<uint32_t>& pcts, uint64_t from,
                             uint64_t horizon,
                             const std::function<Shape(size_t, std::mt19937&)>& shape,
                             unsigned seed) {
  return RunScenario(sms, pcts, from, horizon, shape, seed).shares;
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

// Issue 33: one container goes idle and comes back while the other runs, under the node monitor's
// feedback (policy default, its shipped 5 s interval). While a switch is off, launches are not
// charged but the controller still measured the busy time; that time was charged as debt when the
// switch came back on, and both containers stalled for seconds in every cycle (the lone one before
// the neighbour came back too). No launch may wait longer than a throttled launch of these kernels
// does anyway: 250 ms.
TEST(VgpuLimiter, NoStallWhenTheMonitorSwitchesTheLimiterBackOn) {
  struct Case {
    const char* name;
    uint32_t sms;
    std::vector<uint32_t> pcts;
    size_t toggler;               // the container that goes idle and comes back
    uint64_t busy, idle;          // its cycle
    uint64_t max_waves, wave_ns;  // kernels: 1..max_waves waves
  } cases[] = {
      {"30 returns to 70", 132, {30, 70}, 0, 7 * kSec, 9 * kSec, 8, 250 * kUs},
      {"70 returns to 30", 132, {30, 70}, 1, 7 * kSec, 9 * kSec, 8, 250 * kUs},
      {"50 returns to 50", 20, {50, 50}, 0, 9 * kSec, 12 * kSec, 8, 250 * kUs},
      {"long absences", 188, {30, 70}, 0, 3 * kSec, 14 * kSec, 8, 250 * kUs},
      {"10 ms kernels", 132, {30, 70}, 0, 7 * kSec, 11 * kSec, 1, 10 * kMs},
  };
  for (const Case& c : cases) {
    Scenario sc;
    sc.feedback = 5 * kSec;
    sc.feedback_phase = 1300 * kMs;
    sc.next_wanted = [&c](size_t k, uint64_t t) {
      uint64_t cycle = c.busy + c.idle, in = t % cycle;
      return k != c.toggler || in < c.busy ? t : t - in + cycle;
    };
    auto shape = [&c](size_t, std::mt19937& rng) {
      return Shape{1 + rng() % c.max_waves, c.wave_ns};
    };
    Result r = RunScenario(c.sms, c.pcts, 0, 80 * kSec, shape, c.sms, sc);
    EXPECT_GE(r.switched_off[0], 3) << c.name << ": the monitor never lifted the limits";
    for (size_t i = 0; i < c.pcts.size(); i++) {
      EXPECT_LE(r.longest_wait[i], 250 * kMs)
          << c.name << ": container " << i << " at " << c.pcts[i] << " % stalled";
      std::printf("case=\"%s\" container=%zu pct=%u longest_wait_ms=%.1f share=%.1f offs=%d\n",
                  c.name, i, c.pcts[i], static_cast<double>(r.longest_wait[i]) / kMs, r.shares[i],
                  r.switched_off[i]);
    }
  }
}

// Device time measured while the limiter was off is not charged: not while it is off, and not in
// the grace ticks after it is back (work queued meanwhile still runs); nor does it feed the wave
// cost. After the grace, measured time beyond the charges is charged again, and a debt is bounded.
TEST(VgpuLimiter, TimeMeasuredWhileOffIsNoDebt) {
  // 90 ms busy per 100 ms window (not a fully busy device: the burst stays the default, 15 ms at
  // 30 %), no launches charged.
  const uint64_t kBusy = 90 * kMs, kWindow = 100 * kMs;
  const int64_t cap = static_cast<int64_t>(VGPU_LIMITER_BURST_NS / 100 * 30);
  vgpu_device_entry d{};
  d.ns_per_wave = 100 * kUs;
  d.tokens_ns = -3 * static_cast<int64_t>(kSec);  // a debt from before the switch went off
  d.outstanding_ns = 5 * kMs;
  vgpu_limiter_unlimited(&d, 30);
  EXPECT_EQ(d.tokens_ns, cap) << "held at a full burst while off";
  EXPECT_EQ(d.outstanding_ns, 0);
  for (int i = 0; i < 50; i++) {  // 5 s off
    vgpu_limiter_unlimited(&d, 30);
    vgpu_limiter_tick(&d, 30, kBusy, 0, 0, kWindow);
  }
  EXPECT_EQ(d.tokens_ns, cap);
  EXPECT_EQ(d.ns_per_wave, 100 * kUs) << "busy time of uncharged launches is no calibration sample";
  // Back on: for the rest of the grace (the last tick while off used one), work queued while off
  // still runs; no debt.
  for (uint32_t i = 1; i < VGPU_LIMITER_GRACE_TICKS; i++) {
    vgpu_limiter_tick(&d, 30, kBusy, 0, 0, kWindow);
  }
  EXPECT_EQ(d.tokens_ns, cap);
  EXPECT_EQ(d.grace_ticks, 0u);
  // Afterwards measured time beyond the charges is a debt again, bounded.
  vgpu_limiter_tick(&d, 30, kBusy, 0, 0, kWindow);
  EXPECT_EQ(d.tokens_ns, cap - static_cast<int64_t>(kBusy));
  for (int i = 0; i < 1000; i++) vgpu_limiter_tick(&d, 30, kBusy, 0, 0, kWindow);
  EXPECT_EQ(d.tokens_ns, -static_cast<int64_t>(VGPU_LIMITER_MAX_DEBT_WAIT_NS / 100 * 30));
  // A tampered grace counter grants at most the grace.
  d.grace_ticks = ~0u;
  vgpu_limiter_tick(&d, 30, kBusy, 0, 0, kWindow);
  EXPECT_EQ(d.grace_ticks, VGPU_LIMITER_GRACE_TICKS - 1);
}

// The busy-time meter (vgpu_device_entry.busy_ms, the exporter's busy-seconds counter): every tick
// adds its measured busy time rounded to the ms, with the limiter on or off; it wraps at 2^32.
TEST(VgpuLimiter, EveryTickMetersItsBusyTime) {
  struct Case {
    const char* name;
    uint32_t start_ms;
    std::vector<uint64_t> busy_ns;  // one tick each
    bool off;                       // the limiter is off (vgpu_limiter_unlimited before each tick)
    uint32_t want_ms;
  } cases[] = {
      {"two full windows", 0, {100 * kMs, 100 * kMs}, false, 200},
      {"whole percent of a 100.3 ms window", 0, std::vector<uint64_t>(10, 37111 * kUs), false, 370},
      {"idle windows", 5, {0, 0, 0}, false, 5},
      {"rounded to the nearest ms", 0, {400 * kUs, 500 * kUs, 1499 * kUs}, false, 2},
      {"while the limiter is off", 0, {100 * kMs, 90 * kMs}, true, 190},
      {"wraps", 4294967290u, {20 * kMs}, false, 14},
  };
  for (const Case& c : cases) {
    vgpu_device_entry d{};
    d.busy_ms = c.start_ms;
    for (uint64_t b : c.busy_ns) {
      if (c.off) vgpu_limiter_unlimited(&d, 30);
      vgpu_limiter_tick(&d, 30, b, 0, 0, 100 * kMs);
    }
    EXPECT_EQ(d.busy_ms, c.want_ms) << c.name;
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

// Work-conserving shares: when the rate drops (a neighbour came back) or the limit comes back after
// the container ran unlimited, the tokens gathered before are not spent at the new rate: the bucket
// is cut to the default burst at the new rate and the time since the last refill is not credited.
TEST(VgpuLimiter, LowerCutsTheBucketAndRestartsTheRefill) {
  using Op = void (*)(vgpu_device_entry*, uint32_t, uint64_t);
  const Op lower = vgpu_limiter_lower, lent = vgpu_limiter_lent;
  constexpr int64_t kMsI = static_cast<int64_t>(kMs);
  struct Case {
    const char* name;
    Op op;
    int64_t tokens;
    uint64_t burst, refill, now;
    uint32_t pct;
    int64_t want_tokens;
    uint64_t want_refill, want_burst;
  } cases[] = {
      {"learned 4 s burst, full, at 70 %", lower, 2800 * kMsI, 4 * kSec, 1 * kSec, 3 * kSec, 70,
       35 * kMsI, 3 * kSec, 4 * kSec},
      {"already below the default burst: kept", lower, 5 * kMsI, 0, 1 * kSec, 3 * kSec, 30,
       5 * kMsI, 3 * kSec, 0},
      {"a debt is kept", lower, -40 * kMsI, 0, 1 * kSec, 3 * kSec, 30, -40 * kMsI, 3 * kSec, 0},
      {"a refill later than now is not moved back", lower, 0, 0, 5 * kSec, 3 * kSec, 30, 0,
       5 * kSec, 0},
      // While the monitor lends an idle container's time to its neighbours (vgpu_limiter_lent),
      // its bucket banks none of it: the learnt burst is forgotten and at most the default burst
      // at its rate is kept, while the idle time still repays a debt (credited up to now).
      {"lent: 1.2 s banked under a learnt 4 s burst at 30 %", lent, 1200 * kMsI, 4 * kSec, 1 * kSec,
       1 * kSec + 25 * kMs, 30, 15 * kMsI, 1 * kSec + 25 * kMs, 0},
      {"lent: 500 ms idle credited up to the default burst only", lent, 0, 4 * kSec, 1 * kSec,
       1500 * kMs, 30, 15 * kMsI, 1500 * kMs, 0},
      {"lent: a debt is repaid by the idle time at the rate", lent, -100 * kMsI, 4 * kSec, 1 * kSec,
       1200 * kMs, 30, -40 * kMsI, 1200 * kMs, 0},
      {"lent: a small bucket is credited", lent, 2 * kMsI, 0, 1 * kSec, 1 * kSec + 10 * kMs, 50,
       7 * kMsI, 1 * kSec + 10 * kMs, 0},
  };
  for (const Case& c : cases) {
    vgpu_device_entry d{};
    d.tokens_ns = c.tokens;
    d.burst_ns = c.burst;
    d.full_run = 12;
    d.grace_ticks = VGPU_LIMITER_GRACE_TICKS;  // the limit was off until now
    d.refill_ns = c.refill;
    c.op(&d, c.pct, c.now);
    EXPECT_EQ(d.tokens_ns, c.want_tokens) << c.name;
    EXPECT_EQ(d.refill_ns, c.want_refill) << c.name;
    EXPECT_EQ(d.burst_ns, c.want_burst) << c.name;
    EXPECT_EQ(d.full_run, c.op == lent ? 0u : 12u) << c.name;
    EXPECT_EQ(d.grace_ticks,
              c.op == lent ? VGPU_LIMITER_GRACE_TICKS : VGPU_LIMITER_SHARE_GRACE_TICKS)
        << c.name;
    // The next refill credits only what accrues from now at the new rate.
    if (c.tokens > 0) {
      EXPECT_EQ(vgpu_limiter_try(&d, c.pct, 0, c.want_refill + 10 * kMs), 0u) << c.name;
      EXPECT_LE(d.tokens_ns, c.want_tokens + static_cast<int64_t>(10 * kMs / 100 * c.pct))
          << c.name;
    }
  }
}

// While the monitor blocks a container (its policing, or a busy container of higher priority) the
// container launches nothing and its neighbours fill the device, so the controller's ticks grow the
// learnt burst (4 s x rate at most). The share polls (every 25 ms) must keep the bucket at the
// default burst meanwhile, or the first launch after the block is credited the whole blocked time,
// goes over the share and is blocked again. A debt is repaid at the rate as before; state 0 (the
// container waits behind a neighbour's long kernel) keeps the learnt burst.
TEST(VgpuLimiter, ABlockedContainerBanksAtMostTheDefaultBurst) {
  constexpr int64_t kMsI = static_cast<int64_t>(kMs);
  constexpr uint64_t kPoll = 25 * kMs, kWindow = 100 * kMs, kStart = 10 * kSec;
  struct Case {
    const char* name;
    int state;  // the share line's state while the neighbour runs
    uint32_t pct;
    uint64_t held_ms;     // how long the state lasts
    int64_t tokens;       // the bucket when it starts
    uint64_t burst;       // the learnt burst when it starts
    int64_t want_max_ms;  // the bucket at most, at the first launch 25 ms after it ends
    int64_t want_min_ms;  // ... and at least
  } cases[] = {
      {"blocked 2 s at 30 %, full default burst", VGPU_SHARE_BLOCKED, 30, 2000, 15 * kMsI, 0,
       15 + 8, 15},
      {"blocked 500 ms at 70 % holding a learnt 4 s burst", VGPU_SHARE_BLOCKED, 70, 500,
       2800 * kMsI, 4 * kSec, 35 + 18, 35},
      {"blocked 5 s at 10 %, empty bucket", VGPU_SHARE_BLOCKED, 10, 5000, 0, 0, 5 + 3, 5},
      {"blocked 200 ms at 30 % with a 100 ms debt: repaid at the rate", VGPU_SHARE_BLOCKED, 30, 200,
       -100 * kMsI, 0, -100 + 68, -100 + 67},
      {"lent 2 s at 30 %", VGPU_SHARE_LENT, 30, 2000, 15 * kMsI, 0, 15 + 8, 15},
      {"state 0 for 2 s at 30 %: the learnt burst is kept", 0, 30, 2000, 15 * kMsI, 0, 15 + 608,
       15 + 600},
  };
  for (const Case& c : cases) {
    vgpu_device_entry d{};
    d.tokens_ns = c.tokens;
    d.burst_ns = c.burst;
    d.ns_per_wave = 1;
    d.refill_ns = kStart;
    const uint64_t end = kStart + c.held_ms * kMs;
    for (uint64_t t = kStart + kPoll; t <= end; t += kPoll) {
      vgpu_limiter_share_poll(&d, c.pct, c.state, t);
      // The device full of the neighbour's work, nothing of the container's.
      if ((t - kStart) % kWindow == 0) vgpu_limiter_tick(&d, c.pct, 0, kWindow, 0, kWindow);
      if (c.state != 0) {
        EXPECT_LE(d.tokens_ns, static_cast<int64_t>(VGPU_LIMITER_BURST_NS / 100 * c.pct))
            << c.name << " at " << (t - kStart) / kMs << " ms";
      }
    }
    // The line says 0 again; the first launch (costing nothing) 25 ms later refills the bucket.
    vgpu_limiter_share_poll(&d, c.pct, 0, end + kPoll);
    vgpu_limiter_try(&d, c.pct, 0, end + kPoll);
    EXPECT_LE(d.tokens_ns, c.want_max_ms * kMsI) << c.name;
    EXPECT_GE(d.tokens_ns, c.want_min_ms * kMsI) << c.name;
  }
}
