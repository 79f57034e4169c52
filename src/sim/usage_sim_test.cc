#include "sim/usage_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "nlohmann/json.hpp"
#include "usage/recommend.h"
#include "usage/synthetic.h"

namespace hami::sim {
namespace {

const usage::UsageTrace& Synthetic() {
  static const usage::UsageTrace t = usage::SyntheticTrace({});
  return t;
}

UsageSimConfig Stock(int64_t card_gib, int64_t gpumem_mib, int cores) {
  UsageSimConfig c;
  c.gpu_memory_mib = card_gib * 1024;
  c.gpumem_mib = gpumem_mib;
  c.gpucores = cores;
  return c;
}

UsageSimConfig Aware(int64_t card_gib) {
  UsageSimConfig c;
  c.gpu_memory_mib = card_gib * 1024;
  return c;
}

// The most pods alive at once from the warm-up on.
int64_t PeakPods(const usage::UsageTrace& t, int32_t warmup) {
  int64_t peak = 0;
  for (int32_t m = warmup; m < t.minutes; ++m) {
    int64_t n = 0;
    for (const auto& p : t.pods) n += p.alive(m);
    peak = std::max(peak, n);
  }
  return peak;
}

TEST(UsageSim, StockCalibration) {
  const int64_t peak = PeakPods(Synthetic(), 360);
  struct Case {
    const char* name;
    UsageSimConfig config;
    int64_t want_gpus;
  };
  const Case cases[] = {
      // Exclusive cards: one GPU per concurrent pod.
      {"whole 80 GiB cards", Stock(80, 80 * 1024, 100), peak},
      {"47 GiB on 80 GiB cards: one per card", Stock(80, 48128, 25), peak},
      // Three 47 GiB pods fill a 141 GiB card exactly (3 x 48128 = 144384).
      {"47 GiB on 141 GiB cards: three per card", Stock(141, 48128, 25), (peak + 2) / 3},
  };
  for (const auto& c : cases) {
    auto r = RunUsageSim(Synthetic(), c.config);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status();
    EXPECT_EQ(r->mode, "stock");
    EXPECT_EQ(r->metrics.peak_pods, peak) << c.name;
    EXPECT_EQ(r->metrics.gpus, c.want_gpus) << c.name;
    // Stock accounting: the booked gpumem of a GPU never passes the card.
    for (const auto& segs : r->placement)
      for (const auto& s : segs) EXPECT_EQ(s.mem_mib, c.config.gpumem_mib);
  }
}

TEST(UsageSim, RequestsFlag) {
  struct Case {
    const char* text;
    bool ok;
    int64_t gpumem;
    int cores;
  };
  const Case cases[] = {
      {"gpumem=48128,gpucores=25", true, 48128, 25},
      {"gpucores=100,gpumem=1", true, 1, 100},
      {"gpumem=1024", true, 1024, 0},
      {"", false, 0, 0},
      {"gpucores=25", false, 0, 0},  // gpumem is required
      {"gpumem=0", false, 0, 0},
      {"gpumem=-5", false, 0, 0},
      {"gpumem=12x", false, 0, 0},
      {"gpumem=", false, 0, 0},
      {"gpumem=1,gpucores=101", false, 0, 0},
      {"gpumem=1,,gpucores=1", false, 0, 0},
      {"gpumem=1,cores=1", false, 0, 0},
      {"gpumem=99999999999999999999", false, 0, 0},
  };
  for (const auto& c : cases) {
    UsageSimConfig config;
    const Status s = ParseUsageRequests(c.text, &config);
    EXPECT_EQ(s.ok(), c.ok) << c.text << ": " << s;
    if (!c.ok) {
      EXPECT_FALSE(config.stock()) << c.text;  // untouched on error
      continue;
    }
    EXPECT_EQ(config.gpumem_mib, c.gpumem) << c.text;
    EXPECT_EQ(config.gpucores, c.cores) << c.text;
  }
}

TEST(UsageSim, BadConfigurationsAreErrors) {
  EXPECT_FALSE(RunUsageSim(Synthetic(), Stock(80, 90 * 1024, 0)).ok());  // more than the card
  EXPECT_FALSE(RunUsageSim(Synthetic(), Stock(80, 1024, 101)).ok());
  UsageSimConfig c = Aware(80);
  c.overcommit_pct = 50;
  EXPECT_FALSE(RunUsageSim(Synthetic(), c).ok());
  c = Aware(80);
  c.policy = "no-such-policy";
  EXPECT_FALSE(RunUsageSim(Synthetic(), c).ok());
}

TEST(UsageSim, UsageAwarePacksBeyondStockAccountingWithoutOom) {
  const int64_t peak = PeakPods(Synthetic(), 360);
  for (int64_t card : {80, 141}) {
    auto stock = RunUsageSim(Synthetic(), Stock(card, 48128, 25));
    auto aware = RunUsageSim(Synthetic(), Aware(card));
    ASSERT_TRUE(stock.ok() && aware.ok());
    EXPECT_EQ(aware->mode, "usage-aware");
    const usage::Metrics& m = aware->metrics;
    EXPECT_EQ(m.oom_pods, 0) << card;
    // Fewer GPUs than whole cards (the stock user's count on 80 GiB), by a third at least.
    EXPECT_LE(m.gpus * 3, peak * 2) << card;
    // Contention and memory pressure stay low where stock's three 47 GiB pods a card contend
    // and throttle (141 GiB).
    EXPECT_LE(m.contended_pct, 0.5) << card;
    EXPECT_LE(m.over_cap_pct, 0.05) << card;
    EXPECT_EQ(m.throttled_pct, 0) << card;  // no gpucores
    if (card == 141) {
      EXPECT_GT(stock->metrics.contended_pct, 2 * m.contended_pct);
      EXPECT_GT(stock->metrics.throttled_pct, 10);
    }
    // The booked sum passes the card on some GPU at some minute: the overcommit is used.
    std::map<std::pair<int, int32_t>, int64_t> booked;  // (gpu, minute) -> sum of mem_mib
    const auto& t = Synthetic();
    int64_t most = 0;
    for (size_t i = 0; i < t.pods.size(); ++i)
      for (const auto& s : aware->placement[i])
        for (int32_t mm = std::max(s.from_minute, t.pods[i].first); mm <= t.pods[i].last(); ++mm)
          most = std::max(most, booked[{s.gpu, mm}] += s.mem_mib);
    EXPECT_GT(most, card * 1024) << card;
    EXPECT_LE(most, card * 1024 * 2) << card;  // the overcommit cap (200 %)
    // One recommendation for the one workload: its warm-up peak + 5 %, rounded up to 256 MiB.
    ASSERT_EQ(aware->workloads.size(), 1u);
    const auto& w = aware->workloads[0];
    EXPECT_EQ(w.gpumem_mib, usage::RecommendGpumem(w.warmup_peak_mib, 5, 256));
    EXPECT_LE(w.gpumem_mib, w.warmup_peak_mib * 110 / 100);
  }
}

TEST(UsageSim, SameTraceAndFlagsSameBytes) {
  for (const UsageSimConfig& c : {Stock(141, 48128, 25), Aware(80)}) {
    auto a = RunUsageSim(Synthetic(), c);
    auto b = RunUsageSim(usage::SyntheticTrace({}), c);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(UsagePlacementsJson(Synthetic(), *a, c), UsagePlacementsJson(Synthetic(), *b, c));
    EXPECT_EQ(UsageJson("t", *a, c), UsageJson("t", *b, c));
    EXPECT_EQ(UsageTable("t", *a, c), UsageTable("t", *b, c));
  }
}

TEST(UsageSim, PlacementsJsonIsHamiPlacementV2) {
  const UsageSimConfig c = Aware(80);
  auto r = RunUsageSim(Synthetic(), c);
  ASSERT_TRUE(r.ok());
  const auto j = nlohmann::json::parse(UsagePlacementsJson(Synthetic(), *r, c));
  EXPECT_EQ(j["format"], "hami-placement v2");
  EXPECT_EQ(j["policy"], "usage-aware");
  EXPECT_EQ(j["capacity_mib"], 80 * 1024);
  EXPECT_EQ(j["warmup_min"], 360);
  EXPECT_EQ(j["restart_min"], 0);
  // Every pod alive at a minute >= warm-up, one segment each, from its placing minute.
  size_t listed = 0;
  for (const auto& p : Synthetic().pods) {
    if (p.last() < 360) {
      EXPECT_FALSE(j["pods"].contains(p.name)) << p.name;
      continue;
    }
    ++listed;
    const auto& segs = j["pods"][p.name];
    ASSERT_EQ(segs.size(), 1u) << p.name;
    EXPECT_EQ(segs[0]["from_minute"], std::max(360, p.first)) << p.name;
    EXPECT_EQ(segs[0]["cores"], 0);
    EXPECT_EQ(segs[0]["gpu"].get<std::string>().rfind("gpu-", 0), 0u);
  }
  EXPECT_EQ(j["pods"].size(), listed);
}

// hami recommend's saving: over a window (the warm-up here), placing from its start and learning
// from all of it (learn_until). Without learn_until nothing is learned before minute 0: the
// workload has no peak and gets the whole card.
TEST(UsageSim, LearnUntilLearnsFromTheWholeWindow) {
  const usage::UsageTrace window = usage::Window(Synthetic(), 0, 360);
  const int64_t peak = PeakPods(window, 0);
  for (int32_t learn_until : {-1, 360}) {
    UsageSimConfig config = Aware(80);
    config.warmup_min = 0;
    config.learn_until = learn_until;
    auto r = RunUsageSim(window, config);
    ASSERT_TRUE(r.ok()) << r.status();
    const auto& w = r->workloads[0];
    if (learn_until < 0) {
      EXPECT_EQ(w.warmup_peak_mib, 0);
      EXPECT_EQ(w.gpumem_mib, config.gpu_memory_mib);
      // Nothing learned is no licence to overcommit: one whole card per concurrent pod.
      EXPECT_EQ(r->metrics.gpus, peak);
      continue;
    }
    EXPECT_GT(w.warmup_peak_mib, 40000);
    EXPECT_LT(w.gpumem_mib, config.gpu_memory_mib);
    EXPECT_EQ(r->metrics.oom_pods, 0);  // in-sample: the window's own peak
    EXPECT_LT(r->metrics.gpus * 3, peak * 2) << r->metrics.gpus << " GPUs for " << peak << " pods";
  }
}

UsageSimConfig Consolidating(int64_t card_gib) {
  UsageSimConfig c = Aware(card_gib);
  c.consolidate = true;
  return c;
}

// A hand-made day: two pods busy (60 % each) in the warm-up, so they start apart; idle for two
// hours, so the planner at minute 120 empties one GPU; busy again from 180 to 300, so the plan at
// 240 relieves the shared GPU; idle again. Minute by minute (from the warm-up, 60):
//   60-119 two GPUs; 120-121 two (the surge: the moved pod is on both); 122-239 one, contended
//   from 180; 240-241 two, the old one contended (the surge); 242-299 two.
usage::UsageTrace BusyQuietBusy(int32_t minutes = 300) {
  usage::UsageTrace t;
  t.workloads = {""};
  t.minutes = minutes;
  for (const char* name : {"a", "b"}) {
    usage::PodSeries p;
    p.name = name;
    for (int32_t m = 0; m < minutes; ++m) {
      p.duty.push_back(m < 60 || (m >= 180 && m < 300) ? 6000 : 0);
      p.mem_mib.push_back(m == 0 ? 30720 : 20480);
    }
    t.pods.push_back(std::move(p));
  }
  return t;
}

TEST(UsageSimConsolidate, MetricsOfAHandMadeDay) {
  UsageSimConfig c = Consolidating(80);
  c.warmup_min = 60;
  c.forecast_min = 60;
  c.plan_every_min = 60;
  struct Case {
    const char* name;
    bool consolidate;
    int32_t restart_min;
    int64_t moves, max_moves_pod, gpu_minutes, contended_minutes;
  };
  const Case cases[] = {
      // Static: apart all day, 2 x 240 GPU-minutes, nothing contended.
      {"static", false, 2, 0, 0, 480, 0},
      {"consolidate, restart 2", true, 2, 2, 1, 120 + 4 + 118 + 4 + 116, 60 + 2},
      // Without a surge: 60-119 two, 120-239 one, 240-299 two.
      {"consolidate, restart 0", true, 0, 2, 1, 120 + 120 + 120, 60},
  };
  for (const Case& k : cases) {
    c.consolidate = k.consolidate;
    c.restart_min = k.restart_min;
    auto r = RunUsageSim(BusyQuietBusy(), c);
    ASSERT_TRUE(r.ok()) << k.name << ": " << r.status();
    EXPECT_EQ(r->moves, k.moves) << k.name;
    EXPECT_EQ(r->max_moves_pod, k.max_moves_pod) << k.name;
    EXPECT_EQ(r->metrics.active_gpu_minutes, k.gpu_minutes) << k.name;
    EXPECT_DOUBLE_EQ(r->gpu_hours, static_cast<double>(k.gpu_minutes) / 60) << k.name;
    EXPECT_DOUBLE_EQ(r->whole_gpu_hours, 480.0 / 60) << k.name;
    EXPECT_DOUBLE_EQ(r->hours_ratio, 480.0 / static_cast<double>(k.gpu_minutes)) << k.name;
    // 480 pod-minutes are a third of a pod-day.
    EXPECT_DOUBLE_EQ(r->moves_per_pod_day, static_cast<double>(k.moves) * 1440 / 480) << k.name;
    EXPECT_NEAR(r->metrics.contended_pct, 100.0 * k.contended_minutes / k.gpu_minutes, 1e-9)
        << k.name;
    EXPECT_EQ(r->metrics.peak_pods, 2) << k.name;
    EXPECT_EQ(r->metrics.gpus, 2) << k.name;
    EXPECT_EQ(r->metrics.oom_pods, 0) << k.name;
    if (!k.consolidate) continue;
    // a moved onto b's GPU at 120 (empty-gpu); at 240 b, the one not moved today, left for the
    // GPU a had emptied (relief).
    ASSERT_EQ(r->placement[0].size(), 2u);
    ASSERT_EQ(r->placement[1].size(), 2u);
    EXPECT_EQ(r->placement[0][1].from_minute, 120);
    EXPECT_EQ(r->placement[0][1].gpu, r->placement[1][0].gpu);
    EXPECT_EQ(r->placement[1][1].from_minute, 240);
    EXPECT_EQ(r->placement[1][1].gpu, r->placement[0][0].gpu);
    const auto j = nlohmann::json::parse(UsagePlacementsJson(BusyQuietBusy(), *r, c));
    EXPECT_EQ(j["restart_min"], k.restart_min);
    EXPECT_EQ(j["policy"], "consolidate");
    EXPECT_EQ(j["pods"]["a"].size(), 2u);
  }
}

// Quiet again from 300: the plan at 360 would pack the pair a third time, onto a GPU with a
// pod that moved once already; with one move a day it may not.
TEST(UsageSimConsolidate, TheDayCapHolds) {
  UsageSimConfig c = Consolidating(80);
  c.warmup_min = 60;
  c.forecast_min = 60;
  c.plan_every_min = 60;
  struct Case {
    int cap;
    int64_t moves, max_moves_pod;
  };
  for (const Case& k : {Case{0, 0, 0}, Case{1, 2, 1}, Case{2, 3, 2}}) {
    c.plan.max_moves_pod_day = k.cap;
    auto r = RunUsageSim(BusyQuietBusy(480), c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->moves, k.moves) << k.cap;
    EXPECT_EQ(r->max_moves_pod, k.max_moves_pod) << k.cap;
  }
}

// The defaults (docs/consolidation.md#numbers) on the synthetic day: the bounds and the
// saving measured. The defaults before the fleet-trend forecast went over the card at both sizes
// (0.016 % and 0.025 %).
TEST(UsageSimConsolidate, TheDefaultsKeepTheBoundsOnTheSyntheticDay) {
  const struct {
    int64_t card_gib;
    double min_hours_ratio;
  } cases[] = {{80, 1.9}, {141, 3.1}};
  for (const auto& k : cases) {
    auto r = RunUsageSim(Synthetic(), Consolidating(k.card_gib));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->metrics.oom_pods, 0) << k.card_gib;
    EXPECT_LE(r->metrics.contended_pct, 0.5) << k.card_gib;
    EXPECT_LE(r->metrics.over_cap_pct, 0.01) << k.card_gib;
    EXPECT_LE(r->metrics.throttled_pct, 1) << k.card_gib;
    EXPECT_LE(r->moves_per_pod_day, 1.5) << k.card_gib;
    EXPECT_LE(r->max_moves_pod, 2) << k.card_gib;
    EXPECT_GE(r->hours_ratio, k.min_hours_ratio) << k.card_gib;
  }
}

TEST(UsageSimConsolidate, RefusedWithStockRequests) {
  UsageSimConfig c = Stock(80, 48128, 25);
  c.consolidate = true;
  EXPECT_FALSE(RunUsageSim(Synthetic(), c).ok());
  c = Consolidating(80);
  c.plan_every_min = 0;
  EXPECT_FALSE(RunUsageSim(Synthetic(), c).ok());
}

TEST(UsageSimConsolidate, SameTraceAndFlagsSameBytes) {
  for (int64_t card : {80, 141}) {
    const UsageSimConfig c = Consolidating(card);
    auto a = RunUsageSim(Synthetic(), c);
    auto b = RunUsageSim(usage::SyntheticTrace({}), c);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_GT(a->moves, 0) << card;
    EXPECT_EQ(UsagePlacementsJson(Synthetic(), *a, c), UsagePlacementsJson(Synthetic(), *b, c));
    EXPECT_EQ(UsageJson("t", *a, c), UsageJson("t", *b, c));
    EXPECT_EQ(UsageTable("t", *a, c), UsageTable("t", *b, c));
  }
}

// Two pods busy (60 % each) until minute 100, then idle: the long window (240 min) still sees
// the busy minutes until they pass out of it; the short window while the load falls sees the
// quiet at once. The minute of the first move (-1: none) per forecast.
TEST(UsageSimConsolidate, AFallingLoadIsPlannedByTheShortWindow) {
  usage::UsageTrace t;
  t.workloads = {""};
  t.minutes = 400;
  for (const char* name : {"a", "b"}) {
    usage::PodSeries p;
    p.name = name;
    for (int32_t m = 0; m < t.minutes; ++m) {
      p.duty.push_back(m < 100 ? 6000 : 0);
      p.mem_mib.push_back(20480);
    }
    t.pods.push_back(std::move(p));
  }
  const struct {
    const char* name;
    int32_t falling_min;
    int32_t trend_min;  // 120: at 150 the 70 busy minutes of [30, 150) beat the 30 before
    int trend_scale_pct;
    int32_t want_first_move;
  } cases[] = {
      {"long window only", 0, 30, 0, 360},
      {"short window while falling", 30, 30, 0, 150},
      {"trend over 120 min: still rising at 150", 30, 120, 0, 180},
      // At 120 the fleet's last 30 min hold a third of the duty of the 30 before: scaled by 2/3
      // the two 60 % pods fit one GPU (80 %), even by the long window.
      {"long window, duty scaled by the fleet's trend", 0, 30, 150, 120},
      {"the same, clamped at 110 %: 54 % each, too busy together", 0, 30, 110, 360},
  };
  for (const auto& k : cases) {
    UsageSimConfig c = Consolidating(80);
    c.warmup_min = 60;
    c.plan_every_min = 30;
    c.forecast_min = 240;
    c.forecast_falling_min = k.falling_min;
    c.trend_min = k.trend_min;
    c.trend_scale_pct = k.trend_scale_pct;
    auto r = RunUsageSim(t, c);
    ASSERT_TRUE(r.ok()) << r.status();
    int32_t first = -1;
    for (const auto& segs : r->placement)
      if (segs.size() > 1 && (first < 0 || segs[1].from_minute < first))
        first = segs[1].from_minute;
    EXPECT_EQ(first, k.want_first_move) << k.name;
    EXPECT_EQ(r->metrics.oom_pods, 0) << k.name;
  }
}

UsageSimConfig FallingWindow(int64_t card_gib) {
  UsageSimConfig c = Consolidating(card_gib);
  c.forecast_falling_min = 60;
  return c;
}

// Every forecast knob on (consolidate/forecast.h): the short window while the load falls, duty
// scaled by the fleet's trend, memory held at its 4-hour level, placed by 100 bp.
UsageSimConfig Forecasting(int64_t card_gib) {
  UsageSimConfig c = Consolidating(card_gib);
  c.forecast_falling_min = 90;
  c.trend_scale_pct = 150;
  c.mem_forecast_min = 240;
  c.place_contention_bp = 100;
  return c;
}

// The fleet budget (usage/fleet.h) on: past the per-card 350 bp, a GPU reaching 1200 bp while the
// GPUs in use average 200 bp at most.
UsageSimConfig Fleet(int64_t card_gib) {
  UsageSimConfig c = Aware(card_gib);
  c.fleet_contention_bp = 200;
  c.card_contention_bp = 1200;
  return c;
}

// The fleet budget admits card overruns the per-card budget refuses: fewer GPUs on the synthetic
// trace at 80 GiB (33 -> 31), within the bounds; off (fleet 0) it changes nothing.
TEST(UsageSim, FleetBudgetPacksPastThePerCardBudget) {
  const auto& t = Synthetic();
  auto plain = RunUsageSim(t, Aware(80));
  auto fleet = RunUsageSim(t, Fleet(80));
  UsageSimConfig off = Fleet(80);
  off.fleet_contention_bp = 0;
  auto none = RunUsageSim(t, off);
  ASSERT_TRUE(plain.ok() && fleet.ok() && none.ok());
  EXPECT_LT(fleet->metrics.gpus, plain->metrics.gpus);
  EXPECT_EQ(fleet->metrics.oom_pods, 0);
  EXPECT_LE(fleet->metrics.contended_pct, 0.5);
  EXPECT_LE(fleet->metrics.over_cap_pct, 0.05);
  EXPECT_GT(fleet->metrics.contended_pct, plain->metrics.contended_pct);  // the overrun is used
  EXPECT_EQ(none->placement, plain->placement);
  EXPECT_EQ(
      nlohmann::json::parse(UsageJson("t", *fleet, Fleet(80)))["knobs"]["fleet_contention_bp"],
      200);
}

// New replicas pack by what earlier arrivals did in their first hour (arrival_min), learned as
// the day goes on. A hand-made day on 80 GiB cards: "a" is busy (80 %) from minute 0; "c" arrives
// idle at 100, "d", "e", "f" idle at 200-202. Memory takes three pods a card (20 GiB each, a's
// 10 GiB load spike). By the mix (a alone: busy) every new replica needs a card of its own (a
// pod's profile is the one it was placed by: 5 GPUs); by c's first hour (idle) d, e and f join a
// and c (2 GPUs). A window c has not lived by minute 200 changes nothing.
TEST(UsageSim, NewReplicasPackByWhatEarlierArrivalsDid) {
  usage::UsageTrace t;
  t.workloads = {""};
  t.minutes = 400;
  auto pod = [&](const char* name, int32_t first, int32_t duty) {
    usage::PodSeries p;
    p.name = name;
    p.first = first;
    for (int32_t m = first; m < t.minutes; ++m) {
      p.duty.push_back(duty);
      p.mem_mib.push_back(m == 0 ? 30720 : 20480);
    }
    t.pods.push_back(std::move(p));
  };
  pod("a", 0, 8000);
  pod("c", 100, 0);
  pod("d", 200, 0);
  pod("e", 201, 0);
  pod("f", 202, 0);
  struct Case {
    int32_t arrival_min;
    int64_t gpus;
  };
  for (const Case& k : std::vector<Case>{{0, 5}, {60, 2}, {100, 2}, {150, 5}}) {
    UsageSimConfig c = Aware(80);
    c.warmup_min = 60;
    c.arrival_min = k.arrival_min;
    auto r = RunUsageSim(t, c);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->metrics.gpus, k.gpus) << k.arrival_min;
    EXPECT_EQ(r->metrics.oom_pods, 0) << k.arrival_min;
    EXPECT_EQ(r->metrics.contended_pct, 0) << k.arrival_min;
  }
}

