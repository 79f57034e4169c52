#include "scheduler/policies/gpu_clustering/gpu_clustering.h"

#include "scheduler/pickers.h"

namespace hami::scheduler::policies {

namespace {
// Paper definition: band 75 when the node holds only pods of the pod's class, 50 when it holds this
// class among others, 25 when it holds no GPU pod, 0 when it holds other classes only; plus
// 25 * (8000 - node free GPU milli) / 8000. CPU-only pods score 0 (the tie-break decides).
class GpuClusteringScorer final : public NodeScorer {
 public:
  int64_t Score(const CycleState&, const NodeState& node, const Placement& pl) const override {
    const int c = pl.delta.pod_class;
    if (c == kNoPodClass) return 0;
    int64_t band = 0;
    if (node.class_count[c] > 0)
      band = node.classes_present == 1 ? 75 : 50;
    else if (node.classes_present == 0)
      band = 25;
    return band + 25 * (8000 - node.free_milli_total) / 8000;
  }
};
}  // namespace

StatusOr<std::unique_ptr<Profile>> MakeGpuClustering(const PolicyConfig&) {
  auto p = std::make_unique<Profile>();
  p->name = "gpu-clustering";
  p->picker = std::make_unique<TightestFitPicker>();
  p->scorer = std::make_unique<GpuClusteringScorer>();
  return p;
}

}  // namespace hami::scheduler::policies
