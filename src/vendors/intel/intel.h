#pragma once
// The Intel GPU backend's factory (one row of vendors/registry.cc). See intel.cc and
// docs/vendors.md.
#include <memory>
#include <vector>

#include "common/status.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeIntel(const YAML::Node& section);
}  // namespace hami::vendors
