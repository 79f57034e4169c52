#include "consolidate/planner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

namespace hami::consolidate {

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kRelief:
      return "relief";
    case Reason::kEmptyGpu:
      return "empty-gpu";
  }
  return "?";
}

const char* RefusalName(Refusal r) {
  switch (r) {
    case Refusal::kNotMovable:
      return "not movable";
    case Refusal::kInFlight:
      return "move in flight";
    case Refusal::kRestarting:
      return "within its restart time";
    case Refusal::kPodDayCap:
      return "moves per pod per day";
    case Refusal::kWorkloadConcurrency:
      return "concurrent moves of its workload";
    case Refusal::kClusterConcurrency:
      return "concurrent moves in the cluster";
    case Refusal::kWindowCap:
      return "moves per window";
    case Refusal::kNoDestination:
      return "fits on no other GPU";
  }
  return "?";
}

std::vector<std::vector<int>> PodsByGpu(const ClusterState& state) {
  std::vector<std::vector<int>> on(state.gpus.size());
  for (size_t i = 0; i < state.pods.size(); ++i) {
    const int g = state.pods[i].gpu;
    if (g >= 0 && static_cast<size_t>(g) < on.size())
      on[static_cast<size_t>(g)].push_back(static_cast<int>(i));
  }
  return on;
}

namespace {

const usage::Tenant& TenantOf(const ClusterState& s, int pod) {
  return s.pods[static_cast<size_t>(pod)].tenant;
}

usage::PackBudget BudgetFor(const ClusterState& s, int gpu, usage::PackBudget b) {
  b.capacity_mib = s.gpus[static_cast<size_t>(gpu)].capacity_mib;
  return b;
}

usage::Fit FitOn(const ClusterState& s, const std::vector<int>& on, int pod,
                 const usage::PackBudget& budget) {
  std::vector<const usage::Tenant*> there;
  there.reserve(on.size());
  for (int j : on)
    if (j != pod) there.push_back(&TenantOf(s, j));
  return usage::CheckFit(there, TenantOf(s, pod), budget);
}

// The memory a GPU's pods pack by (their levels over every observed minute): the load order.
int64_t Level(const ClusterState& s, const std::vector<int>& on) {
  int64_t sum = 0;
  for (int j : on) {
    const usage::Tenant& t = TenantOf(s, j);
    sum += t.profile.minutes > 0 ? t.profile.mem_all : t.limit_mib;
  }
  return sum;
}

// The move budgets as they stand, plus what the plan being built adds.
class Budgets {
 public:
  Budgets(const ClusterState& s, const Options& o) : s_(s), o_(o) {
    for (const PodState& p : s.pods) {
      if (p.in_flight) {
        ++in_flight_;
        ++workload_in_flight_[p.workload];
      }
      for (int32_t m : p.move_minutes)
        if (m > s.now - o.window_min) ++in_window_;
    }
  }

  int MovesToday(int pod) const {
    const PodState& p = s_.pods[static_cast<size_t>(pod)];
    int n = 0;
    for (int32_t m : p.move_minutes)
      if (m > s_.now - kMinutesPerDay) ++n;
    return n;
  }

  // Whether `pods` may all move now, on top of what is planned already; the first refusal.
  bool Allow(const std::vector<int>& pods, Reason reason, Refusal* why, int* who) const {
    int day_cap = o_.max_moves_pod_day;
    if (reason == Reason::kEmptyGpu && o_.max_empty_moves_pod_day >= 0)
      day_cap = std::min(day_cap, o_.max_empty_moves_pod_day);
    std::map<std::string, int> per_workload;
    int n = 0;
    for (int pod : pods) {
      const PodState& p = s_.pods[static_cast<size_t>(pod)];
      *who = pod;
      if (!p.movable) return *why = Refusal::kNotMovable, false;
      if (p.in_flight) return *why = Refusal::kInFlight, false;
      if (s_.now - p.since_minute < o_.restart_min) return *why = Refusal::kRestarting, false;
      if (MovesToday(pod) >= day_cap) return *why = Refusal::kPodDayCap, false;
      ++n;
      const int w = ++per_workload[p.workload] + Get(workload_in_flight_, p.workload) +
                    Get(workload_planned_, p.workload);
      if (o_.max_concurrent_workload > 0 && w > o_.max_concurrent_workload)
        return *why = Refusal::kWorkloadConcurrency, false;
      if (o_.max_concurrent_cluster > 0 && in_flight_ + planned_ + n > o_.max_concurrent_cluster)
        return *why = Refusal::kClusterConcurrency, false;
      if (o_.max_moves_window > 0 && in_window_ + planned_ + n > o_.max_moves_window)
        return *why = Refusal::kWindowCap, false;
    }
    return true;
  }

