#pragma once
// What the exporter needs to know about the node's GPUs at scrape time: the inventory with current
// memory use and utilisation, and which processes kept each device busy. Implementations:
// NvmlTelemetry (nvml_telemetry.h) and StaticTelemetry (tests, benchmarks).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "common/status.h"

namespace hami::monitor {

struct HostGpu {
  int index = 0;
  std::string uuid;
  std::string model;  // NVML name, e.g. "NVIDIA A100-SXM4-80GB"
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
  int utilization_pct = -1;         // -1: not available
  int memory_utilization_pct = -1;  // memory controller; -1: not available
  int temperature_c = -1;           // GPU core sensor, degrees Celsius; -1: not available
  int64_t power_mw = -1;            // board power draw, milliwatts; -1: not available
  // ECC errors over the board's life (NVML's aggregate counters); -1: not available (ECC off or
  // not supported).
  int64_t ecc_corrected = -1;
  int64_t ecc_uncorrected = -1;
};

struct ProcessUtil {
  uint32_t pid = 0;     // host PID namespace (as NVML reports it)
  uint32_t sm_pct = 0;  // share of the window the process kept the SMs busy
  bool operator==(const ProcessUtil&) const = default;
};

// One of NVML's per-process samples, stamped as the driver stamps it: a driver that samples in
// periods (200 ms on an H200) with the end of the period the sample covers, a library that averages
// with the call (docs/design.md, "Reading NVML's per-process samples").
struct ProcessSample {
  uint32_t pid = 0;
  uint32_t sm_pct = 0;  // share of the sample's span the process kept the SMs busy
  uint64_t end_us = 0;  // CLOCK_REALTIME microseconds
  bool operator==(const ProcessSample&) const = default;
};

class GpuTelemetry {
 public:
  virtual ~GpuTelemetry() = default;
  virtual StatusOr<std::vector<HostGpu>> Devices() = 0;
  // One row per process busy on device `uuid` during the last `window_ms`; empty when none was.
  virtual StatusOr<std::vector<ProcessUtil>> ProcessUtilization(const std::string& uuid,
                                                                int64_t window_ms) = 0;
  // Each process's newest sample on device `uuid` stamped after `since_us`; empty when there is
  // none. By default the rows of ProcessUtilization over (since_us, now_us], stamped `now_us`.
  virtual StatusOr<std::vector<ProcessSample>> ProcessSamples(const std::string& uuid,
                                                              uint64_t since_us, uint64_t now_us) {
    const int64_t window_ms =
        now_us > since_us ? static_cast<int64_t>((now_us - since_us + 999) / 1000) : 1;
    HAMI_ASSIGN_OR_RETURN(std::vector<ProcessUtil> rows, ProcessUtilization(uuid, window_ms));
    std::vector<ProcessSample> out;
    out.reserve(rows.size());
    for (const ProcessUtil& r : rows) out.push_back({r.pid, r.sm_pct, now_us});
    return out;
  }
};

// In-memory telemetry. Thread-safe.
class StaticTelemetry final : public GpuTelemetry {
 public:
  void SetDevices(std::vector<HostGpu> devices) {
    MutexLock l(mu_);
    devices_ = std::move(devices);
  }
  void SetProcessUtil(const std::string& uuid, std::vector<ProcessUtil> rows) {
    MutexLock l(mu_);
    util_[uuid] = std::move(rows);
  }
  StatusOr<std::vector<HostGpu>> Devices() override {
    MutexLock l(mu_);
    return devices_;
  }
  StatusOr<std::vector<ProcessUtil>> ProcessUtilization(const std::string& uuid, int64_t) override {
    MutexLock l(mu_);
    auto it = util_.find(uuid);
    if (it == util_.end()) return std::vector<ProcessUtil>{};
    return it->second;
  }

 private:
  Mutex mu_;
  std::vector<HostGpu> devices_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<ProcessUtil>> util_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::monitor
