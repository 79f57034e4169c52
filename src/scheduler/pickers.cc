#include "scheduler/pickers.h"

#include <algorithm>
#include <cstddef>

namespace hami::scheduler {

void TightestFitPicker::Pick(const PickContext& ctx, std::span<const int> candidates,
                             std::vector<int>* out) const {
  const size_t first = out->size();
  out->insert(out->end(), candidates.begin(), candidates.end());
  const auto mine = out->begin() + static_cast<std::ptrdiff_t>(first);  // what this call appended
  if (ctx.request.nums == 1) {
    // Common case: one device; a linear scan instead of a sort.
    auto best = mine;
    int best_free = ctx.FreeMilliOf(*best);
    for (auto it = best + 1; it != out->end(); ++it) {
      int f = ctx.FreeMilliOf(*it);
      if (f < best_free) best = it, best_free = f;
    }
    int chosen = *best;
    out->resize(first);
    out->push_back(chosen);
    return;
  }
  std::stable_sort(mine, out->end(),
                   [&](int a, int b) { return ctx.FreeMilliOf(a) < ctx.FreeMilliOf(b); });
  out->resize(first + std::min<size_t>(candidates.size(), ctx.request.nums));
}

void RandomPicker::Pick(const PickContext& ctx, std::span<const int> candidates,
                        std::vector<int>* out) const {
  std::vector<int> pool(candidates.begin(), candidates.end());
  const size_t k = std::min<size_t>(pool.size(), ctx.request.nums);
  for (size_t i = 0; i < k; ++i) {
    size_t j = i + static_cast<size_t>(ctx.cycle.rng().Uniform(pool.size() - i));
    std::swap(pool[i], pool[j]);
    out->push_back(pool[i]);
  }
}

}  // namespace hami::scheduler
