#include "usage/profile.h"

#include <algorithm>
#include <utility>

namespace hami::usage {

int32_t Quantile(std::vector<int32_t>* values, int q_pct) {
  if (values->empty()) return 0;
  const int64_t n = static_cast<int64_t>(values->size());
  int64_t rank = (n * std::clamp(q_pct, 0, 100) + 99) / 100;  // ceil(n * q / 100)
  rank = std::clamp<int64_t>(rank, 1, n);
  auto nth = values->begin() + (rank - 1);
  std::nth_element(values->begin(), nth, values->end());
  return *nth;
}

UsageProfile ProfileOf(const PodSeries& pod, int32_t until, const ProfileOptions& options) {
  UsageProfile p;
  p.mem_mib.fill(-1);
  p.duty.fill(-1);
  const int32_t end = std::min(until, pod.last() + 1);
  if (end <= pod.first) return p;
  std::array<std::vector<int32_t>, kHourBuckets> mem, duty;
  std::array<std::array<int32_t, kDutyBins>, kHourBuckets> counts{};
  std::vector<int32_t> all_mem, all_duty;
  for (int32_t m = pod.first; m < end; ++m) {
    const int h = HourOf(m);
    const size_t i = static_cast<size_t>(m - pod.first);
    mem[h].push_back(pod.mem_mib[i]);
    duty[h].push_back(pod.duty[i]);
    all_mem.push_back(pod.mem_mib[i]);
    all_duty.push_back(pod.duty[i]);
    ++counts[h][std::min(kDutyBins - 1, pod.duty[i] / kDutyBinWidth)];
    p.mem_peak = std::max(p.mem_peak, pod.mem_mib[i]);
  }
  p.minutes = end - pod.first;
  std::pair<int64_t, int64_t> busiest{-1, -1};  // (per mille at >= 50 %, mean bin x 1000)
  for (int h = 0; h < kHourBuckets; ++h) {
    if (mem[h].empty()) continue;
    const auto n = static_cast<int64_t>(mem[h].size());
    p.mem_mib[h] = Quantile(&mem[h], options.mem_q_pct);
    p.duty[h] = Quantile(&duty[h], options.duty_q_pct);
    std::pair<int64_t, int64_t> load{0, 0};
    for (int b = 0; b < kDutyBins; ++b) {
      p.duty_hist[h][b] = static_cast<uint16_t>((int64_t{counts[h][b]} * 1000 + n / 2) / n);
      if (b >= 10) load.first += p.duty_hist[h][b];
      load.second += int64_t{b} * p.duty_hist[h][b];
    }
    if (load > busiest) busiest = load, p.duty_hist_busiest = p.duty_hist[h];
  }
  p.mem_all = Quantile(&all_mem, options.mem_q_pct);
  p.duty_all = Quantile(&all_duty, options.duty_q_pct);
  return p;
}

UsageProfile WorkloadProfile(const std::vector<UsageProfile>& pods, int q_pct) {
  UsageProfile w;
  w.mem_mib.fill(-1);
  w.duty.fill(-1);
  std::vector<int32_t> mem, duty;
  for (int h = 0; h < kHourBuckets; ++h) {
    mem.clear();
    duty.clear();
    for (const auto& p : pods) {
      if (p.mem_mib[h] < 0) continue;
      mem.push_back(p.mem_mib[h]);
      duty.push_back(p.duty[h]);
    }
    if (mem.empty()) continue;
    w.mem_mib[h] = Quantile(&mem, q_pct);
    w.duty[h] = Quantile(&duty, q_pct);
    // The workload's mix: the mean of its pods' histograms for the hour.
    std::array<int64_t, kDutyBins> sum{};
    for (const auto& p : pods)
      if (p.mem_mib[h] >= 0)
        for (int b = 0; b < kDutyBins; ++b) sum[b] += p.duty_hist[h][b];
    const auto n = static_cast<int64_t>(mem.size());
    for (int b = 0; b < kDutyBins; ++b)
      w.duty_hist[h][b] = static_cast<uint16_t>((sum[b] + n / 2) / n);
  }
  {
    std::array<int64_t, kDutyBins> sum{};
    int64_t n = 0;
    for (const auto& p : pods) {
      if (p.minutes == 0) continue;
      ++n;
      for (int b = 0; b < kDutyBins; ++b) sum[b] += p.duty_hist_busiest[b];
    }
    for (int b = 0; b < kDutyBins && n > 0; ++b)
      w.duty_hist_busiest[b] = static_cast<uint16_t>((sum[b] + n / 2) / n);
  }
  mem.clear();
  duty.clear();
  for (const auto& p : pods) {
    if (p.minutes == 0) continue;
    w.minutes += p.minutes;
    mem.push_back(p.mem_all);
    duty.push_back(p.duty_all);
    w.mem_peak = std::max(w.mem_peak, p.mem_peak);
  }
  w.mem_all = Quantile(&mem, q_pct);
  w.duty_all = Quantile(&duty, q_pct);
  return w;
}

int64_t RecommendGpumem(int64_t peak_mib, int margin_pct, int64_t step_mib) {
  const int64_t want = (peak_mib * (100 + margin_pct) + 99) / 100;
  const int64_t step = std::max<int64_t>(1, step_mib);
  return (want + step - 1) / step * step;
}

const char* FitName(Fit f) {
  switch (f) {
    case Fit::kFits:
      return "fits";
    case Fit::kBooked:
      return "overcommit cap";
    case Fit::kMemory:
      return "memory";
    case Fit::kDuty:
      return "duty";
  }
  return "?";
}

double ContentionBp(const std::vector<const DutyHistogram*>& hists, int32_t budget) {
  // dist[k]: the likelihood that the lower bounds sum to k bins; the last cell holds every sum at
  // or above the budget.
  const int top = std::max(1, (budget + kDutyBinWidth - 1) / kDutyBinWidth);
  std::vector<double> dist(static_cast<size_t>(top) + 1, 0.0), next(dist.size());
  dist[0] = 1;
  for (const DutyHistogram* h : hists) {
    double total = 0;
    for (uint16_t v : *h) total += v;
    if (total <= 0) continue;  // nothing observed: no evidence of duty
    std::fill(next.begin(), next.end(), 0.0);
    for (int k = 0; k <= top; ++k) {
      if (dist[static_cast<size_t>(k)] == 0) continue;
      for (int b = 0; b < kDutyBins; ++b)
        next[static_cast<size_t>(std::min(top, k + b))] +=
            dist[static_cast<size_t>(k)] * (*h)[b] / total;
    }
    dist.swap(next);
  }
  return dist[static_cast<size_t>(top)] * 10000;
}

Fit CheckFit(const std::vector<const Tenant*>& on_gpu, const Tenant& candidate,
             const PackBudget& budget) {
  int64_t booked = candidate.limit_mib;
  for (const Tenant* t : on_gpu) booked += t->limit_mib;
  if (booked * 100 > budget.capacity_mib * budget.overcommit_pct) return Fit::kBooked;
  // A tenant with nothing learned (an empty profile) is taken at its whole limit in every hour and
  // busy all the time: no evidence is no licence to overcommit (its level would read 0 otherwise).
  static const DutyHistogram kAlwaysBusy = [] {
    DutyHistogram h{};
    h[kDutyBins - 1] = 1000;
    return h;
  }();
  auto level = [](const Tenant& t, int h) -> int64_t {
    return t.profile.minutes > 0 ? t.profile.Mem(h) : t.limit_mib;
  };
  auto hist = [](const Tenant& t, int h) -> const DutyHistogram* {
    return t.profile.minutes > 0 ? &t.profile.DutyHist(h) : &kAlwaysBusy;
  };
  std::vector<const DutyHistogram*> hists;
  for (int h = 0; h < kHourBuckets; ++h) {
    int64_t mem = level(candidate, h);
    int64_t spike = std::max<int64_t>(0, candidate.spike_mib - level(candidate, h));
    hists.assign(1, hist(candidate, h));
    for (const Tenant* t : on_gpu) {
      mem += level(*t, h);
      spike = std::max<int64_t>(spike, t->spike_mib - level(*t, h));
      hists.push_back(hist(*t, h));
    }
    if (mem + spike > budget.capacity_mib) return Fit::kMemory;
    if (ContentionBp(hists, budget.duty_budget) > budget.contention_bp) return Fit::kDuty;
  }
  return Fit::kFits;
}

}  // namespace hami::usage
