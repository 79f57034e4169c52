#pragma once
// FGD paper baseline "Random": a uniformly random feasible node and a uniformly random fitting GPU.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeRandom(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
