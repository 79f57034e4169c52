#pragma once
// A pod as the API server sends it (Pod JSON) -> core::PodRequest, with upstream HAMi's
// defaulting rules for NVIDIA resources (docs/upstream-contract.md#resource-model) and validation
// of the user-facing
// pod annotations. Also the effective per-device usage of a placed pod, with init containers and
// sidecars collapsed the way Kubernetes runs them
// (docs/upstream-contract.md#where-usage-comes-from, #pod-and-node-fields).
//
// Every function here is pure: no I/O, no clock, no globals. Errors are InvalidArgument with a
// message that names the container, resource or annotation and says what was expected.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/annotations.h"
#include "core/model.h"
#include "nlohmann/json_fwd.hpp"

namespace hami::core {

// Extended-resource names of the NVIDIA vendor (device-config.yaml `nvidia:` section).
struct NvidiaResourceNames {
  std::string count = kDefaultGpuResource;                           // resourceCountName
  std::string memory = kDefaultGpuMemResource;                       // resourceMemoryName (MiB)
  std::string memory_percentage = kDefaultGpuMemPercentageResource;  // resourceMemoryPercentageName
  std::string cores = kDefaultGpuCoresResource;                      // resourceCoreName (percent)
  std::string priority = kDefaultGpuPriorityResource;                // resourcePriorityName
};

// What ParsePodJson needs to know about the cluster's configuration. Defaults are upstream's.
struct ResourceConfig {
  NvidiaResourceNames nvidia;
  int64_t default_memory_mib = 0;  // defaultMemory: MiB per GPU when neither gpumem nor % is given
  int default_cores = 0;           // defaultCores: percent per GPU when gpucores is not given
  int default_gpu_num = 1;         // defaultGPUNum: count added when only gpumem/%/cores are given
  int64_t memory_factor = 1;       // memoryFactor: gpumem is multiplied by this (>= 1)
  // Fails (naming the field) on empty resource names, negative defaults or memory_factor < 1.
  Status Validate() const;
};

// Parses a Pod object (JSON as the API server sends it,
// docs/upstream-contract.md#pod-and-node-fields) into a PodRequest:
//  - metadata: uid, namespace, name, labels, annotations (copied verbatim);
//  - containers: spec.initContainers first (restartPolicy "Always" -> kSidecar, else kInit), then
//    spec.containers (kApp), each keeping its declaration order and name;
//  - per container: cpu (milli, rounded up) and memory (MiB, rounded up) from requests, falling
//    back to limits as Kubernetes does; the NVIDIA request per ParseContainerDevices;
//  - pod annotations per ParseDeviceSelectors, ParseNodeSchedulerPolicy,
//    ParseGpuSchedulerPolicy and ParseScoringWeights; a policy annotation those parsers reject is
//    ignored (node_policy / gpu_policy stay "", the configured default), as upstream ignores it.
// Absent fields are fine (a pod without GPUs parses to containers without devices). Wrong JSON
// types, bad quantities and invalid annotations are errors naming the path, e.g.
// `spec.containers[1] "trainer": nvidia.com/gpumem: quantity "4.5" must be a whole number`.
StatusOr<PodRequest> ParsePodJson(const nlohmann::json& pod, const ResourceConfig& config);

// The NVIDIA request of one container given its `resources` object ({"limits":{..},
// "requests":{..}}), after upstream's webhook and scheduler defaulting
// (docs/upstream-contract.md#resource-model):
//  - each resource is read from limits first, then requests;
//  - count: `nvidia.com/gpu`; when absent but gpumem, gpumem-percentage or gpucores is in the
//    limits, count = default_gpu_num (no request when that is 0);
//  - memory: gpumem * memory_factor when > 0; else gpumem-percentage when > 0 (above 100 clamped
//    to 100; 0 and negative values ignored, as upstream's scheduler does); else
//    default_memory_mib when > 0; else 100 % of the card;
//  - cores: gpucores (clamped to 100); when absent, 100 if gpumem-percentage is given and is
//    100, or if neither gpumem-percentage nor gpumem is given (a bare `nvidia.com/gpu: 1` is an
//    exclusive whole card), otherwise default_cores. Upstream's scheduler books default_cores for
//    such a pod when it skipped the webhook (which writes gpucores=100); hami-cpp books the same as
//    for an admitted pod, on purpose (docs/migration.md);
//  - priority: `nvidia.com/priority` when given, else -1.
// Returns an empty vector when the container asks for no NVIDIA device (count 0 or absent),
// otherwise one DeviceRequest. Errors: non-integer values, negative values other than
// gpumem-percentage, gpumem * factor beyond int32 MiB (upstream's limit), counts beyond 1024.
StatusOr<std::vector<DeviceRequest>> ParseContainerDevices(const nlohmann::json& resources,
                                                           const ResourceConfig& config);

// The limits the mutating webhook adds to one container (resource name -> integer value) to
// make the defaulting explicit in the stored pod: the count (default_gpu_num) when only
// gpumem/%/cores are in the limits, and gpucores=100 for an exclusive card (no gpucores, and
// gpumem-percentage is 100 or neither it nor gpumem is given). Empty when nothing is added.
// Errors: those of ParseContainerDevices, and gpumem-percentage outside 0..100 (upstream's
// webhook denies it; its scheduler would clamp or ignore it).
StatusOr<std::map<std::string, int64_t>> ComputeAdmissionDefaults(const nlohmann::json& resources,
                                                                  const ResourceConfig& config);

// nvidia.com/{use,nouse}-gputype, {use,nouse}-gpuuuid (comma lists; blanks around items and empty
// items dropped), nvidia.com/vgpu-mode (hami-core|mig|mps; anything else is an error) and
// nvidia.com/numa-bind (on only for what Go's ParseBool reads as true, blanks trimmed:
// true/1/t/TRUE; any other value, garbage included, leaves it off, as upstream). Unknown
// annotations are ignored.
StatusOr<DeviceSelectors> ParseDeviceSelectors(
    const std::map<std::string, std::string>& annotations);

// hami.io/node-scheduler-policy: "binpack" | "spread" (surrounding blanks trimmed).
StatusOr<std::string> ParseNodeSchedulerPolicy(std::string_view value);

// hami.io/gpu-scheduler-policy: a comma chain of binpack|spread|topology-aware|mutex|numa, e.g.
// "binpack,numa" (items trimmed; repeats and binpack next to spread allowed, as upstream: the
// chain is an ordered list of sort keys), or one of hami-cpp's whole-placement policies alone
// ("fgd", "default"). Returns the keys in order. Errors: a blank value or empty item, an unknown
// key (case matters: "Binpack" is unknown), a whole-placement policy chained with anything.
StatusOr<std::vector<std::string>> ParseGpuSchedulerPolicy(std::string_view value);

// The pod annotations ParsePodJson reads leniently and found unusable, one sentence each: a
// non-boolean nvidia.com/numa-bind (binding stays off), a hami.io/node-scheduler-policy or
// hami.io/gpu-scheduler-policy the parsers above reject (the annotation is ignored and the
// scheduler's configured policy applies, as upstream). The webhook returns them as warnings.
std::vector<std::string> IgnoredAnnotations(const std::map<std::string, std::string>& annotations);

// hami.io/device-scoring-weights: "slot=<int>,core=<int>,memory=<int>" in any order. All three
// keys are required, each >= 0, at least one > 0; unknown or repeated keys are errors.
StatusOr<ScoringWeights> ParseScoringWeights(std::string_view value);

// CPU and memory a pod needs on its node.
struct CpuMemory {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  bool operator==(const CpuMemory&) const = default;
};

// The pod's effective CPU/memory request by Kubernetes' formula
// (docs/upstream-contract.md#pod-and-node-fields), per dimension:
//   max( sum(app containers) + sum(sidecars), max over init container i of
//        (request_i + sum of sidecars declared before i) )
// (spec.overhead is not included: PodRequest does not carry it).
CpuMemory EffectivePodRequest(const PodRequest& pod);

// The kinds of PodRequest::containers, in order (the shape EffectiveDeviceUsage needs).
std::vector<ContainerKind> ContainerKinds(const PodRequest& pod);

// Effective per-device usage of a placed pod (uuid -> usage), the amount the scheduler must
// count as taken on each device. Per device and per dimension (slots, MiB, cores):
//   max( peak during the init phase, sum(sidecars) + sum(app containers) )
// where the init phase runs regular init containers one at a time next to the sidecars declared
// before them (peak = max over init container i of usage_i + sidecars before i). With
// init_finished, the init containers no longer count: sum(sidecars) + sum(app containers).
// `kinds` describes allocation.containers in order. An allocation longer than `kinds` has its
// surplus trailing empty entries ignored (encoders end with an empty slot); one that is shorter
// is aligned to the end of `kinds` (older encoders dropped leading empty init entries); any
// remaining entries without a kind count as app containers.
std::map<std::string, DeviceUsage> EffectiveDeviceUsage(const std::vector<ContainerKind>& kinds,
                                                        const PodAllocation& allocation,
                                                        bool init_finished = false);

// The device memory and cores of `vendor` that a pod not yet placed counts against a namespace
// quota: EffectiveDeviceUsage (the same formula the scheduler charges a placed pod with) over a
// placement where each container's k-th device is the pod's k-th device, i.e. the fewest devices
// the scheduler can give it. A lower bound of what the scheduler charges once it has chosen the
// devices (the extender checks the quota again then). Requests by memory percentage count 0 MiB
// here (the device's size is not known yet).
struct DeviceTotals {
  int64_t mem_mib = 0;
  int64_t cores = 0;
  bool operator==(const DeviceTotals&) const = default;
};
DeviceTotals RequestedDeviceTotals(const PodRequest& pod, std::string_view vendor);
// RequestedDeviceTotals of every vendor the pod asks for (DeviceRequest::vendor -> totals).
std::map<std::string, DeviceTotals> RequestedDeviceTotalsByVendor(const PodRequest& pod);
// What a placed pod takes per vendor (ContainerDevice::vendor -> totals): EffectiveDeviceUsage
// summed over each vendor's devices, as a namespace quota counts it.
std::map<std::string, DeviceTotals> DeviceTotalsByVendor(const std::vector<ContainerKind>& kinds,
                                                         const PodAllocation& allocation,
                                                         bool init_finished = false);

}  // namespace hami::core
