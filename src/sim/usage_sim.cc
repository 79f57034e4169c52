#include "sim/usage_sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "absl/strings/numbers.h"
#include "consolidate/forecast.h"
#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "usage/fleet.h"
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

// The metrics of a finished run. A moved pod holds its memory and duty on the GPU it left for
// restart_min minutes: the evaluation sees a copy of it there (a "surge" pod with the same rows)
// for those minutes; the per-pod figures (peak pods, the whole-card baseline) come from the trace
// alone.
StatusOr<UsageSimResult> Finish(const usage::UsageTrace& trace, const UsageSimConfig& config,
                                UsageSimResult r,
                                const std::vector<std::vector<int32_t>>& moved_at) {
  const int32_t warmup = config.warmup_min;
  usage::UsageTrace with_surges = trace;
  usage::Placement placement = r.placement;
  for (size_t i = 0; i < trace.pods.size(); ++i) {
    const usage::PodSeries& p = trace.pods[i];
    for (size_t k = 1; k < r.placement[i].size(); ++k) {
      const usage::Segment& from = r.placement[i][k - 1];
      const int32_t start = r.placement[i][k].from_minute;
      const int32_t end = std::min(start + config.restart_min, p.last() + 1);
      if (end <= start) continue;
      usage::PodSeries copy;
      copy.name = p.name + "~surge" + std::to_string(k);
      copy.workload = p.workload;
      copy.first = start;
      const auto a = static_cast<std::ptrdiff_t>(start - p.first);
      const auto b = static_cast<std::ptrdiff_t>(end - p.first);
      copy.duty.assign(p.duty.begin() + a, p.duty.begin() + b);
      copy.mem_mib.assign(p.mem_mib.begin() + a, p.mem_mib.begin() + b);
      with_surges.pods.push_back(std::move(copy));
      placement.push_back({{start, from.gpu, from.mem_mib, from.cores}});
    }
  }
  HAMI_ASSIGN_OR_RETURN(r.metrics,
                        usage::Evaluate(with_surges, placement, config.gpu_memory_mib, warmup));
  // Whole cards: one GPU per live pod.
  usage::Placement whole(trace.pods.size());
  for (size_t i = 0; i < trace.pods.size(); ++i)
    if (trace.pods[i].last() >= warmup)
      whole[i].push_back({std::max(warmup, trace.pods[i].first), static_cast<int>(i), 0, 0});
  HAMI_ASSIGN_OR_RETURN(usage::Metrics w,
                        usage::Evaluate(trace, whole, config.gpu_memory_mib, warmup));
  usage::Metrics& m = r.metrics;
  m.peak_pods = w.peak_pods;
  m.busy_pod_minutes = w.busy_pod_minutes;
  m.pods_per_gpu = m.gpus > 0 ? static_cast<double>(m.peak_pods) / static_cast<double>(m.gpus) : 0;
  m.util_ratio = w.util_pct > 0 ? m.util_pct / w.util_pct : 0;
  r.gpu_hours = static_cast<double>(m.active_gpu_minutes) / 60.0;
  r.whole_gpu_hours = static_cast<double>(w.active_gpu_minutes) / 60.0;
  r.hours_ratio = r.gpu_hours > 0 ? r.whole_gpu_hours / r.gpu_hours : 0;
  for (const auto& v : moved_at) {
    r.moves += static_cast<int64_t>(v.size());
    r.max_moves_pod = std::max<int64_t>(r.max_moves_pod, static_cast<int64_t>(v.size()));
  }
  const double pod_days = static_cast<double>(w.active_gpu_minutes) / 1440.0;
  r.moves_per_pod_day = pod_days > 0 ? static_cast<double>(r.moves) / pod_days : 0;
  return r;
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
  if (config.consolidate && config.stock())
    return InvalidArgument("--consolidate packs by usage: not with --requests");
  if (config.consolidate &&
      (config.plan_every_min < 1 || config.forecast_min < 1 || config.forecast_falling_min < 0 ||
       config.trend_min < 1 || config.restart_min < 0 || config.relief_every_min < 0 ||
       config.mem_forecast_min < 0 || config.place_contention_bp < 0 || config.trend_scale_pct < 0))
    return InvalidArgument(
        "--plan-every-min, --forecast-min and --trend-min must be >= 1, the other --consolidate "
        "knobs >= 0");
  scheduler::SchedulerOptions so;
  so.policy = config.policy;
  HAMI_ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::Create(so));

  UsageSimResult r;
  r.mode = config.stock() ? "stock" : config.consolidate ? "consolidate" : "usage-aware";
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
  lo.arrival_min = config.arrival_min;
  const int32_t learn_until = config.learn_until >= 0 ? config.learn_until : warmup;
  usage::Learned learned = usage::Learn(trace, learn_until, lo);
  // The mix of the pods seen (what a new replica packs by when no arrival counts).
  std::vector<usage::UsageProfile> mix(trace.workloads.size());
  if (config.arrival_min > 0) {
    usage::LearnOptions no_arrivals = lo;
    no_arrivals.arrival_min = 0;
    const usage::Learned m = usage::Learn(trace, learn_until, no_arrivals);
    for (size_t w = 0; w < mix.size(); ++w) mix[w] = m.workloads[w].replica;
  }
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

  int32_t trace_start = trace.pods.empty() ? 0 : trace.pods.front().first;
  for (const usage::PodSeries& p : trace.pods) trace_start = std::min(trace_start, p.first);
  std::vector<std::vector<int>> on_gpu;  // pods on each GPU
  std::vector<usage::Tenant> tenants(trace.pods.size());
  std::vector<int> gpu_of(trace.pods.size(), -1);
  // Consolidation: the scheduler's pod of each pod (a replacement is a new pod), when it started on
  // its GPU, when it moved, and the old reservations a surge holds until a minute.
  std::vector<std::string> uid_of(trace.pods.size());
  std::vector<int32_t> since(trace.pods.size(), 0);
  std::vector<std::vector<int32_t>> moved_at(trace.pods.size());
  std::vector<std::pair<int32_t, std::string>> surges;            // (release minute, scheduler pod)
  std::vector<int64_t> workload_peak(trace.workloads.size(), 0);  // rows before the minute
  auto add_gpu = [&] {
    r.gpu_ids.push_back(GpuName(r.gpu_ids.size()));
    on_gpu.emplace_back();
    sched->UpsertNode(GpuNode(r.gpu_ids.back(), devmem));
  };
  add_gpu();
  usage::PackBudget budget;
  budget.capacity_mib = config.gpu_memory_mib;
  budget.duty_budget = config.duty_budget;
  // With --consolidate, pods are placed by the consolidation's own budget (the planner relieves
  // what the forecast missed; arrivals between rounds should not need it).
  budget.contention_bp = config.consolidate && config.place_contention_bp > 0
                             ? config.place_contention_bp
                             : config.contention_bp;
  budget.overcommit_pct = config.overcommit_pct;
  usage::FleetBudget fleet;
  fleet.fleet_bp = config.fleet_contention_bp;
  fleet.card_bp = config.card_contention_bp;
  // What each GPU's pods are expected to contend (the fleet budget's state): set again whenever a
  // GPU's pods change, from the tenants they pack as.
  usage::ContentionLedger ledger;
  std::vector<const usage::Tenant*> scratch;
  auto record = [&](size_t g) {
    scratch.clear();
    for (int j : on_gpu[g]) scratch.push_back(&tenants[static_cast<size_t>(j)]);
    ledger.Set(r.gpu_ids[g], scratch, budget.duty_budget);
  };

  auto place = [&](size_t i, int32_t minute) -> Status {
    const usage::PodSeries& p = trace.pods[i];
    const auto w = static_cast<size_t>(p.workload);
    const int64_t gpumem = r.workloads[w].gpumem_mib;
    const int cores = config.stock() ? config.gpucores : 0;
    core::PodRequest pod = PodOf(p, gpumem, cores);
    std::vector<std::string> candidates;
    uid_of[i] = pod.uid;
    since[i] = minute;
    const std::vector<std::string>* cand = nullptr;
    if (!config.stock()) {
      tenants[i] = tenant_of(i);
      std::vector<const usage::Tenant*> there;
      for (size_t g = 0; g < on_gpu.size(); ++g) {
        there.clear();
        for (int j : on_gpu[g]) there.push_back(&tenants[static_cast<size_t>(j)]);
        // An empty GPU always takes the pod (even one the rule says is too big for any card).
        if (there.empty() ||
            ledger.Check(r.gpu_ids[g], there, tenants[i], budget, fleet) == usage::Fit::kFits)
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
    if (!config.stock()) record(g);
    if (g + 1 == r.gpu_ids.size()) add_gpu();  // keep one empty GPU
    return OkStatus();
  };

  // One planning round at minute m: profiles from the last forecast_min minutes (rows before m),
  // the workload's peak so far as every pod's spike; moves go through Schedule/Reserve on the
  // planned GPU as a new pod, the old one released when its surge is over.
  auto consolidate_at = [&](int32_t m, bool with_empty) -> Status {
    consolidate::ClusterState state;
    state.now = m;
    std::vector<int> live;  // state pod -> trace pod
    std::vector<std::vector<usage::UsageProfile>> recent(n_work);
    std::vector<usage::UsageProfile> fresh(trace.pods.size());
    // Per workload, the forecast window: the short one while its load is not rising.
    std::vector<int32_t> window(n_work, config.forecast_min);
    if (config.forecast_falling_min > 0) {
      std::vector<double> recent_duty(n_work, 0), before_duty(n_work, 0);
      for (const usage::PodSeries& p : trace.pods)
        for (int32_t t = std::max(p.first, m - 2 * config.trend_min); t < m && t <= p.last(); ++t)
          (t >= m - config.trend_min ? recent_duty
                                     : before_duty)[static_cast<size_t>(p.workload)] +=
              p.duty[static_cast<size_t>(t - p.first)];
      for (size_t w = 0; w < n_work; ++w)
        if (recent_duty[w] * 100 <= before_duty[w] * config.trend_pct)
          window[w] = std::min(config.forecast_falling_min, config.forecast_min);
    }
    // The fleet's trend scales every pod's recent duty (consolidate/forecast.h).
    const int64_t scale = consolidate::DutyScalePct(
        consolidate::FleetTrendPct(trace.pods, m, config.trend_min), config.trend_scale_pct);
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      if (gpu_of[i] < 0) continue;
      const usage::PodSeries& p = trace.pods[i];
      consolidate::ForecastOptions fo;
      fo.window_min = window[static_cast<size_t>(p.workload)];
      fo.mem_window_min = config.mem_forecast_min;
      fo.profile = config.profile;
      fresh[i] = consolidate::ForecastProfile(p, m, scale, fo);
      if (fresh[i].minutes > 0) recent[static_cast<size_t>(p.workload)].push_back(fresh[i]);
    }
    std::vector<usage::UsageProfile> replica_now(n_work);
    for (size_t w = 0; w < n_work; ++w)
      replica_now[w] =
          recent[w].empty() ? replica[w] : usage::WorkloadProfile(recent[w], config.workload_q_pct);
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      if (gpu_of[i] < 0) continue;
      const auto w = static_cast<size_t>(trace.pods[i].workload);
      usage::Tenant& t = tenants[i];  // arrivals from now on pack next to this too
      t.profile = fresh[i].minutes >= config.min_own_minutes ? fresh[i] : replica_now[w];
      t.spike_mib = std::max(t.spike_mib, workload_peak[w]);
      consolidate::PodState ps;
      ps.name = trace.pods[i].name;
      ps.workload = trace.workloads[w];
      ps.gpu = gpu_of[i];
      ps.tenant = t;
      ps.since_minute = since[i];
      ps.move_minutes = moved_at[i];
      ps.in_flight = !moved_at[i].empty() && m < since[i] + config.restart_min;
      state.pods.push_back(std::move(ps));
      live.push_back(static_cast<int>(i));
    }
    consolidate::Options o = config.plan;
    o.pack = budget;
    if (config.plan_contention_bp > 0) o.pack.contention_bp = config.plan_contention_bp;
    o.empty = o.empty && with_empty;
    o.restart_min = std::max(o.restart_min, config.restart_min);
    // Relief may need empty GPUs: at least two per GPU that would be relieved, plus one.
    auto on = consolidate::PodsByGpu(state);
    for (size_t g = on.size(); g < r.gpu_ids.size(); ++g) on.emplace_back();
    int64_t need = 1, empty = 0;
    for (size_t g = 0; g < r.gpu_ids.size(); ++g) {
      if (on[g].empty()) {
        ++empty;
        continue;
      }
      usage::PackBudget relief = budget;
      relief.contention_bp = std::max(o.relief_contention_bp, o.pack.contention_bp);
      state.gpus.push_back({r.gpu_ids[g], config.gpu_memory_mib, true});
      if (!consolidate::Passes(state, on[g], relief)) need += 2;
    }
    for (; empty < need; ++empty) add_gpu();
    state.gpus.clear();
    for (const auto& id : r.gpu_ids) state.gpus.push_back({id, config.gpu_memory_mib, true});
    const consolidate::Plan plan = consolidate::PlanMoves(state, o);
    r.freed_gpus += static_cast<int64_t>(plan.freed_gpus.size());
    for (const consolidate::Move& mv : plan.moves) {
      const auto i = static_cast<size_t>(live[static_cast<size_t>(mv.pod)]);
      const usage::PodSeries& p = trace.pods[i];
      const usage::Segment old = r.placement[i].back();
      core::PodRequest pod = PodOf(p, old.mem_mib, old.cores);
      pod.uid = p.name + "~" + std::to_string(moved_at[i].size() + 1);
      const std::vector<std::string> to = {r.gpu_ids[static_cast<size_t>(mv.to)]};
      HAMI_ASSIGN_OR_RETURN(scheduler::Decision d, sched->Schedule(pod, &to));
      if (d.node != to.front()) {  // the destination is gone: the move is not started
        ++r.aborted_moves;
        continue;
      }
      HAMI_RETURN_IF_ERROR(sched->Reserve(pod, d));
      surges.push_back({m + config.restart_min, uid_of[i]});
      uid_of[i] = pod.uid;
      auto& src = on_gpu[static_cast<size_t>(mv.from)];
      src.erase(std::find(src.begin(), src.end(), static_cast<int>(i)));
      on_gpu[static_cast<size_t>(mv.to)].push_back(static_cast<int>(i));
      gpu_of[i] = mv.to;
      since[i] = m;
      moved_at[i].push_back(m);
      r.relief_moves += mv.reason == consolidate::Reason::kRelief;
      r.placement[i].push_back({m, mv.to, old.mem_mib, old.cores});
      if (static_cast<size_t>(mv.to) + 1 == r.gpu_ids.size()) add_gpu();
    }
    for (size_t g = 0; g < on_gpu.size(); ++g) record(g);  // tenants and GPUs changed
    return OkStatus();
  };

  for (int32_t m = 0; m < warmup && m < trace.minutes; ++m)
    for (const usage::PodSeries& p : trace.pods)
      if (p.alive(m)) {
        int64_t& peak = workload_peak[static_cast<size_t>(p.workload)];
        peak = std::max<int64_t>(peak, p.mem_mib[static_cast<size_t>(m - p.first)]);
      }
  for (int32_t m = warmup; m < trace.minutes; ++m) {
    if (m > warmup)  // what minute m - 1 taught
      for (const usage::PodSeries& p : trace.pods)
        if (p.alive(m - 1)) {
          int64_t& peak = workload_peak[static_cast<size_t>(p.workload)];
          peak = std::max<int64_t>(peak, p.mem_mib[static_cast<size_t>(m - 1 - p.first)]);
        }
    // Surges that are over give the old GPU back.
    for (auto it = surges.begin(); it != surges.end();) {
      if (it->first > m) {
        ++it;
        continue;
      }
      HAMI_RETURN_IF_ERROR(sched->RemovePod(it->second));
      it = surges.erase(it);
    }
    // Pods that left (no row at m) give their GPU back.
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      if (gpu_of[i] < 0 || trace.pods[i].last() >= m) continue;
      auto& v = on_gpu[static_cast<size_t>(gpu_of[i])];
      v.erase(std::find(v.begin(), v.end(), static_cast<int>(i)));
      if (!config.stock()) record(static_cast<size_t>(gpu_of[i]));
      gpu_of[i] = -1;
      HAMI_RETURN_IF_ERROR(sched->RemovePod(uid_of[i]));
    }
    std::vector<size_t> arrivals;
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      const usage::PodSeries& p = trace.pods[i];
      if (m == warmup ? p.alive(m) : p.first == m) arrivals.push_back(i);
    }
    // A new replica packs by what the workload's earlier arrivals did in their first minutes, as
    // far as the rows before m show it.
    if (config.arrival_min > 0 && !config.stock() && m > warmup && !arrivals.empty()) {
      std::vector<bool> again(n_work, false);
      for (size_t i : arrivals) again[static_cast<size_t>(trace.pods[i].workload)] = true;
      for (size_t w = 0; w < n_work; ++w) {
        if (!again[w]) continue;
        replica[w] = usage::NewReplicaProfile(
            mix[w],
            usage::ArrivalProfile(trace, static_cast<int>(w), trace_start, m, config.arrival_min,
                                  config.profile, config.workload_q_pct));
      }
    }
    // The largest first (by the memory level it packs by), then arrival order.
    std::vector<std::pair<int64_t, size_t>> order;
    for (size_t i : arrivals) {
      const usage::Tenant t = tenant_of(i);
      order.push_back({config.stock() ? 0 : -int64_t{t.profile.mem_all}, i});
    }
    std::sort(order.begin(), order.end());
    for (const auto& [key, i] : order) HAMI_RETURN_IF_ERROR(place(i, m));
    if (config.consolidate && m > warmup) {
      const bool plan = (m - warmup) % config.plan_every_min == 0;
      const bool relief =
          config.relief_every_min > 0 && (m - warmup) % config.relief_every_min == 0;
      if (plan || relief) HAMI_RETURN_IF_ERROR(consolidate_at(m, plan));
    }
  }
  return Finish(trace, config, std::move(r), moved_at);
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
                      {"restart_min", config.consolidate ? config.restart_min : 0},
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
                        {"busy_pod_minutes", m.busy_pod_minutes},
                        {"peak_gpus", m.gpus},
                        {"gpu_hours", Round(result.gpu_hours, 4)},
                        {"whole_gpu_hours", Round(result.whole_gpu_hours, 4)},
                        {"hours_ratio", Round(result.hours_ratio, 4)},
                        {"moves", result.moves},
                        {"moves_per_pod_day", Round(result.moves_per_pod_day, 4)},
                        {"max_moves_pod", result.max_moves_pod},
                        {"aborted_moves", result.aborted_moves},
                        {"relief_moves", result.relief_moves},
                        {"freed_gpus", result.freed_gpus}}},
                      {"workloads", std::move(work)}};
  if (config.stock())
    j["requests"] = {{"gpumem_mib", config.gpumem_mib}, {"gpucores", config.gpucores}};
  else
    j["knobs"] = {{"mem_q_pct", config.profile.mem_q_pct},
                  {"margin_pct", config.margin_pct},
                  {"workload_q_pct", config.workload_q_pct},
                  {"overcommit_pct", config.overcommit_pct},
                  {"duty_budget_pct", config.duty_budget / 100},
                  {"contention_bp", config.contention_bp},
                  {"fleet_contention_bp", config.fleet_contention_bp},
                  {"card_contention_bp", config.card_contention_bp},
                  {"arrival_min", config.arrival_min}};
  if (config.consolidate)
    j["consolidate"] = {{"restart_min", config.restart_min},
                        {"plan_every_min", config.plan_every_min},
                        {"relief_every_min", config.relief_every_min},
                        {"plan_contention_bp", config.plan_contention_bp},
                        {"forecast_min", config.forecast_min},
                        {"forecast_falling_min", config.forecast_falling_min},
                        {"trend_min", config.trend_min},
                        {"trend_pct", config.trend_pct},
                        {"trend_scale_pct", config.trend_scale_pct},
                        {"mem_forecast_min", config.mem_forecast_min},
                        {"place_contention_bp", config.place_contention_bp},
                        {"relief_contention_bp", config.plan.relief_contention_bp},
                        {"max_moves_pod_day", config.plan.max_moves_pod_day},
                        {"max_empty_moves_pod_day", config.plan.max_empty_moves_pod_day},
                        {"max_concurrent_workload", config.plan.max_concurrent_workload},
                        {"max_concurrent_cluster", config.plan.max_concurrent_cluster},
                        {"window_min", config.plan.window_min},
                        {"max_moves_window", config.plan.max_moves_window}};
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
  std::snprintf(
      buf, sizeof buf,
      "gpu_hours %.2f (whole cards %.2f): hours_ratio %.3f; moves %lld (%.3f per pod-day, "
      "at most %lld for one pod, %lld aborted)\n",
      result.gpu_hours, result.whole_gpu_hours, result.hours_ratio,
      static_cast<long long>(result.moves), result.moves_per_pod_day,
      static_cast<long long>(result.max_moves_pod), static_cast<long long>(result.aborted_moves));
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
