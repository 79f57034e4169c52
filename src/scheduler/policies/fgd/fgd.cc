#include "scheduler/policies/fgd/fgd.h"

#include "scheduler/policies/fgd/fgd_common.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeFgd(const PolicyConfig&) {
  return fgd::MakeFgdProfile("fgd");
}

}  // namespace hami::scheduler::policies
