#pragma once
// What the API server does to resource.k8s.io/v1 objects on a write, for the fake API server:
// the strategy's dropping of fields whose feature gate is off, and the validation of
// ResourceSlices, DeviceClasses, ResourceClaims (spec and status) and ResourceClaimTemplates.
// docs/dra-placement.md ("The fake API server") lists what is checked and what is not.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hami::k8s::testing {

// The feature gates of the emulated server that change what resource.k8s.io/v1 accepts.
struct DraGates {
  bool consumable_capacity = true;    // DRAConsumableCapacity (KEP-5075): beta, on from 1.36
  bool partitionable_devices = true;  // DRAPartitionableDevices (KEP-4815): beta, on from 1.36
  bool device_taints = true;          // DRADeviceTaints (KEP-5055): beta, on from 1.36
  bool extended_resource = true;      // DRAExtendedResource (KEP-5004): beta, on from 1.36
};

// The gates of a server of version 1.<minor> (their defaults there), then `overrides` by gate name
// ("DRAConsumableCapacity", ...; unknown names are ignored).
DraGates DraGatesFor(int minor, const std::map<std::string, bool>& overrides);

// Is `plural` one of the four resource.k8s.io/v1 kinds handled here?
bool IsDraResource(const std::string& plural);

// Prepares and validates a write of `obj` (a whole object as it will be stored) of resource
// `plural`. `old` is the stored object on an update, null on a create; `status_write` says the
// write came through the /status subresource. Fields of disabled gates are removed from `obj`
// (on an update only when `old` does not use them, as the real strategies do), and a create of a
// ResourceClaim loses its status. Returns the field errors, worded as the API server words them
// ("spec.driver: Required value"); empty = valid.
std::vector<std::string> AdmitDraWrite(const std::string& plural, nlohmann::json& obj,
                                       const nlohmann::json* old, bool status_write,
                                       const DraGates& gates);

}  // namespace hami::k8s::testing
