#include "usage/fleet.h"

#include <cmath>

namespace hami::usage {

HourlyLikelihood CardContention(const std::vector<const Tenant*>& tenants, int32_t duty_budget) {
  static const DutyHistogram kAlwaysBusy = [] {
    DutyHistogram h{};
    h[kDutyBins - 1] = 1000;
    return h;
  }();
  HourlyLikelihood out{};
  if (tenants.empty()) return out;
  std::vector<const DutyHistogram*> hists;
  for (int h = 0; h < kHourBuckets; ++h) {
    hists.clear();
    for (const Tenant* t : tenants)
      hists.push_back(t->profile.minutes > 0 ? &t->profile.DutyHist(h) : &kAlwaysBusy);
    out[static_cast<size_t>(h)] = std::llround(ContentionBp(hists, duty_budget) * 100);
  }
  return out;
}

void ContentionLedger::Set(const std::string& gpu, const std::vector<const Tenant*>& tenants,
                           int32_t duty_budget) {
  if (auto it = cards_.find(gpu); it != cards_.end()) {
    for (size_t h = 0; h < sum_.size(); ++h) sum_[h] -= it->second[h];
    cards_.erase(it);
  }
  if (tenants.empty()) return;
  const HourlyLikelihood c = CardContention(tenants, duty_budget);
  for (size_t h = 0; h < sum_.size(); ++h) sum_[h] += c[h];
  cards_.emplace(gpu, c);
}

Fit ContentionLedger::Check(const std::string& gpu, const std::vector<const Tenant*>& on_gpu,
                            const Tenant& candidate, const PackBudget& pack,
                            const FleetBudget& fleet) const {
  const Fit within = CheckFit(on_gpu, candidate, pack);
  if (within != Fit::kDuty || !fleet.enabled() || fleet.card_bp <= pack.contention_bp)
    return within;
  PackBudget ceiling = pack;
  ceiling.contention_bp = fleet.card_bp;
  if (const Fit f = CheckFit(on_gpu, candidate, ceiling); f != Fit::kFits) return f;
  std::vector<const Tenant*> after = on_gpu;
  after.push_back(&candidate);
  const HourlyLikelihood now = CardContention(after, pack.duty_budget);
  const auto old = cards_.find(gpu);
  const int64_t n = cards() + (old == cards_.end() ? 1 : 0);
  for (size_t h = 0; h < sum_.size(); ++h) {
    const int64_t total = sum_[h] - (old == cards_.end() ? 0 : old->second[h]) + now[h];
    if (total > int64_t{fleet.fleet_bp} * 100 * n) return Fit::kDuty;
  }
  return Fit::kFits;
}

}  // namespace hami::usage
