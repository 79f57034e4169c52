#pragma once
// Usage-aware placement inside the scheduler (docs/utilization.md, "Usage-aware placement in the
// scheduler"): pods that carry a trusted usage profile (the `hami.io/usage-profile` annotation,
// usage/recommend.h) are placed where the time-aligned sum of the co-located profiles fits the card
// (usage::CheckFit, the rule `hami sim --usage` applies), and the sum of the gpumem limits booked
// on a card may then pass the card, up to `overcommit_pct` of it.
//
// How it sits in the scheduler:
//  - Off unless UsageRuleOptions::overcommit_pct is set (>= 100): nothing then changes, not even
//    the nodes' registered sizes.
//  - On: every generic (non-MIG, NVIDIA) device counts at overcommit_pct of its registered memory
//    (ScaleNode: as `hami sim --usage` registers it), and a DeviceGate refuses, per device:
//      * a pod without a profile where the booked sum plus its request passes the real card (it is
//        placed as today: never onto overcommitted memory);
//      * a pod with a profile where the card holds a pod without one and the booked sum would pass
//        the real card (pods without a profile never share an overcommitted card), or where
//        CheckFit refuses it next to the profiled pods already there (an empty card always takes
//        it), or where its own limit is larger than the card.
//  - What is booked (cache, quota, decision annotations, metrics) is the full gpumem limit: only
//    the capacity it is checked against changes. A request sized by the card (gpumem-percentage,
//    a whole card without gpumem) is sized against the real card (Gate::CardMemory), and so
//    books what it would with the rule off.
//
// Trust (docs/security.md): a pod annotation is user-writable. The profile is read only from pods
// in the namespaces the operator lists (UsageRuleOptions::namespaces); elsewhere the annotation is
// ignored and the pod is placed as a pod without a profile. Within those namespaces a pod that lies
// (a tiny profile) is still held to its own limit by libvgpu, cannot make a card's booked sum pass
// overcommit_pct of it, and never lands on a card holding a pod without a profile past the card:
// what it can hurt is bounded to the profiled pods of its card and the cap.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "core/model.h"
#include "scheduler/framework.h"
#include "usage/fleet.h"
#include "usage/profile.h"

namespace hami::scheduler {

// usage::kUsageProfileAnnotation, for callers that read it off a pod object (the extender).
inline constexpr const char* kUsageProfileKey = "hami.io/usage-profile";

struct UsageRuleOptions {
  // 0: the rule is off. 100..1000: on, and a card may book up to this % of its memory.
  int overcommit_pct = 0;
  int32_t duty_budget = usage::kDutyFull;  // hundredths of a percent (usage::PackBudget)
  int contention_bp = 350;                 // basis points (usage::PackBudget)
  // Namespaces whose pods' profiles are trusted; "*" = every namespace. Empty: none.
  std::vector<std::string> namespaces;
  // The fleet budget (usage/fleet.h, the code `hami sim --usage` runs): past contention_bp a card
  // still takes a profiled pod while it stays within card_contention_bp and the mean over the
  // cards holding profiled pods within fleet_contention_bp. 0: off.
  int fleet_contention_bp = 0;
  int card_contention_bp = 0;
  bool enabled() const { return overcommit_pct > 0; }
};

// INVALID_ARGUMENT naming the option (--usage-overcommit-pct, ...) when out of range.
Status ValidateUsageRuleOptions(const UsageRuleOptions& o);

class UsageRule {
 public:
  explicit UsageRule(UsageRuleOptions options) : options_(std::move(options)) {}
  const UsageRuleOptions& options() const { return options_; }

  // The tenant `pod` packs as, or nullopt: no profile annotation, a namespace not trusted, an
  // annotation that does not parse, or a request other than one NVIDIA GPU by absolute gpumem.
  // The profile's peak is the spike the rule leaves room for (usage::Tenant::spike_mib).
  std::optional<usage::Tenant> TenantOf(const core::PodRequest& pod) const;

