#include "usage/metrics.h"

#include <algorithm>

namespace hami::usage {

StatusOr<Metrics> Evaluate(const UsageTrace& trace, const Placement& placement,
                           int64_t capacity_mib, int32_t warmup_min) {
  if (placement.size() != trace.pods.size())
    return InvalidArgument("placement has ", placement.size(), " pods, the trace ",
                           trace.pods.size());
  int max_gpu = -1;
  for (size_t i = 0; i < placement.size(); ++i) {
    const auto& segs = placement[i];
    for (size_t k = 0; k < segs.size(); ++k) {
      if (segs[k].gpu < 0) return InvalidArgument("pod ", trace.pods[i].name, ": negative GPU");
      if (k > 0 && segs[k].from_minute <= segs[k - 1].from_minute)
        return InvalidArgument("pod ", trace.pods[i].name, ": segments out of time order");
      max_gpu = std::max(max_gpu, segs[k].gpu);
    }
  }
  const size_t n_gpu = max_gpu < 0 ? 0 : static_cast<size_t>(max_gpu) + 1;
  std::vector<int64_t> duty(n_gpu), mem(n_gpu);
  std::vector<int> pods_on(n_gpu), busy_on(n_gpu);
  std::vector<size_t> seg_at(trace.pods.size(), 0);
  std::vector<char> oom(trace.pods.size(), 0);
  std::vector<const Segment*> live_seg(trace.pods.size(), nullptr);
  Metrics r;
  int64_t util_sum = 0, whole_sum = 0, contended = 0, over = 0, throttled = 0;
  for (int32_t m = std::max(0, warmup_min); m < trace.minutes; ++m) {
    ++r.minutes;
    std::fill(duty.begin(), duty.end(), 0);
    std::fill(mem.begin(), mem.end(), 0);
    std::fill(pods_on.begin(), pods_on.end(), 0);
    std::fill(busy_on.begin(), busy_on.end(), 0);
    int64_t alive = 0;
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      const PodSeries& p = trace.pods[i];
      live_seg[i] = nullptr;
      if (!p.alive(m)) continue;
      ++alive;
      const auto& segs = placement[i];
      size_t& k = seg_at[i];
      while (k + 1 < segs.size() && segs[k + 1].from_minute <= m) ++k;
      if (segs.empty() || segs[k].from_minute > m)
        return InvalidArgument("pod ", p.name, " is alive at minute ", m, " but not placed");
      const Segment& s = segs[k];
      live_seg[i] = &s;
      const int32_t d = p.duty[m - p.first], u = p.mem_mib[m - p.first];
      duty[s.gpu] += d;
      mem[s.gpu] += u;
      ++pods_on[s.gpu];
      if (d > 0) ++busy_on[s.gpu];
      if (u > s.mem_mib) oom[i] = 1;
      whole_sum += std::min(d, kDutyFull);
    }
    r.peak_pods = std::max(r.peak_pods, alive);
    int64_t active = 0;
    for (size_t g = 0; g < n_gpu; ++g) {
      if (pods_on[g] == 0) continue;
      ++active;
      util_sum += std::min<int64_t>(duty[g], kDutyFull);
      if (duty[g] > kDutyFull) ++contended;
      if (mem[g] > capacity_mib) ++over;
    }
    r.active_gpu_minutes += active;
    r.gpus = std::max(r.gpus, active);
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      const Segment* s = live_seg[i];
      if (s == nullptr) continue;
      const int32_t d = trace.pods[i].duty[m - trace.pods[i].first];
      if (d == 0) continue;
      ++r.busy_pod_minutes;
      if (s->cores > 0 && d > s->cores * 100 && busy_on[s->gpu] > 1) ++throttled;
    }
  }
  for (char o : oom) r.oom_pods += o;
  auto pct = [](int64_t part, int64_t whole) {
    return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  if (r.gpus > 0) {
    r.pods_per_gpu = static_cast<double>(r.peak_pods) / static_cast<double>(r.gpus);
    // Duty is in hundredths of a percent: util_sum / 100 is percent-minutes.
    r.util_pct = static_cast<double>(util_sum) / 100.0 / static_cast<double>(r.gpus * r.minutes);
    const double whole =
        static_cast<double>(whole_sum) / 100.0 / static_cast<double>(r.peak_pods * r.minutes);
    r.util_ratio = whole > 0 ? r.util_pct / whole : 0;
  }
  r.contended_pct = pct(contended, r.active_gpu_minutes);
  r.over_cap_pct = pct(over, r.active_gpu_minutes);
  r.throttled_pct = pct(throttled, r.busy_pod_minutes);
  return r;
}

}  // namespace hami::usage
