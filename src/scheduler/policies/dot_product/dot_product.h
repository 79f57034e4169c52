#pragma once
// FGD paper baseline "DotProd" (Tetris; merge, max): the node whose free (CPU, GPU) vector has the
// smallest dot product with the request.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeDotProduct(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
