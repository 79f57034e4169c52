#pragma once
// A pod as the API server sends it (Pod JSON) -> core::PodRequest: the vendor-neutral part
// (metadata, containers, CPU and memory, the scheduling-policy annotations), with the device
// requests read through PodDeviceReader (vendors::VendorSet: every vendor's rules, NVIDIA's
// included, live in src/vendors). Also the effective per-device usage of a placed pod, with init
// containers and sidecars collapsed the way Kubernetes runs them
// (docs/upstream-contract.md#where-usage-comes-from, #pod-and-node-fields).
//
// Every function here is pure: no I/O, no clock, no globals. Errors are InvalidArgument with a
// message that names the container, resource or annotation and says what was expected.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/annotations.h"
#include "core/model.h"
#include "core/quantity.h"
#include "nlohmann/json_fwd.hpp"

namespace hami::core {

// A container's `resources` object ({"limits":{..}, "requests":{..}}) with typed reads of its
// quantities. Every vendor's request rules read through it, so a quantity means the same thing to
// all of them. Not owning: the JSON must outlive it.
class ContainerResources {
 public:
  // null (no resources) reads as empty; anything but an object, or limits/requests that are not
  // objects, is an error.
  static StatusOr<ContainerResources> Make(const nlohmann::json& resources);
  static StatusOr<ContainerResources> Make(nlohmann::json&&) = delete;  // would dangle
  // Limits first, then requests (upstream's GenerateResourceRequests); nullopt when in neither.
  // Errors name where the value is: `limits[nvidia.com/gpumem]: ...`.
  StatusOr<std::optional<Quantity>> LimitOrRequest(const std::string& name) const;
  // Requests first, then limits (Kubernetes: requests default to limits).
  StatusOr<std::optional<Quantity>> RequestOrLimit(const std::string& name) const;
  // The value in limits and the one in requests, each when present (in that order).
  StatusOr<std::vector<Quantity>> Both(const std::string& name) const;
  bool InLimits(const std::string& name) const;

 private:
  const nlohmann::json* limits_ = nullptr;
  const nlohmann::json* requests_ = nullptr;
};

// The vendor side of a pod: what its enabled vendors read from it. ParsePodJson calls it in
// document order (each container right after its CPU and memory, then the pod's selectors), so the
// first error in the pod is the one reported. vendors::VendorSet implements it over its vendors.
class PodDeviceReader {
 public:
  virtual ~PodDeviceReader() = default;
  // The device requests of one container, given its `resources` (null when absent) and the pod's
  // annotations. Errors name the resource; ParsePodJson adds the container.
  virtual StatusOr<std::vector<DeviceRequest>> ContainerDevices(
      const nlohmann::json& resources,
      const std::map<std::string, std::string>& annotations) const = 0;
  // PodRequest::selectors from the pod's annotations.
  virtual StatusOr<DeviceSelectors> Selectors(
      const std::map<std::string, std::string>& annotations) const = 0;
};

// Parses a Pod object (JSON as the API server sends it,
// docs/upstream-contract.md#pod-and-node-fields) into a PodRequest:
//  - metadata: uid, namespace, name, labels, annotations (copied verbatim);
//  - containers: spec.initContainers first (restartPolicy "Always" -> kSidecar, else kInit), then
//    spec.containers (kApp), each keeping its declaration order and name;
//  - per container: cpu (milli, rounded up) and memory (MiB, rounded up) from requests, falling
//    back to limits as Kubernetes does; the device requests per `devices` (none when null);
//  - selectors per `devices` (empty when null);
//  - pod annotations per ParseNodeSchedulerPolicy, ParseGpuSchedulerPolicy and
//    ParseScoringWeights; a policy annotation those parsers reject is ignored (node_policy /
//    gpu_policy stay "", the configured default), as upstream ignores it.
// Absent fields are fine (a pod without GPUs parses to containers without devices). Wrong JSON
// types, bad quantities and invalid annotations are errors naming the path, e.g.
// `spec.containers[1] "trainer": nvidia.com/gpumem: quantity "4.5" must be a whole number`.
StatusOr<PodRequest> ParsePodJson(const nlohmann::json& pod,
                                  const PodDeviceReader* devices = nullptr);

// hami.io/node-scheduler-policy: "binpack" | "spread" (surrounding blanks trimmed).
StatusOr<std::string> ParseNodeSchedulerPolicy(std::string_view value);

// hami.io/gpu-scheduler-policy: a comma chain of binpack|spread|topology-aware|mutex|numa, e.g.
// "binpack,numa" (items trimmed; repeats and binpack next to spread allowed, as upstream: the
// chain is an ordered list of sort keys), or one of hami-cpp's whole-placement policies alone
// ("fgd", "default"). Returns the keys in order. Errors: a blank value or empty item, an unknown
// key (case matters: "Binpack" is unknown), a whole-placement policy chained with anything.
StatusOr<std::vector<std::string>> ParseGpuSchedulerPolicy(std::string_view value);

// The policy annotations ParsePodJson reads leniently and found unusable, one sentence each: a
// hami.io/node-scheduler-policy or hami.io/gpu-scheduler-policy the parsers above reject (the
// annotation is ignored and the scheduler's configured policy applies, as upstream). The webhook
// returns them as warnings, after each vendor's own (Vendor::IgnoredAnnotations).
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
