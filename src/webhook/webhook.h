#pragma once
// Mutating admission webhook for pods (AdmissionReview admission.k8s.io/v1,
// docs/upstream-contract.md#admission-webhooks) with upstream HAMi's behaviour
// (docs/upstream-contract.md#life-of-a-gpu-pod step 1, #resource-model, #quota):
//  - pods that request no device are allowed untouched (no patch), except that with overwrite_env
//    their containers get NVIDIA_VISIBLE_DEVICES=none, as upstream's;
//  - pods labelled hami.io/webhook=ignore, and pods that name another scheduler, are skipped
//    (a pod naming default-scheduler is taken over when force_overwrite_default_scheduler);
//  - denials, each with a message that says what to change: a pod without containers (before the
//    scheduler check, as upstream), a container whose gpumem-percentage is outside 0..100 (any
//    container, device pod or not, while NVIDIA is enabled), a privileged container in a pod that
//    requests devices, spec.nodeName preset, a namespace quota (limits.nvidia.com/gpumem /
//    gpucores, and every other enabled vendor's memory and core resources, e.g.
//    limits.hygon.com/dcumem x memoryFactor) that the pod would exceed (an exclusive card counts
//    100 cores, as upstream counts the mutated pod), a device request that cannot be parsed;
//  - warnings (kubectl prints them) for pod annotations that are read leniently and ignored, as
//    upstream ignores them: non-boolean nvidia.com/numa-bind, unknown scheduler policies;
//  - otherwise a JSONPatch (base64, patchType JSONPatch) that makes the defaulting explicit
//    (nvidia.com/gpu when only gpumem/%/cores are given, gpucores=100 for a whole card), injects
//    CUDA_TASK_PRIORITY / GPU_CORE_UTILIZATION_POLICY, sets runtimeClassName when configured, and
//    sets spec.schedulerName;
//  - with WebhookOptions::vendors, the same per vendor: each enabled vendor's Mutate adds its
//  limits
//    and env to the container and its denials reject the pod.
// Trust boundary (docs/security.md, "Admission and node agent"):
//  - scheduler-owned annotations and labels (SchedulerOwnedKeys) are removed from every pod on
//  CREATE
//    (ignored and other schedulers' pods included: nobody but hami-scheduler writes them), with a
//    warning; on UPDATE a change to any of them is denied unless userInfo.username is one of
//    scheduler_users, or one of node_agent_users changing only the keys node agents consume;
//  - in a pod that requests devices, every container (app, init, ephemeral) that is privileged or
//    adds CAP_SYS_ADMIN is denied, on CREATE and when an ephemeral container is added (UPDATE);
//  - the quota is charged to request.namespace, else to the object's metadata.namespace; a GPU pod
//    with neither is denied when quotas are checked.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/pod_request.h"
#include "vendors/vendor_set.h"

