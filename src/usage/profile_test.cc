#include "usage/profile.h"

#include <gtest/gtest.h>

namespace hami::usage {
namespace {

TEST(UsageProfile, QuantileIsNearestRank) {
  struct Case {
    std::vector<int32_t> values;
    int q;
    int32_t want;
  };
  const Case cases[] = {
      {{}, 50, 0},
      {{7}, 0, 7},
      {{7}, 100, 7},
      {{1, 2, 3, 4}, 50, 2},
      {{4, 3, 2, 1}, 75, 3},
      {{1, 2, 3, 4}, 76, 4},
      {{1, 2, 3, 4}, 100, 4},
      {{5, 1, 9, 3, 7, 2, 8, 4, 6, 10}, 90, 9},
  };
  for (const auto& c : cases) {
    std::vector<int32_t> v = c.values;
    EXPECT_EQ(Quantile(&v, c.q), c.want) << c.q;
  }
}

// A pod alive from minute 30 to 149: hour 0 (minutes 30..59) at 100 MiB / 10 %, hour 1 at
// 200 MiB with duty 0..59 %, hour 2 (120..149) at 300 MiB and a 900 MiB spike.
PodSeries Pod() {
  PodSeries p;
  p.name = "p";
  p.first = 30;
  for (int32_t m = 30; m < 150; ++m) {
    const int h = m / 60;
    p.duty.push_back(h == 0 ? 1000 : h == 1 ? (m - 60) * 100 : 0);
    p.mem_mib.push_back(h == 0 ? 100 : h == 1 ? 200 : m == 140 ? 900 : 300);
  }
  return p;
}

TEST(UsageProfile, HourBucketsHoldQuantilesOfWhatWasSeenBeforeUntil) {
  struct Case {
    int32_t until;
    int64_t minutes;
    std::array<int32_t, 3> mem, duty;  // hours 0..2
    int32_t mem_all, duty_all, peak;
  };
  const Case cases[] = {
      {0, 0, {-1, -1, -1}, {-1, -1, -1}, 0, 0, 0},
      {60, 30, {100, -1, -1}, {1000, -1, -1}, 100, 1000, 100},
      // hour 1: duty 0..5900 in 100 steps: q90 = rank 54 = 5300
      {120, 90, {100, 200, -1}, {1000, 5300, -1}, 200, 5000, 200},
      // all 120 minutes: q75 of memory is 200, q90 of duty rank 108 = 4700
      {200, 120, {100, 200, 300}, {1000, 5300, 0}, 200, 4700, 900},
  };
  for (const auto& c : cases) {
    UsageProfile p = ProfileOf(Pod(), c.until, {.mem_q_pct = 75, .duty_q_pct = 90});
    EXPECT_EQ(p.minutes, c.minutes) << c.until;
    for (int h = 0; h < 3; ++h) {
      EXPECT_EQ(p.mem_mib[h], c.mem[h]) << c.until << " hour " << h;
      EXPECT_EQ(p.duty[h], c.duty[h]) << c.until << " hour " << h;
    }
    EXPECT_EQ(p.mem_mib[3], -1);
    EXPECT_EQ(p.mem_all, c.mem_all) << c.until;
    EXPECT_EQ(p.duty_all, c.duty_all) << c.until;
    EXPECT_EQ(p.mem_peak, c.peak) << c.until;
    // An hour not observed reads the quantile over everything observed.
    EXPECT_EQ(p.Mem(5), c.mem_all);
    EXPECT_EQ(p.Duty(5), c.duty_all);
  }
  // Duty histograms (per mille, 5 % bins): hour 0 all at 10 %, hour 1 spread evenly over 0..59 %
  // (five minutes a bin), hour 2 idle; an hour not seen reads the busiest (hour 1).
  UsageProfile p = ProfileOf(Pod(), 200);
  EXPECT_EQ(p.duty_hist[0][2], 1000);
  EXPECT_EQ(p.duty_hist[2][0], 1000);
  for (int b = 0; b < kDutyBins; ++b) EXPECT_EQ(p.duty_hist[1][b], b < 12 ? 83 : 0) << b;
  EXPECT_EQ(p.DutyHist(7), p.duty_hist[1]);
  EXPECT_EQ(p.DutyHist(0), p.duty_hist[0]);
  EXPECT_EQ(ProfileOf(Pod(), 60).DutyHist(7), p.duty_hist[0]);  // only hour 0 seen
}

TEST(UsageProfile, WorkloadProfileTakesTheQuantileAcrossPods) {
  const ProfileOptions q75{.mem_q_pct = 75, .duty_q_pct = 90};
  UsageProfile a = ProfileOf(Pod(), 60, q75), b = ProfileOf(Pod(), 200, q75);
  UsageProfile w = WorkloadProfile({a, b}, 100);
  EXPECT_EQ(w.mem_mib[0], 100);
  EXPECT_EQ(w.mem_mib[2], 300);  // only b saw hour 2
  EXPECT_EQ(w.mem_all, 200);     // the larger of the two pods' levels (100, 200)
  EXPECT_EQ(w.mem_peak, 900);
  EXPECT_EQ(w.minutes, 150);
  EXPECT_EQ(w.duty_hist[0][2], 1000);      // the mean of the pods' histograms for the hour
  EXPECT_EQ(w.duty_hist_busiest[2], 542);  // (1000 + 83) / 2: a's busiest is hour 0, b's hour 1
  EXPECT_EQ(w.duty_hist_busiest[11], 42);
  UsageProfile low = WorkloadProfile({a, b}, 50);
  EXPECT_EQ(low.mem_all, 100);
}

TEST(UsageProfile, RecommendationIsThePeakWithAMarginRoundedUp) {
  struct Case {
    int64_t peak;
    int margin;
    int64_t step, want;
  };
  const Case cases[] = {
      {48033, 5, 256, 50688},  // 50434.65 -> 50435 -> 198 x 256
      {1000, 0, 1, 1000},     {1000, 10, 1, 1100}, {1001, 10, 1, 1102},  // 1101.1 rounds up
      {0, 5, 256, 0},
  };
  for (const auto& c : cases)
    EXPECT_EQ(RecommendGpumem(c.peak, c.margin, c.step), c.want) << c.peak;
}

Tenant MakeTenant(int32_t mem, int32_t duty, int64_t spike, int64_t limit) {
  Tenant t;
  t.profile.minutes = 60;
  t.profile.mem_mib.fill(-1);
  t.profile.duty.fill(-1);
  t.profile.mem_all = mem;
  t.profile.duty_all = duty;
  t.profile.duty_hist_busiest[duty / kDutyBinWidth] = 1000;  // every minute at `duty`
  t.spike_mib = spike;
  t.limit_mib = limit;
  return t;
}

TEST(UsageProfile, CheckFitCountsLevelsOneSpikeDutyAndTheOvercommitCap) {
  PackBudget budget{100, 10000, 100, 200};
  const Tenant small = MakeTenant(20, 3000, 50, 60), big = MakeTenant(40, 3000, 50, 60),
               busy = MakeTenant(20, 8000, 50, 60);
  Tenant unknown = MakeTenant(0, 0, 0, 60), tiny_unknown = MakeTenant(0, 0, 0, 5);
  unknown.profile = tiny_unknown.profile = UsageProfile{};  // an empty profile reads level 0
  struct Case {
    const char* name;
    std::vector<const Tenant*> on;
    const Tenant* cand;
    Fit want;
  };
  const Case cases[] = {
      {"empty GPU", {}, &big, Fit::kFits},
      {"20 + 20 + spike 30", {&small}, &small, Fit::kFits},
      {"40 + 40 + spike 10 = 90", {&big}, &big, Fit::kFits},
      {"20 + 40 + spike 30 = 90", {&small}, &big, Fit::kFits},
      {"three: 20+20+20 + 30 = 90, booked 180", {&small, &small}, &small, Fit::kFits},
      {"three: 40+20+20 + 30 = 110", {&big, &small}, &small, Fit::kMemory},
      {"duty 30 + 80 reaches 100 every minute", {&small}, &busy, Fit::kDuty},
      {"four: booked 240 > 200", {&small, &small, &small}, &small, Fit::kBooked},
      {"nothing learned: counted at its limit 60 + 20 + spike 30",
       {&unknown},
       &small,
       Fit::kMemory},
      {"nothing learned next to nothing learned", {&unknown}, &unknown, Fit::kMemory},
      {"nothing learned, small limit: busy all the time", {&tiny_unknown}, &small, Fit::kDuty},
  };
  for (const auto& c : cases) EXPECT_EQ(CheckFit(c.on, *c.cand, budget), c.want) << c.name;
  // Hours are checked one by one: two tenants busy in different hours fit, in the same do not.
  Tenant morning = MakeTenant(20, 0, 20, 20), evening = morning;
  morning.profile.mem_mib[8] = evening.profile.mem_mib[20] = 20;  // observed hours
  morning.profile.duty_hist[8][18] = 1000;                        // 90 % all hour 8
  evening.profile.duty_hist[20][18] = 1000;                       // 90 % all hour 20
  EXPECT_EQ(CheckFit({&morning}, evening, budget), Fit::kFits);
  EXPECT_EQ(CheckFit({&morning}, morning, budget), Fit::kDuty);
}

TEST(UsageProfile, ContentionIsTheLikelihoodThatDutySumsReachTheBudget) {
  DutyHistogram idle{}, half{}, mixed{}, empty{};
  idle[0] = 1000;                   // 0 %
  half[10] = 1000;                  // 50 %
  mixed[0] = 900, mixed[12] = 100;  // 0 % nine minutes in ten, else 60 %
  struct Case {
    const char* name;
    std::vector<const DutyHistogram*> hists;
    int32_t budget;
    double want_bp;
  };
  const Case cases[] = {
      {"none", {}, 10000, 0},
      {"one idle", {&idle}, 10000, 0},
      {"two halves reach 100", {&half, &half}, 10000, 10000},
      {"two halves do not reach 110", {&half, &half}, 11000, 0},
      {"half + mixed: 60 of the time 10 %", {&half, &mixed}, 10000, 1000},
      {"mixed twice: both busy 1 %", {&mixed, &mixed}, 10000, 100},
      {"three mixed: two or more busy 2.8 %", {&mixed, &mixed, &mixed}, 10000, 280},
      {"nothing observed counts as no duty", {&empty, &half, &half}, 10000, 10000},
  };
  for (const auto& c : cases)
    EXPECT_NEAR(ContentionBp(c.hists, c.budget), c.want_bp, 1e-6) << c.name;
}

}  // namespace
}  // namespace hami::usage
