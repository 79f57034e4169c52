#pragma once
// The Ascend backend's factory (one row of vendors/registry.cc). See ascend.cc and docs/vendors.md.
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "nlohmann/json_fwd.hpp"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeAscend(const YAML::Node& section);

// The pod annotation huawei.com/vnpu-mode's key.
inline constexpr char kAscendVnpuModeKey[] = "huawei.com/vnpu-mode";
// Upstream v2.11 (#2975): a container limit on an Ascend chip's `-core` resource above 0 asks for
// hami-core soft split. Returns "hami-core" when some container (init or app) of `pod_spec` has one
// and `annotations` name no vnpu mode: the mode the webhook writes before it reviews the pod. A pod
// that names a mode keeps it (with `template`, the core request is denied as before).
std::optional<std::string> ImpliedVnpuMode(std::span<const std::unique_ptr<Vendor>> vendors,
                                           const nlohmann::json& pod_spec,
                                           const std::map<std::string, std::string>& annotations);
}  // namespace hami::vendors
