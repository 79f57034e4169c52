#pragma once
// The AWS Neuron backend's factory (one row of vendors/registry.cc). See awsneuron.cc and
// docs/vendors.md.
#include <memory>
#include <vector>

#include "common/status.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeAwsNeuron(const YAML::Node& section);
}  // namespace hami::vendors
