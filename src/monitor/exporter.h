#pragma once
// The node exporter's metrics (upstream vGPUmonitor names), built fresh on
// every scrape from the mapped regions, the pod directory and GPU telemetry. Every series carries
// the constant label zone="vGPU" like upstream's.
//
// Upstream metrics:   hami_build_info, hami_host_gpu_memory_used_bytes,
// hami_host_gpu_utilization_ratio,
//   hami_host_gpu_memory_controller_utilization_ratio, hami_vgpu_memory_used_bytes,
//   hami_container_device_memory_bytes, hami_vgpu_memory_limit_bytes,
//   hami_container_device_utilization_ratio (0-100 as upstream's; from libvgpu's busy meter over
//   the scrape interval where the device is metered, else NVML's last window),
//   hami_container_last_kernel_elapsed_seconds (the later
//   of libvgpu's launch stamp and the last time NVML showed the container busy).
//   hami_vgpu_memory_{context,module,buffer}_bytes (contexts from the slots' context_kib; module
//   images are not counted by libvgpu, so module is 0; buffer = used - context).
// Not exported: hami_mig_device_info (MIG containers run without libvgpu, so they have no region).
// Ours: hami_container_device_sm_limit_ratio, hami_container_device_throttled_seconds_total,
//   hami_container_device_busy_seconds_total, hami_container_device_busy_ratio (0-1),
//   hami_container_device_memory_peak_bytes,
//   hami_container_processes, hami_container_core_limit_switch, hami_container_priority_blocked,
//   hami_monitor_regions.
#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "monitor/feedback.h"
#include "monitor/gpu_telemetry.h"
#include "monitor/pod_directory.h"
#include "monitor/region_store.h"

namespace hami::monitor {

struct BuildInfo {
  std::string version = "unknown";
  std::string revision = "unknown";
  std::string build_date = "unknown";
  std::string compiler;
  std::string platform;
};
// Compiler and platform of this build (g++ version, os/arch).
BuildInfo DefaultBuildInfo(std::string version, std::string revision, std::string build_date);
// This binary's: project version, git revision and date of the CMake configure run.
BuildInfo CurrentBuildInfo();

// One reading of libvgpu's busy meter for a container and device, taken by a scrape.
struct BusyMark {
  uint32_t busy_ms = 0;   // the region's counter (wrapping)
  uint64_t meter_us = 0;  // where the meter's last closed window ended (CLOCK_REALTIME us)
  int64_t scrape_ns = 0;  // the scrape's CLOCK_MONOTONIC time
};
// Fraction of the time between two readings that the device was busy, 0-1: the busy time added in
// between over the meter's windows closed in between (the counter moves once per ~100 ms window, so
// the scrape times would be off by up to a window), or over the scrape interval when no window
// closed (the container's processes are gone). nullopt when no time passed or the counter went
// back (a new region): the next scrape has a value again.
std::optional<double> DutyRatio(const BusyMark& prev, const BusyMark& cur);

// The text exposition format 0.0.4 exactly as prometheus::TextSerializer writes it (the same
// escaping, numbers with 16 significant digits in the "C" locale), appended to one string with
// std::to_chars: the serializer's ostream and locale-aware number formatting were about 80 % of a
// scrape's CPU at 1,000 containers. Families of other types than gauge and counter go through
// TextSerializer.
std::string RenderText(const std::vector<prometheus::MetricFamily>& families);

struct ExporterOptions {
  std::string node_name;
  BuildInfo build;
  // Window of NVML's per-process utilisation behind hami_container_device_utilization_ratio for a
  // device libvgpu does not meter (and on a metered device's first scrape).
  int64_t utilization_window_ms = 1000;
};

class Exporter {
 public:
  // All references must outlive the exporter. Thread-safe (scrapes may run concurrently).
  // `activity` (optional) supplies and receives "last seen busy" times (see ActivityLog).
  Exporter(ExporterOptions options, RegionStore& store, const PodDirectory& pods,
           GpuTelemetry& telemetry, const Clock& clock, ActivityLog* activity = nullptr);

  std::vector<prometheus::MetricFamily> Collect();
  // Collect() in the Prometheus text exposition format 0.0.4.
  std::string Render();

 private:
  ExporterOptions options_;
  RegionStore& store_;
  const PodDirectory& pods_;
  GpuTelemetry& telemetry_;
  const Clock& clock_;
  ActivityLog* activity_;
  // Per (container directory, device uuid): the previous scrape's reading of the busy meter.
  Mutex marks_mu_;
  std::map<std::pair<std::string, std::string>, BusyMark> marks_ ABSL_GUARDED_BY(marks_mu_);
};

}  // namespace hami::monitor
