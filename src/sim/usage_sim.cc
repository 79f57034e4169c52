#include "sim/usage_sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "absl/strings/numbers.h"
#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "usage/recommend.h"

namespace hami::sim {

namespace {

std::string GpuName(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-%04zu", i);
  return buf;
}

core::NodeInfo GpuNode(const std::string& name, int64_t devmem_mib) {
  core::NodeInfo n;
  n.name = name;
  core::DeviceInfo d;
  d.index = 0;
  d.uuid = name;
  d.count = 64;
  d.devmem_mib = devmem_mib;
  d.devcore = 100;
  d.type = "NVIDIA-sim";
  n.devices.push_back(std::move(d));
  return n;
}

core::PodRequest PodOf(const usage::PodSeries& p, int64_t gpumem_mib, int gpucores) {
  core::PodRequest pod;
  pod.uid = p.name;
  pod.name = p.name;
  pod.namespace_ = "sim";
  core::ContainerRequest c;
  c.name = "main";
  core::DeviceRequest r;
  r.nums = 1;
  r.memreq_mib = gpumem_mib;
  r.coresreq = gpucores;
  c.devices.push_back(r);
  pod.containers.push_back(std::move(c));
  return pod;
}

double Round(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

Status ParseUsageRequests(const std::string& text, UsageSimConfig* config) {
  int64_t gpumem = 0, cores = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    // Digits only (no sign, no spaces), at most 12 of them: checked before any arithmetic.
    int64_t v = 0;
    const bool ok =
        !value.empty() && value.size() <= 12 &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        absl::SimpleAtoi(value, &v);
    if (!ok) return InvalidArgument("--requests: '", item, "' is not key=<non-negative integer>");
    if (key == "gpumem") {
      gpumem = v;
    } else if (key == "gpucores") {
      if (v > 100) return InvalidArgument("--requests: gpucores ", v, " is more than 100");
      cores = v;
    } else {
      return InvalidArgument("--requests: unknown key '", key, "' (known: gpumem, gpucores)");
    }
  }
  if (gpumem <= 0) return InvalidArgument("--requests: gpumem=<MiB> is required");
  config->gpumem_mib = gpumem;
  config->gpucores = static_cast<int>(cores);
  return OkStatus();
}

StatusOr<UsageSimResult> RunUsageSim(const usage::UsageTrace& trace, const UsageSimConfig& config) {
  if (config.gpu_memory_mib <= 0) return InvalidArgument("--gpu-memory-gib must be positive");
  if (config.warmup_min < 0) return InvalidArgument("--warmup-min must be >= 0");
  if (config.stock() && config.gpumem_mib > config.gpu_memory_mib)
    return InvalidArgument("--requests gpumem=", config.gpumem_mib, " MiB is more than the card (",
                           config.gpu_memory_mib, " MiB)");
  if (config.gpucores < 0 || config.gpucores > 100)
    return InvalidArgument("gpucores must be 0..100");
  if (config.overcommit_pct < 100) return InvalidArgument("overcommit must be >= 100 %");
  scheduler::SchedulerOptions so;
  so.policy = config.policy;
  HAMI_ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::Create(so));

  UsageSimResult r;
  r.mode = config.stock() ? "stock" : "usage-aware";
  r.placement.assign(trace.pods.size(), {});
  const int32_t warmup = config.warmup_min;
  const int64_t devmem =
      config.stock() ? config.gpu_memory_mib : config.gpu_memory_mib * config.overcommit_pct / 100;

  // What the warm-up taught, per workload: its peak, its recommendation and the profile of a
  // replica without history; per pod: its own profile (usage::Learn, shared with hami recommend).
  usage::LearnOptions lo;
  lo.profile = config.profile;
  lo.margin_pct = config.margin_pct;
  lo.workload_q_pct = config.workload_q_pct;
  lo.card_mib = config.gpu_memory_mib;
  usage::Learned learned =
      usage::Learn(trace, config.learn_until >= 0 ? config.learn_until : warmup, lo);
  const std::vector<usage::UsageProfile>& own = learned.own;
  const size_t n_work = trace.workloads.size();
  std::vector<usage::UsageProfile> replica(n_work);
  r.workloads.resize(n_work);
  for (size_t w = 0; w < n_work; ++w) {
    const usage::WorkloadModel& m = learned.workloads[w];
    r.workloads[w] = {m.name, m.pods, m.peak_mib,
                      config.stock() ? config.gpumem_mib : m.gpumem_mib};
    replica[w] = m.replica;
  }
  auto tenant_of = [&](size_t i) {
    const auto w = static_cast<size_t>(trace.pods[i].workload);
    usage::Tenant t;
    t.profile = own[i].minutes >= config.min_own_minutes ? own[i] : replica[w];
    t.spike_mib =
        r.workloads[w].warmup_peak_mib > 0 ? r.workloads[w].warmup_peak_mib : config.gpu_memory_mib;
    t.limit_mib = r.workloads[w].gpumem_mib;
    return t;
  };