  void Take(int pod) {
    ++planned_;
    ++workload_planned_[s_.pods[static_cast<size_t>(pod)].workload];
  }

 private:
  static int Get(const std::map<std::string, int>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  }
  const ClusterState& s_;
  const Options& o_;
  int in_flight_ = 0, in_window_ = 0, planned_ = 0;
  std::map<std::string, int> workload_in_flight_, workload_planned_;
};

struct Planner {
  const ClusterState& s;
  const Options& o;
  std::vector<std::vector<int>> on;
  std::vector<char> frozen;  // neither source nor destination any more (freed by this plan)
  std::vector<char> received;
  Budgets budgets;
  Plan plan;

  Planner(const ClusterState& state, const Options& options)
      : s(state),
        o(options),
        on(PodsByGpu(state)),
        frozen(state.gpus.size(), 0),
        received(state.gpus.size(), 0),
        budgets(state, options) {}

  usage::PackBudget Relief(int gpu) const {
    usage::PackBudget b = BudgetFor(s, gpu, o.pack);
    b.contention_bp = std::max(o.relief_contention_bp, o.pack.contention_bp);
    return b;
  }

  // The fullest GPU other than `from` (non-empty unless `allow_empty`) the pod fits on: -1 when
  // none; `fit` says why the fullest candidate refused it.
  int Destination(int pod, int from, const std::vector<std::vector<int>>& cur, bool allow_empty,
                  usage::Fit* fit) const {
    int best = -1;
    *fit = usage::Fit::kFits;
    std::vector<int> order;
    for (size_t g = 0; g < cur.size(); ++g) {
      if (static_cast<int>(g) == from || frozen[g] || !s.gpus[g].accepts || cur[g].empty())
        continue;
      order.push_back(static_cast<int>(g));
    }
    // Fullest first (pods, then memory level), lower index on ties.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const auto& ca = cur[static_cast<size_t>(a)];
      const auto& cb = cur[static_cast<size_t>(b)];
      return std::make_tuple(ca.size(), Level(s, ca)) > std::make_tuple(cb.size(), Level(s, cb));
    });
    for (int g : order) {
      const usage::Fit f = FitOn(s, cur[static_cast<size_t>(g)], pod, BudgetFor(s, g, o.pack));
      if (f == usage::Fit::kFits) {
        best = g;
        break;
      }
      if (*fit == usage::Fit::kFits) *fit = f;  // the fullest candidate's reason
    }
    if (best >= 0 || !allow_empty) return best;
    for (size_t g = 0; g < cur.size(); ++g)
      if (static_cast<int>(g) != from && !frozen[g] && s.gpus[g].accepts && cur[g].empty())
        return static_cast<int>(g);
    return -1;
  }

  void Apply(int pod, int from, int to, Reason why) {
    auto& src = on[static_cast<size_t>(from)];
    src.erase(std::find(src.begin(), src.end(), pod));
    if (on[static_cast<size_t>(to)].empty()) plan.opened_gpus.push_back(to);
    on[static_cast<size_t>(to)].push_back(pod);
    received[static_cast<size_t>(to)] = 1;
    budgets.Take(pod);
    plan.moves.push_back({pod, from, to, why});
  }

  void ReliefPass() {
    for (size_t gi = 0; gi < on.size(); ++gi) {
      const int g = static_cast<int>(gi);
      if (on[gi].size() < 2 || Passes(s, on[gi], Relief(g))) continue;
      // Send pods away until the rest passes the packing budget: first one whose leaving is
      // enough, else the one moved least today (then the latest to arrive).
      while (on[gi].size() >= 2 && !Passes(s, on[gi], BudgetFor(s, g, o.pack))) {
        std::vector<int> cands;
        Rejected last{g, on[gi].front(), Reason::kRelief, Refusal::kNotMovable, usage::Fit::kFits};
        for (int p : on[gi]) {
          Refusal why;
          int who;
          if (budgets.Allow({p}, Reason::kRelief, &why, &who))
            cands.push_back(p);
          else
            last.pod = p, last.why = why;
        }
        if (cands.empty()) {
          plan.rejected.push_back(last);
          break;
        }
        std::stable_sort(cands.begin(), cands.end(), [&](int a, int b) {
          const PodState& pa = s.pods[static_cast<size_t>(a)];
          const PodState& pb = s.pods[static_cast<size_t>(b)];
          return std::make_tuple(budgets.MovesToday(a), -pa.since_minute) <
                 std::make_tuple(budgets.MovesToday(b), -pb.since_minute);
        });
        int pick = cands.front();
        for (int p : cands) {
          std::vector<int> rest;
          for (int j : on[gi])
            if (j != p) rest.push_back(j);
          if (Passes(s, rest, BudgetFor(s, g, o.pack))) {
            pick = p;
            break;
          }
        }
        usage::Fit fit;
        const int to = Destination(pick, g, on, /*allow_empty=*/true, &fit);
        if (to < 0) {
          plan.rejected.push_back({g, pick, Reason::kRelief, Refusal::kNoDestination, fit});
          break;
        }
        Apply(pick, g, to, Reason::kRelief);
      }
    }
  }

  void EmptyPass() {
    std::vector<int> sources;
    for (size_t g = 0; g < on.size(); ++g)
      if (!on[g].empty() && !received[g]) sources.push_back(static_cast<int>(g));
    // The least loaded first: fewest pods, then the least memory level, then index.
    std::stable_sort(sources.begin(), sources.end(), [&](int a, int b) {
      const auto& ca = on[static_cast<size_t>(a)];
      const auto& cb = on[static_cast<size_t>(b)];
      return std::make_tuple(ca.size(), Level(s, ca)) < std::make_tuple(cb.size(), Level(s, cb));
    });
    for (int src : sources) {
      const auto gi = static_cast<size_t>(src);
      if (received[gi] || on[gi].empty()) continue;
      Refusal why;
      int who;
      if (!budgets.Allow(on[gi], Reason::kEmptyGpu, &why, &who)) {
        plan.rejected.push_back({src, who, Reason::kEmptyGpu, why, usage::Fit::kFits});
        continue;
      }
      // Where each pod would go, the largest level first, on a copy of the GPUs.
      std::vector<int> pods = on[gi];
      std::stable_sort(pods.begin(), pods.end(),
                       [&](int a, int b) { return Level(s, {a}) > Level(s, {b}); });
      std::vector<std::vector<int>> cur = on;
      cur[gi].clear();
      frozen[gi] = 1;  // not a destination of its own pods
      std::vector<std::pair<int, int>> dest;
      bool ok = true;
      for (int p : pods) {
        usage::Fit fit;
        const int to = Destination(p, src, cur, /*allow_empty=*/false, &fit);
        if (to < 0) {
          plan.rejected.push_back({src, p, Reason::kEmptyGpu, Refusal::kNoDestination, fit});
          ok = false;
          break;
        }
        cur[static_cast<size_t>(to)].push_back(p);
        dest.push_back({p, to});
      }
      if (!ok) {
        frozen[gi] = 0;
        continue;
      }
      for (const auto& [p, to] : dest) Apply(p, src, to, Reason::kEmptyGpu);
      plan.freed_gpus.push_back(src);
    }
  }
};

}  // namespace

