#pragma once
// Reader of `hami-usage-trace v1` (docs/utilization.md#the-trace-format): one row per live pod per
// minute, `minute,pod,duty_pct,mem_mib[,workload]`, rows sorted by (minute, pod), '#' comments. A
// pod is alive from its first row to its last, without holes. Pure and bounded: any input gives a
// trace or an error naming the line (a fuzz target checks it).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::usage {

// Duty is kept in hundredths of a percent of one whole GPU (0..10000), memory in MiB: integers, so
// every sum and comparison the metrics make is exact.
inline constexpr int32_t kDutyFull = 10000;  // 100.00 %

struct Limits {
  int64_t max_bytes = int64_t{1} << 30;
  int32_t max_minute = 1 << 20;  // about two years of minutes
  int32_t max_pods = 1 << 16;
  int64_t max_mem_mib = int64_t{1} << 24;  // 16 TiB: more than any GPU
  int64_t max_rows = int64_t{1} << 26;
};

struct PodSeries {
  std::string name;
  int workload = 0;              // index into UsageTrace::workloads
  int32_t first = 0;             // first minute alive
  std::vector<int32_t> duty;     // per minute from `first`, hundredths of a percent
  std::vector<int32_t> mem_mib;  // per minute from `first`
  int32_t last() const { return first + static_cast<int32_t>(duty.size()) - 1; }
  bool alive(int32_t minute) const { return minute >= first && minute <= last(); }
};

struct UsageTrace {
  int32_t minutes = 0;  // last minute of the file + 1
  // Pods in order of arrival (first minute, then name): the index is the pod's id everywhere.
  std::vector<PodSeries> pods;
  // Workload names; without a workload column one workload named "" holds every pod.
  std::vector<std::string> workloads;
};

// `source` names the input in errors ("usage.csv:12: ...").
StatusOr<UsageTrace> ParseUsageTrace(std::string_view text, std::string_view source,
                                     const Limits& limits = {});
StatusOr<UsageTrace> ReadUsageTrace(const std::string& path, const Limits& limits = {});

// The trace as it stood after `minute` (rows of later minutes dropped; pods that had not arrived
// are gone): what a decision at `minute` may know.
UsageTrace CutAfter(const UsageTrace& trace, int32_t minute);

// The file text of a trace (the format above; a workload column when there is more than one
// workload). ParseUsageTrace(Format(t)) == t.
std::string FormatUsageTrace(const UsageTrace& trace);

}  // namespace hami::usage
