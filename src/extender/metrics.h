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

// Upstream's replica gauges: hami_scheduler_is_leader (1 on the replica that decides; always 1
// without leader election) and hami_scheduler_cache_synced (1 once that replica's caches are
// synced; 0 on a follower, as upstream's, whose flag is only set by the leader's registration).
std::string RenderReplicaMetrics(bool is_leader, bool caches_synced);

}  // namespace hami::extender
