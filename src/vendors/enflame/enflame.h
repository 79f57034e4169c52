#pragma once
// The Enflame backends' factories (rows of vendors/registry.cc). See enflame.cc, vgcu.cc and
// docs/vendors.md.
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeEnflame(const YAML::Node& section);
// The keys the DRS and vGCU backends share: upstream's one record key for both models and the
// use/nouse selectors; `node_register` is the registration annotation (DRS only).
AnnotationKeys EnflameShareKeys(std::string node_register);
// Enflame vGCU, upstream's share-based model (its own row and section `enflamevgcu:`; vgcu.cc).
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeEnflameVgcu(const YAML::Node& section);
}  // namespace hami::vendors
