// Production = sim for DRA pods: the extender's placement (scheduler/dra_placement.h: slices and
// claims as the API server serves them, the allocator's first fit, the shared scorer) chooses the
// node and devices `hami sim --policy dra-hami` chooses, pod after pod, on a small trace.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/rng.h"
#include "scheduler/dra_placement.h"
#include "sim/dra_hami.h"
#include "sim/dra_stock.h"
#include "sim/experiment.h"

namespace hami::sim {
namespace {

using nlohmann::json;
namespace sd = scheduler::dra;

constexpr char kDriver[] = "hami-core-gpu.project-hami.io";

// The node's slice as the hami-cpp plugin publishes it, sized as the simulator's GPUs.
json SliceOf(const core::NodeInfo& n) {
  json devices = json::array();
  for (const auto& d : n.devices)
    devices.push_back({{"name", "gpu-" + std::to_string(d.index)},
                       {"allowMultipleAllocations", true},
                       {"attributes",
                        {{"type", {{"string", "hami-gpu"}}},
                         {"uuid", {{"string", d.uuid}}},
                         {"productName", {{"string", d.type}}},
                         {"index", {{"int", d.index}}}}},
                       {"capacity",
                        {{"memory",
                          {{"value", std::to_string(d.devmem_mib) + "Mi"},
                           {"requestPolicy",
                            {{"default", std::to_string(d.devmem_mib) + "Mi"},
                             {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
                         {"cores",
                          {{"value", "100"},
                           {"requestPolicy",
                            {{"default", "100"},
                             {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}}}}}}}});
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", n.name + "-" + kDriver}}},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", n.name},
            {"pool", {{"name", n.name}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

json ClassJson() {
  return {{"metadata", {{"name", kDriver}}},
          {"spec",
           {{"selectors",
             {{{"cel", {{"expression", std::string("device.driver == \"") + kDriver + "\""}}}}}}}}};
}

// The task's claim as the webhook conversion writes it (memory 16 MiB per milli, cores milli/10,
// gpu_spec as a productName selector).
json ClaimOf(const TraceTask& t, const std::string& name) {
  json exactly = {{"deviceClassName", kDriver},
                  {"count", t.num_gpu},
                  {"capacity",
                   {{"requests",
                     {{"memory", std::to_string(int64_t{t.gpu_milli} * kMibPerMilli) + "Mi"},
                      {"cores", std::to_string(t.gpu_milli / 10)}}}}}};
  if (!t.gpu_spec.empty())
    exactly["selectors"] = {
        {{"cel",
          {{"expression", std::string("device.attributes[\"") + kDriver + "\"].productName == \"" +
                              t.gpu_spec[0] + "\""}}}}};
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
          {"spec", {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", exactly}}}}}}}}};
}

json AllocationJson(const std::vector<sd::Result>& results, const std::string& node) {
  json rs = json::array();
  for (const auto& r : results) {
    json e = {{"request", r.request}, {"driver", r.driver}, {"pool", r.pool}, {"device", r.device}};
    if (r.share_id) {
      e["shareID"] = *r.share_id;
      for (const auto& [k, v] : r.consumed) e["consumedCapacity"][k] = std::to_string(v);
    }
    rs.push_back(e);
  }
  return {{"devices", {{"results", rs}}},
          {"nodeSelector",
           {{"nodeSelectorTerms",
             {{{"matchFields",
                {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}}}};
}

struct Trace {
  std::string name;
  std::vector<TraceNode> nodes;
  int tasks = 0;
  uint64_t seed = 0;
};

// A task of a random shape: mostly shares of one GPU, some whole GPUs and pairs, some typed.
TraceTask RandomTask(Rng& rng, int i, const std::vector<std::string>& models) {
  static const int kMilli[] = {100, 200, 250, 300, 500, 700, 1000};
  TraceTask t;
  t.name = "t" + std::to_string(i);
  t.cpu_milli = 1000 * static_cast<int64_t>(1 + rng.Uniform(8));
  t.memory_mib = 4096 * static_cast<int64_t>(1 + rng.Uniform(4));
  t.gpu_milli = kMilli[rng.Uniform(7)];
  t.num_gpu = t.gpu_milli == 1000 && rng.Uniform(3) == 0 ? 2 : 1;
  if (rng.Uniform(5) == 0) t.gpu_spec = {models[rng.Uniform(models.size())]};
  return t;
}

TEST(DraProductionTest, ChoosesTheSimsNodeAndDevicesPodAfterPod) {
  const std::vector<Trace> traces = {
      {"four equal nodes",
       {{"a", 32000, 131072, 4, "A100"},
        {"b", 32000, 131072, 4, "A100"},
        {"c", 32000, 131072, 4, "A100"},
        {"d", 32000, 131072, 4, "A100"}},
       40,
       7},
      {"mixed sizes, two models, tight CPU",
       {{"a", 16000, 65536, 2, "A100"},
        {"b", 64000, 262144, 8, "A100"},
        {"c", 8000, 65536, 4, "A10"},
        {"d", 32000, 131072, 1, "A10"},
        {"e", 48000, 131072, 4, "A100"}},
       60,
       11},
  };
  for (const Trace& tr : traces) {
    SCOPED_TRACE(tr.name);
    std::vector<core::NodeInfo> infos;
    for (const auto& n : tr.nodes) infos.push_back(ToNodeInfo(n, n.name));
    auto sim = DraHamiPlacer::Create(infos, 1);
    ASSERT_TRUE(sim.ok()) << sim.status();
    auto prod = sd::DraPlacer::Create();
    ASSERT_TRUE(prod.ok()) << prod.status();
    std::vector<json> slices, claims;
    for (const auto& n : infos) slices.push_back(SliceOf(n));
    std::map<std::string, sd::NodeResources> resources;
    for (const auto& n : infos) resources[n.name] = {n.cpu_milli, n.memory_mib, 0, 0};
    Rng tasks_rng(tr.seed), rng(3);
    int placed = 0, nowhere = 0;
    for (int i = 0; i < tr.tasks; ++i) {
      const TraceTask t = RandomTask(tasks_rng, i, {"A100", "A10"});
      SCOPED_TRACE(t.name);
      core::PodRequest pod = ToPodRequest(t, "u" + std::to_string(i));
      auto want = (*sim)->Place(t, pod);
      ASSERT_TRUE(want.ok()) << want.status();

      // Production: what the informers hold, the pod's claim, every node a candidate.
      json claim = ClaimOf(t, "c" + std::to_string(i));
      auto view = sd::DraView::Build(kDriver, slices, {ClassJson()}, claims);
      ASSERT_TRUE(view.ok()) << view.status();
      auto requests = sd::RequestsFromClaim(claim);
      ASSERT_TRUE(requests.ok()) << requests.status();
      const core::PodRequest dra_pod = sd::DraPodRequest(pod, {*requests});
      std::vector<std::pair<std::string, sd::NodeResources>> nodes(resources.begin(),
                                                                   resources.end());
      auto verdicts = (*prod)->Evaluate(*view, dra_pod, {*requests}, nodes, rng);
      ASSERT_TRUE(verdicts.ok()) << verdicts.status();
      const std::map<std::string, int> scores = sd::RankScores(*verdicts);
      // kube-scheduler with the extender's weight: the highest extender score; the sim breaks the
      // remaining ties by name, as the first of the map.
      std::string got;
      for (const auto& [node, score] : scores)
        if (score == 10) {
          got = node;
          break;
        }
      ASSERT_EQ(got, want->node);
      if (got.empty()) {
        ++nowhere;
        continue;
      }
      ++placed;
      const sd::DraNodeVerdict* v = nullptr;
      for (const auto& x : *verdicts)
        if (x.node == got) v = &x;
      ASSERT_NE(v, nullptr);
      std::vector<int> devices;
      for (const auto& r : v->results) devices.push_back(view->PositionOf(got, r));
      EXPECT_EQ(devices, want->devices);
      // Commit as the cluster would: kube-scheduler writes the allocation, the pod's CPU and
      // memory are requested on the node, the learning policies observe the pod.
      claim["status"]["allocation"] = AllocationJson(v->results, got);
      claims.push_back(claim);
      resources[got].cpu_used += t.cpu_milli;
      resources[got].memory_used += t.memory_mib;
      (*prod)->Learn(dra_pod, v->delta);
    }
    EXPECT_GT(placed, tr.tasks / 3);  // the traces fill their clusters
    EXPECT_GT(nowhere, 0);
  }
}

// At a thousand nodes of 8 GPUs with 4,000 allocated claims (one half-used GPU per node and a
// quarter-used one on every tenth): the view is rebuilt from JSON as the extender does after a
// change, every node is evaluated, and the best is a node whose GPU is already used (binpack).
// Prints the cost of both (docs/dra-placement.md).
TEST(DraProductionTest, AThousandNodes) {
  std::vector<json> slices, claims;
  Rng rng(9);
  for (int n = 0; n < 1000; ++n) {
    TraceNode tn{"n" + std::to_string(n), 64000, 262144, 8, "A100"};
    const core::NodeInfo info = ToNodeInfo(tn, tn.name);
    slices.push_back(SliceOf(info));
    std::vector<json> none;
    for (int k = 0; k < (n % 10 == 0 ? 5 : 4); ++k) {
      TraceTask t{"x", 1000, 1000, 1, k == 4 ? 250 : 500, {}};
      json c = ClaimOf(t, "c" + std::to_string(n) + "-" + std::to_string(k));
      auto alloc = sd::AllocateClaimJson({slices.back()}, {ClassJson()}, none, c, tn.name, rng);
      ASSERT_TRUE(alloc.ok()) << alloc.status();
      // gpu-0 and gpu-1 full of halves (two each), gpu-2 a quarter on every tenth node.
      c["status"]["allocation"] = *alloc;
      none.push_back(c);
      claims.push_back(c);
    }
  }
  auto prod = sd::DraPlacer::Create();
  ASSERT_TRUE(prod.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto view = sd::DraView::Build(kDriver, slices, {ClassJson()}, claims);
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(view.ok()) << view.status();
  const TraceTask t{"p", 1000, 1000, 1, 250, {}};
  json claim = ClaimOf(t, "p");
  auto requests = sd::RequestsFromClaim(claim);
  ASSERT_TRUE(requests.ok());
  for (const json& c : claims) {  // the shapes the cluster has seen
    core::PodRequest seen = ToPodRequest({"s", 0, 0, 1, 500, {}}, c["metadata"]["uid"]);
    (*prod)->Learn(sd::DraPodRequest(seen, {*sd::RequestsFromClaim(c)}), {});
  }
  std::vector<std::pair<std::string, sd::NodeResources>> nodes;
  for (int n = 0; n < 1000; ++n) nodes.push_back({"n" + std::to_string(n), {64000, 262144, 0, 0}});
  const core::PodRequest pod = sd::DraPodRequest(ToPodRequest(t, "p"), {*requests});
  const auto t2 = std::chrono::steady_clock::now();
  auto verdicts = (*prod)->Evaluate(*view, pod, {*requests}, nodes, rng);
  const auto t3 = std::chrono::steady_clock::now();
  ASSERT_TRUE(verdicts.ok()) << verdicts.status();
  const auto scores = sd::RankScores(*verdicts);
  ASSERT_EQ(scores.size(), 1000u);
  std::string best;
  for (const auto& [node, score] : scores)
    if (score == 10) best = best.empty() ? node : best;
  // A node of a quarter-used gpu-2 (every tenth): the quarter joins it there.
  ASSERT_FALSE(best.empty());
  EXPECT_EQ(std::stoi(best.substr(1)) % 10, 0) << best;
  const auto ms = [](auto a, auto b) {
    return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count() / 1000.0;
  };
  std::printf(
      "DRA view of 1000 nodes x 8 GPUs, %zu claims: build %.1f ms; one pod over 1000 nodes: "
      "%.1f ms (best %s)\n",
      claims.size(), ms(t0, t1), ms(t2, t3), best.c_str());
}

// RankScores: 10 for the best key, one less per lower distinct key, nothing for nodes that do not
// fit, 0 from ten keys down.
TEST(DraProductionTest, RankScores) {
  std::vector<sd::DraNodeVerdict> v;
  auto add = [&](const std::string& n, bool fits, int64_t key) {
    sd::DraNodeVerdict x;
    x.node = n, x.fits = fits, x.key = key;
    v.push_back(x);
  };
  add("a", true, 50), add("b", true, 90), add("c", false, 99), add("d", true, 90),
      add("e", true, -3);
  for (int i = 0; i < 12; ++i) add("z" + std::to_string(i), true, -100 - i);
  const auto s = sd::RankScores(v);
  EXPECT_EQ(s.at("b"), 10);
  EXPECT_EQ(s.at("d"), 10);
  EXPECT_EQ(s.at("a"), 9);
  EXPECT_EQ(s.at("e"), 8);
  EXPECT_EQ(s.count("c"), 0u);
  EXPECT_EQ(s.at("z0"), 7);
  EXPECT_EQ(s.at("z11"), 0);
}

}  // namespace
}  // namespace hami::sim
