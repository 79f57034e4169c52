#include "consolidate/forecast.h"

#include <algorithm>

namespace hami::consolidate {

namespace {

// The pod's rows in [now - span, now).
usage::PodSeries Tail(const usage::PodSeries& pod, int32_t now, int32_t span) {
  usage::PodSeries tail;
  tail.name = pod.name;
  tail.workload = pod.workload;
  tail.first = std::max(pod.first, now - span);
  const auto from = static_cast<size_t>(tail.first - pod.first);
  const auto to =
      static_cast<size_t>(std::max(tail.first, std::min(now, pod.last() + 1)) - pod.first);
  tail.duty.assign(pod.duty.begin() + static_cast<std::ptrdiff_t>(from),
                   pod.duty.begin() + static_cast<std::ptrdiff_t>(to));
  tail.mem_mib.assign(pod.mem_mib.begin() + static_cast<std::ptrdiff_t>(from),
                      pod.mem_mib.begin() + static_cast<std::ptrdiff_t>(to));
  return tail;
}

}  // namespace

int64_t FleetTrendPct(const std::vector<usage::PodSeries>& pods, int32_t now, int32_t trend_min) {
  int64_t recent = 0, before = 0;
  for (const usage::PodSeries& p : pods)
    for (int32_t t = std::max(p.first, now - 2 * trend_min); t < now && t <= p.last(); ++t)
      (t >= now - trend_min ? recent : before) += p.duty[static_cast<size_t>(t - p.first)];
  return before > 0 ? recent * 100 / before : 100;
}

int64_t DutyScalePct(int64_t trend_pct, int trend_scale_pct) {
  if (trend_scale_pct <= 100) return 100;
  return std::clamp<int64_t>(trend_pct, 10000 / trend_scale_pct, trend_scale_pct);
}

usage::UsageProfile ForecastProfile(const usage::PodSeries& pod, int32_t now,
                                    int64_t duty_scale_pct, const ForecastOptions& options) {
  usage::PodSeries tail = Tail(pod, now, options.window_min);
  if (duty_scale_pct != 100)
    for (int32_t& d : tail.duty)
      d = static_cast<int32_t>(std::min<int64_t>(usage::kDutyFull, d * duty_scale_pct / 100));
  usage::UsageProfile profile = usage::ProfileOf(tail, now, options.profile);
  if (options.mem_window_min > options.window_min && profile.minutes > 0) {
    const int32_t floor =
        usage::ProfileOf(Tail(pod, now, options.mem_window_min), now, options.profile).mem_all;
    for (int32_t& level : profile.mem_mib)
      if (level >= 0) level = std::max(level, floor);
    profile.mem_all = std::max(profile.mem_all, floor);
  }
  return profile;
}

}  // namespace hami::consolidate
