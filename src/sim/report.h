#pragma once
// Summaries, JSON, SVG plot and the terminal table of `hami sim`.
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/experiment.h"

namespace hami::sim {

struct PolicySummary {
  std::string policy;
  int seeds = 0;
  double a100_median = 0, a100_mean = 0, a100_min = 0, a100_max = 0;
};

struct TraceInfo {
  std::string nodes_file;
  std::string pods_file;
  int64_t pods = 0;
  double inflation = 1.3;
};

// Median of a non-empty list (mean of the two middle values for an even count).
double Median(std::vector<double> v);
// One row per policy, in the order the policies first appear in `runs`.
std::vector<PolicySummary> Summarize(const std::vector<RunResult>& runs);
// Per policy, the median over its seeds of A(k) for every k.
std::vector<std::pair<std::string, std::vector<double>>> MedianCurves(
    const std::vector<RunResult>& runs);

// The published median A(100) of a baseline on the default openb trace, or a negative number.
double PublishedA100(const std::string& policy);

std::string ToJson(const TraceInfo& trace, const ClusterTotals& cluster,
                   const std::vector<RunResult>& runs);
// Unallocated GPU % (100 - A(k)) against arrived demand k, one line per policy.
std::string ToSvg(const std::vector<RunResult>& runs, const std::string& title);
// The terminal table: A(90), A(100), A(130) medians, unallocated % at 100, and the published value.
std::string ToTable(const std::vector<RunResult>& runs, bool default_trace);

// Heterogeneous traces: per policy and device vendor, the median over seeds of the share of the
// vendor's task events that were placed ("" when the runs saw only one vendor).
std::string ToVendorTable(const std::vector<RunResult>& runs);

// Every decision of the runs (RunConfig::record_placements), one CSV row per task event:
// policy,seed,event,task,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,node,devices, where
// `task` indexes `tasks` (file order), `node` is empty for a task that fitted nowhere and `devices`
// lists "index:milli" per GPU taken, '|'-separated (scripts/sim-why.py reads it).
std::string ToPlacementsCsv(const std::vector<RunResult>& runs,
                            const std::vector<TraceTask>& tasks);

Status WriteFile(const std::string& path, const std::string& content);

// Where the bundled trace file `name` (e.g. "openb_pod_list_default.csv") is: $HAMI_DATA_DIR, then
// data/openb/ in a directory above the running binary, then the source tree the binary was built
// from.
StatusOr<std::string> FindBundledTrace(const std::string& name);

}  // namespace hami::sim
