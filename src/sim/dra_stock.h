#pragma once
// `hami sim --policy dra-stock`: the trace replayed as stock Kubernetes DRA would place it
// (docs/dra-placement.md). Each node publishes one pool of shared GPUs (allowMultipleAllocations,
// capacities memory = 16000 MiB in bytes and cores = 100, whole-device defaults, as the hami-cpp
// DRA driver publishes them); each GPU task is one claim of num_gpu devices asking 16 MiB per milli
// of memory and milli/10 cores (the mapping of docs/sim.md), gpu_spec a productName selector.
// kube-scheduler's defaults pick the node: Filter (CPU, memory, and the DRA allocator finding
// devices) over the adaptive percentageOfNodesToScore from a rotating start, then
// NodeResourcesFit LeastAllocated + NodeResourcesBalancedAllocation, ties at random; the DRA
// allocator (sim/dra_allocator.h) then takes the first devices that fit. Arrivals are
// RunInflation's.
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::sim {

inline constexpr std::string_view kDraStockPolicy = "dra-stock";

// kube-scheduler's numFeasibleNodesToFind with the adaptive default percentage.
int64_t FeasibleNodesToFind(int64_t nodes);

StatusOr<RunResult> RunDraStock(const std::vector<TraceNode>& nodes,
                                const std::vector<TraceTask>& tasks, const RunConfig& config);

}  // namespace hami::sim
