#include "sim/usage_sim.h"

#include <gtest/gtest.h>

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

// The decision for a pod placed at minute m is the same when the trace ends at m: nothing of the
// future is used (not the number of pods to come, not their usage, not when pods leave).
TEST(UsageSim, DecisionsUseNothingOfTheFuture) {
  const auto& t = Synthetic();
  for (const UsageSimConfig& c : {Stock(141, 48128, 25), Aware(80), Aware(141)}) {
    auto full = RunUsageSim(t, c);
    ASSERT_TRUE(full.ok()) << full.status();
    std::vector<int32_t> minutes = {c.warmup_min};
    for (const auto& p : t.pods)
      if (p.first > c.warmup_min) minutes.push_back(p.first);
    int checked = 0;
    for (int32_t m : minutes) {
      const usage::UsageTrace cut = usage::CutAfter(t, m);
      auto part = RunUsageSim(cut, c);
      ASSERT_TRUE(part.ok()) << m << ": " << part.status();
      for (size_t i = 0; i < cut.pods.size(); ++i) {
        ASSERT_EQ(cut.pods[i].name, t.pods[i].name);
        const auto& want = full->placement[i];
        if (want.empty() || want.front().from_minute > m) continue;
        ASSERT_FALSE(part->placement[i].empty()) << t.pods[i].name << " at " << m;
        EXPECT_EQ(part->placement[i].front(), want.front()) << t.pods[i].name << " at " << m;
        EXPECT_EQ(part->gpu_ids[static_cast<size_t>(want.front().gpu)],
                  full->gpu_ids[static_cast<size_t>(want.front().gpu)]);
        ++checked;
      }
    }
    EXPECT_GT(checked, 60);
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

}  // namespace
}  // namespace hami::sim
