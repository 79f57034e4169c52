#include "extender/metrics.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

namespace hami::extender {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// Collects the samples of one metric family and prints HELP/TYPE once.
class Family {
 public:
  Family(std::string name, std::string help, std::string type = "gauge")
      : name_(std::move(name)), help_(std::move(help)), type_(std::move(type)) {}
  void Add(const std::vector<std::pair<std::string, std::string>>& labels, double value) {
    std::string line = name_ + "{zone=\"vGPU\"";
    for (const auto& [k, v] : labels) line += StrCat(",", k, "=\"", EscapeLabel(v), "\"");
    line += "} ";
    char buf[64];
    if (value == static_cast<double>(static_cast<int64_t>(value)))
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value));
    else
      std::snprintf(buf, sizeof buf, "%.6g", value);
    line += buf;
    lines_.push_back(std::move(line));
  }
  void Render(std::string& out) const {
    out += StrCat("# HELP ", name_, " ", help_, "\n# TYPE ", name_, " ", type_, "\n");
    for (const auto& l : lines_) out += l + "\n";
  }

 private:
  std::string name_, help_, type_;
  std::vector<std::string> lines_;
};

}  // namespace

std::string EscapeLabel(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string RenderMetrics(const scheduler::Scheduler& sched, const ClusterState& state,
                          const ExtenderCounters* counters) {
  Family mem_limit("hami_gpu_memory_limit_bytes",
                   "Device memory registered by the node, in bytes.");
  Family core_limit("hami_gpu_core_limit_ratio",
                    "Device cores registered by the node (100 = one whole device).");
  Family shared("hami_gpu_shared_count", "Number of tasks (containers) placed on the device.");
  Family core_alloc("hami_gpu_core_allocated_ratio", "Cores allocated on the device, in percent.");
  Family mem_ratio("hami_node_gpu_memory_allocated_ratio",
                   "Fraction of the device memory allocated (0..1).");
  Family mem_alloc("hami_gpu_memory_allocated_bytes", "Device memory allocated to pods, in bytes.");
  Family overview("hami_node_gpu_overview",
                  "Tasks placed on the device, with its cores and memory as labels.");
  sched.cache().ForEachNode(
      nullptr,
      [&](const scheduler::NodeState& n) {
        for (size_t i = 0; i < n.info.devices.size(); ++i) {
          const auto& d = n.info.devices[i];
          const core::DeviceUsage u = i < n.usage.size() ? n.usage[i] : core::DeviceUsage{};
          std::vector<std::pair<std::string, std::string>> l = {
              {"node", n.info.name},
              {"device_uuid", d.uuid},
              {"device_index", std::to_string(d.index)},
              {"device_type", d.type}};
          mem_limit.Add(l, static_cast<double>(d.devmem_mib * kMiB));
          core_limit.Add(l, d.devcore);
          shared.Add(l, u.used);
          core_alloc.Add(l, u.usedcores);
          mem_ratio.Add(l, d.devmem_mib > 0 ? static_cast<double>(u.usedmem_mib) /
                                                  static_cast<double>(d.devmem_mib)
                                            : 0);
          auto lc = l;
          lc.emplace_back("device_cores", std::to_string(d.devcore));
          mem_alloc.Add(lc, static_cast<double>(u.usedmem_mib * kMiB));
          lc.emplace_back("device_memory_limit", std::to_string(d.devmem_mib * kMiB));
          overview.Add(lc, u.used);
        }
      },
      [](const std::string&) {});

  Family vmem("hami_vgpu_memory_allocated_bytes",
              "Device memory allocated to one container of a pod, in bytes.");
  Family vcore("hami_vgpu_core_allocated_ratio",
               "Cores allocated to one container of a pod on one device, in percent.");
  for (const auto& p : state.Pods()) {
    for (size_t c = 0; c < p.allocation.containers.size(); ++c)
      for (const auto& d : p.allocation.containers[c]) {
        std::vector<std::pair<std::string, std::string>> l = {
            {"namespace", p.namespace_},
            {"node", p.allocation.node},
            {"pod", p.name},
            {"container_index", std::to_string(c)},
            {"device_uuid", d.uuid}};
        vmem.Add(l, static_cast<double>(d.usedmem_mib * kMiB));
        vcore.Add(l, d.usedcores);
      }
  }

  Family qused("hami_resource_quota_used",
               "Device memory (MiB) or cores in use in a namespace under a quota.");
  Family qlimit("hami_resource_quota_limit",
                "Quota limit of device memory (MiB) or cores in a namespace.");
  const auto usage = state.NamespaceUsage();
  for (const auto& q : state.Quotas()) {
    PodTotals used;
    if (auto it = usage.find(q.namespace_); it != usage.end()) used = it->second;
    const auto& names = state.options().resources.nvidia;
    if (q.mem_mib) {
      qused.Add({{"namespace", q.namespace_},
                 {"quota_name", q.name},
                 {"limit", "limits." + names.memory}},
                used.mem_mib);
      qlimit.Add({{"namespace", q.namespace_}, {"quota_name", "limits." + names.memory}},
                 *q.mem_mib);
    }
    if (q.cores) {
      qused.Add(
          {{"namespace", q.namespace_}, {"quota_name", q.name}, {"limit", "limits." + names.cores}},
          used.cores);
      qlimit.Add({{"namespace", q.namespace_}, {"quota_name", "limits." + names.cores}}, *q.cores);
    }
  }

  Family rejected(
      "hami_scheduler_decisions_rejected_total",
      "Pods whose decision annotations were not charged (or, reason OverCommitted, charged and "
      "over-committing a device), by reason; each pod counted once per reason and decision.",
      "counter");
  for (const auto& [reason, n] : state.RejectedDecisions())
    rejected.Add({{"reason", reason}}, static_cast<double>(n));

  std::string out;
  for (const Family* f : {&mem_limit, &core_limit, &shared, &core_alloc, &mem_ratio, &mem_alloc,
                          &overview, &vmem, &vcore, &qused, &qlimit, &rejected})
    f->Render(out);
  out += StrCat(
      "# HELP hami_scheduler_reservations_expired_total Decisions that no bind followed within the "
      "reservation TTL (their devices were given back).\n"
      "# TYPE hami_scheduler_reservations_expired_total counter\n"
      "hami_scheduler_reservations_expired_total ",
      state.expired_reservations(), "\n");
  if (counters != nullptr) {
    auto counter = [&](const char* name, const char* help, int64_t v) {
      out +=
          StrCat("# HELP ", name, " ", help, "\n# TYPE ", name, " counter\n", name, " ", v, "\n");
    };
    counter("hami_extender_filter_requests_total", "Filter calls answered.",
            counters->filter_total.load());
    counter("hami_extender_filter_errors_total", "Filter calls answered with an Error.",
            counters->filter_errors.load());
    counter("hami_extender_filter_unschedulable_total", "Filter calls where no node fits.",
            counters->filter_unschedulable.load());
    counter("hami_extender_reserve_conflicts_total",
            "Decisions retried because a concurrent one took the room first.",
            counters->reserve_conflicts.load());
    counter("hami_extender_bind_requests_total", "Bind calls answered.",
            counters->bind_total.load());
    counter("hami_extender_bind_errors_total", "Bind calls answered with an Error.",
            counters->bind_errors.load());
    counter("hami_extender_refused_requests_total",
            "Filter or bind calls refused for the pod they name (bad name or uid, another pod's "
            "uid, a node other "
            "than the decision's or none, an already bound pod).",
            counters->refused_requests.load());
    out +=
        "# HELP hami_extender_filter_stage_seconds_total Time spent in /filter by stage: the "
        "request parse, the "
        "scheduler library (decide and reserve), the decision patch to the API server, the reply "
        "encoding.\n"
        "# TYPE hami_extender_filter_stage_seconds_total counter\n";
    const std::pair<const char*, const std::atomic<int64_t>*> stages[] = {
        {"parse", &counters->filter_parse_ns},
        {"library", &counters->filter_library_ns},
        {"patch", &counters->filter_patch_ns},
        {"encode", &counters->filter_encode_ns}};
    for (const auto& [stage, ns] : stages) {
      char line[128];
      std::snprintf(line, sizeof line,
                    "hami_extender_filter_stage_seconds_total{stage=\"%s\"} %.6f\n", stage,
                    static_cast<double>(ns->load()) / 1e9);
      out += line;
    }
  }
  return out;
}

}  // namespace hami::extender
