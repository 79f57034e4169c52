#pragma once
// fgd-balance: FGD (fgd/) plus the GPU capacity a placement strands for lack of CPU.
//
// FGD measures fragmentation against the typical task shapes one at a time: a node counts as
// fragmented for a shape only once that shape no longer fits. It misses the slow drain that decides
// most late failures on the openb traces: CPU-only and CPU-heavy pods eat the CPU of nodes whose
// GPUs are still free (an 8-GPU G2 node has 12 cores per GPU, a 2-GPU T4 node 52), until those GPUs
// can never be used. This policy learns online the CPU that GPU pods ask per milli-GPU (ratio of sums
// over the GPU pods seen) and counts, per node, the free GPU milli its free CPU cannot serve:
//   stranded(n) = max(0, free_gpu_milli(n) - free_cpu(n) / cpu_per_milli).
// Score level = int(100 * sigmoid((F(before) - F(after) - (stranded(after) - stranded(before))) / 1000))
// with F and the sigmoid exactly as FGD (the stranded milli count with weight 1, like one more shape
// that every GPU pod has); inside a level, the smaller increase of stranded milli wins; then the node
// order. The GPU(s) inside the node are FGD's choice. Per decision O(1) beyond FGD's own cost.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "scheduler/framework.h"
#include "scheduler/policies/fgd/fgd_common.h"
#include "scheduler/registry.h"

namespace hami::scheduler::fgd_balance {

// CPU per milli-GPU asked by the GPU pods seen so far, as a ratio of two integer sums. Thread-safe.
class CpuDemand {
 public:
  struct Ratio {
    int64_t cpu = 0;     // sum of the CPU milli of GPU pods
    int64_t milli = 0;   // sum of their GPU milli (0: no GPU pod seen, no stranding measured)
  };
  void Observe(const core::PodRequest& pod);
  // Observe() remembered under the pod's uid: Unobserve() takes it back (reservation rolled back),
  // Forget() drops the record (the pod left; what it taught stays). A second Observe replaces.
  void Observe(const std::string& uid, const core::PodRequest& pod);
  void Unobserve(const std::string& uid);
  void Forget(const std::string& uid);
  Ratio Get() const;

 private:
  struct Added {
    Ratio sums;
    int64_t halvings = 0;   // halvings_ when added
  };
  Ratio AddLocked(const core::PodRequest& pod);   // requires mu_; what was added
  void SubtractLocked(const Added& a);            // requires mu_
  mutable std::mutex mu_;
  Ratio sums_;
  int64_t halvings_ = 0;
  std::unordered_map<std::string, Added> records_;   // by uid
};


// Free GPU milli that `cpu_free` cannot serve at `ratio` (0 when no GPU pod asked for CPU yet).
int64_t StrandedMilli(int64_t gpu_free_milli, int64_t cpu_free, const CpuDemand::Ratio& ratio);

class BalanceScorer final : public NodeScorer {
 public:
  BalanceScorer(std::shared_ptr<fgd::ShapeModel> shapes, std::shared_ptr<CpuDemand> demand)
      : shapes_(std::move(shapes)), demand_(std::move(demand)) {
    bounded_ = true;
  }
  Status PreFilter(CycleState& cycle) const override;
  int64_t Score(const CycleState& cycle, const NodeState& node, const Placement& placement) const override;
  // FGD's bound on the fragmentation change, with the stranded milli falling at most to zero.
  int64_t UpperBound(const CycleState& cycle, const NodeSummary& node) const override;

  // The raw score from its parts (exposed for tests): level in the high bits, tie-break below.
  static int64_t Combine(int64_t fgd_delta, int64_t stranded_increase);

 private:
  std::shared_ptr<fgd::ShapeModel> shapes_;
  std::shared_ptr<CpuDemand> demand_;
};

// A profile placing with fgd-balance (FGD picker, balance scorer, fresh learned models), named `name`.
std::unique_ptr<Profile> MakeFgdBalanceProfile(std::string name);

}  // namespace hami::scheduler::fgd_balance

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeFgdBalance(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