bool Passes(const ClusterState& state, const std::vector<int>& on,
            const usage::PackBudget& budget) {
  if (on.size() < 2) return true;
  return FitOn(state, on, on.back(), budget) == usage::Fit::kFits;
}

Plan PlanMoves(const ClusterState& state, const Options& options) {
  Planner p(state, options);
  if (options.relief) p.ReliefPass();
  if (options.empty) p.EmptyPass();
  p.plan.saving_gpus = static_cast<int64_t>(p.plan.freed_gpus.size()) -
                       static_cast<int64_t>(p.plan.opened_gpus.size());
  return std::move(p.plan);
}

std::string FormatPlan(const ClusterState& state, const Plan& plan) {
  std::string out;
  char buf[512];
  auto gpu = [&](int g) { return state.gpus[static_cast<size_t>(g)].id.c_str(); };
  auto pod = [&](int i) { return state.pods[static_cast<size_t>(i)].name.c_str(); };
  for (const Move& m : plan.moves) {
    std::snprintf(buf, sizeof buf, "move %s %s -> %s (%s)\n", pod(m.pod), gpu(m.from), gpu(m.to),
                  ReasonName(m.reason));
    out += buf;
  }
  for (const Rejected& r : plan.rejected) {
    // kNoDestination: why the fullest GPU open to the pod refused it ("none open": no GPU was).
    const bool nowhere = r.why == Refusal::kNoDestination;
    std::snprintf(buf, sizeof buf, "keep %s (%s): %s %s%s%s\n", gpu(r.gpu), ReasonName(r.plan),
                  pod(r.pod), RefusalName(r.why), nowhere ? ": " : "",
                  !nowhere                     ? ""
                  : r.fit == usage::Fit::kFits ? "none open"
                                               : usage::FitName(r.fit));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "saving %lld GPU(s): %zu freed, %zu opened\n",
                static_cast<long long>(plan.saving_gpus), plan.freed_gpus.size(),
                plan.opened_gpus.size());
  out += buf;
  return out;
}

}  // namespace hami::consolidate
