#include "sim/experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "common/rng.h"
#include "core/annotations.h"
#include "scheduler/registry.h"
#include "scheduler/scheduler.h"
#include "sim/dra_hami.h"
#include "sim/dra_stock.h"

namespace hami::sim {

core::NodeInfo ToNodeInfo(const TraceNode& node, const std::string& name) {
  core::NodeInfo n;
  n.name = name;
  n.cpu_milli = node.cpu_milli;
  n.memory_mib = node.memory_mib;
  for (int i = 0; i < node.gpus; ++i) {
    core::DeviceInfo d;
    d.index = i;
    d.uuid = name + "-gpu" + std::to_string(i);
    d.count = kSimSplitCount;
    d.devmem_mib = kSimGpuMemMib;
    d.devcore = 100;
    d.type = node.model;
    if (!node.vendor.empty()) d.vendor = node.vendor;
    if (node.mps) d.mode = core::kModeMps;
    if (i < node.mig_gpus) {
      const SimMigProfileSet* set = FindSimMigProfileSet(node.mig);
      if (set != nullptr) {  // ParseNodesCsv accepts known sets only
        d.mode = core::kModeMig;
        d.devmem_mib = set->memory_mib;
        d.mig_profiles = set->profiles;
      }
    }
    n.devices.push_back(std::move(d));
  }
  return n;
}

core::PodRequest ToPodRequest(const TraceTask& t, const std::string& uid) {
  core::PodRequest p;
  p.uid = uid;
  p.name = t.name;
  p.namespace_ = "sim";
  core::ContainerRequest c;
  c.name = "main";
  c.cpu_milli = t.cpu_milli;
  c.memory_mib = t.memory_mib;
  if (t.num_gpu > 0) {
    core::DeviceRequest r;
    r.nums = t.num_gpu;
    r.memreq_mib = int64_t{t.gpu_milli} * kMibPerMilli;
    r.coresreq = t.gpu_milli / 10;
    if (!t.vendor.empty()) {
      r.vendor = t.vendor;
      // A whole device asks the whole card (what `<vendor count>: n` alone means), so template and
      // whole-device vendors see the request their users would write. NVIDIA keeps the published
      // mapping.
      if (t.gpu_milli == 1000) r.memreq_mib = 0, r.mem_percentage = 100;
    }
    c.devices.push_back(r);
  }
  p.containers.push_back(std::move(c));
  p.selectors.use_types = t.gpu_spec;
  p.selectors.vgpu_mode = t.vgpu_mode;
  p.selectors.mig_profile_preference = t.mig_profile_preference;
  return p;
}

ClusterTotals Totals(const std::vector<TraceNode>& nodes) {
  ClusterTotals t;
  for (const auto& n : nodes) {
    ++t.nodes;
    t.gpus += n.gpus;
    t.milli_cpu += n.cpu_milli;
    t.memory_mib += n.memory_mib;
  }
  return t;
}

Status ResolveVendors(const vendors::VendorSet& set, std::vector<TraceNode>* nodes,
                      std::vector<TraceTask>* tasks) {
  auto resolve = [&](std::string* vendor, const std::string& row) -> Status {
    if (vendor->empty()) return OkStatus();
    const vendors::Vendor* v = set.Find(*vendor);
    if (v == nullptr) {
      std::string known;
      for (const auto& k : set.vendors())
        known += StrCat(known.empty() ? "" : ", ", k->common_word());
      return InvalidArgument(row, ": vendor '", *vendor, "' is not enabled (enabled: ", known, ")");
    }
    *vendor = v->common_word() == core::kNvidiaVendor ? std::string() : v->common_word();
    return OkStatus();
  };
  for (auto& n : *nodes) HAMI_RETURN_IF_ERROR(resolve(&n.vendor, StrCat("node ", n.name)));
  for (auto& t : *tasks) HAMI_RETURN_IF_ERROR(resolve(&t.vendor, StrCat("pod ", t.name)));
  return OkStatus();
}

bool HasOtherVendors(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& tasks) {
  return std::any_of(nodes.begin(), nodes.end(),
                     [](const TraceNode& n) { return !n.vendor.empty(); }) ||
         std::any_of(tasks.begin(), tasks.end(),
                     [](const TraceTask& t) { return !t.vendor.empty(); });
}

void AllocationCurve::Record(int64_t arrived, int64_t used) {
  const double arrive_pct =
      std::round(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity_));
  const double alloc_pct =
      std::round(10000.0 * static_cast<double>(used) / static_cast<double>(capacity_)) / 100.0;
  const int k = static_cast<int>(std::clamp(arrive_pct, 0.0, static_cast<double>(kBuckets - 1)));
  sum_[k] += alloc_pct;
  ++count_[k];
}

