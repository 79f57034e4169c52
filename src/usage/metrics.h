#pragma once
// The metrics of a placement over a usage trace (docs/utilization.md#metrics), over the minutes
// from warm-up to the end of the trace; a GPU is active in a minute when a live pod is on it.
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "usage/trace.h"

namespace hami::usage {

// From `from_minute` on, the pod runs on GPU `gpu` with a memory limit of `mem_mib` (what libvgpu
// enforces) and `cores` (gpucores; 0 = no SM limit).
struct Segment {
  int32_t from_minute = 0;
  int gpu = 0;
  int64_t mem_mib = 0;
  int cores = 0;
  bool operator==(const Segment&) const = default;
};

// Per pod of the trace (same index), its segments in time order; empty for a pod never placed
// (one that left before warm-up).
using Placement = std::vector<std::vector<Segment>>;

struct Metrics {
  int64_t gpus = 0;          // the most GPUs active at once
  int64_t peak_pods = 0;     // the most pods alive at once
  double pods_per_gpu = 0;   // peak_pods / gpus
  double util_pct = 0;       // sum over GPU-minutes of min(100, sum duty) / (gpus x minutes)
  double util_ratio = 0;     // util_pct over the whole-card figure (one GPU per concurrent pod)
  double contended_pct = 0;  // active GPU-minutes with sum duty > 100, % of active GPU-minutes
  int64_t oom_pods = 0;      // pods with a minute of memory above their mem_mib
  double over_cap_pct = 0;   // active GPU-minutes with sum memory > capacity, %
  double throttled_pct = 0;  // busy pod-minutes throttled by cores while another pod is busy, %
  int64_t minutes = 0;       // minutes evaluated
  int64_t active_gpu_minutes = 0;
  int64_t busy_pod_minutes = 0;
};

// Errors: a pod alive at a minute >= warmup without a segment covering it, a segment naming a
// negative GPU, or segments out of time order.
StatusOr<Metrics> Evaluate(const UsageTrace& trace, const Placement& placement,
                           int64_t capacity_mib, int32_t warmup_min);

}  // namespace hami::usage
