// The usage rule inside the scheduler (usage_rule.h): who packs by profile, what may overcommit a
// card and by how much, and that a forged profile is bounded by the cap.
#include "scheduler/usage_rule.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/testing/builders.h"
#include "usage/recommend.h"

namespace hami::scheduler {
namespace {

using testing::NodeBuilder;
using testing::PodBuilder;

constexpr int64_t kCard = 80000;  // MiB

// A profile observed for an hour in every hour bucket: resident at `level`, up to `peak`, duty
// always 0 (idle) or always 100 % (busy).
std::string ProfileText(int32_t level, int32_t peak, bool busy) {
  usage::UsageProfile p;
  p.minutes = 60 * usage::kHourBuckets;
  p.mem_all = level;
  p.mem_peak = peak;
  p.duty_all = busy ? 6000 : 0;
  usage::DutyHistogram h{};
  h[busy ? 12 : 0] = 1000;
  for (int i = 0; i < usage::kHourBuckets; ++i) {
    p.mem_mib[i] = level;
    p.duty[i] = p.duty_all;
    p.duty_hist[i] = h;
  }
  p.duty_hist_busiest = h;
  return usage::FormatUsageProfile(p);
}

struct PodSpec {
  int64_t gpumem = 0;
  std::string profile;  // "" = no annotation
  std::string ns = "serving";
  int gpus = 1;
};

PodSpec Idle(int64_t gpumem, int32_t level, int32_t peak) {
  return {gpumem, ProfileText(level, peak, false)};
}
PodSpec Busy(int64_t gpumem, int32_t level, int32_t peak) {
  return {gpumem, ProfileText(level, peak, true)};
}
PodSpec Stock(int64_t gpumem) {
  return {gpumem, ""};
}

core::PodRequest PodOf(const std::string& uid, const PodSpec& s) {
  core::PodRequest p = PodBuilder(uid).Gpu(s.gpus, s.gpumem, 0).Build();
  p.namespace_ = s.ns;
  if (!s.profile.empty()) p.annotations[std::string(usage::kUsageProfileAnnotation)] = s.profile;
  return p;
}

std::unique_ptr<Scheduler> Make(int overcommit_pct,
                                std::vector<std::string> namespaces = {"serving"}) {
  SchedulerOptions so;
  so.policy = "hami-binpack";
  so.usage.overcommit_pct = overcommit_pct;
  so.usage.namespaces = std::move(namespaces);
  auto s = Scheduler::Create(so);
  EXPECT_TRUE(s.ok()) << s.status();
  (*s)->UpsertNode(NodeBuilder("n1").Gpus(1, kCard).Build());
  return std::move(*s);
}

struct ShareCase {
  const char* name;
  int overcommit_pct;
  std::vector<std::string> trusted;
  std::vector<PodSpec> there;  // reserved on the one card first, in order (each must fit)
  PodSpec pod;
  bool fits;
  const char* reason;  // when it does not fit: in Decision::failures
};

// Who shares the one card of node n1, and how far it may be booked.
const std::vector<ShareCase>& ShareCases() {
  // clang-format off
  static const std::vector<ShareCase> cases = {
      {"rule off: the sum of limits stays within the card, profile or not",
       0, {"serving"}, {Idle(50000, 20000, 30000)}, Idle(50000, 20000, 30000), false, "CardInsufficientMemory"},
      {"two idle pods whose levels and one spike fit: 100,000 MiB booked on 80,000",
       200, {"serving"}, {Idle(50000, 20000, 30000)}, Idle(50000, 20000, 30000), true, ""},
      {"levels 35,000 x 2 and a 12,000 spike pass the card",
       200, {"serving"}, {Idle(50000, 35000, 47000)}, Idle(50000, 35000, 47000), false, "CardUsageProfileNotFit"},
      {"two pods busy in the same hours contend",
       200, {"serving"}, {Busy(30000, 10000, 10000)}, Busy(30000, 10000, 10000), false, "CardUsageProfileNotFit"},
      {"busy next to idle does not contend",
       200, {"serving"}, {Busy(30000, 10000, 10000)}, Idle(30000, 10000, 10000), true, ""},
      {"a namespace the operator did not list: the profile is ignored",
       200, {"other"}, {Idle(50000, 20000, 30000)}, Idle(50000, 20000, 30000), false, "CardInsufficientMemory"},
      {"every namespace trusted with *",
       200, {"*"}, {Idle(50000, 20000, 30000)}, Idle(50000, 20000, 30000), true, ""},
      {"a profile that does not parse: placed as a pod without one",
       200, {"serving"}, {Idle(50000, 20000, 30000)}, {50000, "v1;n=garbage"}, false, "CardInsufficientMemory"},
      {"a profile on a two-GPU request is ignored",
       200, {"serving"}, {Stock(10000)}, {50000, ProfileText(1, 1, false), "serving", 2}, false, "NodeInsufficientDevice"},
      {"forged tiny profiles: the cap still bounds the booked sum (3 x 40,000 = 150 %)",
       150, {"serving"}, {Idle(40000, 1, 1), Idle(40000, 1, 1)}, Idle(40000, 1, 1), true, ""},
      {"forged tiny profiles: a fourth would book 200 % past a 150 % cap (the card registers 150 %)",
       150, {"serving"}, {Idle(40000, 1, 1), Idle(40000, 1, 1), Idle(40000, 1, 1)}, Idle(40000, 1, 1), false, "CardInsufficientMemory"},
      {"no limit larger than the card, even on an empty card",
       200, {"serving"}, {}, Idle(90000, 1, 1), false, "CardUsageProfileNotFit"},
      {"rule on, pods without a profile: still the sum of limits within the card",
       200, {"serving"}, {Stock(50000)}, Stock(40000), false, "CardInsufficientMemory"},
      {"rule on, pods without a profile fit as today",
       200, {"serving"}, {Stock(40000)}, Stock(40000), true, ""},
      {"a pod without a profile never joins an overcommitted card",
       200, {"serving"}, {Idle(50000, 20000, 30000), Idle(50000, 20000, 30000)}, Stock(1000), false, "CardInsufficientMemory"},
      {"a pod without a profile joins profiled pods within the card",
       200, {"serving"}, {Idle(30000, 20000, 30000), Idle(30000, 20000, 30000)}, Stock(10000), true, ""},
      {"a forged profile never overcommits a card holding a pod without one",
       200, {"serving"}, {Stock(40000)}, Idle(50000, 1, 1), false, "CardUsageProfileNotFit"},
      {"a pod without a profile counts busy all the time: no profiled pod joins it",
       200, {"serving"}, {Stock(40000)}, Idle(30000, 1, 1), false, "CardUsageProfileNotFit"},
  };
  // clang-format on
  return cases;
}

// A scheduler with the case's pods reserved on n1.
std::unique_ptr<Scheduler> Reserved(const ShareCase& c) {
  auto s = Make(c.overcommit_pct, c.trusted);
  for (size_t i = 0; i < c.there.size(); ++i) {
    auto d = s->ScheduleAndReserve(PodOf("p" + std::to_string(i), c.there[i]), nullptr);
    EXPECT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d.ok() ? d->node : "", "n1") << "setup pod " << i << " does not fit";
  }
  return s;
}

TEST(UsageRule, WhoSharesACardAndHowFarItMayBeBooked) {
  for (const ShareCase& c : ShareCases()) {
    SCOPED_TRACE(c.name);
    auto s = Reserved(c);
    ScheduleOptions so;
    so.explain = true;
    auto d = s->Schedule(PodOf("new", c.pod), nullptr, so);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(!d->node.empty(), c.fits);
    if (!c.fits) {
      ASSERT_EQ(d->failures.size(), 1u);
      EXPECT_NE(d->failures[0].reason.find(c.reason), std::string::npos) << d->failures[0].reason;
    }
  }
}

// The dry runs (Scheduler::DryRun) decide by the same rule as Schedule: the extender's Simulate
// (the node as it registers, every pod of the live cache as one record without a profile) and the
// preemption check (the node from the live cache, at the cap already, and the pods one by one).
TEST(UsageRule, DryRunsDecideAsTheLiveScheduler) {
  for (const ShareCase& c : ShareCases()) {
    SCOPED_TRACE(c.name);
    auto live = Reserved(c);
    const core::PodRequest pod = PodOf("new", c.pod);
    const bool fits = !live->Schedule(pod, nullptr)->node.empty();
    ASSERT_EQ(fits, c.fits);
    const NodeState snap = *live->cache().Snapshot("n1");

    auto simulate = live->DryRun();
    simulate->UpsertNode(NodeBuilder("n1").Gpus(1, kCard).Build());
    core::PodAllocation all;
    all.node = "n1";
    if (snap.usage[0].usedmem_mib > 0)
      all.containers = {{core::ContainerDevice{snap.info.devices[0].uuid, core::kNvidiaVendor,
                                               snap.usage[0].usedmem_mib, 0, 0}}};
    if (!all.containers.empty()) {
      ASSERT_TRUE(simulate->AddPod("usage/n1", all).ok());
    }
    EXPECT_EQ(!simulate->Schedule(pod, nullptr)->node.empty(), fits) << "Simulate";

    auto preempt = live->DryRun();
    preempt->UpsertNode(snap.info);
    for (size_t i = 0; i < c.there.size(); ++i) {
      core::PodAllocation a;
      a.node = "n1";
      a.containers = {{core::ContainerDevice{snap.info.devices[0].uuid, core::kNvidiaVendor,
                                             c.there[i].gpumem, 0, 0}}};
      ASSERT_TRUE(preempt->AddPod("p" + std::to_string(i), a).ok());
    }
    EXPECT_EQ(!preempt->Schedule(pod, nullptr)->node.empty(), fits) << "preemption";
    // What a dry run records stays in it.
    EXPECT_EQ(live->cache().Snapshot("n1")->info.devices[0].devmem_mib,
              snap.info.devices[0].devmem_mib);
  }
  // The preemption check removes its victims: a card they leave empty takes the pod.
  auto live = Make(200);
  ASSERT_TRUE(live->ScheduleAndReserve(PodOf("victim", Idle(50000, 35000, 47000)), nullptr).ok());
  const core::PodRequest pod = PodOf("new", Idle(50000, 35000, 47000));
  ASSERT_TRUE(live->Schedule(pod, nullptr)->node.empty());
  auto preempt = live->DryRun();
  preempt->UpsertNode(live->cache().Snapshot("n1")->info);
  ASSERT_TRUE(preempt->Schedule(pod, nullptr)->node.empty());  // the victim counts until removed
  (void)preempt->RemovePod("victim");
  EXPECT_EQ(preempt->Schedule(pod, nullptr)->node, "n1");
  EXPECT_EQ(live->usage_rule()->stats().profiled_pods, 1);
}

// A pod with a profile never shares a card with one without (nothing says when that one is busy),
// even where the duty budget would let any two pods share; a pod without one joins profiled pods
// within the card.
TEST(UsageRule, APodWithAProfileNeverJoinsOneWithout) {
  struct Case {
    const char* name;
    std::vector<PodSpec> there;
    PodSpec pod;
    bool fits;
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"profiled next to a pod without one", {Stock(40000)}, Idle(30000, 1, 1), false},
      {"profiled next to a profiled pod and one without", {Idle(30000, 1, 1), Stock(10000)}, Idle(30000, 1, 1), false},
      {"without one next to a profiled pod, within the card", {Idle(30000, 1, 1)}, Stock(40000), true},
      {"profiled next to profiled", {Idle(30000, 1, 1)}, Idle(30000, 1, 1), true},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SchedulerOptions so;
    so.policy = "hami-binpack";
    so.usage.overcommit_pct = 200;
    so.usage.namespaces = {"serving"};
    so.usage.duty_budget = 10 * usage::kDutyFull;  // any two pods' duty fits
    so.usage.contention_bp = 10000;
    auto s = Scheduler::Create(so);
    ASSERT_TRUE(s.ok()) << s.status();
    (*s)->UpsertNode(NodeBuilder("n1").Gpus(1, kCard).Build());
    for (size_t i = 0; i < c.there.size(); ++i) {
      auto d = (*s)->ScheduleAndReserve(PodOf("p" + std::to_string(i), c.there[i]), nullptr);
      ASSERT_TRUE(d.ok() && d->node == "n1") << "setup pod " << i;
    }
    EXPECT_EQ((*s)->Schedule(PodOf("new", c.pod), nullptr)->node.empty(), !c.fits);
  }
}

