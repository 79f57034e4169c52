#pragma once
// hami-cpp's default placement policy: FGD's fragmentation gradient, measured against task shapes
// learned online, with the refinements that measured better on the openb traces (docs/sim.md,
// "Our default policy"). Selected by `--policy default` in `hami sim`, by the scheduler's default
// configuration, and per pod by `hami.io/gpu-scheduler-policy: default`.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeDefault(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