namespace hami::webhook {

using Json = nlohmann::json;

struct WebhookOptions {
  core::ResourceConfig resources;
  std::string scheduler_name = "hami-scheduler";
  bool force_overwrite_default_scheduler = true;
  std::string runtime_class_name;  // "" = leave spec.runtimeClassName alone
  std::string gpu_core_policy =
      "default";  // default | force | disable -> GPU_CORE_UTILIZATION_POLICY
  // Upstream's overwriteEnv: NVIDIA_VISIBLE_DEVICES=none (replacing a value the pod set) in every
  // container, init containers included, that names no NVIDIA resource (NVIDIA enabled only).
  bool overwrite_env = false;
  // The enabled vendors (not owned; never null: a default install's is VendorSet::NvidiaOnly()).
  // Every vendor other than NVIDIA parses and defaults its own resources (Vendor::Mutate: limits to
  // add, env, denials such as Ascend's partial-memory multi-device request), container by
  // container; NVIDIA's come from `resources`.
  const vendors::VendorSet* vendors = &vendors::VendorSet::NvidiaOnly();
  // Namespace quota check; null = no quotas. `demand` is what the pod counts against each quota
  // resource of every enabled vendor (resource -> MiB or cores, vendors::VendorSet::QuotaCharge).
  // Returns the denial.
  std::function<Status(const std::string& ns, const std::map<std::string, int64_t>& demand)>
      quota_check;
  // userInfo.username values allowed to change scheduler-owned annotations on UPDATE (the
  // scheduler's service account, "system:serviceaccount:<ns>:<name>"). Empty: nobody.
  std::vector<std::string> scheduler_users;
  // userInfo.username values of node agents (device plugins): they may change only
  // SchedulerOwnedKeys::node_agent (the to-allocate records they consume, bind-phase, vendor
  // extras).
  std::vector<std::string> node_agent_users;
  // Group added to spec.securityContext.supplementalGroups of every GPU pod we patch, the group the
  // device plugin gives region directories (its --region-group); -1 = none.
  int64_t region_group = -1;
};

// The annotation and label keys of a pod that only hami-scheduler writes: the NVIDIA decision and
// its bookkeeping (hami.io/vgpu-devices-*, vgpu-node, vgpu-time, bind-phase, bind-time,
// vgpu-mig-allocations) and, for every vendor of the registry (vendors::AllVendorsWithDefaults) and
// of `enabled` (configured names such as Ascend chips), its to-allocate and allocated keys and the
// extra keys its EncodeDecision writes.
struct OwnedKeys {
  std::set<std::string> annotations;
  std::set<std::string> node_agent;  // subset of `annotations` node agents may change on UPDATE
  std::set<std::string> labels;      // hami.io/vgpu-node (Filter writes it as a label too)
};
OwnedKeys SchedulerOwnedKeys(const vendors::VendorSet& enabled);

// "NAMESPACE:NAME" (or an already complete "system:serviceaccount:NAMESPACE:NAME") -> the
// username the API server puts in userInfo for that service account. Errors name the value.
StatusOr<std::string> ServiceAccountUsername(std::string_view flag_value);

// The parts of an AdmissionRequest the webhook reads.
struct AdmissionRequest {
  std::string uid;
  std::string namespace_;
  std::string operation;     // CREATE | UPDATE | DELETE | CONNECT
  std::string kind;          // request.kind.kind ("Pod")
  std::string sub_resource;  // request.subResource ("ephemeralcontainers", ...)
  std::string username;      // request.userInfo.username
  Json object;               // request.object (null when absent)
  Json old_object;           // request.oldObject (UPDATE; null when absent)
  bool dry_run = false;
};
// Errors name the field: body not JSON, not an AdmissionReview v1, request or request.uid missing,
// wrong types (request.userInfo must be an object, its username a string).
StatusOr<AdmissionRequest> ParseAdmissionReview(std::string_view body);

struct AdmissionResponse {
  std::string uid;
  bool allowed = true;
  int32_t code = 0;           // with a denial: HTTP-style code of the Status (403)
  std::string reason;         // metav1.Status reason ("Forbidden")
  std::string message;        // why it was denied
  std::optional<Json> patch;  // RFC 6902 array; sent base64-encoded with patchType JSONPatch
  std::vector<std::string> warnings;
};
// The AdmissionReview reply:
// {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{...}}.
Json ToJson(const AdmissionResponse& response);
// Reads a reply back (tests and tools): decodes the base64 patch.
StatusOr<AdmissionResponse> ParseAdmissionResponse(std::string_view body);

// RFC 6901 escaping of one reference token ("~" -> "~0", "/" -> "~1").
std::string EscapePointer(std::string_view token);

class Webhook {
 public:
  explicit Webhook(WebhookOptions opts);

  AdmissionResponse Review(const AdmissionRequest& request) const;
  // HTTP body in, body out. A body that cannot be read gets an AdmissionReview whose response
  // denies with the parse error (uid empty) so the API server logs why.
  std::string Handle(std::string_view body) const;

 private:
  AdmissionResponse ReviewCreate(const AdmissionRequest& request) const;
  AdmissionResponse ReviewUpdate(const AdmissionRequest& request) const;

  WebhookOptions opts_;
  OwnedKeys owned_;
};

}  // namespace hami::webhook
