#include "monitor/exporter.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "common/log.h"
#include "hami_revision.h"  // generated at build time: HAMI_REVISION (cmake/Revision.cmake)
#include "http/metrics_text.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

using http::MetricLabels;
using http::MetricSet;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Every series starts with upstream HAMi's zone="vGPU".
const MetricLabels kZone = {{"zone", "vGPU"}};

}  // namespace

BuildInfo DefaultBuildInfo(std::string version, std::string revision, std::string build_date) {
  BuildInfo b;
  b.version = std::move(version);
  b.revision = std::move(revision);
  b.build_date = std::move(build_date);
#if defined(__clang__)
  b.compiler = StrCat("clang ", __clang_major__, ".", __clang_minor__);
#elif defined(__GNUC__)
  b.compiler = StrCat("g++ ", __GNUC__, ".", __GNUC_MINOR__);
#endif
#if defined(__x86_64__)
  b.platform = "linux/amd64";
#elif defined(__aarch64__)
  b.platform = "linux/arm64";
#else
  b.platform = "linux/unknown";
#endif
  return b;
}

#ifndef HAMI_MONITOR_VERSION
#define HAMI_MONITOR_VERSION "unknown"
#endif
#ifndef HAMI_MONITOR_BUILD_DATE
#define HAMI_MONITOR_BUILD_DATE "unknown"
#endif

BuildInfo CurrentBuildInfo() {
  return DefaultBuildInfo(HAMI_MONITOR_VERSION, HAMI_REVISION, HAMI_MONITOR_BUILD_DATE);
}

namespace {

// Backslash and line feed escaped; double quotes too in label values (`quotes`), not in HELP text.
void AppendEscaped(std::string& out, const std::string& v, bool quotes = true) {
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "Nan";
  } else if (std::isinf(v)) {
    out += v < 0 ? "-Inf" : "+Inf";
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 16);
    out.append(buf, r.ptr);
  }
}

}  // namespace

