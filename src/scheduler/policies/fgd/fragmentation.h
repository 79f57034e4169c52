#pragma once
// Node fragmentation measured against a typical set of task shapes (FGD, Weng et al., ATC'23):
//   F(n) = sum over typical shapes m of p_m * frag_m(n), where frag_m(n) is all free GPU milli of n
//   when m cannot run on n (CPU, memory, too few fitting GPUs of an accepted model) or m is
//   CPU-only, and otherwise the free milli of the GPUs that cannot hold one of m's GPUs.
// Units: p_m in parts per million, free in milli-GPUs, so F is in ppm * milli (integers).
//
// Cost: per-shape tallies of a node (GPUs that can hold one of the shape's GPUs, free milli on the
// others) depend only on the node's state and on which shapes are typical, not on their weights.
// They are kept in a per-thread cache across decisions and recomputed, O(shapes * GPUs), only for a
// node whose state changed. F of a candidate change (a few GPUs' free milli, CPU, memory) is then
// O(shapes * changed GPUs), independent of the number of pods in the cluster.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "scheduler/node_state.h"
#include "scheduler/policies/fgd/shape_model.h"

namespace hami::scheduler::fgd {

// A GPU whose free milli changes to `free_after`.
struct FreeChange {
  int device = -1;
  int free_after = 0;
};

struct TallyCache;

// One decision's view of the typical set. Not thread-safe: one per cycle (it uses the calling
// thread's tally cache).
class FragmentationView {
 public:
  explicit FragmentationView(std::shared_ptr<const TypicalSet> set);

  // F of `node` with per-device free milli `free` (parallel to node.info.devices) and the node's
  // free CPU and memory (ignored when the node does not track them).
  int64_t Fragmentation(const NodeState& node, std::span<const int> free, int64_t cpu_free,
                        int64_t mem_free) const {
    return FragmentationAfter(node, free, cpu_free, mem_free, {}, cpu_free, mem_free);
  }
  // F of the same node after `changes`, with CPU and memory free `cpu_after` / `mem_after`.
  int64_t FragmentationAfter(const NodeState& node, std::span<const int> free, int64_t cpu_free,
                             int64_t mem_free, std::span<const FreeChange> changes,
                             int64_t cpu_after, int64_t mem_after) const;

  const TypicalSet& set() const { return *set_; }

 private:
  std::shared_ptr<const TypicalSet> set_;
  std::shared_ptr<const TrackedShapes> tracked_;  // the set's, or one made of its typical shapes
  // Typical shapes as arrays, for the inner loop; index_ points into tracked_.
  std::vector<int64_t> weight_, cpu_, mem_;
  std::vector<int> gpus_, index_;
};

// The FGD score of a change of fragmentation: int(100 * sigmoid(delta / 1000 GPUs)), where delta =
// F(before) - F(after) in ppm * milli. Integer thresholds, no floating point at decision time:
// 0..99.
int SigmoidScore(int64_t delta);

}  // namespace hami::scheduler::fgd
