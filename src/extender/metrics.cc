#include "extender/metrics.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http/metrics_text.h"

namespace hami::extender {
namespace {

constexpr int64_t kMiB = int64_t{1024} * 1024;
using http::MetricLabels;
using http::MetricSet;
using prometheus::MetricType;

// Every allocation series carries upstream's zone="vGPU" first.
const MetricLabels kZone = {{"zone", "vGPU"}};

}  // namespace

std::string RenderMetrics(const scheduler::Scheduler& sched, const ClusterState& state,
                          const ExtenderCounters* counters) {
  MetricSet set;
  auto family = [&](std::string name, std::string help,
                    MetricType type = MetricType::Gauge) -> MetricSet::Family& {
    return set.Add(std::move(name), std::move(help), type, kZone);
  };
  auto& mem_limit =
      family("hami_gpu_memory_limit_bytes", "Device memory registered by the node, in bytes.");
  auto& core_limit = family("hami_gpu_core_limit_ratio",
                            "Device cores registered by the node (100 = one whole device).");
  auto& shared =
      family("hami_gpu_shared_count", "Number of tasks (containers) placed on the device.");
  auto& core_alloc =
      family("hami_gpu_core_allocated_ratio", "Cores allocated on the device, in percent.");
  auto& mem_ratio = family("hami_node_gpu_memory_allocated_ratio",
                           "Fraction of the device memory allocated (0..1).");
  auto& mem_alloc =
      family("hami_gpu_memory_allocated_bytes", "Device memory allocated to pods, in bytes.");
  auto& overview = family("hami_node_gpu_overview",
                          "Tasks placed on the device, with its cores and memory as labels.");
  sched.cache().ForEachNode(
      nullptr,
      [&](const scheduler::NodeState& n) {
        for (size_t i = 0; i < n.info.devices.size(); ++i) {
          const auto& d = n.info.devices[i];
          const core::DeviceUsage u = i < n.usage.size() ? n.usage[i] : core::DeviceUsage{};
          MetricLabels l = {{"node", n.info.name},
                            {"device_uuid", d.uuid},
                            {"device_index", std::to_string(d.index)},
                            {"device_type", d.type}};
          mem_limit.Put(l, static_cast<double>(d.devmem_mib * kMiB));
          core_limit.Put(l, d.devcore);
          shared.Put(l, u.used);
          core_alloc.Put(l, u.usedcores);
          mem_ratio.Put(l, d.devmem_mib > 0 ? static_cast<double>(u.usedmem_mib) /
                                                  static_cast<double>(d.devmem_mib)
                                            : 0);
          auto lc = l;
          lc.push_back({"device_cores", std::to_string(d.devcore)});
          mem_alloc.Put(lc, static_cast<double>(u.usedmem_mib * kMiB));
          lc.push_back({"device_memory_limit", std::to_string(d.devmem_mib * kMiB)});
          overview.Put(lc, u.used);
        }
      },
      [](const std::string&) {});

  auto& vmem = family("hami_vgpu_memory_allocated_bytes",
                      "Device memory allocated to one container of a pod, in bytes.");
  auto& vcore = family("hami_vgpu_core_allocated_ratio",
                       "Cores allocated to one container of a pod on one device, in percent.");
  for (const auto& p : state.Pods()) {
    for (size_t c = 0; c < p.allocation.containers.size(); ++c)
      for (const auto& d : p.allocation.containers[c]) {
        MetricLabels l = {{"namespace", p.namespace_},
                          {"node", p.allocation.node},
                          {"pod", p.name},
                          {"container_index", std::to_string(c)},
                          {"device_uuid", d.uuid}};
        vmem.Put(l, static_cast<double>(d.usedmem_mib * kMiB));
        vcore.Put(l, d.usedcores);
      }
  }

  // Upstream's scheduler series of dynamic MIG: one per granted instance. The MIG UUID and the
  // instance ids are what the device plugin wrote back into hami.io/vgpu-mig-allocations once the
  // instance exists (PodRecord::mig_runtime, matched by container, GPU, profile and placement);
  // empty while the grant is not realized yet.
  auto& mig = family("hami_node_gpu_mig_instance_info",
                     "A MIG instance granted to a pod (1), with its GPU, profile and placement, "
                     "and its MIG UUID and instance ids once the device plugin made it.");
  for (const auto& p : state.Pods()) {
    for (size_t c = 0; c < p.allocation.containers.size(); ++c)
      for (const auto& d : p.allocation.containers[c]) {
        if (d.mig_profile.empty()) continue;
        int index = -1;
        sched.cache().WithNode(p.allocation.node, [&](const scheduler::NodeState& n) {
          if (int i = n.DeviceIndex(d.uuid); i >= 0) index = n.info.devices[i].index;
        });
        const auto made = std::find_if(
            p.mig_runtime.begin(), p.mig_runtime.end(), [&](const core::MigAllocation& e) {
              return static_cast<size_t>(e.container_index) == c && e.gpu_uuid == d.uuid &&
                     e.profile == d.mig_profile && e.placement == d.mig_placement;
            });
        const bool known = made != p.mig_runtime.end();
        auto id = [](const std::optional<uint32_t>& v) {
          return v ? std::to_string(*v) : std::string();
        };
        mig.Put({{"node", p.allocation.node},
                 {"device_uuid", d.uuid},
                 {"device_index", std::to_string(index)},
                 {"mig_uuid", known ? made->mig_uuid : std::string()},
                 {"profile", d.mig_profile},
                 {"gpu_instance_id", id(known ? made->gpu_instance_id : std::nullopt)},
                 {"compute_instance_id", id(known ? made->compute_instance_id : std::nullopt)},
                 {"placement_start", std::to_string(d.mig_placement.start)},
                 {"placement_size", std::to_string(d.mig_placement.size)}},
                1);
      }
  }

  // Quota series as upstream's: no zone label, quota_name is the resource, and the used series
  // carries the limit's value as its `limit` label. Several ResourceQuota objects in one namespace
  // give one series per resource, with the tightest limit (every quota must hold).
  auto& qused = set.Add("hami_resource_quota_used",
                        "Device memory (MiB) or cores in use in a namespace under a quota.");
  auto& qlimit = set.Add("hami_resource_quota_limit",
                         "Quota limit of device memory (MiB) or cores in a namespace.");
  const auto usage = state.NamespaceUsage();
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>>
      quota;  // -> limit, used
  auto tighten = [&](const std::string& ns, const std::string& resource, int64_t limit,
                     int64_t used) {
    auto [it, fresh] = quota.try_emplace({ns, resource}, limit, used);
    if (!fresh) it->second.first = std::min(it->second.first, limit);
  };
  // Every enabled vendor's quota resources (limits.hygon.com/dcumem, ...), not only NVIDIA's.
  for (const auto& q : state.Quotas()) {
    auto ns = usage.find(q.namespace_);
    for (const auto& [resource, limit] : q.limits) {
      int64_t used = 0;
      if (ns != usage.end())
        if (auto u = ns->second.find(resource); u != ns->second.end()) used = u->second;
      tighten(q.namespace_, resource, limit, used);
    }
  }
  for (const auto& [key, lu] : quota) {
    const auto& [ns, resource] = key;
    qused.Put({{"namespace", ns}, {"quota_name", resource}, {"limit", std::to_string(lu.first)}},
              static_cast<double>(lu.second));
    qlimit.Put({{"namespace", ns}, {"quota_name", resource}}, static_cast<double>(lu.first));
  }

  auto& rejected = family(
      "hami_scheduler_decisions_rejected_total",
      "Pods whose decision annotations were not charged (or, reason OverCommitted, charged and "
      "over-committing a device), by reason; each pod counted once per reason and decision.",
      MetricType::Counter);
  for (const auto& [reason, n] : state.RejectedDecisions())
    rejected.Put({{"reason", reason}}, static_cast<double>(n));

  set.Add("hami_scheduler_reservations_expired_total",
          "Decisions that no bind followed within the reservation TTL (their devices were given "
          "back).",
          MetricType::Counter)
      .Put({}, static_cast<double>(state.expired_reservations()));
  if (const scheduler::UsageRule* rule = sched.usage_rule()) {
    // The usage rule (docs/utilization.md): hami_gpu_memory_limit_bytes above then reads the
    // capacity each card is booked against (its memory x the cap).
    const scheduler::UsageRule::Stats us = rule->stats();
    set.Add("hami_scheduler_usage_overcommit_cap_percent",
            "Usage-aware placement: the most a card may book, in % of its memory "
            "(--usage-overcommit-pct).")
        .Put({}, rule->options().overcommit_pct);
    set.Add("hami_scheduler_usage_profiled_pods",
            "Pods placed by their usage profile (hami.io/usage-profile from a trusted namespace).")
        .Put({}, static_cast<double>(us.profiled_pods));
    set.Add("hami_scheduler_usage_overcommitted_gpus",
            "Cards whose booked gpumem passes their memory (at most the cap).")
        .Put({}, static_cast<double>(us.overcommitted_gpus));
  }
  if (counters != nullptr) {
    auto counter = [&](const char* name, const char* help, int64_t v) {
      set.Add(name, help, MetricType::Counter).Put({}, static_cast<double>(v));
    };
    counter("hami_extender_filter_requests_total", "Filter calls answered.",
            counters->filter_total.load());
    counter("hami_extender_filter_errors_total", "Filter calls answered with an Error.",
            counters->filter_errors.load());
    counter("hami_extender_filter_unschedulable_total", "Filter calls where no node fits.",
            counters->filter_unschedulable.load());
    counter("hami_extender_decision_write_failures_total",
            "Decision patch writes that failed: the background writer's (the pod's /bind then "
            "sends the patch once more) and /bind's own.",
            counters->decision_write_failures.load());
    set.Add("hami_extender_decision_write_seconds_total",
            "Time the background writer spent writing decision patches to the API server.",
            MetricType::Counter)
        .Put({}, static_cast<double>(counters->decision_write_ns.load()) / 1e9);
    set.Add("hami_extender_bind_wait_seconds_total",
            "Time /bind waited for its pod's decision patch before posting the Binding.",
            MetricType::Counter)
        .Put({}, static_cast<double>(counters->bind_wait_ns.load()) / 1e9);
    counter("hami_extender_reserve_conflicts_total",
            "Decisions retried because a concurrent one took the room first.",
            counters->reserve_conflicts.load());
    counter("hami_extender_bind_requests_total", "Bind calls answered.",
            counters->bind_total.load());
    counter("hami_extender_bind_errors_total", "Bind calls answered with an Error.",
            counters->bind_errors.load());
    counter("hami_extender_preempt_requests_total", "Preempt calls answered.",
            counters->preempt_total.load());
    counter("hami_extender_preempt_errors_total",
            "Preempt calls answered with an HTTP error (a bad request, a follower, informers not "
            "synced).",
            counters->preempt_errors.load());
    counter("hami_extender_refused_requests_total",
            "Filter or bind calls refused for the pod they name (bad name or uid, another pod's "
            "uid, a node other than the decision's or none, an already bound pod).",
            counters->refused_requests.load());
    counter("hami_extender_events_dropped_total",
            "Pod Events (FilteringSucceed, BindingFailed, ...) dropped because the API server was "
            "behind and the event queue was full.",
            counters->events_dropped.load());
    auto& stages = set.Add("hami_extender_filter_stage_seconds_total",
                           "Time spent in /filter by stage: the request parse, the scheduler "
                           "library (decide and reserve), handing the decision patch to its "
                           "writer, the reply encoding.",
                           MetricType::Counter);
    const std::pair<const char*, const std::atomic<int64_t>*> stage_ns[] = {
        {"parse", &counters->filter_parse_ns},
        {"library", &counters->filter_library_ns},
        {"patch", &counters->filter_patch_ns},
        {"encode", &counters->filter_encode_ns}};
    for (const auto& [stage, ns] : stage_ns)
      stages.Put({{"stage", stage}}, static_cast<double>(ns->load()) / 1e9);
    // Upstream's request metrics (pkg/scheduler/metrics.go): duration histograms and totals by
    // result; bind's phase is "total" only (no node lock, no separate phases to time).
    std::vector<double> bounds;
    bounds.reserve(LatencyHistogram::kBoundsNs.size());
    for (int64_t ns : LatencyHistogram::kBoundsNs) bounds.push_back(static_cast<double>(ns) / 1e9);
    auto verb = [&](const char* histogram_name, const char* help, const char* total_name,
                    const char* total_help, const LatencyHistogram(&h)[2],
                    const MetricLabels& lead) {
      auto& hist = set.Add(histogram_name, help, MetricType::Histogram);
      auto& total = set.Add(total_name, total_help, MetricType::Counter);
      for (int r = 0; r < 2; ++r) {
        const uint64_t count = static_cast<uint64_t>(h[r].count.load());
        if (count == 0) continue;  // as a HistogramVec: only the results observed
        MetricLabels l = lead;
        l.push_back({"result", r == 0 ? "success" : "error"});
        std::vector<uint64_t> cumulative;
        uint64_t run = 0;
        for (const auto& b : h[r].per_bucket) cumulative.push_back(run += b.load());
        hist.PutHistogram(l, bounds, cumulative, count,
                          static_cast<double>(h[r].sum_ns.load()) / 1e9);
        total.Put({l.back()}, static_cast<double>(count));
      }
    };
    verb("hami_scheduler_filter_duration_seconds", "Time spent processing Filter requests.",
         "hami_scheduler_filter_total", "Total number of Filter requests processed.",
         counters->filter_latency, {});
    verb("hami_scheduler_bind_duration_seconds", "Time spent in each phase of the Bind workflow.",
         "hami_scheduler_bind_total", "Total number of Bind requests processed.",
         counters->bind_latency, {{"phase", "total"}});
    // Upstream's allocation outcome counters (phase, device_type, failure_reason).
    auto outcome = [&](const char* name, const char* help, OutcomeCounters::Kind kind) {
      auto& f = set.Add(name, help, MetricType::Counter);
      for (const auto& [l, n] : counters->outcomes.Snapshot(kind))
        f.Put({{"phase", l[0]}, {"device_type", l[1]}, {"failure_reason", l[2]}},
              static_cast<double>(n));
    };
    outcome("hami_scheduler_allocations_total",
            "Successful device reservations recorded by the filter phase.",
            OutcomeCounters::kAllocations);
    outcome("hami_scheduler_allocation_failures_total", "Filter and bind allocation failures.",
            OutcomeCounters::kAllocationFailures);
    outcome("hami_scheduler_bind_rollbacks_total", "Bind failures that release a reservation.",
            OutcomeCounters::kBindRollbacks);
  }
  // The cache's side of upstream's outcome counters: reservations no bind followed, and decisions
  // read from pods that could not be charged while the state was rebuilt from the informers.
  if (const int64_t n = state.expired_reservations(); n > 0)
    set.Add("hami_scheduler_stale_reservations_total", "Stale reservations encountered or removed.",
            MetricType::Counter)
        .Put({{"phase", "reserve"}, {"device_type", ""}, {"failure_reason", "expired"}},
             static_cast<double>(n));
  auto& reconcile = set.Add("hami_scheduler_reconciliation_errors_total",
                            "Errors while rebuilding scheduler state.", MetricType::Counter);
  for (const auto& [reason, n] : state.RejectedDecisions())
    reconcile.Put({{"phase", "reconcile"}, {"device_type", ""}, {"failure_reason", reason}},
                  static_cast<double>(n));
  return set.Render();
}

std::string RenderReplicaMetrics(bool is_leader, bool caches_synced) {
  MetricSet set;
  set.Add("hami_scheduler_is_leader",
          "1 when this scheduler replica is the leader (the one that decides), else 0.")
      .Put({}, is_leader ? 1 : 0);
  set.Add("hami_scheduler_cache_synced",
          "1 when this replica leads and its node, pod and quota caches have synced, else 0.")
      .Put({}, is_leader && caches_synced ? 1 : 0);
  return set.Render();
}

}  // namespace hami::extender
