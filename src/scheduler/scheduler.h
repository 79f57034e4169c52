#pragma once
// The scheduler facade used by the extender and by `hami sim`: one policy (Profile) over one
// incremental ClusterCache.
//
// Contract:
//  - Schedule() decides, it changes nothing: not the cache, not what the policies have learned, not
//    the random stream (without ScheduleOptions::rng, a decision draws from a stream seeded by the
//    scheduler's seed and the number of reservations so far). It is thread-safe and may run
//    concurrently with itself and with every other method. It returns OK with an empty
//    Decision::node when no node fits (Decision::failures then says why, when explain is set); an
//    error only for a request that can never be scheduled as written (e.g. a bad
//    hami.io/gpu-scheduler-policy annotation).
//  - Reserve() commits a Decision. It succeeds only if the decision still fits the node at commit
//    time (ABORTED otherwise: call Schedule again). ScheduleAndReserve() does that loop. A
//    committed decision is what the policy learns from (Profile::reserve, framework.h): once per
//    reservation.
//  - Unreserve() rolls a reservation back (usage and learning); RemovePod() gives the usage of a
//  pod
//    that ran back and keeps what the policy learned from it; AddPod() records a pod placed earlier
//    (restart, watch); UpsertNode()/RemoveNode() follow node registrations.
//  - Scores in a Decision are 0..100, higher is better. Ties go to the node that sorts first by
//  name
//    (among all nodes, or among the candidates when candidate_nodes is given).
//  - Randomness comes only from ScheduleOptions::rng, or from the scheduler's own seeded stream; a
//    profile that draws visits the candidates in name order, so their order never matters.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "core/model.h"
#include "scheduler/cluster_cache.h"
#include "scheduler/framework.h"
#include "scheduler/registry.h"
#include "scheduler/usage_rule.h"

namespace hami::scheduler {

struct SchedulerOptions {
  std::string policy = "hami";  // a registry name (registry.h)
  PolicyConfig config;
  uint64_t seed = 1;  // for randomized policies when no rng is passed per call
  // Per-device rules of the enabled non-NVIDIA vendors (vendor_rules.h); null = generic checks
  // only. Not owned; must outlive the scheduler.
  const VendorRules* vendor_rules = nullptr;
  // Usage-aware placement of pods with a trusted usage profile (usage_rule.h); off by default.
  UsageRuleOptions usage;
};

struct ScheduleOptions {
  Rng* rng = nullptr;    // per-call randomness (the simulator passes its run's stream)
  bool explain = false;  // fill Decision::failures and Decision::scores (costs a string per node)
  // Score every feasible node even when the policy can bound its scores (same decision, slower; for
  // benchmarks and tests).
  bool full_scan = false;
  // What the pod's namespace quotas leave it (framework.h); null = no quota. Not owned; must
  // outlive the call. A node where no choice of cards stays within it does not fit
  // (ResourceQuotaNotFit).
  const QuotaRoom* quota = nullptr;
};

struct NodeFailure {
  std::string node;
  std::string reason;     // "3/8 CardInsufficientMemory, 5/8 CardTypeMismatch"
  bool retryable = true;  // false: can never fit on this node as it is registered
};

struct NodeScore {
  std::string node;
  int score = 0;  // 0..100
};

struct Decision {
  std::string node;                // empty: no node fits
  core::PodAllocation allocation;  // per container (PodRequest order), its devices
  PodDelta delta;                  // what Reserve commits (effective usage)
  // Feasible nodes found. Exact with explain and for policies that choose among all feasible nodes;
  // a policy whose scorer bounds its scores stops examining nodes once none can win, and counts
  // only the nodes it examined.
  int feasible_nodes = 0;
  int score = 0;                      // of the chosen node
  std::vector<NodeFailure> failures;  // explain only
  std::vector<NodeScore> scores;      // explain only, feasible nodes
  // Pooled devices (VendorRules::Pooled, remote GPUs): the node serving the pod's grants of them
  // ("" = the pod asks for none) and what they take there (each device once, whatever the number
  // of containers granted it). The grants themselves are in `allocation`, next to the local ones.
  std::string pool_node;
  PodDelta pool_delta;
  // The pod runs on a node the cache does not hold (a candidate without devices, chosen for a pod
  // whose only devices are pooled): nothing is reserved on it.
  bool node_untracked = false;
};

class Scheduler {
 public:
  static StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options);

