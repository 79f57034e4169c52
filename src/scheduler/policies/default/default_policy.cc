#include "scheduler/policies/default/default_policy.h"

#include "scheduler/policies/fgd_balance/fgd_balance.h"

namespace hami::scheduler::policies {

// fgd-balance leaves fewer GPUs unallocated than fgd on every openb trace (docs/sim.md, 10 seeds).
StatusOr<std::unique_ptr<Profile>> MakeDefault(const PolicyConfig&) {
  return fgd_balance::MakeFgdBalanceProfile("default");
}

}  // namespace hami::scheduler::policies
