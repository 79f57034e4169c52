#pragma once
// Prometheus text exposition (format 0.0.4, written by http::MetricSet) of the scheduler's
// allocation state, with upstream's metric names and labels (docs/upstream-contract.md#monitoring),
// computed from the in-memory usage cache, not from the devices. Every series carries zone="vGPU"
// as upstream's do.
#include <string>

#include "extender/extender.h"
#include "extender/state.h"
#include "scheduler/scheduler.h"

namespace hami::extender {

// counters may be null (no extender in this process).
std::string RenderMetrics(const scheduler::Scheduler& sched, const ClusterState& state,
                          const ExtenderCounters* counters);

}  // namespace hami::extender