  // The tenant of a pod placed earlier (a restart, a pod seen through the watch), from its
  // namespace, its profile annotation (null: none) and its decision: the same rule as TenantOf, the
  // limit the one NVIDIA grant of the decision.
  std::optional<usage::Tenant> TenantOfPlaced(const std::string& namespace_,
                                              const std::string* profile,
                                              const core::PodAllocation& allocation) const;

  // Scales the generic devices of `info` to overcommit_pct of their memory and remembers their real
  // size. In a DryRun() copy a device registered already and given at its scaled size (a node taken
  // from the live cache) is left as it is.
  void ScaleNode(core::NodeInfo* info);

  // A copy of the rule and of what it has recorded (the dry runs of Scheduler::DryRun: they decide
  // by the same rule against the same pods, and what they record stays in the copy).
  std::unique_ptr<UsageRule> DryRun() const;

  // The gate of one cycle: `tenant` is the pod's (null: a pod without a profile). Not owned.
  class Gate final : public DeviceGate {
   public:
    Gate(const UsageRule& rule, const usage::Tenant* tenant) : rule_(rule), tenant_(tenant) {}
    Reason Admit(const PickContext& ctx, int device, int64_t mem_mib) const override;
    // The card's registered (real) memory on a device the rule scales: a gpumem-percentage or a
    // whole card takes its share of the real card, not of the cap.
    int64_t CardMemory(const PickContext& ctx, int device) const override;

   private:
    const UsageRule& rule_;
    const usage::Tenant* tenant_;
  };

  // One device a pod takes: the node, the device's uuid, the memory booked.
  struct Grant {
    std::string node, uuid;
    int64_t mem_mib = 0;
    int64_t used_mib = 0;  // booked on the device before the pod (Commit re-checks against it)
  };
  // Re-checks `grants` (each device once: the pod's memory there and what was booked there before
  // it) under the rule's lock and records the pod: ABORTED when it no longer fits (a concurrent
  // reservation took the room the decision was made against). The caller has committed the pod to
  // the cache already and rolls that back on ABORTED; the rule's lock is never held while a node's
  // is taken (a decision holds a node's lock while its gate reads the rule).
  Status Commit(const std::string& uid, const std::optional<usage::Tenant>& tenant,
                const std::vector<Grant>& grants);
  // Records a pod placed earlier (restart, watch). Without a tenant, the uid's earlier record on
  // the same devices keeps its tenant (the cache re-records a pod we reserved when its init
  // containers finish).
  void Record(const std::string& uid, const std::optional<usage::Tenant>& tenant,
              const std::vector<Grant>& grants);
  void Forget(const std::string& uid);

  struct Stats {
    int64_t profiled_pods = 0;       // pods placed with a profile
    int64_t overcommitted_gpus = 0;  // devices whose booked sum passes their real memory
  };
  Stats stats() const;

 private:
  struct Pod {
    std::optional<usage::Tenant> tenant;
    std::vector<Grant> grants;
  };
  static std::string Key(const std::string& node, const std::string& uuid) {
    return node + '\n' + uuid;
  }
  Reason CheckLocked(const usage::Tenant* tenant, const std::string& node, const std::string& uuid,
                     int64_t used_mib, int64_t mem_mib) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void RecordLocked(const std::string& uid, const std::optional<usage::Tenant>& tenant,
                    const std::vector<Grant>& grants) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetLocked(const std::string& uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the fleet ledger the profiled pods of device `key` as they are now.
  void RecountLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UsageRuleOptions options_;
  bool dry_run_ = false;  // a DryRun() copy
  mutable SharedMutex mu_;
  std::map<std::string, int64_t> real_mib_ ABSL_GUARDED_BY(mu_);  // Key -> registered memory
  std::map<std::string, Pod> pods_ ABSL_GUARDED_BY(mu_);
  // Key -> the uids with a grant there, and the sum of their limits (every pod recorded, with a
  // profile or not).
  struct Device {
    std::vector<std::string> uids;
    int64_t booked_mib = 0;
  };
  std::map<std::string, Device> devices_ ABSL_GUARDED_BY(mu_);
  usage::ContentionLedger ledger_ ABSL_GUARDED_BY(mu_);  // Key -> its profiled pods' contention
};

}  // namespace hami::scheduler