TEST(UsageRule, TheBookingIsTheFullLimitAndTheCardCountsAtTheCap) {
  auto s = Make(200);
  auto d = s->ScheduleAndReserve(PodOf("a", Idle(50000, 20000, 30000)), nullptr);
  ASSERT_TRUE(d.ok() && d->node == "n1");
  ASSERT_EQ(d->allocation.containers.size(), 1u);
  EXPECT_EQ(d->allocation.containers[0][0].usedmem_mib, 50000);  // what libvgpu enforces
  auto snap = s->cache().Snapshot("n1");
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->info.devices[0].devmem_mib, 2 * kCard);
  EXPECT_EQ(snap->usage[0].usedmem_mib, 50000);
  ASSERT_TRUE(s->ScheduleAndReserve(PodOf("b", Idle(50000, 20000, 30000)), nullptr).ok());
  EXPECT_EQ(s->usage_rule()->stats().profiled_pods, 2);
  EXPECT_EQ(s->usage_rule()->stats().overcommitted_gpus, 1);
  // Off: the registration is left as it is.
  auto off = Make(0);
  EXPECT_EQ(off->cache().Snapshot("n1")->info.devices[0].devmem_mib, kCard);
  EXPECT_EQ(off->usage_rule(), nullptr);
}

// A request sized by the card (nvidia.com/gpumem-percentage, or a whole card without gpumem) takes
// its share of the card's real memory, not of the size the rule counts the card at: with the rule
// on 50 % of the 80,000 MiB card is 40,000 MiB booked (not 50 % of 160,000), a whole card is 80,000
// and fits an empty card, and both are held to the real card as every pod without a profile is.
TEST(UsageRule, CardSizedRequestsTakeTheRealCard) {
  struct Case {
    const char* name;
    int overcommit_pct;
    std::vector<PodSpec> there;  // reserved first (absolute gpumem)
    int64_t gpumem;              // the new pod's: 0 with pct 0 = a whole card
    int pct;                     // gpumem-percentage (0: none)
    bool profiled;               // the new pod carries a profile annotation
    int64_t booked;              // the grant's memory when it fits, else 0
    const char* reason;          // when it does not fit
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"off: 50 % of an empty card",                0,   {},                  0, 50, false, 40000, ""},
      {"on: 50 % of an empty card",                 200, {},                  0, 50, false, 40000, ""},
      {"off: a whole card",                         0,   {},                  0, 0,  false, 80000, ""},
      {"on: a whole card",                          200, {},                  0, 0,  false, 80000, ""},
      {"on: 100 % of an empty card",                200, {},                  0, 100, false, 80000, ""},
      {"off: 50 % next to 40,000 MiB",              0,   {Stock(40000)},      0, 50, false, 40000, ""},
      {"on: 50 % next to 40,000 MiB",               200, {Stock(40000)},      0, 50, false, 40000, ""},
      {"on: 50 % next to 50,000 MiB passes the card", 200, {Stock(50000)},    0, 50, false, 0, "CardInsufficientMemory"},
      {"on: a whole card next to 1,000 MiB",        200, {Stock(1000)},       0, 0,  false, 0, "CardInsufficientMemory"},
      {"on: 50 % joins a profiled pod within the card", 200, {Idle(30000, 20000, 30000)}, 0, 50, false, 40000, ""},
      {"on: 50 % never joins an overcommitted card", 200, {Idle(50000, 20000, 30000), Idle(50000, 20000, 30000)}, 0, 50, false, 0, "CardInsufficientMemory"},
      {"on: a percentage with a profile packs as a pod without one", 200, {Idle(50000, 20000, 30000)}, 0, 50, true, 0, "CardInsufficientMemory"},
      {"off: plain gpumem as before",               0,   {Stock(40000)},      40000, 0, false, 40000, ""},
      {"on: plain gpumem as before",                200, {Stock(40000)},      40000, 0, false, 40000, ""},
      {"on: plain gpumem past the real card",       200, {Stock(40000)},      40001, 0, false, 0, "CardInsufficientMemory"},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = Make(c.overcommit_pct);
    for (size_t i = 0; i < c.there.size(); ++i) {
      auto d = s->ScheduleAndReserve(PodOf("p" + std::to_string(i), c.there[i]), nullptr);
      ASSERT_TRUE(d.ok() && d->node == "n1") << "setup pod " << i;
    }
    core::PodRequest pod =
        PodOf("new", {c.gpumem, c.profiled ? ProfileText(1, 1, false) : std::string()});
    pod.containers[0].devices[0].mem_percentage = c.gpumem > 0 ? 0 : c.pct > 0 ? c.pct : 100;
    ScheduleOptions so;
    so.explain = true;
    auto d = s->Schedule(pod, nullptr, so);
    ASSERT_TRUE(d.ok()) << d.status();
    if (c.booked == 0) {
      EXPECT_EQ(d->node, "");
      EXPECT_EQ(d->failures.size(), 1u);
      const std::string why = d->failures.empty() ? "" : d->failures[0].reason;
      EXPECT_NE(why.find(c.reason), std::string::npos) << why;
    } else {
      EXPECT_EQ(d->node, "n1") << (d->failures.empty() ? "" : d->failures[0].reason);
      EXPECT_EQ(d->node.empty() ? 0 : d->allocation.containers.at(0).at(0).usedmem_mib, c.booked);
    }
    // The dry runs size it the same way: the node taken from the live cache (at the cap already)
    // and the node as it registers.
    auto from_cache = s->DryRun();
    from_cache->UpsertNode(s->cache().Snapshot("n1")->info);
    auto registered = s->DryRun();
    registered->UpsertNode(NodeBuilder("n1").Gpus(1, kCard).Build());
    for (Scheduler* dry : {from_cache.get(), registered.get()}) {
      for (size_t i = 0; i < c.there.size(); ++i) {
        core::PodAllocation a;
        a.node = "n1";
        a.containers = {
            {core::ContainerDevice{"n1-gpu0", core::kNvidiaVendor, c.there[i].gpumem, 0, 0}}};
        ASSERT_TRUE(dry->AddPod("p" + std::to_string(i), a).ok());
      }
      auto dd = dry->Schedule(pod, nullptr);
      ASSERT_TRUE(dd.ok()) << dd.status();
      EXPECT_EQ(dd->node, c.booked == 0 ? "" : "n1");
      if (!dd->node.empty()) {
        EXPECT_EQ(dd->allocation.containers[0][0].usedmem_mib, c.booked);
      }
    }
  }
}

