#pragma once
// A tiny cluster + scheduler for table tests.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/testing/builders.h"

namespace hami::scheduler::testing {

// Builds a scheduler of `policy` over `nodes` and places `existing` pods in order (each must fit).
inline std::unique_ptr<Scheduler> MakeCluster(const std::string& policy,
                                              const std::vector<core::NodeInfo>& nodes,
                                              const std::vector<core::PodRequest>& existing = {},
                                              Rng* rng = nullptr) {
  SchedulerOptions o;
  o.policy = policy;
  auto s = Scheduler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  for (const auto& n : nodes) (*s)->UpsertNode(n);
  for (const auto& p : existing) {
    ScheduleOptions so;
    so.rng = rng;
    auto d = (*s)->ScheduleAndReserve(p, nullptr, so);
    EXPECT_TRUE(d.ok()) << d.status();
    if (d.ok()) {
      EXPECT_FALSE(d->node.empty()) << "existing pod " << p.uid << " does not fit";
    }
  }
  return std::move(*s);
}

// One explained decision of `pod` on a cluster built by MakeCluster.
inline Decision Explain(const std::string& policy, const std::vector<core::NodeInfo>& nodes,
                        const std::vector<core::PodRequest>& existing,
                        const core::PodRequest& pod) {
  auto s = MakeCluster(policy, nodes, existing);
  ScheduleOptions o;
  o.explain = true;
  auto d = s->Schedule(pod, nullptr, o);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Decision{};
}

// The bounded scan's contract for one pod, node by node, on the scheduler's current state: MayFit
// never rejects a node the pod fits, and the scorer's UpperBound is never below the score of the
// placement the profile would choose. Counts the fitting nodes checked and those with a bound.
inline void ExpectBoundsHold(const Scheduler& s, const core::PodRequest& pod, Rng& rng,
                             const std::string& what, int* checked, int* bounded) {
  const Profile& profile = s.profile();
  CycleState cycle(pod, &rng, profile.vendor_rules);
  cycle.set_gpu_capacity(s.cache().gpu_capacity());  // as Scheduler::Schedule does
  ASSERT_TRUE(profile.picker->PreFilter(cycle).ok());
  ASSERT_TRUE(profile.scorer->PreFilter(cycle).ok());
  s.cache().Read([&](const ClusterCache::View& view) {
    EvalScratch scratch;
    Placement placement;
    for (size_t n = 0; n < view.size(); ++n) {
      const NodeSummary sum = view.Summary(n);
      view.WithNode(n, [&](const NodeState& node) {
        const bool fits = EvaluateNode(profile, cycle, node, scratch, &placement, nullptr);
        if (!MayFit(profile, cycle, sum)) {
          EXPECT_FALSE(fits) << "MayFit rejected a node that fits: " << what << " node "
                             << node.info.name;
          return;
        }
        if (!fits) return;
        const int64_t bound = profile.scorer->UpperBound(cycle, sum);
        EXPECT_GE(bound, profile.scorer->Score(cycle, node, placement))
            << what << " node " << node.info.name;
        ++*checked;
        *bounded += bound != kNoBound;
      });
    }
  });
}

// Normalised scores of the feasible nodes, in name order.
inline std::vector<int> ScoresOf(const Decision& d) {
  std::vector<int> out;
  for (const auto& s : d.scores) out.push_back(s.score);
  return out;
}

// "node:uuid,uuid|uuid" (containers separated by '|'), or "" when unscheduled.
inline std::string Describe(const Decision& d) {
  if (d.node.empty()) return "";
  std::string out = d.node + ":";
  for (size_t c = 0; c < d.allocation.containers.size(); ++c) {
    if (c) out += "|";
    for (size_t i = 0; i < d.allocation.containers[c].size(); ++i) {
      if (i) out += ",";
      out += d.allocation.containers[c][i].uuid;
    }
  }
  return out;
}

}  // namespace hami::scheduler::testing
