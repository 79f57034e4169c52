#include "scheduler/policies/fgd/fgd.h"

#include <algorithm>
#include <limits>

#include "scheduler/policies/fgd/fgd_common.h"

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeFgd(const PolicyConfig&) {
  auto model = std::make_shared<fgd::ShapeModel>();
  auto p = std::make_unique<Profile>();
  p->name = "fgd";
  p->picker = std::make_unique<fgd::FgdPicker>(model);
  p->scorer = std::make_unique<fgd::FgdScorer>(model);
  p->normalize = Normalize::kClamp;
  return p;
}

}  // namespace hami::scheduler::policies
