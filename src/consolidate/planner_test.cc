#include "consolidate/planner.h"

#include <gtest/gtest.h>

#include <functional>

namespace hami::consolidate {
namespace {

// A tenant at a steady `level_mib` that may spike to `spike_mib`, busy at `duty_pct` in every
// minute of every hour (one histogram bin holds them all).
usage::Tenant T(int64_t level_mib, int64_t spike_mib, int duty_pct = 0, int64_t limit_mib = 0) {
  usage::Tenant t;
  t.profile.minutes = 60;
  t.profile.mem_mib.fill(static_cast<int32_t>(level_mib));
  t.profile.duty.fill(duty_pct * 100);
  t.profile.mem_all = static_cast<int32_t>(level_mib);
  t.profile.duty_all = duty_pct * 100;
  t.profile.mem_peak = static_cast<int32_t>(spike_mib);
  usage::DutyHistogram h{};
  h[static_cast<size_t>(std::min(usage::kDutyBins - 1, duty_pct * 100 / usage::kDutyBinWidth))] =
      1000;
  t.profile.duty_hist.fill(h);
  t.profile.duty_hist_busiest = h;
  t.spike_mib = spike_mib;
  t.limit_mib = limit_mib > 0 ? limit_mib : spike_mib;
  return t;
}

PodState P(const char* name, int gpu, usage::Tenant t, const char* workload = "w") {
  PodState p;
  p.name = name;
  p.workload = workload;
  p.gpu = gpu;
  p.tenant = std::move(t);
  p.since_minute = 0;
  return p;
}

ClusterState Cluster(int gpus, std::vector<PodState> pods, int32_t now = 600) {
  ClusterState s;
  s.now = now;
  for (int g = 0; g < gpus; ++g) s.gpus.push_back({"g" + std::to_string(g), 100, true});
  s.pods = std::move(pods);
  return s;
}

Options Defaults() {
  Options o;
  o.pack.contention_bp = 350;
  o.relief_contention_bp = 700;
  return o;
}

TEST(Planner, Table) {
  struct Case {
    const char* name;
    ClusterState state;
    std::function<void(ClusterState*, Options*)> tweak;
    const char* want;  // FormatPlan
  };
  const auto none = [](ClusterState*, Options*) {};
  const Case cases[] =
      {
          {"two lone quiet pods: the first of the least loaded GPUs is emptied onto the other",
           Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(20, 30))}), none,
           "move a g0 -> g1 (empty-gpu)\nsaving 1 GPU(s): 1 freed, 0 opened\n"},
          {"the less loaded GPU goes, whatever its index",
           Cluster(2, {P("a", 0, T(30, 40)), P("b", 1, T(20, 30))}), none,
           "move b g1 -> g0 (empty-gpu)\nsaving 1 GPU(s): 1 freed, 0 opened\n"},
          {"memory: levels plus the largest spike pass the card",
           Cluster(2, {P("a", 0, T(40, 70)), P("b", 1, T(40, 70))}), none,
           "keep g0 (empty-gpu): a fits on no other GPU: memory\n"
           "keep g1 (empty-gpu): b fits on no other GPU: memory\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"duty: two pods busy 60 % in the same hours contend",
           Cluster(2, {P("a", 0, T(20, 30, 60)), P("b", 1, T(20, 30, 60))}), none,
           "keep g0 (empty-gpu): a fits on no other GPU: duty\n"
           "keep g1 (empty-gpu): b fits on no other GPU: duty\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"an empty GPU is never an empty-gpu destination", Cluster(2, {P("a", 0, T(20, 30))}),
           none,
           "keep g0 (empty-gpu): a fits on no other GPU: none open\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"a GPU that does not accept pods (cordoned) is no destination",
           Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(20, 30))}),
           [](ClusterState* s, Options*) { s->gpus[1].accepts = false; },
           "move b g1 -> g0 (empty-gpu)\nkeep g0 (empty-gpu): a fits on no other GPU: none open\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"the fullest GPU that fits receives; a GPU that received is not emptied",
           Cluster(3, {P("a", 0, T(10, 20)), P("b", 1, T(20, 30)), P("c", 2, T(25, 30)),
                       P("d", 2, T(10, 20))}),
           none,
           "move a g0 -> g2 (empty-gpu)\nmove b g1 -> g2 (empty-gpu)\n"
           "saving 2 GPU(s): 2 freed, 0 opened\n"},
          {"a GPU is emptied only when all its pods fit elsewhere (a would fit on g1, b not)",
           Cluster(2, {P("a", 0, T(30, 40)), P("b", 0, T(45, 55)), P("c", 1, T(50, 60))}), none,
           "keep g1 (empty-gpu): c fits on no other GPU: memory\n"
           "keep g0 (empty-gpu): b fits on no other GPU: memory\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"a GPU of two pods is emptied onto two GPUs",
           Cluster(3, {P("a", 0, T(30, 40)), P("b", 0, T(30, 40)), P("c", 1, T(50, 60)),
                       P("d", 2, T(45, 55))}),
           none,
           "move a g0 -> g1 (empty-gpu)\nmove b g0 -> g2 (empty-gpu)\n"
           "keep g2 (empty-gpu): d fits on no other GPU: memory\n"
           "keep g1 (empty-gpu): c fits on no other GPU: memory\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"relief: two pods contending send the latest to arrive to an empty GPU",
           Cluster(2, {P("a", 0, T(20, 30, 60)), P("b", 0, T(20, 30, 60))}),
           [](ClusterState* s, Options*) { s->pods[1].since_minute = 100; },
           "move b g0 -> g1 (relief)\nkeep g0 (empty-gpu): a fits on no other GPU: duty\n"
           "saving -1 GPU(s): 0 freed, 1 opened\n"},
          {"relief goes to a GPU where the pod fits before it opens one",
           Cluster(3, {P("a", 0, T(20, 30, 60)), P("b", 0, T(20, 30, 60)), P("c", 1, T(20, 30))}),
           [](ClusterState* s, Options*) { s->pods[1].since_minute = 100; },
           "move b g0 -> g1 (relief)\nkeep g0 (empty-gpu): a fits on no other GPU: duty\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"relief without an empty GPU: refused",
           Cluster(1, {P("a", 0, T(20, 30, 60)), P("b", 0, T(20, 30, 60))}), none,
           "keep g0 (relief): a fits on no other GPU: none open\n"
           "keep g0 (empty-gpu): a fits on no other GPU: none open\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"hysteresis: contention between the packing and the relief budgets stays put",
           Cluster(2, {P("a", 0, T(20, 30, 60)), P("b", 0, T(20, 30, 60))}),
           [](ClusterState*, Options* o) { o->relief_contention_bp = 10001; },
           "keep g0 (empty-gpu): a fits on no other GPU: none open\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"memory overflow is relieved too",
           Cluster(2, {P("a", 0, T(40, 70)), P("b", 0, T(40, 70))}), none,
           "move a g0 -> g1 (relief)\nkeep g0 (empty-gpu): b fits on no other GPU: memory\n"
           "saving -1 GPU(s): 0 freed, 1 opened\n"},
          {"relief off", Cluster(2, {P("a", 0, T(40, 70)), P("b", 0, T(40, 70))}),
           [](ClusterState*, Options* o) { o->relief = false; },
           "keep g0 (empty-gpu): a fits on no other GPU: none open\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"not movable (owner, PDB, opt-out)",
           Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}),
           [](ClusterState* s, Options*) { s->pods[0].movable = false; },
           "move b g1 -> g0 (empty-gpu)\nkeep g0 (empty-gpu): a not movable\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"a move in flight", Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}),
           [](ClusterState* s, Options*) { s->pods[0].in_flight = true; },
           "move b g1 -> g0 (empty-gpu)\nkeep g0 (empty-gpu): a move in flight\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"within its restart time", Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}),
           [](ClusterState* s, Options*) { s->pods[0].since_minute = 599; },
           "move b g1 -> g0 (empty-gpu)\nkeep g0 (empty-gpu): a within its restart time\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"restart time passed", Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}),
           [](ClusterState* s, Options*) { s->pods[0].since_minute = 598; },
           "move a g0 -> g1 (empty-gpu)\nsaving 1 GPU(s): 1 freed, 0 opened\n"},
          {"two moves in the last day", Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}),
           [](ClusterState* s, Options*) {
             s->pods[0].move_minutes = {0, 400};
           },
           "move b g1 -> g0 (empty-gpu)\nkeep g0 (empty-gpu): a moves per pod per day\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"empty-gpu moves may leave one of the day's moves for relief",
           Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}),
           [](ClusterState* s, Options* o) {
             s->pods[0].move_minutes = {400};
             o->max_empty_moves_pod_day = 1;
           },
           "move b g1 -> g0 (empty-gpu)\nkeep g0 (empty-gpu): a moves per pod per day\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"... and relief may use it", Cluster(2, {P("a", 0, T(40, 70)), P("b", 0, T(40, 70))}),
           [](ClusterState* s, Options* o) {
             s->pods[0].move_minutes = {400};
             s->pods[1].move_minutes = {400};
             o->max_empty_moves_pod_day = 1;
           },
           "move a g0 -> g1 (relief)\nkeep g0 (empty-gpu): b moves per pod per day\n"
           "saving -1 GPU(s): 0 freed, 1 opened\n"},
          {"a move older than a day does not count",
           Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40))}, 2000),
           [](ClusterState* s, Options*) {
             s->pods[0].move_minutes = {500, 1900};
           },
           "move a g0 -> g1 (empty-gpu)\nsaving 1 GPU(s): 1 freed, 0 opened\n"},
          {"its workload has its concurrent moves in flight",
           Cluster(3, {P("a", 0, T(20, 30), "x"), P("b", 1, T(30, 40), "y"),
                       P("c", 2, T(10, 20), "x"), P("d", 2, T(10, 20), "z")}),
           [](ClusterState* s, Options* o) {
             s->pods[2].in_flight = true;
             o->max_concurrent_workload = 1;
           },
           "move b g1 -> g2 (empty-gpu)\nkeep g0 (empty-gpu): a concurrent moves of its "
           "workload\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"the cluster has its concurrent moves in flight",
           Cluster(3, {P("a", 0, T(20, 30), "x"), P("b", 1, T(30, 40), "y"),
                       P("c", 2, T(10, 20), "z")}),
           [](ClusterState* s, Options* o) {
             s->pods[2].in_flight = true;
             o->max_concurrent_cluster = 1;
           },
           "keep g2 (empty-gpu): c move in flight\n"
           "keep g0 (empty-gpu): a concurrent moves in the cluster\n"
           "keep g1 (empty-gpu): b concurrent moves in the cluster\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"moves per window: one started 30 min ago fills a window of 1",
           Cluster(3, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40)), P("c", 2, T(35, 40))}),
           [](ClusterState* s, Options* o) {
             s->pods[2].move_minutes = {570};
             o->max_moves_window = 1;
           },
           "keep g0 (empty-gpu): a moves per window\nkeep g1 (empty-gpu): b moves per window\n"
           "keep g2 (empty-gpu): c moves per window\nsaving 0 GPU(s): 0 freed, 0 opened\n"},
          {"a pod on no GPU (evicted, its replacement not placed yet) counts toward its workload",
           Cluster(2, {P("a", 0, T(20, 30), "x"), P("b", 1, T(30, 40), "y"),
                       P("gone", -1, T(10, 20), "x")}),
           [](ClusterState* s, Options* o) {
             s->pods[2].in_flight = true;
             o->max_concurrent_workload = 1;
           },
           "move b g1 -> g0 (empty-gpu)\n"
           "keep g0 (empty-gpu): a concurrent moves of its workload\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
          {"... and toward the window, and is neither moved nor a destination",
           Cluster(2, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40)), P("gone", -1, T(10, 20))}),
           [](ClusterState* s, Options* o) {
             s->pods[2].in_flight = true;
             s->pods[2].move_minutes = {595};
             o->max_moves_window = 1;
           },
           "keep g0 (empty-gpu): a moves per window\nkeep g1 (empty-gpu): b moves per window\n"
           "saving 0 GPU(s): 0 freed, 0 opened\n"},
          {"moves per window: a move before the window does not count",
           Cluster(3, {P("a", 0, T(20, 30)), P("b", 1, T(30, 40)), P("c", 2, T(35, 40))}),
           [](ClusterState* s, Options* o) {
             s->pods[2].move_minutes = {540};
             o->max_moves_window = 1;
           },
           "move a g0 -> g2 (empty-gpu)\nkeep g1 (empty-gpu): b moves per window\n"
           "saving 1 GPU(s): 1 freed, 0 opened\n"},
      };
  for (const Case& c : cases) {
    ClusterState s = c.state;
    Options o = Defaults();
    c.tweak(&s, &o);
    const Plan plan = PlanMoves(s, o);
    EXPECT_EQ(FormatPlan(s, plan), c.want) << c.name;
    // Every move within the budgets it was planned under.
    for (const Move& m : plan.moves) {
      EXPECT_EQ(s.pods[static_cast<size_t>(m.pod)].gpu, m.from) << c.name;
      EXPECT_NE(m.from, m.to) << c.name;
      EXPECT_TRUE(s.gpus[static_cast<size_t>(m.to)].accepts) << c.name;
    }
  }
}

