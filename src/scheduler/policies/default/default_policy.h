#pragma once
// hami-cpp's default placement policy: FGD's fragmentation gradient, measured against task shapes
// learned online. It is the slot for refinements that measure better on every openb trace
// (docs/sim.md); none has yet, so today it places exactly as `fgd` does (with its own shape model). Selected by `--policy default` in `hami sim`, by the scheduler's default
// configuration, and per pod by `hami.io/gpu-scheduler-policy: default`.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeDefault(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
