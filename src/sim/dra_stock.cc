#include "sim/dra_stock.h"

#include <algorithm>
#include <chrono>

#include "core/annotations.h"
#include "scheduler/dra_allocator.h"

namespace hami::sim {
namespace {

constexpr const char* kDriver = kSimDraDriver;
constexpr int64_t kMiB = int64_t{1} << 20;
// What kube-scheduler scores a pod that requests no CPU / memory with (non-zero defaults).
constexpr int64_t kDefaultCpuMilli = 100;
constexpr int64_t kDefaultMemoryMib = 200;

dra::Device SimGpu(int index, const std::string& model) {
  dra::Device d;
  d.name = "gpu-" + std::to_string(index);
  d.allow_multiple_allocations = true;
  d.attributes["type"] = std::string("hami-gpu");
  d.attributes["productName"] = model;
  d.attributes["index"] = int64_t{index};
  dra::RequestPolicy mem;
  mem.default_value = kSimGpuMemMib * kMiB;
  mem.valid_range = dra::RequestPolicy::Range{kMiB, std::nullopt, kMiB};
  d.capacity["memory"] = {kSimGpuMemMib * kMiB, mem};
  dra::RequestPolicy cores;
  cores.default_value = 100;
  cores.valid_range = dra::RequestPolicy::Range{0, 100, 1};
  d.capacity["cores"] = {100, cores};
  return d;
}

struct NodeUse {
  int64_t cpu_milli = 0, memory_mib = 0;  // scheduled requests
};

}  // namespace

int64_t KubeNodeScore(const core::NodeInfo& n, int64_t used_cpu, int64_t used_mem, int64_t cpu,
                      int64_t mem) {
  if (n.cpu_milli <= 0 || n.memory_mib <= 0) return 0;
  const int64_t c = used_cpu + (cpu > 0 ? cpu : kDefaultCpuMilli);
  const int64_t m = used_mem + (mem > 0 ? mem : kDefaultMemoryMib);
  auto least = [](int64_t req, int64_t cap) { return req > cap ? 0 : (cap - req) * 100 / cap; };
  const int64_t fit = (least(c, n.cpu_milli) + least(m, n.memory_mib)) / 2;
  const double fc = std::min(1.0, static_cast<double>(c) / static_cast<double>(n.cpu_milli));
  const double fm = std::min(1.0, static_cast<double>(m) / static_cast<double>(n.memory_mib));
  const int64_t balanced = static_cast<int64_t>((1.0 - std::abs(fc - fm) / 2) * 100);
  return fit + balanced;
}

StatusOr<dra::Allocator> SimDraAllocator(const std::vector<core::NodeInfo>& nodes) {
  std::vector<dra::Pool> pools;
  for (const auto& n : nodes) {
    dra::Pool p;
    p.driver = kDriver;
    p.name = p.node_name = n.name;
    for (const auto& d : n.devices) p.devices.push_back(SimGpu(d.index, d.type));
    pools.push_back(std::move(p));
  }
  std::map<std::string, dra::DeviceClass> classes;
  HAMI_ASSIGN_OR_RETURN(dra::Selector ours,
                        dra::ParseSelector(StrCat("device.driver == \"", kDriver, "\"")));
  classes[kDriver].selectors.push_back(ours);
  return dra::Allocator(std::move(pools), std::move(classes));
}

std::vector<dra::DeviceRequest> SimDraClaim(const TraceTask& t) {
  std::vector<dra::DeviceRequest> claim;
  if (t.num_gpu <= 0) return claim;
  dra::DeviceRequest req;
  req.name = "gpu";
  req.device_class = kDriver;
  req.count = t.num_gpu;
  req.capacity["memory"] = int64_t{t.gpu_milli} * kMibPerMilli * kMiB;
  req.capacity["cores"] = t.gpu_milli / 10;
  if (!t.gpu_spec.empty()) {
    const std::vector<std::string> models = t.gpu_spec;
    req.selectors.push_back([models](const std::string&, const dra::Device& d) {
      auto it = d.attributes.find("productName");
      return it != d.attributes.end() &&
             std::find(models.begin(), models.end(), std::get<std::string>(it->second)) !=
                 models.end();
    });
  }
  claim.push_back(std::move(req));
  return claim;
}

int64_t FeasibleNodesToFind(int64_t nodes) {
  constexpr int64_t kMinFeasible = 100, kMinPercent = 5;
  if (nodes < kMinFeasible) return nodes;
  const int64_t percent = std::max(kMinPercent, 50 - nodes / 125);
  return std::max(kMinFeasible, nodes * percent / 100);
}

StatusOr<RunPlan> PlanDraRun(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& tasks, const RunConfig& config) {
  for (const auto& n : nodes)
    if (!n.vendor.empty() || n.mig_gpus > 0 || n.mps)
      return InvalidArgument("--policy ", config.policy, " models whole NVIDIA GPUs only; node ",
                             n.name, " has vendor/MIG/MPS GPUs");
  Rng rng(config.seed);
  return PlanRun(nodes, tasks, config, rng);
}

StatusOr<RunResult> ReplayDraPlan(const RunPlan& plan, const std::vector<TraceTask>& tasks,
                                  const RunConfig& config, const DraPlace& place) {
  const auto start = std::chrono::steady_clock::now();
  RunResult r;
  r.policy = config.policy;
  r.seed = config.seed;
  AllocationCurve curve(plan.capacity_milli);
  int64_t arrived = 0, used = 0;
  for (size_t i = 0; i < plan.order.size(); ++i) {
    const TraceTask& t = tasks[plan.order[i]];
    ++r.tasks_arrived;
    arrived += t.total_gpu_milli();
    HAMI_ASSIGN_OR_RETURN(TaskPlacement p, place(i, plan.order[i]));
    RunResult::VendorCount* vc = t.num_gpu > 0 ? &r.by_vendor[core::kNvidiaVendor] : nullptr;
    if (vc) ++vc->arrived;
    if (!p.node.empty()) {
      if (vc) ++vc->scheduled;
      ++r.tasks_scheduled;
      used += t.total_gpu_milli();
    } else {
      ++r.tasks_failed;
    }
    if (config.record_placements) r.placements.push_back(std::move(p));
    curve.Record(arrived, used);
  }
  r.curve = curve.Points();
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

StatusOr<RunResult> RunDraStock(const std::vector<TraceNode>& nodes,
                                const std::vector<TraceTask>& tasks, const RunConfig& config) {
  HAMI_ASSIGN_OR_RETURN(const RunPlan plan, PlanDraRun(nodes, tasks, config));
  HAMI_ASSIGN_OR_RETURN(const dra::Allocator allocator, SimDraAllocator(plan.nodes));
  dra::AllocatedState state;
  std::vector<NodeUse> use(plan.nodes.size());
  Rng sched_rng(config.seed);  // tie-breaks and shareIDs, as kube-scheduler's own randomness
  const int64_t to_find = FeasibleNodesToFind(static_cast<int64_t>(plan.nodes.size()));
  size_t next_start = 0;
  auto place = [&](size_t, int task) -> StatusOr<TaskPlacement> {
    const TraceTask& t = tasks[task];
    const std::vector<dra::DeviceRequest> claim = SimDraClaim(t);
    // Filter from the rotating start until enough feasible nodes are found; score those.
    size_t best = plan.nodes.size(), processed = 0;
    int64_t best_score = -1, feasible = 0, ties = 0;
    std::vector<dra::Result> best_alloc;
    for (; processed < plan.nodes.size() && feasible < to_find; ++processed) {
      const size_t k = (next_start + processed) % plan.nodes.size();
      const core::NodeInfo& n = plan.nodes[k];
      if (use[k].cpu_milli + t.cpu_milli > n.cpu_milli ||
          use[k].memory_mib + t.memory_mib > n.memory_mib)
        continue;
      std::vector<dra::Result> alloc;
      if (!claim.empty()) {
        auto a = allocator.Allocate(claim, n.name, state, sched_rng);
        if (!a.ok()) continue;
        alloc = std::move(*a);
      }
      ++feasible;
      const int64_t score =
          KubeNodeScore(n, use[k].cpu_milli, use[k].memory_mib, t.cpu_milli, t.memory_mib);
      if (score > best_score) {
        best_score = score, best = k, ties = 1, best_alloc = std::move(alloc);
      } else if (score == best_score && sched_rng.Uniform(static_cast<uint64_t>(++ties)) == 0) {
        best = k, best_alloc = std::move(alloc);  // reservoir sampling, as selectHost
      }
    }
    next_start = (next_start + processed) % plan.nodes.size();
    if (best >= plan.nodes.size()) return TaskPlacement{task, "", {}};
    use[best].cpu_milli += t.cpu_milli;
    use[best].memory_mib += t.memory_mib;
    state.Add(best_alloc);
    return TaskPlacement{task, plan.nodes[best].name, {}};
  };
  return ReplayDraPlan(plan, tasks, config, place);
}

}  // namespace hami::sim
