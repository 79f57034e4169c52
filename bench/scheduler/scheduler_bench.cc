// Filter+score decision latency of the scheduler versus cluster size: N nodes of 8 GPUs, about half
// of the GPU capacity in use, one Schedule() call over all nodes (no candidate list) per iteration.
// Reports p50/p99 of the per-decision wall time and the mean per-decision CPU time of the calling
// thread as counters (microseconds).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/rng.h"
#include "scheduler/scheduler.h"

namespace hami::scheduler {
namespace {

core::NodeInfo MakeNode(int i) {
  core::NodeInfo n;
  n.name = "node-" + std::to_string(100000 + i);
  n.cpu_milli = 96000;
  n.memory_mib = 393216;
  for (int d = 0; d < 8; ++d) {
    core::DeviceInfo dev;
    dev.index = d;
    dev.uuid = n.name + "-gpu" + std::to_string(d);
    dev.count = 10;
    dev.devmem_mib = 32000;
    dev.devcore = 100;
    dev.type = "NVIDIA-Tesla V100-SXM2-32GB";
    n.devices.push_back(std::move(dev));
  }
  return n;
}

core::PodRequest SharePod(const std::string& uid, int64_t mem, int cores) {
  core::PodRequest p;
  p.uid = uid;
  core::ContainerRequest c;
  c.cpu_milli = 4000;
  c.memory_mib = 8192;
  core::DeviceRequest r;
  r.nums = 1;
  r.memreq_mib = mem;
  r.coresreq = cores;
  c.devices.push_back(r);
  p.containers.push_back(std::move(c));
  return p;
}

// A cluster with ~50% of GPU memory and cores in use (each GPU 0..100% used, uniformly).
std::unique_ptr<Scheduler> HalfFull(const std::string& policy, int nodes) {
  SchedulerOptions o;
  o.policy = policy;
  auto s = std::move(*Scheduler::Create(o));
  Rng rng(7);
  int uid = 0;
  for (int i = 0; i < nodes; ++i) {
    core::NodeInfo n = MakeNode(i);
    s->UpsertNode(n);
    for (const auto& dev : n.devices) {
      const int pct = static_cast<int>(rng.Uniform(101));
      if (pct == 0) continue;
      core::PodAllocation a;
      a.node = n.name;
      a.containers.push_back(
          {core::ContainerDevice{dev.uuid, "NVIDIA", dev.devmem_mib * pct / 100, pct, dev.index}});
      (void)s->AddPod("seed-" + std::to_string(uid++), a);
    }
  }
  return s;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void Report(benchmark::State& state, std::vector<double>& us, double cpu_sec = -1) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return;
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  if (cpu_sec >= 0) state.counters["cpu_us"] = cpu_sec * 1e6 / static_cast<double>(us.size());
  state.counters["nodes"] = static_cast<double>(state.range(0));
}

// full_scan: score every feasible node (ScheduleOptions::full_scan), the cost without the bounded
// scan. candidates: pass every node's name as the extender does with nodeCacheCapable
// (kube-scheduler's NodeNames), in kube-scheduler's order: rotated by a different start node on
// every decision. quota: the pod's namespace has a memory quota that leaves it 20000 MiB (every
// card is checked against it; each decision of the benchmark is within it).
template <const char* kPolicy, bool kFullScan = false, bool kCandidates = false,
          bool kQuota = false>
void BM_FilterScore(benchmark::State& state) {
  ScheduleOptions opts;
  opts.full_scan = kFullScan;
  const QuotaRoom room{{{"NVIDIA", 20000, QuotaRoom::kUnlimited}}};
  if (kQuota) opts.quota = &room;
  const int nodes = static_cast<int>(state.range(0));
  auto s = HalfFull(kPolicy, nodes);
  Rng rng(11);
  // Steady state: the fragmentation-aware policies learn the 40 pod shapes of this benchmark from
  // the first decisions (cold-start numbers are in docs/benchmarks.md); other policies are
  // unaffected.
  for (int i = 0; i < 300; ++i) {
    const int pct = 5 + static_cast<int>(rng.Uniform(40));
    benchmark::DoNotOptimize(s->Schedule(SharePod("w", 32000 * pct / 100, pct), nullptr));
  }
  std::vector<double> us;
  std::vector<std::string> names;
  if (kCandidates)
    for (int i = 0; i < nodes; ++i) names.push_back(MakeNode(i).name);
  double cpu = 0, feasible = 0;
  for (auto _ : state) {
    const int pct = 5 + static_cast<int>(rng.Uniform(40));
    auto pod = SharePod("p", 32000 * pct / 100, pct);
    if (kCandidates)
      std::rotate(names.begin(), names.begin() + static_cast<long>(rng.Uniform(names.size())),
                  names.end());
    const double c0 = ThreadCpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    auto d = s->Schedule(pod, kCandidates ? &names : nullptr, opts);
    auto t1 = std::chrono::steady_clock::now();
    cpu += ThreadCpuSeconds() - c0;
    if (d.ok()) feasible += d->feasible_nodes;
    benchmark::DoNotOptimize(d);
    const double sec = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(sec);
    us.push_back(sec * 1e6);
  }
  Report(state, us, cpu);
  // Feasible nodes per decision: all of them for a full scan; with a bounded scorer only those the
  // best-bound-first scan examined before it could stop.
  if (!us.empty()) state.counters["feasible"] = feasible / static_cast<double>(us.size());
}

constexpr char kHami[] = "hami";
constexpr char kBestFit[] = "best-fit";
BENCHMARK_TEMPLATE(BM_FilterScore, kHami)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kBestFit)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// The fragmentation-aware policies (their task-shape model learns the benchmark's 40 pod shapes as
// it goes).
constexpr char kFgd[] = "fgd";
constexpr char kDefault[] = "default";
BENCHMARK_TEMPLATE(BM_FilterScore, kFgd)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kDefault)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// The same decisions scoring every feasible node (what every decision cost before the bounded
// scan).
BENCHMARK_TEMPLATE(BM_FilterScore, kHami, false, true)
    ->Arg(1000)
    ->Arg(5000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kDefault, false, true)
    ->Arg(1000)
    ->Arg(5000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// A namespace with a quota: every card checked against what it leaves.
BENCHMARK_TEMPLATE(BM_FilterScore, kHami, false, false, true)
    ->Arg(5000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kHami, true, false, true)
    ->Arg(5000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kHami, true)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kBestFit, true)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kFgd, true)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_FilterScore, kDefault, true)
    ->Arg(1000)
    ->Arg(5000)
    ->Arg(10000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Schedule + Reserve + Unreserve: the full per-pod cost the extender pays (cache update included).
void BM_ScheduleReserve(benchmark::State& state) {
  auto s = HalfFull("hami", static_cast<int>(state.range(0)));
  auto pod = SharePod("p", 3200, 10);
  std::vector<double> us;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto d = s->ScheduleAndReserve(pod, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    (void)s->Unreserve("p");
    const double sec = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(sec);
    us.push_back(sec * 1e6);
  }
  Report(state, us);
}
BENCHMARK(BM_ScheduleReserve)->Arg(5000)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hami::scheduler

BENCHMARK_MAIN();
