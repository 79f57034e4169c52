#pragma once
// `hami sim --usage`: a time-driven replay of a usage trace (usage/trace.h) through the production
// scheduler (scheduler::Scheduler: the Schedule/Reserve the extender runs). docs/utilization.md.
//
// The cluster is identical one-GPU nodes ("gpu-0000", ...) of `gpu_memory_mib`, added as needed
// (there is always one empty node; no decision knows how many pods will come). Pods are only
// observed until `warmup_min`; at that minute every live pod is placed (largest profile first),
// later pods at their arrival minute; a pod leaves the minute after its last row. Every decision
// uses only what the trace held before it (the no-future test cuts the trace and compares).
//
// Modes:
//  - stock (`requests` set): every pod asks gpumem/gpucores and the node registers the card as it
//    is: stock HAMi accounting (sum of gpumem <= card).
//  - usage-aware: every pod asks its workload's recommended gpumem (the warm-up peak with a margin)
//    and no gpucores; the nodes register `overcommit_pct` of the card so the booked sum may pass
//    it, and a node is a candidate only when the usage rule (usage::CheckFit: time-aligned profiles
//    learned in the warm-up) says the pod fits next to the pods already there. The scheduler's
//    policy then chooses among the candidates.
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "consolidate/planner.h"
#include "usage/metrics.h"
#include "usage/profile.h"
#include "usage/trace.h"

namespace hami::sim {

struct UsageSimConfig {
  int64_t gpu_memory_mib = int64_t{80} * 1024;
  int32_t warmup_min = 360;
  // Learn from the minutes before this (-1: warmup_min). `hami recommend` learns from a whole
  // window and places from its start to measure the saving over that window.
  int32_t learn_until = -1;
  std::string policy = "hami-binpack";  // the scheduler's policy (registry name)
  // Stock calibration mode when gpumem_mib > 0.
  int64_t gpumem_mib = 0;
  int gpucores = 0;
  // Usage-aware knobs (docs/utilization.md#knobs).
  usage::ProfileOptions profile;
  int margin_pct = 5;       // recommendation: warm-up peak of the workload + margin
  int workload_q_pct = 90;  // a pod without history packs by this quantile of its workload's pods
  int32_t min_own_minutes = 60;  // fewer observed minutes: the pod packs by its workload's profile
  // > 0: that profile is learned from the first arrival_min minutes of the workload's replicas that
  // arrived inside the trace (usage::ArrivalProfile), again at each arrival minute from the rows
  // before it, when any did; 0: the mix of the warm-up pods (usage::LearnOptions::arrival_min).
  int32_t arrival_min = 0;
  int overcommit_pct = 200;
  int32_t duty_budget = usage::kDutyFull;
  int contention_bp = 350;
  // The fleet budget (usage/fleet.h): past contention_bp a GPU still takes a pod while it stays
  // within card_contention_bp and the mean over the GPUs in use within fleet_contention_bp (0:
  // off).
  int fleet_contention_bp = 0;
  int card_contention_bp = 0;
  // Consolidation (--consolidate; docs/consolidation.md): every plan_every_min minutes after the
  // warm-up the planner (consolidate::PlanMoves) moves pods by profiles learned from the last
  // forecast_min minutes; a moved pod holds its memory and duty on both GPUs for restart_min.
  bool consolidate = false;
  int32_t restart_min = 2;
  int32_t plan_every_min = 60;
  int32_t relief_every_min = 0;  // relief-only rounds in between (0: none)
  int plan_contention_bp = 250;  // the planner's packing budget (0: contention_bp)
  // The budget pods are placed by at the warm-up and on arrival (0: contention_bp).
  int place_contention_bp = 100;
  int32_t forecast_min = 240;
  // While its workload's load is falling or flat (mean duty of the last trend_min minutes no more
  // than trend_pct % of the trend_min before), a pod is planned by profiles of only the last
  // forecast_falling_min minutes (0: always forecast_min): the night's lower load shows at once,
  // a rising load keeps the long window's busier hours. Past rows only.
  int32_t forecast_falling_min = 90;
  int32_t trend_min = 30;
  int trend_pct = 100;
  // > 100: every pod's recent duty is scaled by the fleet's trend (last trend_min minutes over
  // the trend_min before), clamped to [100 / trend_scale_pct, trend_scale_pct / 100] (0: off).
  int trend_scale_pct = 150;
  // > the window a pod is planned by: no hour's memory level below its level over the last this
  // many minutes (memory follows the pipeline loaded, not the hour; 0: off).
  int32_t mem_forecast_min = 0;
  consolidate::Options plan;  // its budgets; plan.pack is set from the knobs above
  bool stock() const { return gpumem_mib > 0; }
};

struct UsageSimResult {
  std::string mode;                  // "stock" or "usage-aware"
  usage::Placement placement;        // per pod of the trace
  std::vector<std::string> gpu_ids;  // GPU index -> its id (the node and device name)
  usage::Metrics metrics;
  struct Workload {
    std::string name;
    int64_t pods = 0;
    int64_t warmup_peak_mib = 0;  // 0: no pod of it seen in the warm-up
    int64_t gpumem_mib = 0;       // what its pods ask
  };
  std::vector<Workload> workloads;  // the trace's workloads, same order
  // GPU-hours (every mode): sum over minutes from the warm-up of GPUs with a live pod (a moved
  // pod's old GPU included for restart_min), / 60; on whole cards (one GPU per live pod); ratio.
  double gpu_hours = 0, whole_gpu_hours = 0, hours_ratio = 0;
  // Consolidation: moves carried out, per pod-day alive after the warm-up, the most of one pod;
  // moves the scheduler refused at Reserve time (the plan's destination was gone).
  int64_t moves = 0, max_moves_pod = 0, aborted_moves = 0;
  int64_t relief_moves = 0;  // of the moves, relief ones (the others emptied GPUs)
  int64_t freed_gpus = 0;    // GPUs the plans emptied
  double moves_per_pod_day = 0;
};

// `--requests`: "gpumem=<MiB>,gpucores=<N>" (gpumem required, gpucores 0..100, default 0) into
// the stock mode of `config`.
Status ParseUsageRequests(const std::string& text, UsageSimConfig* config);

StatusOr<UsageSimResult> RunUsageSim(const usage::UsageTrace& trace, const UsageSimConfig& config);

// `hami-placement v2` (docs/utilization.md#placements).
std::string UsagePlacementsJson(const usage::UsageTrace& trace, const UsageSimResult& result,
                                const UsageSimConfig& config);
// The metrics and the recommendations: a table, or JSON.
std::string UsageTable(const std::string& source, const UsageSimResult& result,
                       const UsageSimConfig& config);
std::string UsageJson(const std::string& source, const UsageSimResult& result,
                      const UsageSimConfig& config);

}  // namespace hami::sim
