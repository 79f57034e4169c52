#pragma once
// FGD (Fragmentation Gradient Descent, Weng et al., USENIX ATC'23) as a production policy: place
// the pod where it increases the node's fragmentation (measured against the typical task shapes,
// learned online) the least. Score = int(100 * sigmoid((F(before) - F(after)) / 1000)), no
// normalisation; inside the node, the GPU(s) that minimise F(after).
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

// The published policy.
StatusOr<std::unique_ptr<Profile>> MakeFgd(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
