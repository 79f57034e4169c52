#pragma once
// FGD paper baseline "BestFit": the node with the least CPU and GPU left after placement (min-max
// normalised), tightest GPU.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeBestFit(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
