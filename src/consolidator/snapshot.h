#pragma once
// From Kubernetes objects to the planner's input (docs/consolidation.md, "The controller"): which
// pods may move (owner, PodDisruptionBudget, opt-outs), what each packs by (its usage profile, the
// scheduler's usage rule), which GPUs exist and accept pods, and the moves already made. Pure: the
// objects and the clock come in, nothing is read or written here.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "consolidate/planner.h"
#include "scheduler/usage_rule.h"

namespace hami::consolidator {

using Json = nlohmann::json;

// Opt-out and opt-in keys. On a pod (from its template): kNoConsolidate present (any value but
// "false") keeps it where it is; kConsolidate "true" lets a Job's pod move. On a namespace:
// kNoConsolidate as a label keeps every pod of it.
inline constexpr const char kNoConsolidate[] = "hami.io/no-consolidate";
inline constexpr const char kConsolidate[] = "hami.io/consolidate";
// Written by the controller on a node: its GPUs that hold no pod (comma-separated UUIDs, an
// annotation) and how many (a label, for node selectors and autoscalers).
inline constexpr const char kFreeGpus[] = "hami.io/consolidate-free-gpus";

// Why a pod may not move (kMovable: it may).
enum class Hold {
  kMovable,
  kBarePod,            // no controller owner
  kJobNotOptedIn,      // owned by a Job without hami.io/consolidate: "true"
  kOtherOwner,         // owned by something else (DaemonSet, a custom controller)
  kAnnotated,          // hami.io/no-consolidate
  kNamespaceOptedOut,  // listed in --skip-namespaces or labelled hami.io/no-consolidate
  kPdbBlocks,          // its PodDisruptionBudget allows no disruption now
  kPdbMultiple,        // more than one PDB selects it (the Eviction API refuses such pods)
  kNotRunning,         // not Running yet, or terminating
  kBackoff,            // a move of its workload failed recently
  kNoProfile,          // no trusted usage profile: the controller does not know how it packs
  kSharesGpu,          // its GPU holds a pod the controller cannot plan for
};
const char* HoldName(Hold h);

struct EligibilityOptions {
  std::set<std::string> skip_namespaces = {"kube-system"};
};

// The owner-, annotation- and namespace-based answer for one pod (PDBs are separate: PdbHold).
// `ns` is the pod's Namespace object (null: not known).
Hold OwnerHold(const Json& pod, const Json& ns, const EligibilityOptions& options);

// What the Eviction API would answer for `pod` about disruption budgets, from the PDBs of its
// namespace (`pdbs`: PodDisruptionBudget objects, any namespace; others are ignored): as the API
// server does, a PDB with a null or empty selector selects nothing. kMovable with *pdb set to the
// selecting PDB's "namespace/name" (empty: none) and *allowed to its disruptionsAllowed.
Hold PdbHold(const Json& pod, const std::vector<Json>& pdbs, std::string* pdb, int64_t* allowed);

// The workload a pod belongs to, for the per-workload caps: "<ns>/<Kind>/<name>" of its controller
// owner, a ReplicaSet named by its Deployment when the pod carries pod-template-hash (so a
// rollout's two ReplicaSets are one workload); "" when it has no controller owner.
std::string WorkloadOf(const Json& pod);

// A move the controller carried out and has not seen finish: the pod was evicted at `minute`;
// it is finished when another pod of the same workload (another uid: a StatefulSet's replacement
// has the same name) created at or after it runs (that pod inherits the move history), or at
// `deadline_minute`. While the evicted pod is still there (terminating) it counts as itself.
struct InFlight {
  std::string pod_key;  // "<ns>/<name>" of the evicted pod
  std::string uid;      // its uid
  std::string workload;
  std::string from_gpu, to_gpu;  // UUIDs
  int32_t minute = 0;
  int32_t deadline_minute = 0;
  // The reservation of `to_gpu` the scheduler holds for the workload's next pod
  // (scheduler/gpu_reservation.h), written on `to_node` until `reserve_until_s` (Unix seconds;
  // 0: none, or consumed: a pod of the owner bound on `to_gpu` whose decision names the
  // reservation, BuildSnapshot): the room the evicted pod held, for its controller owner.
  std::string to_node = {}, owner_uid = {};
  int64_t mem_mib = 0;
  int cores = 0;
  int64_t reserve_until_s = 0;
};

// What the controller remembers between rounds; kept in a ConfigMap so that the next leader
// starts from it (history.h, docs/consolidation.md "State across leaders").
struct History {
  std::map<std::string, std::vector<int32_t>> moves;  // "<ns>/<name>" -> minutes of its moves
  std::vector<InFlight> in_flight;
  std::map<std::string, int32_t> backoff_until;  // workload -> minute its moves may resume
  std::map<std::string, int> failures;           // workload -> failed moves in a row
};

struct Objects {
  std::vector<Json> nodes, pods, pdbs, namespaces;
};

struct PodRef {
  std::string ns, name, uid, node, workload;
  std::string pdb;  // "namespace/name" of its PDB, "" = none
  int64_t pdb_allowed = 0;
  std::string owner_uid;  // its controller owner's uid
  int64_t mem_mib = 0;    // its grant (one GPU)
  int cores = 0;
};
struct GpuRef {
  std::string node, uuid;
  int pods = 0;  // every pod on it (profiled or not)
};
struct HeldPod {
  std::string pod;  // "<ns>/<name>"
  Hold why;
};

struct Snapshot {
  consolidate::ClusterState state;  // pods[i] <-> pods[i] below; pods past refs.size() are ghosts
  std::vector<PodRef> pods;
  std::vector<GpuRef> gpus;
  std::vector<HeldPod> held;        // pods on our GPUs that may not move, and why (sorted)
  std::vector<InFlight> timed_out;  // moves given up this round: no replacement by the deadline
};

// Builds the planner's view at `now_minute` (Unix minutes). Moves finished by a replacement are
// taken off `history->in_flight` (their history passes to the replacement), expired ones too.
// GPUs: every healthy NVIDIA non-MIG device of hami.io/node-nvidia-register; a GPU accepts pods
// unless its node is unschedulable or the device is cordoned (hami.io/device-cordon). Pods: bound,
// not finished, holding exactly one NVIDIA grant (hami.io/vgpu-devices-allocated); they pack by
// `rule.TenantOfPlaced` (the scheduler's usage rule: its trusted namespaces). A GPU holding any
// pod without a tenant takes nothing and none of its pods moves (kSharesGpu).
Snapshot BuildSnapshot(const Objects& objects, History* history, const scheduler::UsageRule& rule,
                       const EligibilityOptions& options, int32_t now_minute,
                       int32_t move_timeout_min);

}  // namespace hami::consolidator