UsageSimConfig Arrivals(int64_t card_gib) {
  UsageSimConfig c = Aware(card_gib);
  c.arrival_min = 60;
  return c;
}

// Every decision up to minute m (placements and moves: every segment starting at or before m) is
// the same when the trace ends at m: nothing of the future is used (not the number of pods to
// come, not their usage, not when pods leave).
TEST(UsageSim, DecisionsUseNothingOfTheFuture) {
  const auto& t = Synthetic();
  for (const UsageSimConfig& c :
       {Stock(141, 48128, 25), Aware(80), Aware(141), Consolidating(80), Consolidating(141),
        FallingWindow(80), FallingWindow(141), Forecasting(80), Forecasting(141), Fleet(80),
        Fleet(141), Arrivals(80), Arrivals(141)}) {
    const int64_t card = c.gpu_memory_mib / 1024;
    auto full = RunUsageSim(t, c);
    ASSERT_TRUE(full.ok()) << full.status();
    std::vector<int32_t> minutes = {c.warmup_min};
    for (const auto& segs : full->placement)
      for (const auto& s : segs)
        if (s.from_minute > c.warmup_min) minutes.push_back(s.from_minute);
    std::sort(minutes.begin(), minutes.end());
    minutes.erase(std::unique(minutes.begin(), minutes.end()), minutes.end());
    int checked = 0;
    for (int32_t m : minutes) {
      const usage::UsageTrace cut = usage::CutAfter(t, m);
      auto part = RunUsageSim(cut, c);
      ASSERT_TRUE(part.ok()) << m << ": " << part.status();
      for (size_t i = 0; i < cut.pods.size(); ++i) {
        ASSERT_EQ(cut.pods[i].name, t.pods[i].name);
        std::vector<std::pair<int32_t, std::string>> want, got;
        for (const auto& s : full->placement[i])
          if (s.from_minute <= m)
            want.push_back({s.from_minute, full->gpu_ids[static_cast<size_t>(s.gpu)]});
        for (const auto& s : part->placement[i])
          got.push_back({s.from_minute, part->gpu_ids[static_cast<size_t>(s.gpu)]});
        EXPECT_EQ(got, want) << t.pods[i].name << " cut at " << m << ", " << card;
        checked += static_cast<int>(want.size());
      }
    }
    EXPECT_GT(minutes.size(), 3u) << card;
    EXPECT_GT(checked, 60) << card;
    if (c.consolidate) {
      EXPECT_GT(full->moves, 0) << card;
    }
  }
}

}  // namespace
}  // namespace hami::sim
