#include "usage/fleet.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hami::usage {
namespace {

// A tenant learned from one hour (minute 0-59) of `mem` MiB at 0 % duty, but at `busy_pct` in
// every tenth minute; the other hours read that hour (its busiest).
Tenant Learned(int32_t busy_pct, int32_t mem = 10) {
  PodSeries p;
  for (int m = 0; m < kMinutesPerHour; ++m) {
    p.duty.push_back(m % 10 == 0 ? busy_pct * 100 : 0);
    p.mem_mib.push_back(mem);
  }
  return {ProfileOf(p, kMinutesPerHour), mem, mem};
}

TEST(ContentionLedger, AdmitsACardOverrunOnlyWhereTheFleetMeanAllows) {
  // 60 % one minute in ten: two of them contend 1 % of the minutes (100 bp).
  const Tenant quiet = Learned(0), busy = Learned(60), big = Learned(0, 95);
  // Per card 50 bp; under the fleet budget a card may reach card_bp, the fleet's mean fleet_bp.
  PackBudget pack{100, kDutyFull, 50, 1000};
  struct Case {
    const char* name;
    std::vector<std::vector<const Tenant*>> cards;  // cards[0] is the one asked about
    const Tenant* cand;
    int fleet_bp, card_bp;
    Fit want;
  };
  const Case cases[] = {
      {"within the card's budget: the fleet is not asked", {{&quiet}}, &busy, 40, 150, Fit::kFits},
      {"past it, fleet off: refused as before",
       {{&busy}, {&quiet}, {&quiet}},
       &busy,
       0,
       150,
       Fit::kDuty},
      {"past it, 100 bp over three cards = 33 <= 40",
       {{&busy}, {&quiet}, {&quiet}},
       &busy,
       40,
       150,
       Fit::kFits},
      {"past it, 100 bp over two cards = 50 > 40", {{&busy}, {&quiet}}, &busy, 40, 150, Fit::kDuty},
      {"the card's ceiling 90 < 100",
       {{&busy}, {&quiet}, {&quiet}, {&quiet}},
       &busy,
       40,
       90,
       Fit::kDuty},
      {"a ceiling at or under the card's budget: off",
       {{&busy}, {&quiet}, {&quiet}},
       &busy,
       40,
       50,
       Fit::kDuty},
      {"three busy: 280 bp passes the ceiling",
       {{&busy, &busy}, {&quiet}, {&quiet}, {&quiet}, {&quiet}, {&quiet}, {&quiet}, {&quiet}},
       &busy,
       40,
       150,
       Fit::kDuty},
      {"another card's 100 bp counts: 200 over four cards = 50 > 40",
       {{&busy}, {&busy, &busy}, {&quiet}, {&quiet}},
       &busy,
       40,
       150,
       Fit::kDuty},
      {"memory is never overrun", {{&big}, {&quiet}, {&quiet}}, &busy, 40, 150, Fit::kMemory},
  };
  for (const Case& c : cases) {
    ContentionLedger ledger;
    for (size_t i = 0; i < c.cards.size(); ++i)
      ledger.Set("gpu-" + std::to_string(i), c.cards[i], pack.duty_budget);
    EXPECT_EQ(ledger.Check("gpu-0", c.cards[0], *c.cand, pack, {c.fleet_bp, c.card_bp}), c.want)
        << c.name;
  }
}

TEST(ContentionLedger, KeepsPerHourSumsOfTheCardsItHolds) {
  const Tenant busy = Learned(60);
  Tenant unknown = busy;
  unknown.profile = UsageProfile{};  // nothing learned: busy all the time, as in CheckFit
  ContentionLedger ledger;
  ledger.Set("a", {&busy, &busy}, kDutyFull);
  ledger.Set("b", {&busy}, kDutyFull);
  EXPECT_EQ(ledger.cards(), 2);
  EXPECT_EQ(ledger.sum()[3], 10000);    // 100 bp, in 1/100 bp
  ledger.Set("a", {&busy}, kDutyFull);  // set again: replaces, does not add
  EXPECT_EQ(ledger.sum()[3], 0);
  ledger.Set("a", {}, kDutyFull);  // no tenants: the card leaves the fleet
  EXPECT_EQ(ledger.cards(), 1);
  EXPECT_EQ(CardContention({&busy, &unknown}, kDutyFull)[20], 1000000);
  EXPECT_EQ(CardContention({}, kDutyFull)[20], 0);
}

}  // namespace
}  // namespace hami::usage
