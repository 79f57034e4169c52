#pragma once
// The task-shape distribution that fragmentation-aware policies measure fragmentation against,
// learned online from the pods the scheduler sees (never read from a trace file).
//
// A shape is what a pod asks of one node: CPU, memory, number of GPUs, the per-GPU request as the
// pod wrote it (MiB or percent of memory, percent of cores) and the GPU models it accepts. The
// model keeps an exponentially decayed histogram of shapes; its snapshot is the "typical set" of
// the FGD paper: the most frequent shapes, heaviest first, until they cover `coverage_pct` of the
// weight, with weights renormalised to one million (parts per million, integers).
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "core/model.h"

namespace hami::scheduler::fgd {

struct TaskShape {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;            // 0 = CPU-only
  int64_t memreq_mib = 0;  // per GPU
  int mem_percentage = 0;  // per GPU, when memreq_mib == 0
  int coresreq = 0;        // per GPU
  std::string models;      // accepted models, '|'-joined use-gputype patterns; "" = any
  bool operator==(const TaskShape&) const = default;
};

struct TaskShapeHash {
  size_t operator()(const TaskShape& s) const;
};

// The shape of a pod: its effective node resources and its first device request (the openb task
// model: one request per pod). Pods asking several vendors or containers with different per-GPU
// requests use the largest per-GPU request and the total GPU count.
TaskShape ShapeOf(const core::PodRequest& pod);

struct TypicalShape {
  TaskShape shape;
  std::vector<std::string> models;  // `shape.models` split, for matching
  int64_t weight_ppm = 0;           // sums to 1'000'000 over the set
  int tracked = -1;  // index into TypicalSet::tracked (-1: the set has no tracked list)
};

// Every shape the model tracks, in first-seen order. Shared by the snapshots taken while no shape
// is added or forgotten, so per-node tallies keyed on it survive weight changes and typical-set
// churn.
struct TrackedShapes {
  std::vector<TaskShape> shapes;
  std::vector<std::vector<std::string>> models;  // shapes[i].models split
};

struct TypicalSet {
  std::vector<TypicalShape> shapes;              // the typical ones, in first-seen order
  std::shared_ptr<const TrackedShapes> tracked;  // null for hand-built sets: `shapes` is the list
  uint64_t version = 0;                          // changes with every snapshot (weights)
  uint64_t membership = 0;  // process-unique id of the tracked list (or of `shapes` when none)
  int64_t observed = 0;     // pods observed when the snapshot was taken
};

struct ShapeModelOptions {
  int coverage_pct = 95;      // the paper's 95 %
  double half_life = 0;       // in observations; 0 = no decay (the paper's static distribution)
  size_t max_tracked = 4096;  // distinct shapes kept; the lightest is forgotten beyond this
  size_t max_typical = 128;   // cap on the typical set
  // Weigh each observation by the GPUs it asks (a k-GPU task counts k, a share or CPU-only task 1)
  // instead of counting tasks: the metric that matters is GPU capacity, and rare whole-node tasks
  // that strand the most capacity when they fail would otherwise fall out of the typical set.
  bool demand_weighted = false;
};

// Thread-safe. Observe() costs O(distinct shapes · log) under a mutex; Snapshot() is a pointer
// copy.
class ShapeModel {
 public:
  explicit ShapeModel(ShapeModelOptions options = {});
  void Observe(const core::PodRequest& pod);
  void ObserveShape(const TaskShape& shape);
  // Observe() remembered under the pod's uid, so that Unobserve() can take exactly that weight back
  // (a reservation rolled back) and Forget() can drop the record (the pod left; its weight stays).
  // A second Observe for a uid still recorded replaces the first.
  void Observe(const std::string& uid, const core::PodRequest& pod);
  void Unobserve(const std::string& uid);
  void Forget(const std::string& uid);
  size_t recorded() const;  // uids with a record (tests)
  std::shared_ptr<const TypicalSet> Snapshot() const;

 private:
  double AddLocked(const TaskShape& shape) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // the weight added
  void SubtractLocked(const TaskShape& shape, double weight, double log_scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Rebuild() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShapeModelOptions options_;
  mutable Mutex mu_;
  struct Tracked {
    double weight = 0;
    uint64_t id = 0;    // first-seen order
    int64_t count = 0;  // observations not taken back; the shape is dropped when none is left
  };
  struct Record {
    TaskShape shape;
    double weight = 0;  // as added, in the units of log_scale_ at that time
    double log_scale = 0;
  };
  std::unordered_map<std::string, Record> records_ ABSL_GUARDED_BY(mu_);  // by uid
  double log_scale_ ABSL_GUARDED_BY(mu_) =
      0;  // log2 of the product of every rescale divisor so far
  std::unordered_map<TaskShape, Tracked, TaskShapeHash> weights_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t membership_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const TrackedShapes> tracked_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> tracked_ids_ ABSL_GUARDED_BY(mu_);  // ids of tracked_->shapes, ascending
  bool tracked_dirty_ ABSL_GUARDED_BY(mu_) =
      true;  // a shape was added or forgotten since tracked_ was built
  double increment_ ABSL_GUARDED_BY(mu_) =
      1.0;  // grows by the decay factor instead of decaying every entry
  double growth_ ABSL_GUARDED_BY(mu_) = 1.0;
  int64_t observed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const TypicalSet> snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::scheduler::fgd
