// One full workload-inflation run (inflation 1.3, seed 42) of the bundled default openb trace per
// policy.
#include <cstdio>
#include <string>

#include "benchmark/benchmark.h"
#include "scheduler/registry.h"
#include "sim/experiment.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace hami::sim {
namespace {

struct Trace {
  std::vector<TraceNode> nodes;
  std::vector<TraceTask> tasks;
  bool ok = false;
};

const Trace& Bundled() {
  static const Trace t = [] {
    Trace t;
    auto n = FindBundledTrace("openb_node_list_gpu_node.csv");
    auto p = FindBundledTrace("openb_pod_list_default.csv");
    if (!n.ok() || !p.ok()) return t;
    auto nodes = ReadNodesCsv(*n);
    auto tasks = ReadPodsCsv(*p);
    if (!nodes.ok() || !tasks.ok()) return t;
    t.nodes = std::move(*nodes);
    t.tasks = std::move(*tasks);
    t.ok = true;
    return t;
  }();
  return t;
}

void BM_FullRun(benchmark::State& state, std::string policy) {
  const Trace& t = Bundled();
  if (!t.ok) {
    state.SkipWithError("bundled trace not found (set HAMI_DATA_DIR)");
    return;
  }
  double a100 = 0;
  int64_t pods = 0;
  for (auto _ : state) {
    auto r = RunInflation(t.nodes, t.tasks, {policy, 42, 1.3});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    a100 = r->curve[100];
    pods = r->tasks_arrived;
  }
  state.counters["A100"] = a100;
  state.counters["pods"] = static_cast<double>(pods);
}

const int kRegistered = [] {
  for (const auto& row : scheduler::Policies())
    benchmark::RegisterBenchmark(("BM_FullRun/" + std::string(row.name)).c_str(), BM_FullRun,
                                 std::string(row.name))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  return 0;
}();

}  // namespace
}  // namespace hami::sim

BENCHMARK_MAIN();
