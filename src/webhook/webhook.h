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
//    100 cores, as upstream counts the mutated pod), a device request that cannot be parsed, a
//    nvidia.com/mig-profile-preference entry no profile of migProfileAllowlist matches (any pod,
//    while NVIDIA is enabled);
//  - warnings (kubectl prints them) for pod annotations that are read leniently and ignored, as
//    upstream ignores them: non-boolean nvidia.com/numa-bind, unknown scheduler policies;
//  - otherwise a JSONPatch (base64, patchType JSONPatch) that makes the defaulting explicit
//    (nvidia.com/gpu when only gpumem/%/cores are given, gpucores=100 for a whole card), injects
//    CUDA_TASK_PRIORITY / GPU_CORE_UTILIZATION_POLICY, sets runtimeClassName when configured, and
//    sets spec.schedulerName;
//  - opt-in (WebhookOptions::cpu_pods, off by default): pods without devices in the selected
//    namespaces or with the selected labels get spec.schedulerName too (phases::TakesOverCpuPod);
//  - the same for every enabled vendor, NVIDIA included: each one's Vendor::Mutate adds its limits
//    and env to the container and its denials reject the pod; quotas count every vendor's devices.
// Trust boundary (docs/security.md, "Admission and node agent"):
//  - scheduler-owned annotations and labels (SchedulerOwnedKeys) are removed from every pod on
//  CREATE
//    (ignored and other schedulers' pods included: nobody but hami-scheduler writes them), with a
//    warning; on UPDATE a change to any of them is denied unless userInfo.username is one of
//    scheduler_users, or one of node_agent_users changing only the keys node agents consume;
//  - in a pod that requests devices, every container (app, init, ephemeral) that is privileged or
//    adds CAP_SYS_ADMIN is denied, on CREATE and when an ephemeral container is added (UPDATE);
//  - the quota is charged to request.namespace, else to the object's metadata.namespace; a GPU pod
//    with neither is denied when quotas are checked;
//  - hami.io/usage-profile is removed from pods of namespaces not in usage.trusted_namespaces on
//    CREATE and may not be changed there on UPDATE (but by scheduler_users); hami.io/usage-applied
//    likewise in every namespace (usage_apply.h).
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "core/pod_request.h"
#include "vendors/nvidia/mig.h"
#include "vendors/vendor_set.h"
#include "webhook/dra_convert.h"
#include "webhook/usage_apply.h"

