#pragma once
// Usage recommendations at admission (issue 27 part 2,
// docs/utilization.md#applying-recommendations- at-admission): what `hami recommend --format json`
// learned per workload, applied by the webhook to the pods of the workloads that opted in (like
// VPA's Initial mode), and the trust rule of the `hami.io/usage-profile` annotation
// (docs/security.md, "The usage profile").
//  - Opt-in: the pod's namespace is one of UsageApplyOptions::apply_namespaces ("*" = every one),
//    or the pod carries hami.io/usage-apply: "true" (its workload opted in). "false" opts a
//    workload out of its namespace's opt-in.
//  - A limit the user set (nvidia.com/gpumem, nvidia.com/gpucores, a profile in a trusted
//    namespace) is never lowered or replaced unless the workload opted in itself; a missing one is
//    set, a lower one raised (the recommendation is what the workload was seen to need).
//  - What was done is written on the pod (hami.io/usage-applied, JSON) and in an Event.
//  - hami.io/usage-profile and hami.io/usage-applied set by a user are removed on CREATE in every
//    namespace that is not trusted (hami.io/usage-applied everywhere: only the webhook writes it),
//    and a change of either on UPDATE is denied there (Webhook::ReviewUpdate).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "k8s/client.h"
#include "vendors/vendor_set.h"

namespace hami::webhook {

inline constexpr std::string_view kUsageProfileKey = "hami.io/usage-profile";
inline constexpr std::string_view kUsageAppliedKey = "hami.io/usage-applied";
inline constexpr std::string_view kUsageApplyKey = "hami.io/usage-apply";
inline constexpr std::string_view kUsageAppliedReason = "UsageRecommendationApplied";

// One workload's recommendation, as `hami recommend --format json` writes it.
struct UsageRecommendation {
  int64_t gpumem_mib = 0;  // > 0
  int gpucores = 0;        // 0 = leave the container's as it is
  std::string profile;     // a valid hami.io/usage-profile value
  bool operator==(const UsageRecommendation&) const = default;
};
// Keyed by "<namespace>/<workload>" (WorkloadKeyOf).
using UsageRecommendations = std::map<std::string, UsageRecommendation>;

// `hami recommend --format json` output (only its "workloads" object is read). A workload key
// must be "<namespace>/<name>": a DNS-1123 label, '/', a DNS-1123 subdomain (an object name).
// Bounded (kMaxRecommendationsBytes); every error names the workload and the field.
inline constexpr size_t kMaxRecommendationsBytes = size_t{16} << 20;
StatusOr<UsageRecommendations> ParseUsageRecommendations(std::string_view json);

// The workload a pod at admission belongs to, "<namespace>/<name>": its controller (an
// ownerReference with controller: true) - a ReplicaSet named "<deployment>-<pod-template-hash>"
// counts as the Deployment - or, without one, the pod itself (metadata.name, else generateName
// without its trailing '-'). "" when nothing names it.
std::string WorkloadKeyOf(const nlohmann::json& pod, const std::string& namespace_);

struct UsageApplyOptions {
  // Namespaces whose pods' own hami.io/usage-profile is kept (the scheduler's --usage-namespaces;
  // "*" = every one). Elsewhere a user-set profile is removed.
  std::vector<std::string> trusted_namespaces;
  // Namespaces whose workloads get their recommendation ("*" = every one).
  std::vector<std::string> apply_namespaces;
  // Null or empty: nothing to apply (the trust rule still holds).
  std::shared_ptr<const UsageRecommendations> recommendations;
  // When set, read at each review instead of `recommendations` (a file re-read when it changes,
  // usage_reload.h).
  std::function<std::shared_ptr<const UsageRecommendations>()> current_recommendations;
  // Receives the Event of an applied recommendation (never called on a dry run). Must not block.
  std::function<void(k8s::EventSpec)> record_event;
};

bool NamespaceListed(const std::vector<std::string>& list, const std::string& ns);

// What ApplyUsage did, for the review to return and send.
struct UsageApplyResult {
  std::vector<std::string> warnings;
  std::optional<k8s::EventSpec> event;
};

// Phase 0b, usage (CREATE): strips what the trust rule says from *pod and applies the
// recommendation of the pod's workload when it opted in, editing *pod (the pod the later phases
// review) and appending the JSON-patch ops that make the API server's copy the same to *ops.
// `review` is false for pods the webhook does not review (other schedulers', ignored): they are
// only stripped.
UsageApplyResult ApplyUsage(nlohmann::json* pod, const std::string& namespace_, bool review,
                            const UsageApplyOptions& options, const vendors::VendorSet& vendors,
                            nlohmann::json* ops);

}  // namespace hami::webhook