std::vector<double> AllocationCurve::Points() const {
  std::vector<double> out(kCurveMax + 1, 0.0);
  double prev = 0;
  for (int k = 0; k <= kCurveMax; ++k) {
    double s = 0;
    int64_t n = 0;
    if (count_[k] > 0) {
      s = sum_[k];
      n = count_[k];
    } else {
      for (int j = std::max(0, k - 1); j <= k + 1; ++j) s += sum_[j], n += count_[j];
    }
    out[k] = n > 0 ? s / static_cast<double>(n) : prev;
    prev = out[k];
  }
  return out;
}

std::vector<int> ArrivalOrder(const std::vector<TraceTask>& tasks, int64_t capacity,
                              double inflation, size_t nodes, Rng& rng,
                              std::vector<int>* node_rank) {
  (void)rng.Next();  // the original draws one number first (a debug print); kept for the same
                     // stream shape
  std::vector<int> order(tasks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return tasks[a].name < tasks[b].name; });
  rng.Shuffle(order);
  int64_t sum = 0;
  for (const auto& t : tasks) sum += t.total_gpu_milli();
  const double limit = inflation * static_cast<double>(capacity);
  while (true) {
    const int idx = static_cast<int>(rng.Uniform(tasks.size()));
    // The stopping rule checks the candidate's per-GPU milli but adds its total (as published).
    if (static_cast<double>(sum + tasks[idx].gpu_milli) > limit) break;
    order.push_back(idx);
    sum += tasks[idx].total_gpu_milli();
  }
  node_rank->resize(nodes);
  std::iota(node_rank->begin(), node_rank->end(), 0);
  rng.Shuffle(*node_rank);
  return order;
}

StatusOr<RunPlan> PlanRun(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& tasks,
                          const RunConfig& config, Rng& rng) {
  if (nodes.empty() || tasks.empty()) return InvalidArgument("the trace has no nodes or no pods");
  if (!(config.inflation > 0) || config.inflation > 100)
    return InvalidArgument("inflation ", config.inflation, " is out of range (0, 100]");
  // Vendor names are resolved (ResolveVendors) to Type keywords of the set.
  for (const auto& n : nodes)
    if (!n.vendor.empty() && config.vendors->ByCommonWord(n.vendor) == nullptr)
      return InvalidArgument("node ", n.name, ": vendor ", n.vendor, " is not in the vendor set");
  for (const auto& t : tasks)
    if (!t.vendor.empty() && config.vendors->ByCommonWord(t.vendor) == nullptr)
      return InvalidArgument("pod ", t.name, ": vendor ", t.vendor, " is not in the vendor set");
  RunPlan plan;
  plan.capacity_milli = Totals(nodes).gpus * 1000;
  if (plan.capacity_milli == 0) return InvalidArgument("the cluster has no GPUs");

  std::vector<int> rank;
  plan.order = ArrivalOrder(tasks, plan.capacity_milli, config.inflation, nodes.size(), rng, &rank);

  // Nodes sorted by name get a random "%04d-" prefix: the tie-break order of the scheduler.
  std::vector<int> by_name(nodes.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](int a, int b) { return nodes[a].name < nodes[b].name; });
  const int width = nodes.size() > 9999 ? static_cast<int>(std::to_string(nodes.size()).size()) : 4;
  for (size_t i = 0; i < by_name.size(); ++i) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%0*d-", width, rank[i]);
    plan.nodes.push_back(ToNodeInfo(nodes[by_name[i]], prefix + nodes[by_name[i]].name));
    // A node serving a pooled vendor (remote GPUs: docs/vendors.md#remote-gpu) registers as that
    // vendor's device plugin does (the vendor's EncodeNode, then DecodeNode as the informer reads
    // it): device ids name their server, so the scheduler charges a client's grant there.
    core::NodeInfo& info = plan.nodes.back();
    const vendors::Vendor* v = nodes[by_name[i]].vendor.empty()
                                   ? nullptr
                                   : config.vendors->ByCommonWord(nodes[by_name[i]].vendor);
    if (v != nullptr && v->pooled() && !info.devices.empty()) {
      vendors::NodeView view;
      view.name = info.name;
      HAMI_RETURN_IF_ERROR(v->EncodeNode(info.devices, &view));
      auto devices = v->DecodeNode(view);
      if (!devices.ok())
        return InvalidArgument("node ", nodes[by_name[i]].name, ": ", devices.status().message());
      info.devices = std::move(*devices);
    }
  }

  plan.pods.reserve(tasks.size());
  for (const auto& t : tasks) {
    plan.pods.push_back(ToPodRequest(t, ""));
    // Another vendor reads gpu_spec from its own use-type annotation (when it has one).
    const vendors::Vendor* v = t.vendor.empty() ? nullptr : config.vendors->ByCommonWord(t.vendor);
    if (v != nullptr && !t.gpu_spec.empty() && !v->keys().use_type.empty()) {
      std::string list;
      for (const auto& m : t.gpu_spec) list += StrCat(list.empty() ? "" : ",", m);
      plan.pods.back().annotations[v->keys().use_type] = list;
    }
  }
  return plan;
}

