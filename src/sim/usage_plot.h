#pragma once
// `hami sim --usage FILE --plot OUT.svg` (docs/utilization.md, "The plot"): per minute from the
// warm-up to the end of the trace, the GPUs a placement keeps in use (next to whole cards: one GPU
// per live pod), their utilization and the share of them contended; drawn as an SVG of three
// panels sharing the time axis.
#include <cstdint>
#include <string>
#include <vector>

#include "usage/metrics.h"
#include "usage/trace.h"

namespace hami::sim {

struct UsageMinute {
  int32_t minute = 0;
  int64_t pods = 0;       // live pods (the GPUs whole cards would use)
  int64_t gpus = 0;       // GPUs with a live pod
  int64_t util_cp = 0;    // sum over those GPUs of min(100 %, sum of duty), hundredths of a %
  int64_t contended = 0;  // of those GPUs, the ones whose sum of duty passes 100 %
  bool operator==(const UsageMinute&) const = default;
};

// One entry per minute from `warmup_min` to the trace's last minute. A pod at a minute is on the
// GPU of its last segment starting at or before it (a minute it has no segment for does not
// count: usage::Evaluate refuses such placements).
std::vector<UsageMinute> UsageSeries(const usage::UsageTrace& trace,
                                     const usage::Placement& placement, int32_t warmup_min);

// The SVG: GPUs in use and whole cards; utilization (% of the GPUs in use); contended GPUs (% of
// the GPUs in use). Same series, same bytes.
std::string UsagePlotSvg(const std::vector<UsageMinute>& series, const std::string& title);

}  // namespace hami::sim
