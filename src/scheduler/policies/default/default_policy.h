#pragma once
// hami-cpp's default placement policy: today fgd-balance (src/scheduler/policies/fgd_balance/),
// FGD's fragmentation gradient against task shapes learned online, plus the GPU capacity a
// placement strands for lack of CPU. A refinement becomes the default only when it measures better
// than fgd on every openb trace (docs/sim.md). Selected by `--policy default` in `hami sim`, by the
// scheduler's default configuration, and per pod by `hami.io/gpu-scheduler-policy: default`.
#include <memory>

#include "scheduler/registry.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeDefault(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
