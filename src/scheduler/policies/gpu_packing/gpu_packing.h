#pragma once
// FGD paper baseline "GpuPacking": prefer a partly used GPU, then free GPUs on a used node, then an
// empty node.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeGpuPacking(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
