#pragma once
// The FGD picker and scorer, shared by the published policy (fgd) and our own variants.
#include <memory>

#include "scheduler/framework.h"
#include "scheduler/policies/fgd/fragmentation.h"
#include "scheduler/policies/fgd/shape_model.h"

namespace hami::scheduler::fgd {

// Weights of typical shapes above a threshold: values ascending, suffix sums of their weights.
struct WeightAbove {
  std::vector<int64_t> values, suffix;  // suffix[i] = sum of weights of entries i.. (size + 1)
  void Build(std::vector<std::pair<int64_t, int64_t>> value_weight);
  int64_t Above(int64_t x) const;  // total weight of entries with value > x
};

// Per-cycle tables for FgdScorer::UpperBound, built on first use.
struct FgdBoundTables {
  struct Kind {
    bool built = false;
    int64_t unaccepted = 0;  // weight of shapes that cannot use this kind of GPU (or use none)
    WeightAbove need;        // per-GPU milli of each GPU shape on this kind
    // For the cycle's request on this kind: the milli one GPU of it takes.
    int64_t drop = 0;
    int f_lb = 0;                     // least free milli of a GPU the request fits on
    std::vector<int64_t> need_above;  // need.Above(f) for f = 0..1000 (the free milli of a GPU)
  };
  bool built = false;
  int64_t total = 0;                 // sum of the typical weights
  WeightAbove cpu, mem, multi_gpus;  // node CPU, node memory, GPU count of multi-GPU shapes
  std::vector<Kind> kinds;           // by NodeSummary::kind
  int64_t last_delta = -1, last_score = SigmoidScore(-1);  // the last SigmoidScore asked
};

// Per-cycle data: the typical set of this decision and its device-kind cache.
struct FgdCycle {
  explicit FgdCycle(std::shared_ptr<const TypicalSet> set) : view(std::move(set)) {}
  FragmentationView view;
  mutable FgdBoundTables bounds;
  // The picker's last one-GPU choice on a node, so that the scorer does not evaluate it again.
  struct LastPick {
    const NodeState* node = nullptr;
    int device = -1, free_after = 0;
    int64_t free_total = 0, cpu_after = 0, mem_after = 0, fragmentation = 0;
  };
  mutable LastPick last;
};

// An upper bound of the FGD score of any placement of the cycle's pod on a node with summary `node`
// when the pod asks no GPU or one request of GPUs (kNoBound for other pods and for nodes with mixed
// devices). Every shape's
// fragmentation falls by at most the free milli the pod takes, and falls at all only for shapes
// that could not run on the node before or that could not use a GPU the pod takes; the second set
// is bounded from the node's CPU, memory, fully free GPUs and the least free milli a fitting GPU
// has.
int64_t FgdUpperBound(const FgdCycle& fc, const CycleState& cycle, const NodeSummary& node);
// The same bound on FragmentationDelta itself (ppm * milli), for scorers that build on it; kNoBound
// when there is none.
int64_t FragmentationDeltaUpperBound(const FgdCycle& fc, const CycleState& cycle,
                                     const NodeSummary& node);

// Stores the cycle's view of the model (once per cycle; the model is only read). Both the picker
// and the scorer call it; the first one does the work.
Status PrepareCycle(const ShapeModel& model, CycleState& cycle);
const FgdCycle& CycleOf(const ShapeModel& model, const CycleState& cycle);

// Chooses, one GPU at a time, the fitting GPU that leaves the node least fragmented; ties go to the
// lower index.
class FgdPicker final : public GpuPicker {
 public:
  explicit FgdPicker(std::shared_ptr<ShapeModel> model) : model_(std::move(model)) {}
  Status PreFilter(CycleState& cycle) const override { return PrepareCycle(*model_, cycle); }
  void Pick(const PickContext& ctx, std::span<const int> candidates,
            std::vector<int>* out) const override;

 private:
  std::shared_ptr<ShapeModel> model_;
};

// Fragmentation change of a placement, in ppm * milli (positive: the node is less fragmented
// after).
int64_t FragmentationDelta(const FragmentationView& view, const CycleState& cycle,
                           const NodeState& node, const Placement& placement);

class FgdScorer final : public NodeScorer {
 public:
  explicit FgdScorer(std::shared_ptr<ShapeModel> model) : model_(std::move(model)) {
    bounded_ = true;
  }
  int64_t UpperBound(const CycleState& cycle, const NodeSummary& node) const override {
    return FgdUpperBound(CycleOf(*model_, cycle), cycle, node);
  }
  Status PreFilter(CycleState& cycle) const override { return PrepareCycle(*model_, cycle); }
  int64_t Score(const CycleState& cycle, const NodeState& node,
                const Placement& placement) const override;

 private:
  std::shared_ptr<ShapeModel> model_;
};

// A profile placing with FGD (picker + scorer over one fresh shape model), named `name`.
std::unique_ptr<Profile> MakeFgdProfile(std::string name, const ShapeModelOptions& shapes = {});

}  // namespace hami::scheduler::fgd