std::string RenderText(const std::vector<MetricFamily>& families) {
  for (const MetricFamily& f : families) {
    if (f.type != MetricType::Gauge && f.type != MetricType::Counter) {
      std::ostringstream os;
      prometheus::TextSerializer().Serialize(os, families);
      return os.str();
    }
  }
  std::string out;
  size_t series = 0;
  for (const MetricFamily& f : families) series += f.metric.size();
  out.reserve(series * 160);
  for (const MetricFamily& f : families) {
    const bool counter = f.type == MetricType::Counter;
    if (!f.help.empty()) {
      out.append("# HELP ").append(f.name).append(" ");
      AppendEscaped(out, f.help, /*quotes=*/false);
      out += '\n';
    }
    out.append("# TYPE ").append(f.name).append(counter ? " counter\n" : " gauge\n");
    for (const prometheus::ClientMetric& m : f.metric) {
      out += f.name;
      if (!m.label.empty()) {
        out += '{';
        for (size_t i = 0; i < m.label.size(); ++i) {
          if (i > 0) out += ',';
          out.append(m.label[i].name).append("=\"");
          AppendEscaped(out, m.label[i].value);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      AppendValue(out, counter ? m.counter.value : m.gauge.value);
      if (m.timestamp_ms != 0) out.append(" ").append(std::to_string(m.timestamp_ms));
      out += '\n';
    }
  }
  return out;
}

std::optional<double> DutyRatio(const BusyMark& prev, const BusyMark& cur) {
  const uint32_t busy = cur.busy_ms - prev.busy_ms;  // wraps like the counter
  double window_ms = 0;
  if (cur.meter_us > prev.meter_us) {
    window_ms = static_cast<double>(cur.meter_us - prev.meter_us) / 1e3;
  } else if (cur.meter_us == prev.meter_us && cur.scrape_ns > prev.scrape_ns) {
    window_ms = static_cast<double>(cur.scrape_ns - prev.scrape_ns) / 1e6;
  }
  if (window_ms <= 0) return std::nullopt;
  // More than the window plus a window of rounding: the counter went back (or was rewritten).
  if (static_cast<double>(busy) > window_ms + 200) return std::nullopt;
  return std::min(1.0, static_cast<double>(busy) / window_ms);
}

Exporter::Exporter(ExporterOptions options, RegionStore& store, const PodDirectory& pods,
                   GpuTelemetry& telemetry, const Clock& clock, ActivityLog* activity)
    : options_(std::move(options)),
      store_(store),
      pods_(pods),
      telemetry_(telemetry),
      clock_(clock),
      activity_(activity) {}

std::vector<MetricFamily> Exporter::Collect() {
  MetricSet set;
  auto add = [&](std::string name, std::string help,
                 MetricType type = MetricType::Gauge) -> MetricSet::Family& {
    return set.Add(std::move(name), std::move(help), type, kZone);
  };
  const BuildInfo& b = options_.build;
  add("hami_build_info", "Build information of the hami-cpp node monitor.")
      .Put({{"version", b.version},
            {"revision", b.revision},
            {"build_date", b.build_date},
            {"go_version", ""},
            {"compiler", b.compiler},
            {"platform", b.platform}},
           1);

  // Host GPUs (NVML).
  auto& host_mem =
      add("hami_host_gpu_memory_used_bytes", "GPU device memory used on the host, in bytes.");
  auto& host_util = add("hami_host_gpu_utilization_ratio", "GPU utilisation on the host, 0-100.");
  auto& host_mc = add("hami_host_gpu_memory_controller_utilization_ratio",
                      "GPU memory controller utilisation on the host, 0-100.");
  auto& host_temp =
      add("hami_host_gpu_temperature_celsius", "GPU core temperature on the host, in Celsius.");
  auto& host_power =
      add("hami_host_gpu_power_usage_watts", "GPU board power draw on the host, in watts.");
  auto& host_ecc = add("hami_host_gpu_ecc_errors_total",
                       "ECC errors of the GPU over its life (NVML aggregate counters), by "
                       "error_type (corrected, uncorrected).",
                       MetricType::Counter);
  auto devices = telemetry_.Devices();
  if (!devices.ok()) {
    spdlog::warn("monitor: host GPU metrics unavailable: {}",
                 std::string(devices.status().message()));
  } else {
    for (const HostGpu& g : *devices) {
      std::string idx = std::to_string(g.index);
      MetricLabels with_node = {{"node", options_.node_name},
                                {"device_index", idx},
                                {"device_uuid", g.uuid},
                                {"device_type", g.model}};
      host_mem.Put(with_node, static_cast<double>(g.memory_used_bytes));
      if (g.utilization_pct >= 0) host_util.Put(with_node, g.utilization_pct);
      if (g.temperature_c >= 0) host_temp.Put(with_node, g.temperature_c);
      if (g.power_mw >= 0) host_power.Put(with_node, static_cast<double>(g.power_mw) / 1000);
      for (const auto& [type, n] :
           {std::pair{"corrected", g.ecc_corrected}, std::pair{"uncorrected", g.ecc_uncorrected}}) {
        if (n < 0) continue;
        MetricLabels l = with_node;
        l.push_back({"error_type", type});
        host_ecc.Put(l, static_cast<double>(n));
      }
      if (g.memory_utilization_pct >= 0) {
        host_mc.Put({{"device_index", idx}, {"device_uuid", g.uuid}, {"device_type", g.model}},
                    g.memory_utilization_pct);
      }
    }
  }

  // Containers (libvgpu regions).
  auto& used = add("hami_vgpu_memory_used_bytes",
                   "Device memory held by the container's live processes, in bytes.");
  auto& dev_mem = add("hami_container_device_memory_bytes",
                      "Device memory held by the container's live processes, in bytes.");
  auto& ctx_mem = add("hami_vgpu_memory_context_bytes",
                      "Device memory of the container's CUDA contexts, in bytes.");
  auto& module_mem = add(
      "hami_vgpu_memory_module_bytes",
      "Device memory of the container's loaded modules, in bytes (libvgpu does not count module "
      "images: 0).");
  auto& buffer_mem =
      add("hami_vgpu_memory_buffer_bytes",
          "Device memory of the container's allocations (used minus contexts), in bytes.");
  auto& limit = add("hami_vgpu_memory_limit_bytes",
                    "Device memory limit of the container, in bytes (0 = none).");
  auto& util = add("hami_container_device_utilization_ratio",
                   "SM utilisation of the container's processes on the device, 0-100 (upstream's "
                   "unit): libvgpu's busy meter since the previous scrape where it meters the "
                   "device, else NVML's last window.");
  auto& duty = add("hami_container_device_busy_ratio",
                   "Fraction of the time since the previous scrape that the container's processes "
                   "kept the device busy, 0-1 (libvgpu's busy meter).");
  auto& last_kernel =
      add("hami_container_last_kernel_elapsed_seconds",
          "Seconds since the container last ran a kernel on the device (launch stamp or NVML).");
  auto& sm_limit = add("hami_container_device_sm_limit_ratio",
                       "SM limit of the container on the device, 0-100 (100 = none).");
  auto& throttled =
      add("hami_container_device_throttled_seconds_total",
          "Time the container's kernel launches waited for the SM limiter, in seconds.",
          MetricType::Counter);
  auto& peak = add("hami_container_device_memory_peak_bytes",
                   "Highest device memory the container held on the device, in bytes (rounded up "
                   "to MiB; libvgpu's own accounting).");
  auto& busy = add("hami_container_device_busy_seconds_total",
                   "Device time the container's processes kept the GPU busy, in seconds "
                   "(libvgpu's own measurement; wraps after 49.7 days).",
                   MetricType::Counter);
  auto& procs =
      add("hami_container_processes", "Live processes of the container registered with libvgpu.");
  auto& sw = add(
      "hami_container_core_limit_switch",
      "1 when the SM limit applies under policy default (contention), else 0 (monitor feedback).");
  auto& blocked =
      add("hami_container_priority_blocked",
          "1 while a higher-priority container is active on one of its GPUs (monitor feedback).");
  auto& regions_gauge =
      add("hami_monitor_regions", "Container region directories seen on the node, by state.");

  store_.Rescan();
  ScanStats stats = store_.last_stats();
  int unknown_pod = 0, unreadable = 0, exported = 0;
  std::map<std::string, std::vector<ProcessUtil>> util_rows;  // per uuid, once per scrape
  ProcessFiles files;
  std::set<std::pair<std::string, std::string>> seen;  // metered (directory, uuid) of this scrape
  const int64_t now = clock_.MonotonicNanos();
  for (const ContainerRegion& cr : store_.Regions()) {
    auto pod = pods_.Find(cr.pod_uid);
    if (!pod) {
      ++unknown_pod;
      continue;
    }
    auto snap = cr.region->Snapshot();
    if (!snap.ok()) {
      ++unreadable;
      spdlog::debug("monitor: {}", std::string(snap.status().message()));
      continue;
    }
    ++exported;
    MetricLabels pod_labels = {
        {"namespace", pod->namespace_name}, {"pod", pod->name}, {"container", cr.container}};
    procs.Put(pod_labels, static_cast<double>(snap->processes.size()));
    sw.Put(pod_labels, snap->utilization_switch > 0 ? 1 : 0);
    blocked.Put(pod_labels, snap->recent_kernel < 0 ? 1 : 0);
    for (const RegionDevice& d : snap->devices) {
      MetricLabels l = pod_labels;
      l.push_back(
          {"vdevice_index", std::to_string(d.container_index >= 0 ? d.container_index : d.entry)});
      l.push_back({"device_uuid", d.uuid});
      used.Put(l, static_cast<double>(d.used_bytes));
      dev_mem.Put(l, static_cast<double>(d.used_bytes));
      limit.Put(l, static_cast<double>(d.limit_bytes));
      ctx_mem.Put(l, static_cast<double>(d.context_bytes));
      module_mem.Put(l, 0);
      buffer_mem.Put(l, static_cast<double>(d.used_bytes - d.context_bytes));
      // libvgpu meters the device (layout v5: armed containers, limit or not; before: a device
      // with an SM limit, whose controller measures busy time).
      const bool metered = d.metered || (d.sm_limit_pct > 0 && d.sm_limit_pct < 100 &&
                                         snap->policy != VGPU_POLICY_DISABLE);
      std::optional<double> ratio;
      if (metered) {
        busy.Put(l, static_cast<double>(d.busy_ms) / 1e3);
        const BusyMark mark{d.busy_ms, d.meter_us, now};
        MutexLock ml(marks_mu_);
        auto [m, fresh] = marks_.try_emplace({cr.dir, d.uuid}, mark);
        if (!fresh) {
          ratio = DutyRatio(m->second, mark);
          m->second = mark;
        }
        seen.emplace(cr.dir, d.uuid);
      }
      double pct = 0;
      if (ratio) {
        duty.Put(l, *ratio);
        pct = 100 * *ratio;
      } else {  // NVML's sampled figure: one query per GPU and a /proc/<pid>/fd read per process
        auto it = util_rows.find(d.uuid);
        if (it == util_rows.end()) {
          auto rows = telemetry_.ProcessUtilization(d.uuid, options_.utilization_window_ms);
          it = util_rows.emplace(d.uuid, rows.ok() ? std::move(*rows) : std::vector<ProcessUtil>{})
                   .first;
        }
        pct = ContainerSmPercent(snap->processes, it->second, &files, cr.region.get());
      }
      util.Put(l, pct);
      int64_t last = d.last_launch_ns <= static_cast<uint64_t>(now)
                         ? static_cast<int64_t>(d.last_launch_ns)
                         : 0;
      if (activity_ != nullptr) {
        if (pct > 0) activity_->Saw(cr.dir, d.uuid, now);
        last = std::max(last, activity_->LastSeen(cr.dir, d.uuid));
      }
      if (last > 0) last_kernel.Put(l, static_cast<double>(now - last) / 1e9);
      sm_limit.Put(l, d.sm_limit_pct == 0 ? 100 : d.sm_limit_pct);
      throttled.Put(l, static_cast<double>(d.throttled_ns) / 1e9);
      if (d.peak_bytes > 0) peak.Put(l, static_cast<double>(d.peak_bytes));
    }
  }
  {  // readings of containers and devices gone are dropped
    MutexLock ml(marks_mu_);
    std::erase_if(marks_, [&](const auto& kv) { return !seen.contains(kv.first); });
  }
  regions_gauge.Put({{"state", "exported"}}, exported);
  regions_gauge.Put({{"state", "unknown_pod"}}, unknown_pod);
  regions_gauge.Put({{"state", "invalid"}}, stats.invalid + unreadable);

  return set.Take();  // without empty families: promtool warns on them
}

std::string Exporter::Render() {
  return RenderText(Collect());
}

}  // namespace hami::monitor
