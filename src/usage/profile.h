#pragma once
// Compact, time-aligned usage profiles and the usage-aware packing rule (docs/utilization.md).
// A profile keeps, per hour-of-day bucket, one memory and one duty quantile of the minutes observed
// (integer MiB and hundredths of a percent): 24 x 2 numbers per pod or workload. Hours not yet
// observed read the quantile over every observed minute.
#include <array>
#include <cstdint>
#include <vector>

#include "usage/trace.h"

namespace hami::usage {

inline constexpr int kHourBuckets = 24;
// Duty histograms: bin b holds the minutes with duty in [5b, 5b + 5) %, the last bin 100 %.
inline constexpr int kDutyBins = 21;
inline constexpr int32_t kDutyBinWidth = 500;           // hundredths of a percent
using DutyHistogram = std::array<uint16_t, kDutyBins>;  // per mille of the minutes
inline constexpr int32_t kMinutesPerHour = 60;
inline int HourOf(int32_t minute) {
  return (minute / kMinutesPerHour) % kHourBuckets;
}

struct ProfileOptions {
  int mem_q_pct = 50;   // memory quantile kept per hour (the pod's resident level)
  int duty_q_pct = 90;  // duty quantile kept per hour
};

struct UsageProfile {
  int64_t minutes = 0;                          // minutes observed (0: an empty profile)
  std::array<int32_t, kHourBuckets> mem_mib{};  // -1: hour not observed
  std::array<int32_t, kHourBuckets> duty{};     // hundredths of a percent; -1: not observed
  int32_t mem_all = 0;                          // the quantiles over every observed minute
  int32_t duty_all = 0;
  int32_t mem_peak = 0;  // the largest memory observed
  // Per hour, how the duty of its minutes spreads; an hour not observed reads the busiest observed
  // hour's (the one with the most minutes at or above 50 %, then the highest mean bin).
  std::array<DutyHistogram, kHourBuckets> duty_hist{};
  DutyHistogram duty_hist_busiest{};
  int32_t Mem(int hour) const { return mem_mib[hour] >= 0 ? mem_mib[hour] : mem_all; }
  int32_t Duty(int hour) const { return duty[hour] >= 0 ? duty[hour] : duty_all; }
  const DutyHistogram& DutyHist(int hour) const {
    return mem_mib[hour] >= 0 ? duty_hist[hour] : duty_hist_busiest;
  }
  bool operator==(const UsageProfile&) const = default;
};

// The q-th percentile (nearest rank: the smallest value with at least q % of the values at or
// below it) of `values`, reordered in place; 0 for none.
int32_t Quantile(std::vector<int32_t>* values, int q_pct);

// The profile of `pod` from its minutes before `until` (exclusive): what is known at `until`.
UsageProfile ProfileOf(const PodSeries& pod, int32_t until, const ProfileOptions& options = {});

// A workload's profile for a replica with no history of its own: per hour the `q_pct` quantile
// across the given pod profiles (of the hours they observed), the peak the largest peak.
UsageProfile WorkloadProfile(const std::vector<UsageProfile>& pods, int q_pct = 90);

// The recommended gpumem of a workload whose observed peak is `peak_mib`: peak * (100 +
// margin_pct) / 100 rounded up to `step_mib`.
int64_t RecommendGpumem(int64_t peak_mib, int margin_pct = 5, int64_t step_mib = 256);

// One pod on (or for) a GPU, as the packing rule sees it.
struct Tenant {
  UsageProfile profile;
  int64_t spike_mib = 0;  // how high its memory may go (its workload's observed peak)
  int64_t limit_mib = 0;  // its gpumem (what is booked)
};

struct PackBudget {
  int64_t capacity_mib = 0;
  int32_t duty_budget = kDutyFull;  // co-located duty above this is contention
  // Per hour, the most likely a minute may be contended (sum of duty >= duty_budget, the pods'
  // histograms taken as independent within the hour), in basis points (1/100 of a percent).
  int contention_bp = 350;
  int overcommit_pct = 200;  // sum of limits <= capacity * overcommit_pct / 100
};

// Why a tenant does not fit next to others (kFits when it does).
enum class Fit { kFits, kBooked, kMemory, kDuty };
const char* FitName(Fit f);

// The likelihood, in basis points, that the summed duty of these histograms reaches `budget`
// (each taken at its bin's lower bound, independently).
double ContentionBp(const std::vector<const DutyHistogram*>& hists, int32_t budget);

// The rule: in every hour bucket, the co-located memory quantiles plus the largest single spike
// above its own level (one tenant loading a model at a time) stay within the card, and the
// likelihood of contention (ContentionBp of the co-located duty histograms) within its budget;
// the booked limits within the overcommit cap.
Fit CheckFit(const std::vector<const Tenant*>& on_gpu, const Tenant& candidate,
             const PackBudget& budget);

}  // namespace hami::usage
