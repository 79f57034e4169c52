#pragma once
// Usage read from Prometheus (`hami recommend --prometheus URL`, docs/utilization.md#reading-usage-
// from-prometheus): the query_range reads of what `hami monitor` exports, the parser of their
// answers, and the usage trace they make. Pure: the HTTP GET is the caller's (src/cmd).
//  - Memory: hami_vgpu_memory_used_bytes, the most a pod held in each step (max_over_time, summed
//    over the pod's containers and devices); duty: hami_container_device_utilization_ratio
//    (0-100), the mean of each step (avg_over_time, summed, at most 100).
//  - The range of each *_over_time is the step less one second, so that a sample is counted in one
//    step only and a pod that stopped reporting is gone at the next step.
//  - Minutes count from the UTC midnight before the window, so hours of day stay aligned with the
//    profile's hour buckets. A pod is "<namespace>/<pod>"; its workload "<namespace>/<name>" is
//    its controller as kube-state-metrics exports it (kube_pod_owner, and kube_replicaset_owner
//    for a ReplicaSet's Deployment: PromWorkloadsOf), the key the webhook matches
//    (webhook/usage_apply.h, WorkloadKeyOf); a pod kube-state-metrics does not know is named by
//    its pod name (PromWorkloadOf).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "usage/trace.h"

namespace hami::usage {

inline constexpr std::string_view kPromMemoryMetric = "hami_vgpu_memory_used_bytes";
inline constexpr std::string_view kPromDutyMetric = "hami_container_device_utilization_ratio";

struct PromWindow {
  int64_t start_s = 0;  // unix seconds
  int64_t end_s = 0;
  int64_t step_s = 60;  // one trace minute per step: must be 60
};

struct PromLimits {
  size_t max_bytes = size_t{256} << 20;  // one answer
  size_t max_series = size_t{1} << 16;
  int64_t max_points = int64_t{1} << 26;  // over every series of one answer
};

// The two queries; `namespace_` ("" = every namespace) must be a DNS-1123 label: it is written
// into the query's label matcher.
enum class PromRead { kMemory, kDuty };
StatusOr<std::string> PromQuery(PromRead read, std::string_view namespace_, int64_t step_s);

// The URL path and query string of a query_range read (`base` is the server URL as given:
// "http://host:9090" or with a path prefix; a trailing '/' is dropped). Errors: a URL that is not
// http(s)://, or a window that is empty or longer than 7 days (Prometheus answers at most 11,000
// points per series).
StatusOr<std::string> PromRangeUrl(std::string_view base, const std::string& query,
                                   const PromWindow& window);

struct PromSeries {
  std::string namespace_, pod;
  std::vector<std::pair<int64_t, double>> points;  // (unix seconds, value), in time order
};

// One query_range answer ({"status":"success","data":{"resultType":"matrix","result":[...]}}).
// Every series must carry string labels namespace and pod (valid names), every point be
// [number, "decimal"] with a finite value >= 0 and times increasing. Errors say what and where;
// an error answer ("status":"error") gives Prometheus's errorType and error.
StatusOr<std::vector<PromSeries>> ParsePromMatrix(std::string_view body,
                                                  const PromLimits& limits = {});

// "<namespace>/<name>" of a pod from its name: a Deployment's pod "web-5d4f8c7b9-x2x7k" (a
// pod-template-hash of 6..10 and a suffix of 5 characters of the alphabet Kubernetes generates
// names from) is "web", a StatefulSet's "db-0" is "db", anything else is its own workload.
std::string PromWorkloadOf(std::string_view namespace_, std::string_view pod);

// The owners of pods and of ReplicaSets over a window, as kube-state-metrics exports them:
// kube_pod_owner{namespace, pod, owner_kind, owner_name, owner_is_controller} and
// kube_replicaset_owner{namespace, replicaset, ...} ("<none>" for an object without an owner).
inline constexpr std::string_view kPromPodOwnerMetric = "kube_pod_owner";
inline constexpr std::string_view kPromReplicaSetOwnerMetric = "kube_replicaset_owner";
enum class PromOwnerRead { kPod, kReplicaSet };
// Every owner row seen in the `range_s` seconds before each evaluation (read with query_range at
// one step of the whole window: one point per series). `namespace_` as PromQuery's.
StatusOr<std::string> PromOwnerQuery(PromOwnerRead read, std::string_view namespace_,
                                     int64_t range_s);

struct PromOwnerRow {
  std::string namespace_, object;  // the pod, or the ReplicaSet
  std::string owner_kind, owner_name;
  bool controller = false;  // owner_is_controller="true"
  bool operator==(const PromOwnerRow&) const = default;
};
// One query_range answer of PromOwnerQuery (bounded as ParsePromMatrix; the points are not read).
// Every series carries namespace, the object's label (pod / replicaset), owner_kind and
// owner_name; names are checked (an owner of kind "<none>" has no name).
StatusOr<std::vector<PromOwnerRow>> ParsePromOwners(std::string_view body, PromOwnerRead read,
                                                    const PromLimits& limits = {});

// "<namespace>/<pod>" -> "<namespace>/<workload>" from the owner rows, as the webhook names the
// workload of a pod at admission: the pod's controller (a ReplicaSet counts as its own controller,
// the Deployment, from kube_replicaset_owner; a ReplicaSet no row tells of, as its name without a
// trailing "-<pod-template-hash>"), a Job, StatefulSet, DaemonSet... by its name; a pod without a
// controller is its own workload.
using PromWorkloads = std::map<std::string, std::string>;
PromWorkloads PromWorkloadsOf(const std::vector<PromOwnerRow>& pods,
                              const std::vector<PromOwnerRow>& replicasets);

// The usage trace of the two reads over `window` (memory in MiB rounded up, duty in hundredths of
// a percent; a step one read lacks takes the other read's pod's previous value, a pod is alive
// from its first to its last step with either). *first_minute: the window's first minute.
// `workloads` (PromWorkloadsOf; null or without the pod: PromWorkloadOf) names each pod's workload.
StatusOr<UsageTrace> TraceFromProm(const std::vector<PromSeries>& memory,
                                   const std::vector<PromSeries>& duty, const PromWindow& window,
                                   int32_t* first_minute, const PromWorkloads* workloads = nullptr);

}  // namespace hami::usage
