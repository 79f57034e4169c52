#pragma once
// A ResourceClaim (resource.k8s.io/v1) as this node's plugin reads it at NodePrepareResources: the
// results allocated to this driver and pool, and what each consumes (docs/dra.md#resourceclaim).
// Pure; every refusal is an InvalidArgument / FailedPrecondition naming the claim and the field.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "dra/slice.h"
#include "nlohmann/json_fwd.hpp"

namespace hami::dra {

// What the kubelet names a claim by (the Claim message).
struct ClaimRef {
  std::string namespace_;
  std::string name;
  std::string uid;
  bool operator==(const ClaimRef&) const = default;
};

// What one claim (all its results on one device, summed) takes from a device.
struct Usage {
  int64_t memory_mib = 0;
  int cores = 0;
  bool operator==(const Usage&) const = default;
};

// One allocation result of this driver and pool.
struct Share {
  std::string request;   // "gpu", or "<request>/<subrequest>" for firstAvailable
  std::string device;    // "gpu-<index>"
  std::string share_id;  // empty: the device is not shared
  Usage usage;
  bool operator==(const Share&) const = default;
};

struct ClaimAllocation {
  ClaimRef ref;
  std::vector<Share> shares;  // in the claim's result order
  // Per device name, the claim's shares on it summed (two requests on one GPU add up).
  std::map<std::string, Usage> ByDevice() const;
  bool operator==(const ClaimAllocation&) const = default;
};

// A claim UID or other name that becomes a file name and a CDI device name: [A-Za-z0-9] at both
// ends, [A-Za-z0-9._-] inside, at most 128 characters.
Status CheckName(std::string_view s, std::string_view what);

// Reads `claim` (a ResourceClaim object) for `ref`, keeping the results of `driver` in pool `pool`
// on `devices`. A result without consumedCapacity (consumable capacity off: an exclusive
// allocation) and a capacity it does not name take the whole device. Refused: not an object, a
// uid other than ref.uid, not allocated, no result for this driver and pool, a result of this
// driver naming another pool or an unknown device, a malformed or negative quantity, a
// consumption larger than the device. With `shared` false (the node publishes exclusive devices:
// consumable capacity is off) every result takes its whole device, whatever consumedCapacity says.
StatusOr<ClaimAllocation> ParseClaim(const nlohmann::json& claim, const ClaimRef& ref,
                                     const std::string& driver, const std::string& pool,
                                     const std::vector<DeviceCapacity>& devices,
                                     bool shared = true);
// The same from the API server's JSON text; garbage is an InvalidArgument, never a crash.
StatusOr<ClaimAllocation> ParseClaimText(std::string_view text, const ClaimRef& ref,
                                         const std::string& driver, const std::string& pool,
                                         const std::vector<DeviceCapacity>& devices);

}  // namespace hami::dra
