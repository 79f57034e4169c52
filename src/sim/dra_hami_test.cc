// The dra-hami sim policy (sim/dra_hami.h): default's node choice over stock DRA's first-fit
// devices.
#include "sim/dra_hami.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "sim/dra_stock.h"

namespace hami::sim {
namespace {

struct Step {
  TraceTask task;
  std::string node;          // dra-hami's node
  std::vector<int> devices;  // its devices: stock first fit there
  std::string kube;          // kube-scheduler's node (highest KubeNodeScore where the claim fits)
};

struct Case {
  std::string name;
  std::vector<TraceNode> nodes;
  std::vector<Step> steps;  // in arrival order, each committed before the next
};

TraceTask Task(const std::string& name, int num_gpu, int milli,
               std::vector<std::string> spec = {}) {
  return {name, 1000, 1000, num_gpu, milli, std::move(spec)};
}

TEST(DraHamiPolicyTest, DefaultChoosesTheNodeStockFirstFitTheDevice) {
  const std::vector<Case> cases = {
      {"a second half GPU joins the first one; kube-scheduler spreads it to the empty node",
       {{"a", 32000, 128000, 2, "A100"}, {"b", 32000, 128000, 2, "A100"}},
       {{Task("t1", 1, 500), "a", {0}, "a"}, {Task("t2", 1, 500), "a", {0}, "b"}}},
      {"first fit takes gpu-0 (0.5 free) where default's own picker would take gpu-1 (0.4 free)",
       {{"a", 32000, 128000, 2, "A100"}},
       {{Task("t1", 1, 500), "a", {0}, "a"},
        {Task("t2", 1, 600), "a", {1}, "a"},
        {Task("t3", 1, 400), "a", {0}, "a"}}},
      {"two GPUs of 0.6 skip the half-used gpu-0",
       {{"a", 32000, 128000, 4, "A100"}, {"b", 32000, 128000, 4, "A100"}},
       {{Task("t1", 1, 500), "a", {0}, "a"}, {Task("t2", 2, 600), "a", {1, 2}, "b"}}},
      {"gpu_spec A10 is an exact productName (use-gputype would also match A100)",
       {{"a", 32000, 128000, 1, "A100"}, {"b", 32000, 128000, 1, "A10"}},
       {{Task("t1", 1, 300, {"A10"}), "b", {0}, "b"}}},
      {"nothing fits: no node",
       {{"a", 32000, 128000, 1, "A100"}},
       {{Task("t1", 1, 800), "a", {0}, "a"}, {Task("t2", 1, 300), "", {}, ""}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<core::NodeInfo> infos;
    for (const auto& n : c.nodes) infos.push_back(ToNodeInfo(n, n.name));
    auto placer = DraHamiPlacer::Create(infos, 1);
    ASSERT_TRUE(placer.ok()) << placer.status();
    auto stock = SimDraAllocator(infos);
    ASSERT_TRUE(stock.ok()) << stock.status();
    dra::AllocatedState claims;
    Rng share_ids(1);
    std::map<std::string, std::pair<int64_t, int64_t>> used;  // node -> cpu, memory requested
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const Step& s = c.steps[i];
      SCOPED_TRACE(s.task.name);
      // kube-scheduler's choice on the same state: the highest score where the claim fits.
      std::string kube;
      int64_t best = -1;
      for (const auto& n : infos) {
        if (!stock->Allocate(SimDraClaim(s.task), n.name, claims, share_ids).ok()) continue;
        const int64_t score = KubeNodeScore(n, used[n.name].first, used[n.name].second,
                                            s.task.cpu_milli, s.task.memory_mib);
        if (score > best) best = score, kube = n.name;
      }
      EXPECT_EQ(kube, s.kube);
      auto d = (*placer)->Place(s.task, ToPodRequest(s.task, "p" + std::to_string(i)));
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->node, s.node);
      EXPECT_EQ(d->devices, s.devices);
      if (d->node.empty()) continue;
      auto taken = stock->Allocate(SimDraClaim(s.task), d->node, claims, share_ids);
      ASSERT_TRUE(taken.ok()) << taken.status();
      claims.Add(*taken);
      used[d->node].first += s.task.cpu_milli;
      used[d->node].second += s.task.memory_mib;
    }
  }
}

// What kube-scheduler shows an extender changes the choice: equal `default` scores go to
// kube-scheduler's best node (b has more free CPU) instead of the first in name order; and above
// 100 nodes only a sample is scored, so a second half GPU misses the half-used GPU outside it.
TEST(DraHamiPolicyTest, TheExtenderSeesWhatKubeSchedulerSamples) {
  struct Row {
    std::string name;
    std::vector<TraceNode> nodes;
    bool kube_view;
    std::vector<std::string> want;  // node per task t1 (0.5 GPU), t2 (0.5 GPU)
  };
  std::vector<TraceNode> many;
  for (int i = 0; i < 200; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "n%03d", i);
    many.push_back({name, 32000, 128000, 1, "A100"});
  }
  const std::vector<TraceNode> two = {{"a", 32000, 128000, 1, "A100"},
                                      {"b", 64000, 128000, 1, "A100"}};
  // 200 nodes: kube-scheduler takes the first 100 feasible (n000..n099) for t1, all equal but for
  // the draw; t2 starts at n100 and never sees t1's node.
  const std::vector<Row> rows = {
      {"two nodes, every node scored, name order", two, false, {"a", "a"}},
      {"two nodes, kube-scheduler's score breaks the tie", two, true, {"b", "b"}},
      {"200 nodes, every node scored", many, false, {"n000", "n000"}},
      {"200 nodes, sampled", many, true, {"<n100", ">=n100"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<core::NodeInfo> infos;
    for (const auto& n : row.nodes) infos.push_back(ToNodeInfo(n, n.name));
    auto placer = DraHamiPlacer::Create(infos, 7, row.kube_view);
    ASSERT_TRUE(placer.ok()) << placer.status();
    for (int i = 0; i < 2; ++i) {
      const TraceTask t = Task("t" + std::to_string(i + 1), 1, 500);
      auto d = (*placer)->Place(t, ToPodRequest(t, t.name));
      ASSERT_TRUE(d.ok()) << d.status();
      const std::string& want = row.want[static_cast<size_t>(i)];
      if (want[0] == '<')
        EXPECT_LT(d->node, want.substr(1));
      else if (want[0] == '>')
        EXPECT_GE(d->node, want.substr(2));
      else
        EXPECT_EQ(d->node, want);
      EXPECT_EQ(d->devices, std::vector<int>{0});
    }
  }
  EXPECT_TRUE(CheckPolicy("dra-hami-extender").ok());
}

TEST(DraHamiPolicyTest, RunsATrace) {
  std::vector<TraceNode> nodes = {{"n1", 32000, 128000, 2, "A100"},
                                  {"n2", 32000, 128000, 2, "A100"}};
  std::vector<TraceTask> tasks = {Task("t1", 1, 500), Task("t2", 1, 500), Task("t3", 2, 1000)};
  RunConfig cfg;
  cfg.policy = std::string(kDraHamiPolicy);
  cfg.inflation = 1.0;
  cfg.record_placements = true;
  auto r = RunInflation(nodes, tasks, cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->policy, "dra-hami");
  EXPECT_EQ(r->tasks_arrived, r->tasks_scheduled + r->tasks_failed);
  EXPECT_EQ(r->placements.size(), static_cast<size_t>(r->tasks_arrived));
  EXPECT_TRUE(CheckPolicy("dra-hami").ok());
  nodes[0].mps = true;  // outside the model, as for dra-stock
  EXPECT_FALSE(RunInflation(nodes, tasks, cfg).ok());
}

}  // namespace
}  // namespace hami::sim