TEST(UsageRule, ReserveRechecksAgainstAConcurrentReservation) {
  // Both decided on the empty card; each alone fits, together their levels pass it.
  auto s = Make(200);
  const core::PodRequest a = PodOf("a", Idle(50000, 40000, 45000));
  const core::PodRequest b = PodOf("b", Idle(50000, 40000, 45000));
  auto da = s->Schedule(a, nullptr);
  auto db = s->Schedule(b, nullptr);
  ASSERT_TRUE(da.ok() && db.ok() && da->node == "n1" && db->node == "n1");
  ASSERT_TRUE(s->Reserve(a, *da).ok());
  const Status second = s->Reserve(b, *db);
  EXPECT_TRUE(absl::IsAborted(second)) << second;
  EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].usedmem_mib, 50000);  // rolled back
}

TEST(UsageRule, PodsPlacedEarlierCountWithTheProfileTheyAreGiven) {
  auto s = Make(200);
  core::PodAllocation a;
  a.node = "n1";
  a.containers = {{core::ContainerDevice{"n1-gpu0", core::kNvidiaVendor, 50000, 0, 0}}};
  const core::PodRequest next = PodOf("next", Idle(50000, 20000, 30000));
  // Without its profile a pod placed earlier is a pod without one: no overcommit next to it.
  ASSERT_TRUE(s->AddPod("old", a).ok());
  EXPECT_TRUE(s->Schedule(next, nullptr)->node.empty());
  // Told its profile (the extender reads it from the pod), it packs.
  const auto tenant = s->usage_rule()->TenantOf(PodOf("old", Idle(50000, 20000, 30000)));
  ASSERT_TRUE(tenant.has_value());
  ASSERT_TRUE(s->AddPod("old", a, {}, tenant).ok());
  EXPECT_EQ(s->Schedule(next, nullptr)->node, "n1");
  // Recorded again without one (init containers finished): it keeps the profile it had.
  ASSERT_TRUE(s->AddPod("old", a).ok());
  EXPECT_EQ(s->Schedule(next, nullptr)->node, "n1");
  // Gone: the card is empty.
  ASSERT_TRUE(s->RemovePod("old").ok());
  EXPECT_EQ(s->usage_rule()->stats().profiled_pods, 0);
  EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].usedmem_mib, 0);
}

