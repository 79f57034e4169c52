#pragma once
// NVIDIA's dynamic-MIG decision annotation (hami.io/vgpu-mig-allocations, core/mig.h) on top of the
// generic decision records: what the NVIDIA backend writes beside them and reads back.
#include <map>
#include <string>

#include "common/status.h"
#include "core/model.h"

namespace hami::vendors::nvidia {

// Adds hami.io/vgpu-mig-allocations when `allocation` (NVIDIA's devices only) holds MIG grants.
Status AddMigDecision(const core::PodAllocation& allocation,
                      std::map<std::string, std::string>* annotations);

// Puts the MIG grants of the pod's hami.io/vgpu-mig-allocations on `allocation` (decoded from the
// allocated record). A malformed annotation is an error (only the scheduler writes it); entries
// that name no device of the record are ignored (core::AttachMigAllocations).
Status AttachMigDecision(const std::map<std::string, std::string>& annotations,
                         core::PodAllocation* allocation);

}  // namespace hami::vendors::nvidia
