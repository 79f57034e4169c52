#include "vendors/nvidia/mig.h"

#include "core/annotations.h"
#include "core/mig.h"

namespace hami::vendors::nvidia {

Status AddMigDecision(const core::PodAllocation& allocation,
                      std::map<std::string, std::string>* annotations) {
  const std::vector<core::MigAllocation> mig = core::MigAllocationsOf(allocation);
  if (!mig.empty()) (*annotations)[core::kMigAllocations] = core::EncodeMigAllocations(mig);
  return OkStatus();
}

Status AttachMigDecision(const std::map<std::string, std::string>& annotations,
                         core::PodAllocation* allocation) {
  const auto it = annotations.find(core::kMigAllocations);
  if (it == annotations.end()) return OkStatus();
  HAMI_ASSIGN_OR_RETURN(std::vector<core::MigAllocation> entries,
                        core::DecodeMigAllocations(it->second));
  core::AttachMigAllocations(entries, allocation);
  return OkStatus();
}

}  // namespace hami::vendors::nvidia
