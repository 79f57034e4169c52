#pragma once
// GPU pickers shared by several policies (the FGD paper's within-node GPU choice).
#include "scheduler/framework.h"

namespace hami::scheduler {

// "best": the fitting devices with the least free milli first (the tightest fit for a sharing pod;
// for whole-GPU pods every candidate is fully free, so the lowest indices), ties by lower index.
class TightestFitPicker final : public GpuPicker {
 public:
  void Pick(const PickContext& ctx, std::span<const int> candidates,
            std::vector<int>* out) const override;
};

// "random": request.nums devices drawn uniformly without replacement from the fitting ones.
class RandomPicker final : public GpuPicker {
 public:
  void Pick(const PickContext& ctx, std::span<const int> candidates,
            std::vector<int>* out) const override;
};

}  // namespace hami::scheduler