TEST(Planner, ABudgetOfOneAPodPerDayHoldsAcrossPlans) {
  // Replan after each move as a controller would: the pod moved is in the books and not moved
  // again the same day, whatever the plan would like.
  ClusterState s = Cluster(3, {P("a", 0, T(20, 30, 60)), P("b", 0, T(20, 30, 60))});
  Options o = Defaults();
  o.max_moves_pod_day = 1;
  for (int round = 0; round < 4; ++round) {
    const Plan plan = PlanMoves(s, o);
    for (const Move& m : plan.moves) {
      PodState& p = s.pods[static_cast<size_t>(m.pod)];
      p.gpu = m.to;
      p.move_minutes.push_back(s.now);
      p.since_minute = s.now;
    }
    s.now += 60;
  }
  for (const PodState& p : s.pods) EXPECT_LE(p.move_minutes.size(), 1u) << p.name;
  // They ended apart (the relief happened) and stayed apart (emptying would contend).
  EXPECT_NE(s.pods[0].gpu, s.pods[1].gpu);
}

TEST(Planner, SameStateSamePlan) {
  ClusterState s = Cluster(6, {});
  for (int i = 0; i < 10; ++i)
    s.pods.push_back(P(("p" + std::to_string(i)).c_str(), i % 5, T(10 + i, 30, i * 5)));
  const Plan a = PlanMoves(s, Defaults()), b = PlanMoves(s, Defaults());
  EXPECT_EQ(a.moves, b.moves);
  EXPECT_EQ(a.rejected, b.rejected);
  EXPECT_FALSE(a.moves.empty());
}

}  // namespace
}  // namespace hami::consolidate
