#pragma once
// The annotation and label keys of upstream HAMi's wire contract that every vendor shares
// (docs/upstream-contract.md#node-registration-and-handshake, #decision-annotations-per-vendor).
// One place, so a typo cannot split the contract in two. A vendor's own keys (its registration,
// handshake and decision annotations, its users' selector annotations, its resource names) live
// with the vendor: NVIDIA's in vendors/nvidia/annotations.h.
// Values are encoded and decoded by core/node_codec.h, core/pod_codec.h and core/lock_codec.h.

namespace hami::core {

// ---- Node annotations ----
// Prefix of the other vendors' handshake keys: "hami.io/node-handshake-<vendor>".
inline constexpr const char kNodeHandshakePrefix[] = "hami.io/node-handshake-";
// Comma list of device UUIDs excluded from new allocations.
inline constexpr const char kDeviceCordon[] = "hami.io/device-cordon";

// ---- Pod annotations written by the scheduler ----
// Node name chosen by Filter (also written as a label of the same key).
inline constexpr const char kVgpuNode[] = "hami.io/vgpu-node";
// Unix seconds at Filter time.
inline constexpr const char kVgpuTime[] = "hami.io/vgpu-time";
// Unix seconds at Bind time.
inline constexpr const char kBindTime[] = "hami.io/bind-time";
// "allocating" | "success" | "failed".
inline constexpr const char kBindPhase[] = "hami.io/bind-phase";
inline constexpr const char kBindPhaseAllocating[] = "allocating";
inline constexpr const char kBindPhaseSuccess[] = "success";
inline constexpr const char kBindPhaseFailed[] = "failed";

// ---- Pod annotations set by users ----
inline constexpr const char kNodeSchedulerPolicy[] = "hami.io/node-scheduler-policy";
inline constexpr const char kGpuSchedulerPolicy[] = "hami.io/gpu-scheduler-policy";
inline constexpr const char kDeviceScoringWeights[] = "hami.io/device-scoring-weights";

// ---- Labels ----
// Label (on namespaces and pods) that makes the webhook skip the object: value "ignore".
inline constexpr const char kWebhookLabel[] = "hami.io/webhook";
// Label the elected scheduler replica puts on its own pod: "leader" | "follower".
inline constexpr const char kSchedulerRoleLabel[] = "hami.io/scheduler-role";
// PodGroup membership label (longer node-lock retry).
inline constexpr const char kPodGroupLabel[] = "scheduling.x-k8s.io/pod-group";

// ---- Policy names (hami.io/{node,gpu}-scheduler-policy) ----
inline constexpr const char kPolicyBinpack[] = "binpack";
inline constexpr const char kPolicySpread[] = "spread";
inline constexpr const char kPolicyTopologyAware[] = "topology-aware";
inline constexpr const char kPolicyMutex[] = "mutex";
inline constexpr const char kPolicyNuma[] = "numa";
// Whole-placement policies of hami-cpp that a pod may select alone in hami.io/gpu-scheduler-policy
// (they choose the node and the GPUs together, so they do not chain with the keys above).
inline constexpr const char kPolicyFgd[] = "fgd";          // FGD as published (ATC'23)
inline constexpr const char kPolicyDefault[] = "default";  // our fragmentation-aware default

// ---- Device modes (DeviceInfo::mode; NVIDIA's nvidia.com/vgpu-mode, Ascend's hami-core) ----
inline constexpr const char kModeHamiCore[] = "hami-core";
inline constexpr const char kModeMig[] = "mig";
inline constexpr const char kModeMps[] = "mps";
// A card a lupine server serves to other nodes (upstream's nvidia.RemoteMode): the remote-GPU
// backend's, never NVIDIA's (vendors/remotegpu).
inline constexpr const char kModeRemote[] = "remote";

}  // namespace hami::core
