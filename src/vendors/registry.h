#pragma once
// The vendor registry: one row per backend (registry.cc). A row names the config section and the
// factory that builds the backend's Vendor instances from that section (one backend may yield
// several: one per Ascend/Iluvatar chip, GPU + sGPU for MetaX, ...).
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {

using VendorFactory = StatusOr<std::vector<std::unique_ptr<Vendor>>> (*)(const YAML::Node& section);

struct VendorRow {
  const char* section;      // device-config.yaml key
  bool enabled_by_default;  // enabled without a section (NVIDIA)
  VendorFactory make;       // section is an undefined node when absent
};

std::span<const VendorRow> VendorRegistry();

}  // namespace hami::vendors
