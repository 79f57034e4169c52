#pragma once
// fgd-balance: FGD (fgd/) plus the GPU capacity a placement strands for lack of CPU.
//
// FGD measures fragmentation against the typical task shapes one at a time: a node counts as
// fragmented for a shape only once that shape no longer fits. It misses the slow drain that decides
// most late failures on the openb traces: CPU-only and CPU-heavy pods eat the CPU of nodes whose
// GPUs are still free (an 8-GPU G2 node has 12 cores per GPU, a 2-GPU T4 node 52), until those GPUs
// can never be used. This policy learns online the CPU that GPU pods ask per milli-GPU (ratio of
// sums over the GPU pods seen) and counts, per node, the free GPU milli its free CPU cannot serve:
//   stranded(n) = max(0, free_gpu_milli(n) - free_cpu(n) / cpu_per_milli).
// Score level = int(100 * sigmoid((F(before) - F(after) - (stranded(after) - stranded(before))) /
// 1000)) with F and the sigmoid exactly as FGD (the stranded milli count with weight 1, like one
// more shape that every GPU pod has); inside a level, the smaller increase of stranded milli wins;
// then the node order. The GPU(s) inside the node are FGD's choice. Per decision O(1) beyond FGD's
// own cost.
//
// Model pressure: pods constrained to some GPU models (use-gputype) can only use those,
// so a flexible pod that takes a scarce model's GPU takes it from them. The policy learns online,
// per set of accepted models, the GPU milli the constrained pods ask (ModelDemand) and, with the
// cluster's GPUs per model (ClusterCache::gpu_capacity), the expected share of each model's
// capacity that pods constrained to it will ask when arrivals fill the cluster:
//   pressure(T) = sum over sets S that accept T of (demand share of S) * (GPUs) / (GPUs of S's
//   models)
// capped at one. A placement then also costs pressure(T) per milli it takes on a GPU of model T, in
// the same unit as the stranded milli (weight one). Without constrained pods it is zero everywhere.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "scheduler/framework.h"
#include "scheduler/policies/fgd/fgd_common.h"
#include "scheduler/registry.h"

namespace hami::scheduler::fgd_balance {

// What each observed pod added, by uid, so that a rolled-back reservation can be taken back
// (Unobserve) while a pod that left keeps what it taught (Forget). Derived defines
// SubtractLocked(const Record&), called with mu_ held.
template <class Derived, class Record>
class UidRecords {
 public:
  void Unobserve(const std::string& uid) {
    MutexLock lock(mu_);
    TakeBackLocked(uid);
  }
  void Forget(const std::string& uid) {
    MutexLock lock(mu_);
    records_.erase(uid);
  }

 protected:
  void TakeBackLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = records_.find(uid);
    if (it == records_.end()) return;
    static_cast<Derived*>(this)->SubtractLocked(it->second);
    records_.erase(it);
  }
  mutable Mutex mu_;
  std::unordered_map<std::string, Record> records_ ABSL_GUARDED_BY(mu_);  // by uid
};

struct CpuDemandRecord {
  int64_t cpu = 0, milli = 0;  // the sums added
  int64_t halvings = 0;        // the halvings done before
};

// CPU per milli-GPU asked by the GPU pods seen so far, as a ratio of two integer sums. Thread-safe.
class CpuDemand : public UidRecords<CpuDemand, CpuDemandRecord> {
 public:
  struct Ratio {
    int64_t cpu = 0;    // sum of the CPU milli of GPU pods
    int64_t milli = 0;  // sum of their GPU milli (0: no GPU pod seen, no stranding measured)
  };
  void Observe(const core::PodRequest& pod);
  // Observe() remembered under the pod's uid: Unobserve() takes it back (reservation rolled back),
  // Forget() drops the record (the pod left; what it taught stays). A second Observe replaces.
  void Observe(const std::string& uid, const core::PodRequest& pod);
  Ratio Get() const;

 private:
  friend class UidRecords<CpuDemand, CpuDemandRecord>;
  Ratio AddLocked(const core::PodRequest& pod)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // what was added
  void SubtractLocked(const CpuDemandRecord& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Ratio sums_ ABSL_GUARDED_BY(mu_);
  int64_t halvings_ ABSL_GUARDED_BY(mu_) = 0;
};

struct ModelDemandRecord {
  std::string models;  // '|'-joined; "" = counted in the total only
  int64_t milli = 0;
};

// GPU milli asked by pods per set of accepted GPU models (the shape's use-gputype patterns,
// '|'-joined; "" = any model), as learned at Reserve. Thread-safe.
class ModelDemand : public UidRecords<ModelDemand, ModelDemandRecord> {
 public:
  struct Sums {
    int64_t total = 0;  // GPU milli of every GPU pod seen
    std::vector<std::pair<std::vector<std::string>, int64_t>>
        constrained;  // accepted models, milli
  };
  static constexpr size_t kMaxSets =
      256;  // distinct model sets kept; pods of further sets count in total only
  void Observe(const std::string& uid, const core::PodRequest& pod);
  Sums Get() const;

 private:
  friend class UidRecords<ModelDemand, ModelDemandRecord>;
  void SubtractLocked(const ModelDemandRecord& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> by_models_ ABSL_GUARDED_BY(mu_);  // "" excluded
};

// Per device type, the pressure (ppm, 0..1e6) of constrained demand on its capacity (see above).
std::vector<std::pair<std::string, int64_t>> ModelPressure(const ModelDemand::Sums& demand,
                                                           const GpuCapacity& capacity);

// Free GPU milli that `cpu_free` cannot serve at `ratio` (0 when no GPU pod asked for CPU yet).
int64_t StrandedMilli(int64_t gpu_free_milli, int64_t cpu_free, const CpuDemand::Ratio& ratio);

class BalanceScorer final : public NodeScorer {
 public:
  BalanceScorer(std::shared_ptr<fgd::ShapeModel> shapes, std::shared_ptr<CpuDemand> demand,
                std::shared_ptr<ModelDemand> models = nullptr)
      : shapes_(std::move(shapes)), demand_(std::move(demand)), models_(std::move(models)) {
    bounded_ = true;
  }
  Status PreFilter(CycleState& cycle) const override;
  int64_t Score(const CycleState& cycle, const NodeState& node,
                const Placement& placement) const override;
  // FGD's bound on the fragmentation change, with the stranded milli falling at most to zero and
  // the least pressure cost the request can have on the node's model.
  int64_t UpperBound(const CycleState& cycle, const NodeSummary& node) const override;

  // The raw score from its parts (exposed for tests): level in the high bits, tie-break below.
  // `pressure_cost` (ppm * milli, >= 0) lowers the level only.
  static int64_t Combine(int64_t fgd_delta, int64_t stranded_increase, int64_t pressure_cost = 0);

 private:
  std::shared_ptr<fgd::ShapeModel> shapes_;
  std::shared_ptr<CpuDemand> demand_;
  std::shared_ptr<ModelDemand> models_;
};

// A profile placing with fgd-balance (FGD picker, balance scorer, fresh learned models), named
// `name`.
std::unique_ptr<Profile> MakeFgdBalanceProfile(std::string name);

}  // namespace hami::scheduler::fgd_balance

namespace hami::scheduler::policies {

StatusOr<std::unique_ptr<Profile>> MakeFgdBalance(const PolicyConfig& config);

}  // namespace hami::scheduler::policies
