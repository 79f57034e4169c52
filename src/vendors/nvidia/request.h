#pragma once
// NVIDIA's request rules (docs/upstream-contract.md#resource-model): its resource names and
// defaulting knobs (device-config.yaml `nvidia:`), one container's request after upstream's webhook
// and scheduler defaulting, the limits the webhook adds, and the selector annotations. NvidiaVendor
// (nvidia.cc) puts them behind the Vendor interface; nothing else calls them in production.
//
// Every function here is pure. Errors are InvalidArgument naming the resource or annotation.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "nlohmann/json_fwd.hpp"
#include "vendors/nvidia/annotations.h"
#include "vendors/vendor.h"

namespace hami::vendors::nvidia {

// What NVIDIA's request rules read from the cluster's configuration. Defaults are upstream's.
struct ResourceConfig {
  // resourceCountName, resourceMemoryName (MiB), resourceMemoryPercentageName,
  // resourceCoreName (percent), resourcePriorityName.
  ResourceNames nvidia = {kDefaultGpuResource, kDefaultGpuMemResource,
                          kDefaultGpuMemPercentageResource, kDefaultGpuCoresResource,
                          kDefaultGpuPriorityResource};
  int64_t default_memory_mib = 0;  // defaultMemory: MiB per GPU when neither gpumem nor % is given
  int default_cores = 0;           // defaultCores: percent per GPU when gpucores is not given
  int default_gpu_num = 1;         // defaultGPUNum: count added when only gpumem/%/cores are given
  int64_t memory_factor = 1;       // memoryFactor: gpumem is multiplied by this (>= 1)
  // Fails (naming the field) on empty resource names, negative defaults or memory_factor < 1.
  Status Validate() const;
};

// The NVIDIA request of one container given its `resources` object ({"limits":{..},
// "requests":{..}}, null when absent), after upstream's webhook and scheduler defaulting:
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
// nullopt when the container asks for no NVIDIA device (count 0 or absent). Errors: an invalid
// config, non-integer values, negative values other than gpumem-percentage, gpumem * factor beyond
// int32 MiB (upstream's limit), counts beyond 1024.
StatusOr<std::optional<core::DeviceRequest>> ParseContainerRequest(const nlohmann::json& resources,
                                                                   const ResourceConfig& config);

// The limits the mutating webhook adds to one container (resource name -> integer value) to
// make the defaulting explicit in the stored pod: the count (default_gpu_num) when only
// gpumem/%/cores are in the limits, and gpucores=100 for an exclusive card (no gpucores, and
// gpumem-percentage is 100 or neither it nor gpumem is given). Empty when nothing is added.
// Errors: those of ParseContainerRequest, and gpumem-percentage outside 0..100 (upstream's
// webhook denies it; its scheduler would clamp or ignore it).
StatusOr<std::map<std::string, int64_t>> ComputeAdmissionDefaults(const nlohmann::json& resources,
                                                                  const ResourceConfig& config);

// nvidia.com/{use,nouse}-gputype, {use,nouse}-gpuuuid (comma lists; blanks around items and empty
// items dropped), nvidia.com/mig-profile-preference (core::ParseMigProfilePreference; read
// leniently: entries that match no profile of a device are ignored there; the webhook checks them
// against migProfileAllowlist), nvidia.com/vgpu-mode (hami-core|mig|mps; anything else is an
// error) and nvidia.com/numa-bind (on only for what Go's ParseBool reads as true, blanks trimmed:
// true/1/t/TRUE; any other value, garbage included, leaves it off, as upstream). Unknown
// annotations are ignored.
StatusOr<core::DeviceSelectors> ParseDeviceSelectors(
    const std::map<std::string, std::string>& annotations);

// The NVIDIA annotations ParseDeviceSelectors reads leniently and found unusable, one sentence
// each: a non-boolean nvidia.com/numa-bind (binding stays off). The webhook returns them as
// warnings.
std::vector<std::string> IgnoredAnnotations(const std::map<std::string, std::string>& annotations);

}  // namespace hami::vendors::nvidia
