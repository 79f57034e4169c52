#include "scheduler/policies/gpu_packing/gpu_packing.h"

#include <algorithm>

#include "scheduler/pickers.h"

namespace hami::scheduler::policies {

namespace {
// Paper definition, from high to low:
//  1. the pod uses only partly used GPUs: 100 - (sum over them of free%)/10, at least 50;
//  2. it has to use fully free GPUs of a used node: 50 - (#fully free GPUs it uses), at least 33;
//  3. the node is empty: 33 - #GPUs (at least #GPUs, as published).
// CPU-only pods score 0 everywhere.
class GpuPackingScorer final : public NodeScorer {
 public:
  int64_t Score(const CycleState&, const NodeState& node, const Placement& pl) const override {
    if (pl.gpus == 0) return 0;
    if (node.fully_free == node.gpus())
      return std::max<int64_t>(33 - node.fully_free, node.fully_free);
    int64_t fully_free_used = 0, free_pct = 0;
    for (const auto& d : pl.delta.devices) {
      const int before = node.free_milli[d.device];
      fully_free_used += before == kMilliPerGpu;
      free_pct += int64_t{before} * 100 / kMilliPerGpu;
    }
    if (fully_free_used > 0) return std::max<int64_t>(50 - fully_free_used, 33);
    return std::max<int64_t>(100 - free_pct / 10, 50);
  }
};
}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeGpuPacking(const PolicyConfig&) {
  auto p = std::make_unique<Profile>();
  p->name = "gpu-packing";
  p->picker = std::make_unique<TightestFitPicker>();
  p->scorer = std::make_unique<GpuPackingScorer>();
  return p;
}

}  // namespace hami::scheduler::policies
