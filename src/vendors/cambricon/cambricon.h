#pragma once
// The Cambricon backend's factory (one row of vendors/registry.cc). See cambricon.cc and
// docs/vendors.md.
#include <memory>
#include <vector>

#include "common/status.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeCambricon(const YAML::Node& section);
}  // namespace hami::vendors