  std::vector<std::vector<int>> on_gpu;  // pods on each GPU
  std::vector<usage::Tenant> tenants(trace.pods.size());
  std::vector<int> gpu_of(trace.pods.size(), -1);
  auto add_gpu = [&] {
    r.gpu_ids.push_back(GpuName(r.gpu_ids.size()));
    on_gpu.emplace_back();
    sched->UpsertNode(GpuNode(r.gpu_ids.back(), devmem));
  };
  add_gpu();
  usage::PackBudget budget;
  budget.capacity_mib = config.gpu_memory_mib;
  budget.duty_budget = config.duty_budget;
  budget.contention_bp = config.contention_bp;
  budget.overcommit_pct = config.overcommit_pct;

  auto place = [&](size_t i, int32_t minute) -> Status {
    const usage::PodSeries& p = trace.pods[i];
    const auto w = static_cast<size_t>(p.workload);
    const int64_t gpumem = r.workloads[w].gpumem_mib;
    const int cores = config.stock() ? config.gpucores : 0;
    core::PodRequest pod = PodOf(p, gpumem, cores);
    std::vector<std::string> candidates;
    const std::vector<std::string>* cand = nullptr;
    if (!config.stock()) {
      tenants[i] = tenant_of(i);
      std::vector<const usage::Tenant*> there;
      for (size_t g = 0; g < on_gpu.size(); ++g) {
        there.clear();
        for (int j : on_gpu[g]) there.push_back(&tenants[static_cast<size_t>(j)]);
        // An empty GPU always takes the pod (even one the rule says is too big for any card).
        if (there.empty() || usage::CheckFit(there, tenants[i], budget) == usage::Fit::kFits)
          candidates.push_back(r.gpu_ids[g]);
      }
      cand = &candidates;
    }
    HAMI_ASSIGN_OR_RETURN(scheduler::Decision d, sched->Schedule(pod, cand));
    if (d.node.empty()) return Internal("pod ", p.name, " fits no GPU, not even an empty one");
    HAMI_RETURN_IF_ERROR(sched->Reserve(pod, d));
    const auto g = static_cast<size_t>(std::find(r.gpu_ids.begin(), r.gpu_ids.end(), d.node) -
                                       r.gpu_ids.begin());
    if (g == r.gpu_ids.size()) return Internal("the scheduler chose an unknown node ", d.node);
    on_gpu[g].push_back(static_cast<int>(i));
    gpu_of[i] = static_cast<int>(g);
    r.placement[i].push_back({minute, static_cast<int>(g), gpumem, cores});
    if (g + 1 == r.gpu_ids.size()) add_gpu();  // keep one empty GPU
    return OkStatus();
  };

  for (int32_t m = warmup; m < trace.minutes; ++m) {
    // Pods that left (no row at m) give their GPU back.
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      if (gpu_of[i] < 0 || trace.pods[i].last() >= m) continue;
      auto& v = on_gpu[static_cast<size_t>(gpu_of[i])];
      v.erase(std::find(v.begin(), v.end(), static_cast<int>(i)));
      gpu_of[i] = -1;
      HAMI_RETURN_IF_ERROR(sched->RemovePod(trace.pods[i].name));
    }
    std::vector<size_t> arrivals;
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      const usage::PodSeries& p = trace.pods[i];
      if (m == warmup ? p.alive(m) : p.first == m) arrivals.push_back(i);
    }
    // The largest first (by the memory level it packs by), then arrival order.
    std::vector<std::pair<int64_t, size_t>> order;
    for (size_t i : arrivals) {
      const usage::Tenant t = tenant_of(i);
      order.push_back({config.stock() ? 0 : -int64_t{t.profile.mem_all}, i});
    }
    std::sort(order.begin(), order.end());
    for (const auto& [key, i] : order) HAMI_RETURN_IF_ERROR(place(i, m));
  }
  HAMI_ASSIGN_OR_RETURN(r.metrics,
                        usage::Evaluate(trace, r.placement, config.gpu_memory_mib, warmup));
  return r;
}

