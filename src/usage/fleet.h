#pragma once
// A fleet-level contention budget for the usage-aware packing rule (docs/usage-packing.md).
//
// usage::CheckFit holds every card, in every hour bucket, to one contention likelihood
// (PackBudget::contention_bp). The bound users care about is over the fleet: the share of all
// active GPU-minutes that are contended. A card with a busy and a light pod contends a few times
// more often than the per-card budget allows, and a few such cards among many quiet ones keep the
// fleet within the bound; one per-card budget that let them in would let every card in that far.
//
// The ledger records, per card, the likelihood CheckFit computes (per hour, of its tenants as they
// were learned), and admits a pod onto a card past the per-card budget when
//  - the card stays within FleetBudget::card_bp in every hour (a ceiling no card passes), and
//  - the mean over the fleet's cards, that card included, stays within FleetBudget::fleet_bp in
//    every hour.
// It decides from the profiles of the pods placed now and nothing else: what a decision reads is
// known when it is made. The scheduler's usage rule (scheduler/usage_rule.h) and `hami sim --usage`
// keep one ledger each, fed the same way (a card's tenants after every change), so they decide
// alike. Integer accounting: likelihoods are kept in 1/100 of a basis point.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "usage/profile.h"

namespace hami::usage {

// Per hour bucket, a likelihood in 1/100 of a basis point (1e-6).
using HourlyLikelihood = std::array<int64_t, kHourBuckets>;

// Per hour, the likelihood that a minute of a card holding `tenants` is contended (ContentionBp of
// their histograms against `duty_budget`; a tenant with nothing learned counts as busy all the
// time, as in CheckFit). None: 0.
HourlyLikelihood CardContention(const std::vector<const Tenant*>& tenants, int32_t duty_budget);

struct FleetBudget {
  int fleet_bp = 0;  // 0: off. The most the fleet's mean card may reach per hour, basis points
  int card_bp = 0;   // the most one card may reach under the fleet budget, basis points
  bool enabled() const { return fleet_bp > 0 && card_bp > 0; }
};

class ContentionLedger {
 public:
  // Records card `gpu` as holding `tenants` (none: the card leaves the fleet).
  void Set(const std::string& gpu, const std::vector<const Tenant*>& tenants, int32_t duty_budget);

  // The rule with the fleet budget: CheckFit against `pack`; past its duty budget (kDuty) the pod
  // is still admitted where `fleet` allows (above). `on_gpu` are the card's tenants now (the ones
  // Set was last given for `gpu`).
  Fit Check(const std::string& gpu, const std::vector<const Tenant*>& on_gpu,
            const Tenant& candidate, const PackBudget& pack, const FleetBudget& fleet) const;

  int64_t cards() const { return static_cast<int64_t>(cards_.size()); }
  // Per hour, the sum over the cards.
  const HourlyLikelihood& sum() const { return sum_; }

 private:
  std::map<std::string, HourlyLikelihood> cards_;
  HourlyLikelihood sum_{};
};

}  // namespace hami::usage
