#pragma once
// Right-sizing (`hami recommend`, docs/utilization.md#right-sizing-hami-recommend): what a window
// of a usage trace teaches per workload (the same learning `hami sim --usage` packs by), the
// `hami.io/usage-profile` annotation that carries a profile to the scheduler, and the outputs (a
// table, JSON, a patch for the workload's pod template).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "usage/profile.h"
#include "usage/trace.h"

namespace hami::usage {

// ---- What a trace teaches (shared by the simulator and the recommender) ----

struct LearnOptions {
  ProfileOptions profile;
  int margin_pct = 5;       // recommended gpumem = workload peak + this %
  int workload_q_pct = 90;  // a replica without history packs by this quantile of the pods
  int64_t card_mib = int64_t{80} * 1024;
  // > 0: a replica without history packs by how the workload's replicas that arrived inside the
  // trace (after its first minute) behaved in their first arrival_min minutes (ArrivalProfile),
  // when any did; otherwise by the mix of all its pods. 0: always the mix.
  int32_t arrival_min = 0;
};

struct WorkloadModel {
  std::string name;
  int64_t pods = 0;        // pods of the workload in the trace
  int64_t seen_pods = 0;   // of them, observed before `until`
  int64_t peak_mib = 0;    // the largest memory any of them used before `until`; 0: none seen
  int64_t gpumem_mib = 0;  // recommended: RecommendGpumem(peak) within the card; none seen: card
  UsageProfile replica;    // the profile of a replica without history (WorkloadProfile)
};

struct Learned {
  std::vector<UsageProfile> own;  // per pod of the trace: its profile before `until`
  std::vector<WorkloadModel> workloads;
};

// The profile of a new replica of `workload`: per hour the q_pct quantile (WorkloadProfile) over
// its pods that arrived after `start` and lived their first `arrival_min` minutes before `until`,
// each from those minutes. Pods that were there at `start` are not arrivals (their beginning is
// not seen); a pod that left sooner, or whose window is not over at `until`, does not count. An
// empty profile (minutes 0) when no pod counts.
UsageProfile ArrivalProfile(const UsageTrace& trace, int workload, int32_t start, int32_t until,
                            int32_t arrival_min, const ProfileOptions& options, int q_pct);

// What a replica without history packs by, given the workload's mix (WorkloadProfile of its pods)
// and ArrivalProfile: the arrivals' profile with the mix's peak; the mix when no arrival counts or
// the arrivals' duty (duty_all) is above the mix's.
UsageProfile NewReplicaProfile(const UsageProfile& mix, UsageProfile arrivals);

// Everything from the minutes before `until` only.
Learned Learn(const UsageTrace& trace, int32_t until, const LearnOptions& options);

// The rows of minutes in [from, until) (pods without one dropped; minutes keep their absolute
// values, so hours of day stay aligned).
UsageTrace Window(const UsageTrace& trace, int32_t from, int32_t until);

// The pods of one workload, as a trace of its own (one workload, same name).
UsageTrace WorkloadTrace(const UsageTrace& trace, int workload);

// ---- The profile annotation `hami.io/usage-profile` ----

inline constexpr std::string_view kUsageProfileAnnotation = "hami.io/usage-profile";
inline constexpr size_t kMaxProfileText = 4096;

// `v1;n=<minutes>;all=<mem>,<duty>;peak=<mib>;mem=<24>;duty=<24>;hist=<24 groups>;busy=<group>`:
// mem/duty are 24 comma-separated hour values ('-' = hour not observed), a group is a duty
// histogram's 21 per-mille values comma-separated with the trailing zeros left out, hist's groups
// are separated by '/'. Exact: ParseUsageProfile(FormatUsageProfile(p)) == p.
std::string FormatUsageProfile(const UsageProfile& p);
// Bounded (kMaxProfileText) and validated: an error names what is wrong.
StatusOr<UsageProfile> ParseUsageProfile(std::string_view text);

// ---- Recommendations ----

struct RecommendOptions {
  int32_t until_min = -1;  // learn from minutes before this; -1 (or past the end): the whole trace
  int32_t window_min = 0;  // only the last this many minutes before until_min; 0: all of them
  LearnOptions learn;
};

struct WorkloadRecommendation {
  WorkloadModel model;
  int gpucores = 0;     // 0: unset (no SM limit); see docs/utilization.md on why
  std::string profile;  // FormatUsageProfile(model.replica)
  // When the trace goes on after until_min: its pods alive then, and how many of them use more
  // than gpumem_mib in a later minute (-1: the trace ends at until_min).
  int64_t later_pods = -1, later_oom_pods = -1;
  // Expected saving over the window (filled by the caller that runs the simulator; -1: not run):
  // GPUs with every pod asking the workload's peak (stock accounting) vs with the recommendation
  // packed by usage.
  int64_t gpus_now = -1, gpus_after = -1;
};

struct PodRecommendation {
  std::string pod;
  int workload = 0;
  int64_t gpumem_mib = 0;
  int gpucores = 0;
};

struct Recommendation {
  int32_t from = 0, until = 0;  // the window learned from
  int64_t card_mib = 0;
  std::vector<WorkloadRecommendation> workloads;  // the trace's workloads, same order
  std::vector<PodRecommendation> pods;            // every pod of the trace, in trace order
};

StatusOr<Recommendation> Recommend(const UsageTrace& trace, const RecommendOptions& options);

// Outputs. JSON: {"workloads": {"<name>": {...}}, "pods": {"<pod>": {"workload": "<name>",
// "gpumem_mib": N, "gpucores": N}}} (the unnamed workload of a trace without a workload column is
// "").
std::string RecommendTable(const std::string& source, const Recommendation& r);
std::string RecommendJson(const Recommendation& r);
// A patch for one workload's pod template (a Deployment, StatefulSet, ...): with `container`, a
// strategic-merge patch (`kubectl patch --type strategic`) setting the annotation and that
// container's nvidia.com/gpumem limit; without, a JSON patch (`kubectl patch --type json`) doing
// the same to the first container. `workload` names it; "" is allowed only for a one-workload
// trace.
StatusOr<std::string> RecommendPatch(const Recommendation& r, const std::string& workload,
                                     const std::string& container);

}  // namespace hami::usage