std::string UsagePlacementsJson(const usage::UsageTrace& trace, const UsageSimResult& result,
                                const UsageSimConfig& config) {
  nlohmann::json pods = nlohmann::json::object();
  for (size_t i = 0; i < trace.pods.size(); ++i) {
    if (result.placement[i].empty()) continue;
    nlohmann::json segs = nlohmann::json::array();
    for (const auto& s : result.placement[i])
      segs.push_back({{"from_minute", s.from_minute},
                      {"gpu", result.gpu_ids[static_cast<size_t>(s.gpu)]},
                      {"mem_mib", s.mem_mib},
                      {"cores", s.cores}});
    pods[trace.pods[i].name] = std::move(segs);
  }
  nlohmann::json j = {{"format", "hami-placement v2"},
                      {"policy", result.mode},
                      {"capacity_mib", config.gpu_memory_mib},
                      {"warmup_min", config.warmup_min},
                      {"restart_min", 0},
                      {"pods", std::move(pods)}};
  return j.dump(1) + "\n";
}

std::string UsageJson(const std::string& source, const UsageSimResult& result,
                      const UsageSimConfig& config) {
  const usage::Metrics& m = result.metrics;
  nlohmann::json work = nlohmann::json::object();
  for (const auto& w : result.workloads)
    work[w.name] = {
        {"pods", w.pods}, {"warmup_peak_mib", w.warmup_peak_mib}, {"gpumem_mib", w.gpumem_mib}};
  nlohmann::json j = {{"trace", source},
                      {"mode", result.mode},
                      {"scheduler_policy", config.policy},
                      {"capacity_mib", config.gpu_memory_mib},
                      {"warmup_min", config.warmup_min},
                      {"metrics",
                       {{"gpus", m.gpus},
                        {"peak_pods", m.peak_pods},
                        {"pods_per_gpu", Round(m.pods_per_gpu, 4)},
                        {"util_pct", Round(m.util_pct, 4)},
                        {"util_ratio", Round(m.util_ratio, 4)},
                        {"contended_pct", Round(m.contended_pct, 4)},
                        {"oom_pods", m.oom_pods},
                        {"over_cap_pct", Round(m.over_cap_pct, 4)},
                        {"throttled_pct", Round(m.throttled_pct, 4)},
                        {"minutes", m.minutes},
                        {"active_gpu_minutes", m.active_gpu_minutes},
                        {"busy_pod_minutes", m.busy_pod_minutes}}},
                      {"workloads", std::move(work)}};
  if (config.stock())
    j["requests"] = {{"gpumem_mib", config.gpumem_mib}, {"gpucores", config.gpucores}};
  else
    j["knobs"] = {
        {"mem_q_pct", config.profile.mem_q_pct},       {"margin_pct", config.margin_pct},
        {"workload_q_pct", config.workload_q_pct},     {"overcommit_pct", config.overcommit_pct},
        {"duty_budget_pct", config.duty_budget / 100}, {"contention_bp", config.contention_bp}};
  return j.dump(1) + "\n";
}

std::string UsageTable(const std::string& source, const UsageSimResult& result,
                       const UsageSimConfig& config) {
  const usage::Metrics& m = result.metrics;
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "hami sim --usage %s: %s, %lld MiB GPUs, warm-up %d min, scheduler policy %s\n",
                source.c_str(), result.mode.c_str(), static_cast<long long>(config.gpu_memory_mib),
                config.warmup_min, config.policy.c_str());
  out += buf;
  std::snprintf(buf, sizeof buf, "%5s %9s %12s %9s %10s %13s %8s %12s %13s\n", "gpus", "peak_pods",
                "pods_per_gpu", "util_pct", "util_ratio", "contended_pct", "oom_pods",
                "over_cap_pct", "throttled_pct");
  out += buf;
  std::snprintf(buf, sizeof buf, "%5lld %9lld %12.2f %9.2f %10.2f %13.2f %8lld %12.2f %13.2f\n",
                static_cast<long long>(m.gpus), static_cast<long long>(m.peak_pods), m.pods_per_gpu,
                m.util_pct, m.util_ratio, m.contended_pct, static_cast<long long>(m.oom_pods),
                m.over_cap_pct, m.throttled_pct);
  out += buf;
  out += "workload                         pods  warmup_peak_mib  gpumem_mib\n";
  for (const auto& w : result.workloads) {
    std::snprintf(buf, sizeof buf, "%-32s %4lld %16lld %11lld\n",
                  w.name.empty() ? "(all pods)" : w.name.substr(0, 32).c_str(),
                  static_cast<long long>(w.pods), static_cast<long long>(w.warmup_peak_mib),
                  static_cast<long long>(w.gpumem_mib));
    out += buf;
  }
  return out;
}

}  // namespace hami::sim
