#include "scheduler/policies/best_fit/best_fit.h"

#include <algorithm>

#include "scheduler/pickers.h"

namespace hami::scheduler::policies {

namespace {
// Paper definition: int64(100 * (1 - [0.5*(cpu_free - cpu_req)/128000 + 0.5*(gpu_free -
// gpu_req)/8000])) with 128 cores and 8 GPUs the largest node of the openb cluster. In integers:
// 100 - (a + 16 b) / 2560 truncated, a = CPU milli left, b = GPU milli left.
class BestFitScorer final : public NodeScorer {
 public:
  BestFitScorer() { bounded_ = true; }
  // The score falls as the GPU milli left grows: bound it with the most milli the pod can take (a
  // one-request pod: its share on the smallest device of the node; otherwise a whole GPU per device
  // asked).
  int64_t UpperBound(const CycleState& cycle, const NodeSummary& node) const override {
    int64_t take = 0;
    if (const core::DeviceRequest* r = cycle.single_request()) {
      int64_t m = 0;
      if (node.max_devmem > 0) {
        if (r->memreq_mib <= 0)
          m = r->mem_percentage > 0 ? 10 * std::min(r->mem_percentage, 100) : kMilliPerGpu;
        else if (node.min_devmem > 0)
          m = (r->memreq_mib * kMilliPerGpu + node.min_devmem - 1) / node.min_devmem;
        else
          m = kMilliPerGpu;  // some device has no memory figure: be safe
      }
      if (node.min_devcore > 0)
        m = std::max<int64_t>(
            m, (std::max(r->coresreq, 0) * int64_t{kMilliPerGpu} + node.min_devcore - 1) /
                   node.min_devcore);
      else if (node.max_devcore > 0)
        m = kMilliPerGpu;
      take = int64_t{std::max(r->nums, 0)} * std::min<int64_t>(m, kMilliPerGpu);
    } else {
      for (const auto& c : cycle.pod().containers)
        for (const auto& r : c.devices) take += int64_t{std::max(r.nums, 0)} * kMilliPerGpu;
    }
    const int64_t a = std::max<int64_t>(node.cpu_free - cycle.cpu_milli(), 0);
    const int64_t b = std::max<int64_t>(node.free_milli_total - take, 0);
    const int64_t x = a + 16 * b;
    return 100 - (x + 2559) / 2560;
  }
  int64_t Score(const CycleState& cycle, const NodeState& node,
                const Placement& pl) const override {
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
