#include "sim/dra_hami.h"

#include <algorithm>

#include "core/annotations.h"
#include "scheduler/dra_placement.h"
#include "scheduler/registry.h"
#include "scheduler/scheduler.h"
#include "sim/dra_stock.h"

namespace hami::sim {
StatusOr<std::unique_ptr<DraHamiPlacer>> DraHamiPlacer::Create(std::vector<core::NodeInfo> nodes,
                                                               uint64_t seed, bool kube_view) {
  // The profile production's DRA placement scores with (scheduler/dra_placement.h).
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::Profile> profile, dra::MakeDraProfile());
  profile->name = std::string(kDraHamiPolicy);
  HAMI_ASSIGN_OR_RETURN(dra::Allocator allocator, SimDraAllocator(nodes));
  std::unique_ptr<DraHamiPlacer> p(
      new DraHamiPlacer(std::move(profile), std::move(allocator), seed, kube_view));
  for (auto& n : nodes) p->cache_.UpsertNode(std::move(n));
  return p;
}

bool DraHamiPlacer::Choose(const TraceTask& task, const scheduler::CycleState& cycle,
                           scheduler::Placement* best, DraHamiDecision* out) {
  const scheduler::Profile& profile = *profile_;
  scheduler::EvalScratch scratch;
  scheduler::Placement placement;
  bool have_best = false;
  int64_t best_key = 0, best_kube = 0, ties = 0;
  // Whether `node` fits; if so it replaces the best when its key is higher (then, with kube_view_,
  // its kube-scheduler score; then a draw among the ties). Name order keeps the first of equals.
  auto consider = [&](const scheduler::NodeState& node) {
    if (!scheduler::EvaluateNode(profile, cycle, node, scratch, &placement, nullptr)) return false;
    const int64_t key = profile.scorer->Score(cycle, node, placement);
    const int64_t kube =
        kube_view_
            ? KubeNodeScore(node.info, node.info.cpu_milli - node.cpu_free(),
                            node.info.memory_mib - node.mem_free(), task.cpu_milli, task.memory_mib)
            : 0;
    bool take = !have_best || key > best_key || (key == best_key && kube > best_kube);
    if (!take && kube_view_ && key == best_key && kube == best_kube)
      take = rng_.Uniform(static_cast<uint64_t>(++ties)) == 0;  // reservoir, as selectHost
    else if (take)
      ties = 1;
    if (take) {
      have_best = true;
      best_key = key, best_kube = kube;
      *best = placement;
      out->node = node.info.name;
      out->allocation = scheduler::AllocationOf(node, placement);
    }
    return true;
  };
  if (!kube_view_) {
    cache_.ForEachNode(nullptr, consider, [](const std::string&) {});
    return have_best;
  }
  cache_.Read([&](const scheduler::ClusterCache::View& view) {
    const size_t n = view.size();
    const int64_t to_find = FeasibleNodesToFind(static_cast<int64_t>(n));
    int64_t feasible = 0;
    size_t processed = 0;
    for (; processed < n && feasible < to_find; ++processed)
      view.WithNode((next_start_ + processed) % n, [&](const scheduler::NodeState& node) {
        if (consider(node)) ++feasible;
      });
    if (n > 0) next_start_ = (next_start_ + processed) % n;
  });
  return have_best;
}

StatusOr<DraHamiDecision> DraHamiPlacer::Place(const TraceTask& task, const core::PodRequest& pod) {
  const scheduler::Profile& profile = *profile_;
  scheduler::CycleState cycle(pod, &rng_);
  cycle.set_gpu_capacity(cache_.gpu_capacity());
  HAMI_RETURN_IF_ERROR(profile.picker->PreFilter(cycle));
  HAMI_RETURN_IF_ERROR(profile.scorer->PreFilter(cycle));
  scheduler::Placement best_placement;
  DraHamiDecision out;
  if (!Choose(task, cycle, &best_placement, &out)) return out;
  for (const auto& c : best_placement.containers)
    for (const auto& d : c) out.devices.push_back(d.device);
  // The stock allocator on the chosen node must take the same devices.
  const std::vector<dra::DeviceRequest> claim = SimDraClaim(task);
  if (!claim.empty()) {
    auto stock = allocator_.Allocate(claim, out.node, claims_, rng_);
    if (!stock.ok())
      return Internal("dra-hami: ", pod.uid, " fits ", out.node,
                      " but not for the stock allocator: ", stock.status().message());
    std::vector<int> want;
    for (const auto& res : *stock) want.push_back(std::stoi(res.device.substr(4)));  // gpu-<i>
    if (want != out.devices)
      return Internal("dra-hami: ", pod.uid, " on ", out.node,
                      ": first fit differs from the stock allocator's devices");
    claims_.Add(*stock);
  }
  HAMI_RETURN_IF_ERROR(cache_.Reserve(pod.uid, out.node, best_placement.delta));
  for (const auto& plugin : profile.reserve) plugin->Reserve(pod, best_placement.delta);
  return out;
}

StatusOr<RunResult> RunDraHami(const std::vector<TraceNode>& nodes,
                               const std::vector<TraceTask>& tasks, const RunConfig& config) {
  HAMI_ASSIGN_OR_RETURN(RunPlan plan, PlanDraRun(nodes, tasks, config));
  HAMI_ASSIGN_OR_RETURN(
      auto placer,
      DraHamiPlacer::Create(plan.nodes, config.seed, config.policy == kDraHamiExtenderPolicy));
  auto place = [&](size_t event, int task) -> StatusOr<TaskPlacement> {
    core::PodRequest& pod = plan.pods[task];
    pod.uid = "t" + std::to_string(event);
    HAMI_ASSIGN_OR_RETURN(DraHamiDecision d, placer->Place(tasks[task], pod));
    return TaskPlacement{task, std::move(d.node), std::move(d.allocation)};
  };
  return ReplayDraPlan(plan, tasks, config, place);
}

}  // namespace hami::sim
