#pragma once
// The FGD picker and scorer, shared by the published policy (fgd) and our own variants.
#include <memory>

#include "scheduler/framework.h"
#include "scheduler/policies/fgd/fragmentation.h"
#include "scheduler/policies/fgd/shape_model.h"

namespace hami::scheduler::fgd {

// Per-cycle data: the typical set of this decision and its device-kind cache.
struct FgdCycle {
  explicit FgdCycle(std::shared_ptr<const TypicalSet> set) : view(std::move(set)) {}
  FragmentationView view;
};

// Observes the pod into the model (once per cycle) and stores the cycle's view. Both the picker and
// the scorer call it; the first one does the work.
Status PrepareCycle(ShapeModel& model, CycleState& cycle);
const FgdCycle& CycleOf(const ShapeModel& model, const CycleState& cycle);

// Chooses, one GPU at a time, the fitting GPU that leaves the node least fragmented; ties go to the
// lower index.
class FgdPicker final : public GpuPicker {
 public:
  explicit FgdPicker(std::shared_ptr<ShapeModel> model) : model_(std::move(model)) {}
  Status PreFilter(CycleState& cycle) const override { return PrepareCycle(*model_, cycle); }
  void Pick(const PickContext& ctx, std::span<const int> candidates, std::vector<int>* out) const override;

 private:
  std::shared_ptr<ShapeModel> model_;
};

// Fragmentation change of a placement, in ppm * milli (positive: the node is less fragmented after).
int64_t FragmentationDelta(const FragmentationView& view, const CycleState& cycle, const NodeState& node,
                           const Placement& placement);

class FgdScorer final : public NodeScorer {
 public:
  explicit FgdScorer(std::shared_ptr<ShapeModel> model) : model_(std::move(model)) {}
  Status PreFilter(CycleState& cycle) const override { return PrepareCycle(*model_, cycle); }
  int64_t Score(const CycleState& cycle, const NodeState& node, const Placement& placement) const override {
    return SigmoidScore(FragmentationDelta(CycleOf(*model_, cycle).view, cycle, node, placement));
  }

 private:
  std::shared_ptr<ShapeModel> model_;
};

// A profile placing with FGD (picker + scorer over one fresh shape model), named `name`.
std::unique_ptr<Profile> MakeFgdProfile(std::string name, const ShapeModelOptions& shapes = {});

}  // namespace hami::scheduler::fgd
