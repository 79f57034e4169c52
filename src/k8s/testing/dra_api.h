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
  // DRAPrioritizedList (KEP-4816, firstAvailable): beta and on from 1.34, GA in 1.36. Off, a
  // request's firstAvailable is dropped (it then fails validation: neither exactly nor it).
  bool prioritized_list = true;
  // DRAResourceClaimGranularStatusAuthorization: beta, on from 1.36. A write that adds, removes
  // or changes a driver's status.devices entries also needs that driver's name on the synthetic
  // subresource resourceclaims/driver, verb associated-node:<verb> (a service account of the node
  // the claim is allocated to) or arbitrary-node:<verb> (FakeApiServer::Authorize).
  bool granular_status_authorization = true;
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

// The drivers whose status.devices entries differ between two claim statuses (entries keyed by
// driver/pool/device/shareID: added, removed or changed), sorted.
std::vector<std::string> ModifiedDeviceStatusDrivers(const nlohmann::json& new_status,
                                                     const nlohmann::json& old_status);
// The node a claim status's allocation pins it to: its nodeSelector of one term with one
// matchFields `metadata.name In [node]` and nothing else; "" otherwise.
std::string AllocatedNodeName(const nlohmann::json& status);

}  // namespace hami::k8s::testing
