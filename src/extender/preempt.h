#pragma once
// The rules of the extender's preemption verb (Extender::Preempt, preempt.cc), kept pure for their
// table tests (preempt_test.cc, named after upstream's pkg/scheduler/preempt tests).
//
// kube-scheduler proposes victims per candidate node by its own resource view; the extender refines
// them by the devices (docs/upstream-contract.md#scheduler-extender-v1):
//  - a proposed victim stays unless it is protected (IsProtectedFromPreemption) or its priority is
//    not lower than the preemptor's; one we cannot find any more has ended and is left out;
//  - the preemptor is fitted by the normal scheduler path on a private copy of the node whose
//    usage is every device grant on it except the victims';
//  - when it does not fit, more pods bound to that node are added, best victims first
//    (SortVictimsByPreference), skipping protected pods, pods of equal or higher priority and pods
//    a PodDisruptionBudget protects (PdbBudgets), until it fits (none are added while the budgets
//    are not listed); a node where it cannot fit, or whose victims are all spared, is left out of
//    the reply.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "k8s/label_selector.h"

namespace hami::extender {

using Json = nlohmann::json;

// The value of the system-cluster-critical PriorityClass: pods at or above it are never victims.
inline constexpr int64_t kCriticalPriority = 2000000000;

// spec.priority (0 when absent; kube-scheduler's default for pods without a PriorityClass).
// nullopt when present but not an int32: such a pod is never chosen as a victim.
std::optional<int64_t> PodPriority(const Json& pod);
// A system-node-critical / system-cluster-critical PriorityClass, a priority at or above
// kCriticalPriority, or the kube-system namespace.
bool IsCriticalPod(const Json& pod);
// Terminating (metadata.deletionTimestamp), finished (Succeeded/Failed), critical, owned by a
// DaemonSet controller (evicting it frees nothing: its controller puts it back on the node), or
// with an unreadable priority.
bool IsProtectedFromPreemption(const Json& pod);

// NumPDBViolations of a refined victim list: kube-scheduler's count for the victims it proposed,
// but never more than the victims kept of them (the ones we add never violate a budget).
int64_t PdbViolationsUpperBound(int64_t proposed, size_t kept);

// A pod that could be added as a victim.
struct VictimCandidate {
  std::string uid;
  int64_t priority = 0;
  int64_t created_unix = 0;  // metadata.creationTimestamp (0 when absent or unreadable)
  int64_t grant = 0;         // device MiB + cores + devices it holds (what evicting it frees)
};
// Lowest priority first; then the newest (it has run the least); then the largest grant; then uid
// (a total order: the same pods always sort the same).
void SortVictimsByPreference(std::vector<VictimCandidate>& pods);

// metav1.LabelSelector evaluation (k8s/label_selector.h).
using k8s::LabelSelectorMatches;

// The disruptions the policy/v1 PodDisruptionBudgets still allow while victims are chosen on one
// node: a budget covers the pods of its namespace its spec.selector selects (null selects none,
// {} selects all); what it allows is status.disruptionsAllowed, less each victim charged to it.
// Budgets whose selector is not well formed are ignored (as upstream does).
class PdbBudgets {
 public:
  explicit PdbBudgets(const std::vector<Json>& pdbs);
  // Evicting `pod` would exceed a budget that covers it.
  bool Violates(const Json& pod) const;
  // `pod` is a victim: every budget that covers it allows one disruption less.
  void Charge(const Json& pod);
  size_t size() const { return budgets_.size(); }

 private:
  struct Budget {
    std::string namespace_;
    Json selector;
    int64_t allowed = 0;
  };
  bool Covers(const Budget& b, const Json& pod) const;
  std::vector<Budget> budgets_;
};

}  // namespace hami::extender