  // candidate_nodes == nullptr: all nodes of the cache.
  StatusOr<Decision> Schedule(const core::PodRequest& pod,
                              const std::vector<std::string>* candidate_nodes,
                              const ScheduleOptions& options = {}) const;
  Status Reserve(const core::PodRequest& pod, const Decision& decision);
  // Schedule + Reserve, retrying a few times when a concurrent reservation wins the node.
  StatusOr<Decision> ScheduleAndReserve(const core::PodRequest& pod,
                                        const std::vector<std::string>* candidate_nodes,
                                        const ScheduleOptions& options = {});
  Status Unreserve(const std::string& uid);
  // Grants of pooled devices (Decision::pool_node) are recorded on their serving node under
  // PoolKey(uid); every method that takes a uid handles both records.
  // `usage_tenant`: the pod's usage-rule tenant (UsageRule::TenantOf), when the caller read one.
  Status AddPod(const std::string& uid, const core::PodAllocation& allocation,
                const ClusterCache::PodResources& res = {},
                const std::optional<usage::Tenant>& usage_tenant = std::nullopt);
  Status RemovePod(const std::string& uid);
  // The cache key of a pod's grants on the node serving its pooled devices.
  static std::string PoolKey(const std::string& uid) { return uid + "/pool"; }
  // `allocation` without its pooled grants, and those grants as a record of their serving node
  // (one container holding each device once; node "" when there are none). Errors: pooled grants
  // that name no serving node, or more than one.
  struct SplitAllocation {
    core::PodAllocation local, pooled;
  };
  StatusOr<SplitAllocation> SplitPooled(const core::PodAllocation& allocation) const;
  // Whether `allocation` holds grants of a pooled vendor (no copy: callers on the informer's path
  // split only such records).
  bool HasPooledGrants(const core::PodAllocation& allocation) const;
  // Whether the pod asks for devices of a pooled vendor (VendorRules::Pooled): such a pod is
  // scheduled by SchedulePooled, and may run on a node without devices.
  bool AsksPooled(const core::PodRequest& pod) const;

  // A scheduler with an empty cache that decides with this one's policies and what they have
  // learned so far (dry runs: the extender's Simulate). Its Reserve/Unreserve/RemovePod teach
  // nothing. With the usage rule on, the copy decides by the rule too, against a copy of the pods
  // the rule has recorded (UsageRule::DryRun): a node given at its registered size is scaled to the
  // cap, one taken from cache() is not scaled twice; a pod the dry run leaves out must be removed
  // from it (RemovePod) to stop counting.
  std::unique_ptr<Scheduler> DryRun() const;
  // With the usage rule on, generic devices count at its overcommit cap (UsageRule::ScaleNode).
  void UpsertNode(core::NodeInfo info) {
    if (usage_) usage_->ScaleNode(&info);
    cache_.UpsertNode(std::move(info));
  }
  void RemoveNode(const std::string& name) { cache_.RemoveNode(name); }

  const ClusterCache& cache() const { return cache_; }
  // The usage rule; null when it is off.
  const UsageRule* usage_rule() const { return usage_.get(); }
  const Profile& profile() const { return *profile_; }
  // The profile that places `pod`: the whole-placement policy it names in
  // hami.io/gpu-scheduler-policy
  // ("fgd", "default"); upstream HAMi's profile when it sets upstream policy annotations and the
  // configured policy is not one of HAMi's; otherwise the configured one.
  const Profile& ProfileFor(const core::PodRequest& pod) const;

 private:
  explicit Scheduler(std::shared_ptr<Profile> profile, uint64_t seed)
      : profile_(std::move(profile)), seed_(seed) {}
  // f(ReservePlugin&) for every plugin of every profile this scheduler holds (none in a DryRun
  // copy).
  template <typename F>
  void ForEachPlugin(F&& f) const;
  // Schedule for a pod with requests of a pooled vendor: the vendor's ChoosePool over every node
  // serving it, then the rest of the pod on a candidate that serves none.
  StatusOr<Decision> SchedulePooled(const core::PodRequest& pod,
                                    const std::vector<std::string>* candidates,
                                    const ScheduleOptions& options) const;
  // Both records of a pod (its own and PoolKey's): OK when either existed.
  Status RemoveRecords(const std::string& uid);
  // Schedule for a profile whose scorer bounds its scores (no explain): best bound first, stopping
  // when no node left can win. Same decision as scoring every node.
  StatusOr<Decision> ScheduleBounded(const Profile& profile, const CycleState& cycle,
                                     const std::vector<std::string>* candidates) const;
  // Shared with the DryRun() copies (a profile is immutable; its learned models are thread-safe).
  std::shared_ptr<Profile> profile_;
  std::shared_ptr<Profile> fgd_, default_,
      hami_;            // per-pod choices (null when profile_ is that policy)
  bool learns_ = true;  // false in DryRun() copies
  // The usage grants of the pods `allocation` places (node and device uuid from the cache).
  std::vector<UsageRule::Grant> GrantsOf(const std::string& node, const PodDelta& delta) const;
  std::vector<UsageRule::Grant> GrantsOf(const core::PodAllocation& allocation) const;
  ClusterCache cache_;
  std::unique_ptr<UsageRule> usage_;  // null: off
  uint64_t seed_;
  std::atomic<uint64_t> reserved_{
      0};  // successful Reserve calls: seeds the random stream of Schedule
};

// A node waiting to be examined by a bounded scan: the upper bound of its key and its index.
struct BoundedNode {
  int64_t bound = 0;
  uint32_t index = 0;
};

// The allocation annotations describe: devices per container from a placement.
core::PodAllocation AllocationOf(const NodeState& node, const Placement& placement);

}  // namespace hami::scheduler