TEST(UsageRule, PodsPlacedEarlierAreBelievedAsAtTheirDecision) {
  auto s = Make(200);
  const std::string good = ProfileText(20000, 30000, false), garbage = "v1;n=x";
  auto grant = [](int64_t mem, std::string mig = "") {
    core::ContainerDevice d{"n1-gpu0", core::kNvidiaVendor, mem, 0, 0};
    d.mig_profile = std::move(mig);
    return d;
  };
  auto alloc = [](std::vector<std::vector<core::ContainerDevice>> c) {
    core::PodAllocation a;
    a.node = "n1";
    a.containers = std::move(c);
    return a;
  };
  struct Case {
    const char* name;
    std::string ns;
    const std::string* profile;
    core::PodAllocation allocation;
    int64_t limit;  // 0: no tenant
  };
  const std::vector<Case> cases = {
      {"one card, trusted namespace", "serving", &good, alloc({{grant(50000)}}), 50000},
      {"no annotation", "serving", nullptr, alloc({{grant(50000)}}), 0},
      {"a namespace not listed", "other", &good, alloc({{grant(50000)}}), 0},
      {"a profile that does not parse", "serving", &garbage, alloc({{grant(50000)}}), 0},
      {"two grants", "serving", &good, alloc({{grant(20000)}, {grant(20000)}}), 0},
      {"a MIG instance", "serving", &good, alloc({{grant(20000, "3g.40gb")}}), 0},
      {"no grant", "serving", &good, alloc({}), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto t = s->usage_rule()->TenantOfPlaced(c.ns, c.profile, c.allocation);
    EXPECT_EQ(t.has_value() ? t->limit_mib : 0, c.limit);
    if (t) {
      EXPECT_EQ(t->spike_mib, 30000);
    }
  }
}

// The fleet budget (usage/fleet.h): past the per-card 50 bp a card takes a profiled pod where the
// cards holding profiled pods average little enough contention; what is recorded and forgotten
// (Reserve, RemovePod) is what the ledger counts.
TEST(UsageRule, FleetBudgetAdmitsAnOverrunTheFleetAffords) {
  // 60 % one minute in ten: two such pods contend 1 % of the minutes (100 bp); idle: 0 %.
  StatusOr<usage::UsageProfile> p = usage::ParseUsageProfile(ProfileText(10000, 10000, false));
  ASSERT_TRUE(p.ok()) << p.status();
  usage::DutyHistogram mixed{};
  mixed[0] = 900, mixed[12] = 100;
  p->duty_hist.fill(mixed);
  p->duty_hist_busiest = mixed;
  const PodSpec busy{30000, usage::FormatUsageProfile(*p)}, idle = Idle(30000, 10000, 10000);
  struct Case {
    const char* name;
    int fleet_bp, card_bp;
    std::vector<std::pair<std::string, PodSpec>> there;  // (node, pod), reserved in order
    std::vector<std::string> removed;                    // then removed (uids "p<i>")
    bool fits;                                           // the busy pod on n1
  };
  const Case cases[] = {
      {"fleet off: the per-card budget refuses",
       0,
       0,
       {{"n1", busy}, {"n2", idle}, {"n3", idle}},
       {},
       false},
      {"100 bp over three cards = 33 <= 40",
       40,
       150,
       {{"n1", busy}, {"n2", idle}, {"n3", idle}},
       {},
       true},
      {"100 bp over two cards = 50 > 40", 40, 150, {{"n1", busy}, {"n2", idle}}, {}, false},
      {"a card leaves the fleet when its pod is removed",
       40,
       150,
       {{"n1", busy}, {"n2", idle}, {"n3", idle}},
       {"p2"},
       false},
      {"the card's ceiling 90 < 100",
       40,
       90,
       {{"n1", busy}, {"n2", idle}, {"n3", idle}},
       {},
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SchedulerOptions so;
    so.policy = "hami-binpack";
    so.usage = {.overcommit_pct = 200,
                .contention_bp = 50,
                .namespaces = {"serving"},
                .fleet_contention_bp = c.fleet_bp,
                .card_contention_bp = c.card_bp};
    auto s = Scheduler::Create(so);
    ASSERT_TRUE(s.ok()) << s.status();
    for (const char* n : {"n1", "n2", "n3"})
      (*s)->UpsertNode(NodeBuilder(n).Gpus(1, kCard).Build());
    for (size_t i = 0; i < c.there.size(); ++i) {
      const std::vector<std::string> to = {c.there[i].first};
      auto d = (*s)->ScheduleAndReserve(PodOf("p" + std::to_string(i), c.there[i].second), &to);
      ASSERT_TRUE(d.ok()) << d.status();
      ASSERT_EQ(d->node, to[0]);
    }
    for (const std::string& uid : c.removed) ASSERT_TRUE((*s)->RemovePod(uid).ok());
    const std::vector<std::string> n1 = {"n1"};
    auto d = (*s)->Schedule(PodOf("new", busy), &n1);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->node == "n1", c.fits);
  }
}

TEST(UsageRule, OptionsAreCheckedAtStart) {
  struct Case {
    UsageRuleOptions o;
    bool ok;
  };
  auto with = [](int oc, int bp, int32_t duty, std::vector<std::string> ns) {
    return UsageRuleOptions{
        .overcommit_pct = oc, .duty_budget = duty, .contention_bp = bp, .namespaces = ns};
  };
  const std::vector<Case> cases = {
      {with(0, 350, 10000, {}), true},      {with(100, 350, 10000, {"a"}), true},
      {with(1000, 0, 1, {"*"}), true},      {with(99, 350, 10000, {}), false},
      {with(1001, 350, 10000, {}), false},  {with(200, -1, 10000, {}), false},
      {with(200, 10001, 10000, {}), false}, {with(200, 350, 0, {}), false},
      {with(200, 350, 10000, {""}), false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ValidateUsageRuleOptions(cases[i].o).ok(), cases[i].ok);
    SchedulerOptions so;
    so.usage = cases[i].o;
    EXPECT_EQ(Scheduler::Create(so).ok(), cases[i].ok);
  }
  for (auto [fleet, card, ok] :
       {std::tuple{10000, 10000, true}, {-1, 0, false}, {0, 10001, false}}) {
    UsageRuleOptions o = with(200, 350, 10000, {});
    o.fleet_contention_bp = fleet;
    o.card_contention_bp = card;
    EXPECT_EQ(ValidateUsageRuleOptions(o).ok(), ok) << fleet << " " << card;
  }
}

}  // namespace
}  // namespace hami::scheduler