StatusOr<RunResult> RunInflation(const std::vector<TraceNode>& nodes,
                                 const std::vector<TraceTask>& tasks, const RunConfig& config) {
  if (config.policy == kDraStockPolicy) return RunDraStock(nodes, tasks, config);
  if (config.policy == kDraHamiPolicy || config.policy == kDraHamiExtenderPolicy)
    return RunDraHami(nodes, tasks, config);
  const auto start = std::chrono::steady_clock::now();
  Rng rng(config.seed);
  HAMI_ASSIGN_OR_RETURN(RunPlan plan, PlanRun(nodes, tasks, config, rng));
  const int64_t capacity = plan.capacity_milli;

  scheduler::SchedulerOptions so;
  so.policy = config.policy;
  so.seed = config.seed;
  so.vendor_rules = config.vendors;
  HAMI_ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::Create(so));
  for (auto& n : plan.nodes) sched->UpsertNode(std::move(n));
  const std::vector<int>& order = plan.order;
  std::vector<core::PodRequest>& templates = plan.pods;

  RunResult r;
  r.policy = config.policy;
  r.seed = config.seed;
  AllocationCurve curve(capacity);
  int64_t arrived = 0, used = 0;
  // Randomized policies draw from the scheduler's own stream (seeded with the run's seed), as in
  // the extender, so a run replayed through the extender decides the same.
  scheduler::ScheduleOptions opts;
  for (size_t i = 0; i < order.size(); ++i) {
    const TraceTask& t = tasks[order[i]];
    core::PodRequest& pod = templates[order[i]];
    pod.uid = "t" + std::to_string(i);
    ++r.tasks_arrived;
    arrived += t.total_gpu_milli();
    HAMI_ASSIGN_OR_RETURN(scheduler::Decision d, sched->Schedule(pod, nullptr, opts));
    RunResult::VendorCount* vc =
        t.num_gpu > 0 ? &r.by_vendor[t.vendor.empty() ? core::kNvidiaVendor : t.vendor] : nullptr;
    if (vc) ++vc->arrived;
    if (vc && !d.node.empty()) ++vc->scheduled;
    if (config.record_placements) r.placements.push_back({order[i], d.node, d.allocation});
    if (!d.node.empty()) {
      HAMI_RETURN_IF_ERROR(sched->Reserve(pod, d));
      ++r.tasks_scheduled;
      used += t.total_gpu_milli();
    } else {
      ++r.tasks_failed;  // dropped, never retried
    }
    curve.Record(arrived, used);
  }
  r.curve = curve.Points();
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

const std::vector<std::pair<std::string, std::string>>& SimOnlyPolicies() {
  static const std::vector<std::pair<std::string, std::string>> kPolicies = {
      {std::string(kDraStockPolicy),
       "stock Kubernetes DRA: kube-scheduler's default node scores, first-fit device with "
       "consumable capacity (docs/dra-placement.md)"},
      {std::string(kDraHamiPolicy),
       "DRA with hami-cpp's node choice: default's scorer over every feasible node, scoring the "
       "state after the stock first-fit device allocation (docs/dra-placement.md)"},
      {std::string(kDraHamiExtenderPolicy),
       "dra-hami through kube-scheduler's extender interface: only the feasible nodes it samples, "
       "its own scores and a draw breaking the extender's ties (docs/dra-placement.md)"}};
  return kPolicies;
}

Status CheckPolicy(const std::string& name) {
  for (const auto& [known, doc] : SimOnlyPolicies())
    if (known == name) return OkStatus();
  return scheduler::MakeProfile(name).status();
}

}  // namespace hami::sim
