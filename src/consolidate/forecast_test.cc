#include "consolidate/forecast.h"

#include <gtest/gtest.h>

#include <vector>

namespace hami::consolidate {
namespace {

// A pod alive from minute 0 whose duty (hundredths of a percent) and memory (MiB) change at
// `switch_at`; the rows from `future` on are a burst no forecast before it may see.
usage::PodSeries Pod(int32_t minutes, int32_t switch_at, int32_t duty_before, int32_t duty_after,
                     int32_t mem_before, int32_t mem_after, int32_t future = 1 << 30) {
  usage::PodSeries p;
  p.name = "p";
  for (int32_t m = 0; m < minutes; ++m) {
    const bool after = m >= switch_at;
    p.duty.push_back(m >= future ? usage::kDutyFull : after ? duty_after : duty_before);
    p.mem_mib.push_back(m >= future ? 46000 : after ? mem_after : mem_before);
  }
  return p;
}

TEST(Forecast, TheFleetTrendScalesDutyWithinItsClamp) {
  const struct {
    const char* name;
    int32_t duty_before, duty_after;  // every pod: [60, 90) then [90, 120)
    int scale_pct;                    // ForecastOptions::trend_scale_pct
    int64_t want_trend, want_scale;
  } cases[] = {
      {"rising, off", 1000, 2000, 0, 200, 100},
      {"rising, clamped at 150", 1000, 2000, 150, 200, 150},
      {"rising, within 300", 1000, 2000, 300, 200, 200},
      {"falling, clamped at 100/1.5", 2000, 500, 150, 25, 66},
      {"flat", 1500, 1500, 150, 100, 100},
      {"nothing before: unscaled", 0, 2000, 150, 100, 100},
  };
  for (const auto& k : cases) {
    const std::vector<usage::PodSeries> fleet = {Pod(200, 90, k.duty_before, k.duty_after, 1, 1),
                                                 Pod(200, 90, k.duty_before, k.duty_after, 1, 1)};
    // Minutes from 120 on (the future of the round at 120) are ignored.
    const int64_t trend = FleetTrendPct(fleet, 120, 30);
    EXPECT_EQ(trend, k.want_trend) << k.name;
    EXPECT_EQ(DutyScalePct(trend, k.scale_pct), k.want_scale) << k.name;
  }
}

TEST(Forecast, TheProfileIsTheRecentPastScaledWithAMemoryFloor) {
  // Memory 30 GiB for 180 minutes then 20 GiB; duty 20 % throughout; a full-card burst at 46 GB
  // from minute 240, the round's own minute: never seen.
  const usage::PodSeries pod = Pod(300, 180, 2000, 2000, 30720, 20480, /*future=*/240);
  const struct {
    const char* name;
    int32_t window, mem_window;
    int64_t scale_pct;
    int32_t want_duty, want_mem;  // the hour of the last minutes (3) and over all hours
  } cases[] = {
      {"last hour", 60, 0, 100, 2000, 20480},
      {"last hour, rising fleet", 60, 0, 150, 3000, 20480},
      {"last hour, falling fleet", 60, 0, 66, 1320, 20480},
      {"capped at a whole GPU", 60, 0, 600, 10000, 20480},
      {"memory held at the 4 h level", 60, 240, 100, 2000, 30720},
      {"memory window not longer: no floor", 60, 60, 100, 2000, 20480},
      {"the floor never lowers", 60, 120, 100, 2000, 20480},  // [120, 240): median 20 GiB
  };
  for (const auto& k : cases) {
    ForecastOptions o;
    o.window_min = k.window;
    o.mem_window_min = k.mem_window;
    o.profile.duty_q_pct = 50;
    const usage::UsageProfile p = ForecastProfile(pod, 240, k.scale_pct, o);
    EXPECT_EQ(p.minutes, k.window) << k.name;
    EXPECT_EQ(p.Duty(3), k.want_duty) << k.name;
    EXPECT_EQ(p.Mem(3), k.want_mem) << k.name;
    EXPECT_EQ(p.mem_all, k.want_mem) << k.name;
    EXPECT_EQ(p.Mem(10), k.want_mem) << k.name;  // an hour not observed reads the level too
    EXPECT_LT(p.mem_peak, 46000) << k.name;
  }
}

}  // namespace
}  // namespace hami::consolidate
