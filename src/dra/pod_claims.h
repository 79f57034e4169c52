#pragma once
// Which containers of a pod use which ResourceClaims (docs/dra.md#one-container-several-claims).
// Each claim's CDI device arms libvgpu for that claim alone (its GPUs visible, its limits, its
// region directory at the same container paths), so a container that references two claims of this
// driver would get two conflicting sets of edits and the runtime keeps the last: the plugin
// refuses such claims instead. Pure.
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "nlohmann/json_fwd.hpp"

namespace hami::dra {

// A pod a claim is reserved for (status.reservedFor[] with resource "pods" in the core group).
struct PodRef {
  std::string name;
  std::string uid;
  bool operator==(const PodRef&) const = default;
  bool operator<(const PodRef& o) const { return std::tie(name, uid) < std::tie(o.name, o.uid); }
};
std::vector<PodRef> ReservedPods(const nlohmann::json& claim);

// A container of `pod` (containers and init containers) that references two or more of the
// ResourceClaim objects named in `claims`, with those object names (sorted). A pod claim entry
// names its object by spec.resourceClaims[].resourceClaimName, or for a template by
// status.resourceClaimStatuses[].resourceClaimName; an entry not resolved yet names nothing.
// Malformed input yields nothing, never a crash.
struct ContainerClaims {
  std::string container;
  std::vector<std::string> claims;
  bool operator==(const ContainerClaims&) const = default;
};
std::vector<ContainerClaims> ContainersWithSeveralClaims(const nlohmann::json& pod,
                                                         const std::set<std::string>& claims);

}  // namespace hami::dra
