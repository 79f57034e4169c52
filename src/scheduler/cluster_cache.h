#pragma once
// The incremental cluster-usage cache (docs/design.md: no rebuild of every node's usage per
// decision).
//
// Holds per node its registration and usage (NodeState) and per pod what it adds where. Every
// update costs O(devices of the touched node); a decision reads each node once under that node's
// lock.
//
// Concurrency contract (many concurrent Schedule calls, e.g. the extender's HTTP threads):
//  - ForEachNode/WithNode run the callback with the node's lock held: the callback sees a
//    consistent snapshot of that node and must be short (microseconds) and must not call back into
//    the cache.
//  - Reserve commits a pod only if its delta still fits the node at commit time (checked under the
//    node's lock), so concurrent decisions can never oversubscribe memory, cores, slots, CPU or
//    memory of a node; the loser gets ABORTED and schedules again.
//  - Lock order: nodes_mu_ -> pods_mu_ -> a node's mu. Node add/remove takes nodes_mu_ exclusively.
//  - Every node also has a NodeSummary in one contiguous array, republished (sequence lock) after
//  each
//    change of the node: a View reads it without the node's lock, so a decision can reject or bound
//    a node without touching the node itself.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"
#include "common/status.h"
#include "core/model.h"
#include "scheduler/node_state.h"

namespace hami::scheduler {

// Node CPU/memory and container kinds of a placed pod (for AddPod; the allocation only names
// devices). kinds parallel to PodAllocation::containers; empty = all app containers.
struct PlacedPodResources {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<core::ContainerKind> kinds;
  bool init_finished = false;  // every init container has succeeded: their devices are given back
};

class ClusterCache {
 public:
  using PodResources = PlacedPodResources;

  ClusterCache() = default;
  ClusterCache(const ClusterCache&) = delete;
  ClusterCache& operator=(const ClusterCache&) = delete;

  // Adds or replaces a node. Usage of pods already known on it is kept (matched by device uuid).
  void UpsertNode(core::NodeInfo info);
  // Removes a node; its pods are remembered and count again if the node comes back.
  void RemoveNode(const std::string& name);

  // Records a pod that is already placed (decision annotations after a restart, or a watch
  // event). Ground truth: applied without a fit check. Replaces an earlier record of the uid.
  // A node that is not known yet gets the usage when it is upserted.
  Status AddPod(const std::string& uid, const core::PodAllocation& allocation,
                const PodResources& res = {});
  // Forgets a pod (deleted, finished, or a reservation given up). NOT_FOUND when unknown.
  Status RemovePod(const std::string& uid);

  // Commits `delta` for `uid` on `node` if it still fits. ALREADY_EXISTS when uid is recorded,
  // NOT_FOUND when the node is unknown, ABORTED when it no longer fits (schedule again).
  Status Reserve(const std::string& uid, const std::string& node, const PodDelta& delta);

  // Calls f(const NodeState&) for every node in name order (names == nullptr) or for the named
  // nodes in the given order (unknown names are passed to missing(name)). The node's lock is held
  // during f.
  template <typename F, typename M>
  void ForEachNode(const std::vector<std::string>* names, F&& f, M&& missing) const {
    ReaderLock l(nodes_mu_);
    if (names == nullptr) {
      for (const auto& e : order_) {
        MutexLock nl(e->mu);
        f(static_cast<const NodeState&>(e->state));
      }
      return;
    }
    for (const auto& name : *names) {
      auto it = by_name_.find(name);
      if (it == by_name_.end()) {
        missing(name);
        continue;
      }
      MutexLock nl(it->second.entry->mu);
      f(static_cast<const NodeState&>(it->second.entry->state));
    }
  }

  // Whether the cache holds the node (no node lock, no copy).
  bool HasNode(const std::string& name) const {
    ReaderLock l(nodes_mu_);
    return by_name_.count(name) != 0;
  }

  // Calls f(const NodeState&) for one node under its lock; false when the node is unknown.
  template <typename F>
  bool WithNode(const std::string& name, F&& f) const {
    ReaderLock l(nodes_mu_);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return false;
    MutexLock nl(it->second.entry->mu);
    f(static_cast<const NodeState&>(it->second.entry->state));
    return true;
  }