namespace hami::webhook {

using Json = nlohmann::json;

// Opt-in for pods without devices (docs/install.md, "CPU-only pods on GPU nodes"): a pod that
// requests no device of an enabled vendor and that this selects gets spec.schedulerName =
// WebhookOptions::scheduler_name, so that hami-scheduler's policy chooses its node, as `hami sim`
// places CPU-only tasks. Selected: the pod's namespace (request.namespace, else
// metadata.namespace) is one of `namespaces`, OR `match_labels` is not empty and the pod carries
// every one of its key=value labels. Both empty (the default): no such pod is touched.
struct CpuPodOptIn {
  std::vector<std::string> namespaces;
  std::vector<std::pair<std::string, std::string>> match_labels;
  bool Enabled() const { return !namespaces.empty() || !match_labels.empty(); }
};
// "key=value,key2=value2" (matchLabels written as --node-label-selector is; a value may be empty,
// spaces around entries are dropped; "" = no labels) -> the pairs. Errors name the entry: no '=',
// an empty key, a key given twice.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMatchLabels(std::string_view text);

struct WebhookOptions {
  std::string scheduler_name = "hami-scheduler";
  bool force_overwrite_default_scheduler = true;
  std::string runtime_class_name;  // "" = leave spec.runtimeClassName alone
  std::string gpu_core_policy =
      "default";  // default | force | disable -> GPU_CORE_UTILIZATION_POLICY
  // Upstream's overwriteEnv: NVIDIA_VISIBLE_DEVICES=none (replacing a value the pod set) in every
  // container, init containers included, that names no NVIDIA resource (NVIDIA enabled only). When
  // false, a pod's hami.io/overwrite-env(-containers) annotations may turn it on for its
  // containers.
  bool overwrite_env = false;
  // The enabled vendors (not owned; never null: a default install's is VendorSet::NvidiaOnly()).
  // Every vendor, NVIDIA included, parses and defaults its own resources (VendorSet::ParsePod;
  // Vendor::Mutate: limits to add, env, denials such as Ascend's partial-memory multi-device
  // request), container by container.
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
  // device-config.yaml nvidia.migProfileAllowlist: a pod's nvidia.com/mig-profile-preference must
  // name profiles of it (phases::CheckMigPreference).
  std::vector<vendors::nvidia::MigAllowlistEntry> mig_profile_allowlist =
      vendors::nvidia::DefaultMigProfileAllowlist();
  // Pods without devices that the webhook hands to scheduler_name as well (off by default).
  CpuPodOptIn cpu_pods;
  // Usage recommendations applied at admission and the trust rule of hami.io/usage-profile
  // (usage_apply.h). Default: nothing applied, every user-set profile removed.
  UsageApplyOptions usage;
  // Opt-in DRA conversion (dra_convert.h, docs/dra.md "Webhook conversion"): a pod that asks for
  // NVIDIA devices, passes the phases up to the quota and is selected by `dra` (its namespace is
  // one of dra.namespaces, "*" meaning every one, or it carries all of dra.match_labels) is turned
  // into claims instead of being patched for hami-scheduler (its schedulerName is left alone:
  // kube-scheduler allocates claims). Its templates go to `dra_templates` (not owned; required
  // when dra.Enabled()), except on dry runs, which create nothing. A refusal of the conversion or
  // of the store denies the pod.
  DraConversionOptions dra;
  DraTemplateStore* dra_templates = nullptr;
  // The GPU sizes our driver publishes, read only for a gpumem-percentage below 100 (not owned;
  // null: such a pod is refused as when no GPU is published).
  DraDeviceSizes* dra_sizes = nullptr;
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

// The phases of a CREATE review, in the order Webhook::Review runs them (the way kube-scheduler's
// schedule_one.go reads: each phase a named function, its own table test in
// webhook_phases_test.cc). A phase that refuses returns a Status whose message is the whole denial
// text ("hami: ..."), which Review sends with 403 Forbidden.
namespace phases {

// Phase 0, trust: removes the scheduler-owned annotations and labels `owned` lists from `pod`
// (appends remove ops to *ops) and returns the keys removed ("label <key>" for labels).
std::vector<std::string> StripOwnedKeys(const Json& pod, const OwnedKeys& owned, Json* ops);

// Phase 1, scope: whether the webhook reviews this pod at all.
enum class Scope {
  kReview,        // ours: go on
  kIgnored,       // labelled hami.io/webhook=ignore, or another scheduler's: allow as it is
  kNoContainers,  // spec.containers missing or empty: denied (as upstream)
};
Scope ScopeOf(const Json& pod, const WebhookOptions& opts);

// Phase 2, decode: the pod as the scheduler will see it, and each container's JSON and patch path
// in PodRequest order (spec.initContainers, then spec.containers). `pod` must outlive the result.
struct PodUnderReview {
  struct Container {
    const Json* json = nullptr;
    std::string path;                             // "/spec/containers/0"
    const core::ContainerRequest* req = nullptr;  // into `parsed`; null past its end
  };
  const Json* spec = nullptr;
  core::PodRequest parsed;
  std::vector<Container> containers;
  PodUnderReview() = default;
  PodUnderReview(const PodUnderReview&) = delete;  // containers point into `parsed`
  PodUnderReview& operator=(const PodUnderReview&) = delete;
};
// Errors: the pod's device request does not parse (denial text).
Status DecodePod(const Json& pod, const WebhookOptions& opts, PodUnderReview* out);

// Phase 3, per-vendor mutate: every enabled vendor's Vendor::Mutate of every container (NVIDIA's
// defaulting included, run on every container as upstream's MutateAdmission is), merged in vendor
// order; one entry per `pod.containers`. Errors: a vendor's error or first denial, naming the
// container.
// `env` is added where the container lacks the name; the other fields are vendors::Mutation's and
// are applied as it says (replacing entries, prepending, mounting the pod-level init containers'
// volumes). A container that takes an env_prepend name from a source is denied.
struct ContainerChanges {
  std::map<std::string, int64_t> add_limits;
  std::vector<std::pair<std::string, std::string>> env;
  std::map<std::string, std::string> set_env = {}, env_field_refs = {}, env_prepend = {},
                                     volume_mounts = {};
  std::vector<vendors::InitContainer> init_containers = {};
};
StatusOr<std::vector<ContainerChanges>> MutateContainers(const PodUnderReview& pod,
                                                         const vendors::VendorSet& vendors);

// Phase 3b, upstream's admission check of nvidia.com/mig-profile-preference while NVIDIA is
// enabled (every reviewed pod, as upstream's MutateAdmission runs on every container): each entry
// must match a profile of opts.mig_profile_allowlist (vendors::nvidia::CheckMigProfilePreference).
Status CheckMigPreference(const PodUnderReview& pod, const WebhookOptions& opts);

// Phase 4, trust checks for a pod that requests devices: no privileged or CAP_SYS_ADMIN container
// of any kind (a sidecar sees the node's GPUs too), no preset spec.nodeName.
Status CheckTrust(const PodUnderReview& pod, const WebhookOptions& opts);

// Phase 5, quota: the pod's NVIDIA device memory and cores (the scheduler's formula) against
// opts.quota_check, charged to `request_namespace`, else metadata.namespace. No check without
// opts.quota_check.
Status CheckQuota(const Json& pod, const PodUnderReview& parsed,
                  const std::string& request_namespace, const WebhookOptions& opts);

// Phase 6, patch build: the JSON-patch ops (appended to *ops) for a pod that passed the phases
// above: each container's limits and env (with GPU_CORE_UTILIZATION_POLICY for NVIDIA containers
// and overwriteEnv), the region group, runtimeClassName and schedulerName. A pod without devices
// gets only overwriteEnv's ops (`changes` is then ignored).
void BuildPatch(const PodUnderReview& pod, const std::vector<ContainerChanges>& changes,
                const WebhookOptions& opts, Json* ops);

// Phase 6 for a pod without devices, or a pod converted into DRA claims: only overwriteEnv's ops
// (NVIDIA_VISIBLE_DEVICES=none in each container that names no NVIDIA resource, when
// opts.overwrite_env or the pod's overwrite-env annotations ask for it).
void BuildOverwriteEnvPatch(const PodUnderReview& pod, const std::vector<ContainerChanges>& changes,
                            const WebhookOptions& opts, Json* ops);

// Phase 7, CPU-only pods (opts.cpu_pods): whether a pod that passed ScopeOf (so it names no
// scheduler, ours, or default-scheduler while force_overwrite_default_scheduler) and requests no
// device is handed to opts.scheduler_name. Never: when the opt-in is off, a pod with spec.nodeName
// set (nothing to place), a pod a DaemonSet controls (its node is fixed; the cluster's daemons
// must not wait for hami-scheduler), a pod outside the selected namespaces and labels.
bool TakesOverCpuPod(const Json& pod, const std::string& request_namespace,
                     const WebhookOptions& opts);

}  // namespace phases

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
  // Whether a pod that asks for devices is converted into DRA claims (WebhookOptions::dra).
  bool ConvertsToDra(const Json& pod, const phases::PodUnderReview& decoded,
                     const std::string& request_namespace) const;
  // Appends the conversion's ops to *ops after ensuring its templates (not on dry runs).
  Status ConvertToDra(const Json& pod, const phases::PodUnderReview& decoded,
                      const std::vector<phases::ContainerChanges>& changes,
                      const AdmissionRequest& request, Json* ops) const;

  WebhookOptions opts_;
  OwnedKeys owned_;
};

}  // namespace hami::webhook
