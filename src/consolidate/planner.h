#pragma once
// The consolidation planner (docs/consolidation.md): given the GPUs, the pods on them (each with
// what it packs by: a usage profile learned from the past only, its workload's spike, its limit)
// and each pod's move history, an ordered plan of moves:
//  - relief: a GPU whose own pods no longer pass the usage rule (usage::CheckFit) with the relief
//    budget (about to contend or overflow) sends pods away until the rest passes the packing
//    budget; a relieved pod goes where it fits, onto an empty GPU when nowhere else;
//  - empty-gpu: the least-loaded GPUs whose pods all fit elsewhere (the same rule, the packing
//    budget) are emptied, never onto an empty GPU and never onto a GPU emptied by the same plan.
// Every move respects the budgets: moves per pod per day, concurrent moves per workload and
// cluster-wide, moves per window, and a pod is never moved again within its restart time. What it
// refused, and why, comes back with the plan.
//
// Pure and deterministic: no clock (the caller says what minute it is), no I/O, ties broken by
// index. The same planner serves `hami sim --usage --consolidate` and a Kubernetes controller
// (which fills `movable` from owners, PodDisruptionBudgets and opt-outs, and `in_flight` from the
// moves it is carrying out).
#include <cstdint>
#include <string>
#include <vector>

#include "usage/profile.h"

namespace hami::consolidate {

inline constexpr int32_t kMinutesPerDay = 24 * 60;

struct GpuState {
  std::string id;
  int64_t capacity_mib = 0;
  bool accepts = true;  // may receive pods (false: cordoned, draining, not ours)
};

struct PodState {
  std::string name;
  std::string workload;  // concurrency is capped per workload
  // Index into ClusterState::gpus; -1: on no GPU (a controller's evicted pod whose replacement is
  // not placed yet): it counts toward the budgets (in_flight, move_minutes), nothing else.
  int gpu = -1;
  usage::Tenant tenant;               // what it packs by: learned from the past only
  int32_t since_minute = 0;           // when it started on its GPU (placed, or its last move)
  std::vector<int32_t> move_minutes;  // when its earlier moves started, oldest first
  bool in_flight = false;             // a move of it is under way (surge, eviction pending)
  bool movable = true;  // may be moved at all (owner, PDB, opt-out: the controller decides)
};

struct ClusterState {
  int32_t now = 0;  // minutes, the clock of move_minutes and since_minute
  std::vector<GpuState> gpus;
  std::vector<PodState> pods;
};

struct Options {
  // The packing rule (usage::CheckFit) destinations must pass; capacity_mib is per GPU (ignored).
  usage::PackBudget pack;
  // A GPU is relieved when its own pods pass this contention likelihood (basis points) or its
  // memory: above pack.contention_bp, so a GPU just packed is not relieved at once (hysteresis).
  int relief_contention_bp = 500;
  int32_t restart_min = 2;    // a pod is never moved again within this of its last start
  int max_moves_pod_day = 2;  // moves of one pod in any 24 hours
  // Of them, empty-gpu moves may use at most this many (-1: all), so that a pod packed away
  // still has a move left for relief when load rises.
  int max_empty_moves_pod_day = -1;
  int max_concurrent_workload = 4;  // moves in flight per workload (0: no cap)
  int max_concurrent_cluster = 16;  // moves in flight cluster-wide (0: no cap)
  int32_t window_min = 60;          // moves started within the last window_min ...
  int max_moves_window = 32;        // ... at most this many (0: no cap)
  bool relief = true;               // plan relief moves
  bool empty = true;                // plan empty-gpu moves
};

enum class Reason { kRelief, kEmptyGpu };
const char* ReasonName(Reason r);

struct Move {
  int pod = -1;  // indices into ClusterState
  int from = -1;
  int to = -1;
  Reason reason = Reason::kEmptyGpu;
  bool operator==(const Move&) const = default;
};

// Why a GPU was not emptied or not relieved (or only partly).
enum class Refusal {
  kNotMovable,           // a pod may not move (PodState::movable)
  kInFlight,             // a pod is being moved already
  kRestarting,           // a pod started less than restart_min ago
  kPodDayCap,            // a pod used its moves of the day
  kWorkloadConcurrency,  // its workload has max_concurrent_workload moves in flight
  kClusterConcurrency,   // max_concurrent_cluster moves in flight
  kWindowCap,            // max_moves_window moves in the window
  kNoDestination,        // a pod fits on no other GPU
};
const char* RefusalName(Refusal r);

struct Rejected {
  int gpu = -1;
  int pod = -1;  // the pod that stopped it
  Reason plan = Reason::kEmptyGpu;
  Refusal why = Refusal::kNoDestination;
  usage::Fit fit = usage::Fit::kFits;  // kNoDestination: why the best other GPU refused the pod
  bool operator==(const Rejected&) const = default;
};

struct Plan {
  std::vector<Move> moves;       // in the order to carry them out (relief first)
  std::vector<int> freed_gpus;   // GPUs the empty-gpu moves empty
  std::vector<int> opened_gpus;  // empty GPUs the relief moves need
  int64_t saving_gpus = 0;       // expected: freed_gpus - opened_gpus
  std::vector<Rejected> rejected;
};

// Per GPU (index into state.gpus), the pods on it, in index order.
std::vector<std::vector<int>> PodsByGpu(const ClusterState& state);

// Whether the pods `on` of one GPU pass the rule with `budget` (a GPU of one pod or none does).
bool Passes(const ClusterState& state, const std::vector<int>& on, const usage::PackBudget& budget);

Plan PlanMoves(const ClusterState& state, const Options& options);

// The plan as readable lines ("move <pod> <from> -> <to> (<reason>)", "keep <gpu>: ...").
std::string FormatPlan(const ClusterState& state, const Plan& plan);

}  // namespace hami::consolidate