  // A read view of all nodes, valid during Read(): nodes by index in name order, their summaries
  // (lock-free), and each node's full state under its lock. Node add/remove waits for the view.
  class View {
   public:
    // Used only inside Read(), which holds nodes_mu_ shared; clang cannot follow that into the
    // caller's lambda, hence ABSL_NO_THREAD_SAFETY_ANALYSIS on the accessors.
    size_t size() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return c_.order_.size(); }
    // Index of the node in name order, or -1 when unknown.
    int IndexOf(const std::string& name) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      auto it = c_.by_name_.find(name);
      return it == c_.by_name_.end() ? -1 : static_cast<int>(c_.slot_index_[it->second.slot]);
    }
    // A consistent copy of the node's summary (retries while the node is being updated).
    NodeSummary Summary(size_t i) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return c_.SlotAt(c_.order_slot_[i]).Read();
    }
    // Calls f(const NodeState&) under the node's lock.
    template <typename F>
    void WithNode(size_t i, F&& f) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      const Entry& e = *c_.order_[i];
      MutexLock nl(e.mu);
      f(static_cast<const NodeState&>(e.state));
    }

   private:
    friend class ClusterCache;
    explicit View(const ClusterCache& c) : c_(c) {}
    const ClusterCache& c_;
  };
  template <typename F>
  void Read(F&& f) const {
    ReaderLock l(nodes_mu_);
    f(View(*this));
  }

  // A copy of one node's state (tests, reports).
  std::optional<NodeState> Snapshot(const std::string& name) const;
  std::vector<std::string> NodeNames() const;
  // GPUs per device type over all nodes, republished on every node change (a pointer copy to read).
  std::shared_ptr<const GpuCapacity> gpu_capacity() const { return std::atomic_load(&capacity_); }

  size_t node_count() const;
  size_t pod_count() const;

 private:
  struct Entry {
    explicit Entry(NodeState s) : state(std::move(s)) {}
    mutable Mutex mu;
    NodeState state ABSL_GUARDED_BY(mu);
    size_t slot = 0;  // its summary in slots_ (and its entry in slot_index_); guarded by nodes_mu_
  };
  // What a name finds. The slot is kept here, next to the key the probe has already read, so that
  // IndexOf (once per NodeNames entry of a /filter) reads no Entry: at 5000 nodes the Entries do
  // not stay in cache between requests, and that miss per name was most of a decision's time.
  struct Named {
    Entry* entry;
    uint32_t slot;
  };
  // One node's summary. The registration-fixed part is written only with nodes_mu_ held
  // exclusively; the usage part under the node's lock (one writer) behind a sequence counter.
  struct Slot {
    static constexpr int kDynamic = 14;
    NodeSummary fixed;
    std::atomic<uint64_t> seq{0};
    std::atomic<int64_t> dyn[kDynamic] = {};
    void Publish(const NodeSummary& s);  // the usage part
    NodeSummary Read() const;
  };
  // Republishes the usage part of e's summary; requires e.mu (or nodes_mu_ exclusively).
  void PublishUsage(const Entry& e) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    SlotAt(e.slot).Publish(e.state.Summarize());
  }
  static constexpr size_t kSlotChunk = 1024;
  Slot& SlotAt(size_t i) const { return slots_[i / kSlotChunk][i % kSlotChunk]; }
  // Rewrites e's whole summary (kind included); requires nodes_mu_ exclusively.
  void PublishAllLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_);
  struct PodRecord {
    std::string node;
    PodDelta delta;                  // device indices valid while applied
    std::vector<std::string> uuids;  // parallel to delta.devices (to remap on node changes)
    bool applied = false;
  };

  // Maps the record's uuids onto `state` (devices that are gone are dropped) and applies it.
  static void ApplyRecord(NodeState& state, PodRecord& rec);
  // Effective per-device usage of an allocation (core::EffectiveDeviceUsage).
  static PodDelta DeltaFromAllocation(const core::PodAllocation& alloc, const PodResources& res,
                                      std::vector<std::string>* uuids);
  // Rewrites slot_index_ for order_[at..]; requires nodes_mu_ exclusively.
  void ReindexFromLocked(size_t at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_);
  // Requires nodes_mu_ held exclusively.
  void ApplyPendingLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_);
  // Adds (sign = +1) or removes a node's GPUs to capacity_; requires nodes_mu_ exclusively.
  void CountCapacityLocked(const core::NodeInfo& info, int sign)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(nodes_mu_);

  // std:: locks rather than absl::Mutex: Debian's abseil is built with deadlock detection, which
  // costs more than the node evaluation itself on the decision path.
  mutable SharedMutex nodes_mu_;
  std::vector<std::unique_ptr<Entry>> order_ ABSL_GUARDED_BY(nodes_mu_);  // sorted by name
  // Flat: one probe per NodeNames entry.
  absl::flat_hash_map<std::string, Named> by_name_ ABSL_GUARDED_BY(nodes_mu_);
  // Position in order_ of the node holding each summary slot (dense: IndexOf's second read).
  std::vector<uint32_t> slot_index_ ABSL_GUARDED_BY(nodes_mu_);
  // Summaries in chunks of kSlotChunk (contiguous for the scan, never moved): slot_count_ grows
  // only (a removed node's slot is reused); order_slot_ is parallel to order_.
  std::vector<std::unique_ptr<Slot[]>> slots_;  // shape guarded by nodes_mu_ (read lock-free)
  size_t slot_count_ ABSL_GUARDED_BY(nodes_mu_) = 0;
  std::vector<uint32_t> order_slot_ ABSL_GUARDED_BY(nodes_mu_);
  std::vector<uint32_t> free_slots_ ABSL_GUARDED_BY(nodes_mu_);
  // Interned device kinds (vendor, type, memory, cores) for NodeSummary::kind.
  std::vector<std::tuple<std::string, std::string, int64_t, int>> kinds_ ABSL_GUARDED_BY(nodes_mu_);
  GpuCapacity gpus_by_type_ ABSL_GUARDED_BY(nodes_mu_);
  std::shared_ptr<const GpuCapacity> capacity_ =
      std::make_shared<const GpuCapacity>();  // atomic_load/store

  mutable Mutex pods_mu_ ABSL_ACQUIRED_AFTER(nodes_mu_);
  std::unordered_map<std::string, PodRecord> pods_ ABSL_GUARDED_BY(pods_mu_);
  std::unordered_map<std::string, std::unordered_set<std::string>> node_pods_
      ABSL_GUARDED_BY(pods_mu_);
};

}  // namespace hami::scheduler
