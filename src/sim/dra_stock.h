#pragma once
// `hami sim --policy dra-stock`: the trace replayed as stock Kubernetes DRA would place it
// (docs/dra-placement.md). Each node publishes one pool of shared GPUs (allowMultipleAllocations,
// capacities memory = 16000 MiB in bytes and cores = 100, whole-device defaults, as the hami-cpp
// DRA driver publishes them); each GPU task is one claim of num_gpu devices asking 16 MiB per milli
// of memory and milli/10 cores (the mapping of docs/sim.md), gpu_spec a productName selector.
// kube-scheduler's defaults pick the node: Filter (CPU, memory, and the DRA allocator finding
// devices) over the adaptive percentageOfNodesToScore from a rotating start, then
// NodeResourcesFit LeastAllocated + NodeResourcesBalancedAllocation, ties at random; the DRA
// allocator (scheduler/dra_allocator.h) then takes the first devices that fit. Arrivals are
// RunInflation's.
#include <functional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "scheduler/dra_allocator.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::sim {

// The reference allocator lives with the scheduler (the extender uses it too).
namespace dra = scheduler::dra;

inline constexpr std::string_view kDraStockPolicy = "dra-stock";

// The hami-cpp DRA driver's name: the driver of every simulated pool and the device class.
inline constexpr char kSimDraDriver[] = "hami-core-gpu.project-hami.io";

// kube-scheduler's numFeasibleNodesToFind with the adaptive default percentage.
int64_t FeasibleNodesToFind(int64_t nodes);

// NodeResourcesFit (LeastAllocated, cpu and memory weight 1) + NodeResourcesBalancedAllocation,
// each 0..100, for `node` with `used_*` already requested and the pod's `cpu`/`mem` added (a
// request of 0 scores as 100m / 200 MiB, kube-scheduler's non-zero defaults).
int64_t KubeNodeScore(const core::NodeInfo& node, int64_t used_cpu_milli, int64_t used_memory_mib,
                      int64_t cpu_milli, int64_t memory_mib);

// The stock allocator over the plan's nodes: one pool per node (named as the node), its GPUs
// gpu-<index> in index order, shared, as the hami-cpp driver publishes them.
StatusOr<dra::Allocator> SimDraAllocator(const std::vector<core::NodeInfo>& nodes);
// A task's claim: one request of num_gpu devices (memory 16 MiB per milli in bytes, cores
// milli/10, gpu_spec as an exact productName selector); empty for a task without GPUs.
std::vector<dra::DeviceRequest> SimDraClaim(const TraceTask& task);

// What both DRA policies share. PlanDraRun: RunInflation's plan, refusing vendor, MIG and MPS
// nodes (outside the model). ReplayDraPlan: the arrivals of `plan` in order, each decided and
// committed by `place` (given the event number and the task index; TaskPlacement::node "" = fits
// nowhere), with the counts and the curve of RunResult.
StatusOr<RunPlan> PlanDraRun(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& tasks, const RunConfig& config);
using DraPlace = std::function<StatusOr<TaskPlacement>(size_t event, int task)>;
StatusOr<RunResult> ReplayDraPlan(const RunPlan& plan, const std::vector<TraceTask>& tasks,
                                  const RunConfig& config, const DraPlace& place);

StatusOr<RunResult> RunDraStock(const std::vector<TraceNode>& nodes,
                                const std::vector<TraceTask>& tasks, const RunConfig& config);

}  // namespace hami::sim
