#pragma once
// FGD paper baseline "GpuClustering": keep pods of one class (share or k-GPU) together, fuller
// nodes first.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeGpuClustering(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
