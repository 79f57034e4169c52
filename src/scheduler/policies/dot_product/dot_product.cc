#include "scheduler/policies/dot_product/dot_product.h"

#include <algorithm>

#include "scheduler/pickers.h"

namespace hami::scheduler::policies {

namespace {
// Paper definition (merge, normalised by the largest node: 128 cores, 8 GPUs):
// dot = (cpu_free/128000)(cpu_req/128000) + (gpu_free/8000)(gpu_req/8000); score = int64(100*(1 -
// dot/2)). In integers with D = 128000^2 (and 128000^2 / 8000^2 = 256): (100 D - 50 (cf cr + 256 gf
// gr)) / D.
class DotProductScorer final : public NodeScorer {
 public:
  int64_t Score(const CycleState& cycle, const NodeState& node,
                const Placement& pl) const override {
    constexpr int64_t kD = int64_t{128000} * 128000;
    const int64_t cf = std::max<int64_t>(node.cpu_free(), 0);
    const int64_t gf = node.free_milli_total;
    const int64_t num = 100 * kD - 50 * (cf * cycle.cpu_milli() + 256 * gf * pl.gpu_milli);
    return std::max<int64_t>(num, 0) / kD;
  }
};
}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeDotProduct(const PolicyConfig&) {
  auto p = std::make_unique<Profile>();
  p->name = "dot-product";
  p->picker = std::make_unique<TightestFitPicker>();
  p->scorer = std::make_unique<DotProductScorer>();
  return p;
}

}  // namespace hami::scheduler::policies
