#pragma once
// The consolidation controller (`hami consolidate`, docs/consolidation.md "The controller"): each
// round it reads nodes, pods, PodDisruptionBudgets and namespaces, builds the planner's view
// (snapshot.h), runs the planner shared with `hami sim --usage --consolidate`
// (consolidate::PlanMoves) and, unless it is a dry run, carries the moves out through the Eviction
// API, one Event per move, and publishes the GPUs that hold no pod on their nodes. Its state
// between rounds (moves per pod, moves under way, back-offs) is its own (History).
//
// Not thread-safe: one thread calls RunOnce (the main's loop, while it leads).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "consolidate/planner.h"
#include "consolidator/snapshot.h"
#include "k8s/client.h"
#include "scheduler/usage_rule.h"

namespace hami::consolidator {

struct ControllerOptions {
  consolidate::Options plan;          // the planner's rule and move budgets
  scheduler::UsageRuleOptions usage;  // which profiles are trusted (the scheduler's flags)
  EligibilityOptions eligibility;
  bool dry_run = true;  // plan and report; evict nothing, write nothing
  // A move whose replacement does not run within this many minutes is given up (counted failed;
  // its workload backs off).
  int32_t move_timeout_min = 15;
  // Before each eviction the destination GPU is reserved for the workload's next pod for this many
  // minutes (hami.io/consolidate-reservations on its node, scheduler/gpu_reservation.h); 0: moves
  // are not reserved. At most scheduler::kMaxGpuReservationS / 60 (the scheduler refuses longer).
  int32_t reserve_min = 10;
  int32_t backoff_min = 10;       // first back-off of a workload after a failed move ...
  int32_t backoff_max_min = 240;  // ... doubling up to this
  // The ConfigMap that keeps History across leaders (read at the start of every round, written
  // after it when it changed; history.h). Empty name: the history stays in memory.
  std::string history_namespace, history_name;
  std::string component = "hami-consolidate";
  std::string host;  // the Event's reporting instance (the pod name)
};

// What one round did.
struct RoundReport {
  std::string plan_text;  // consolidate::FormatPlan, then one line per held pod
  int64_t saving_gpus = 0;
  int planned = 0;
  int evicted = 0;
  int blocked = 0;  // the API server answered 429 (a PDB) or the PDB's budget was spent this round
  int failed = 0;   // any other refusal
  int skipped = 0;  // moves not tried (a GPU's earlier move failed, a budget spent)
  int free_gpus = 0;               // GPUs holding no pod after the round's writes (as published)
  std::vector<std::string> lines;  // one per move tried: "<pod> <from> -> <to>: <outcome>"
};

// Counters since start (for /metrics).
struct Counters {
  int64_t rounds = 0, moves = 0, relief_moves = 0, blocked = 0, failed = 0, aborted_plans = 0,
          timed_out = 0;
  int64_t free_gpus = 0;        // as of the last round
  double free_gpu_minutes = 0;  // Σ over rounds of free GPUs x minutes since the previous round
};

class Controller {
 public:
  // `client` and `clock` must outlive the controller.
  Controller(k8s::Client& client, ControllerOptions options, const Clock& clock);

  StatusOr<RoundReport> RunOnce();
  // Asked before every eviction (the leader elector's IsLeader): false stops the round's moves.
  void SetMayAct(std::function<bool()> may_act) { may_act_ = std::move(may_act); }

  const Counters& counters() const { return counters_; }
  const History& history() const { return history_; }
  // Prometheus text of the counters (hami_consolidate_*).
  std::string RenderMetrics() const;

 private:
  Status Evict(const PodRef& pod, std::string* outcome, bool* blocked);
  void Event(const PodRef& pod, const std::string& type, const std::string& reason,
             const std::string& message);
  // Writes kFreeGpus (annotation: UUIDs, label: count) on every node whose GPUs holding no pod
  // (after this round's evictions) changed.
  Status PublishFreeGpus(const Objects& objects, const Snapshot& snap,
                         const std::map<int, int>& evicted_from, RoundReport* report);

  // Writes scheduler::kGpuReservationsKey on `node`: the live reservations of history_.in_flight
  // whose destination is there, unless the node already carries exactly that
  // (reservations_on_).
  Status WriteReservations(const std::string& node, int64_t now_s);
  // History from the ConfigMap when another writer changed it since we read or wrote it last; an
  // absent or unreadable document leaves the history as it is. Errors: the API's.
  Status LoadHistory(int32_t now_minute);
  // Writes the history when it changed (an update guarded by the version last seen: a newer
  // leader's write is never overwritten).
  void SaveHistory();

  k8s::Client& client_;
  const ControllerOptions options_;
  const Clock& clock_;
  scheduler::UsageRule rule_;
  History history_;
  Counters counters_;
  int64_t last_round_minute_ = -1;
  std::function<bool()> may_act_;
  std::map<std::string, std::string> reservations_on_;  // node -> annotation value, as last seen
  std::string history_version_;  // resourceVersion of the ConfigMap last read or written
  std::string history_saved_;    // what it holds then
};

}  // namespace hami::consolidator
