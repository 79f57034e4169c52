#pragma once
// What a consolidation round plans a pod by (docs/consolidation.md#forecast): a usage profile of
// the pod's recent rows only, its duty scaled by the fleet's trend and its memory held at the level
// of a longer window. Pure: the caller says what minute it is, and only rows before it are read.
#include <cstdint>
#include <vector>

#include "usage/profile.h"
#include "usage/trace.h"

namespace hami::consolidate {

struct ForecastOptions {
  int32_t window_min = 240;  // duty (and memory) from the pod's last this many minutes
  // > 100: the duty of those minutes times the fleet's trend (FleetTrendPct), clamped to
  // [10000 / trend_scale_pct, trend_scale_pct] %; serving load moves together across the fleet,
  // so where the fleet went in the last span is where each pod goes next (0: unscaled).
  int trend_scale_pct = 0;
  // > window_min: no hour's memory level below the pod's level over this longer window (memory
  // follows the pipeline a replica loaded, not the hour of the day; 0: off).
  int32_t mem_window_min = 0;
  usage::ProfileOptions profile;
};

// The duty of every pod in [now - trend_min, now) as a percentage of [now - 2 trend_min,
// now - trend_min); 100 when the earlier span holds no duty.
int64_t FleetTrendPct(const std::vector<usage::PodSeries>& pods, int32_t now, int32_t trend_min);

// The scale a round applies: FleetTrendPct clamped as ForecastOptions::trend_scale_pct says.
int64_t DutyScalePct(int64_t trend_pct, int trend_scale_pct);

// The profile `pod` is planned by at `now` (its rows before `now` only), its duty times
// `duty_scale_pct` % (capped at a whole GPU).
usage::UsageProfile ForecastProfile(const usage::PodSeries& pod, int32_t now,
                                    int64_t duty_scale_pct, const ForecastOptions& options);

}  // namespace hami::consolidate
