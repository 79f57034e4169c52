#include "scheduler/policies/best_fit/best_fit.h"

#include <algorithm>

#include "scheduler/pickers.h"

namespace hami::scheduler::policies {

namespace {
// Paper definition: int64(100 * (1 - [0.5*(cpu_free - cpu_req)/128000 + 0.5*(gpu_free - gpu_req)/8000]))
// with 128 cores and 8 GPUs the largest node of the openb cluster. In integers:
// 100 - (a + 16 b) / 2560 truncated, a = CPU milli left, b = GPU milli left.
class BestFitScorer final : public NodeScorer {
 public:
  int64_t Score(const CycleState& cycle, const NodeState& node, const Placement& pl) const override {
    const int64_t a = std::max<int64_t>(node.cpu_free() - cycle.cpu_milli(), 0);
    const int64_t b = std::max<int64_t>(node.free_milli_total - pl.gpu_milli, 0);
    const int64_t x = a + 16 * b;
    return 100 - (x + 2559) / 2560;
  }
};
}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeBestFit(const PolicyConfig&) {
  auto p = std::make_unique<Profile>();
  p->name = "best-fit";
  p->picker = std::make_unique<TightestFitPicker>();
  p->scorer = std::make_unique<BestFitScorer>();
  p->normalize = Normalize::kMinMax;
  return p;
}

}  // namespace hami::scheduler::policies
