#pragma once
// Every annotation, label and resource key of upstream HAMi's wire contract that we read or write
// (docs/upstream-contract.md#node-registration-and-handshake, #decision-annotations-per-vendor,
// #resource-model). One place, so a typo cannot split the contract in two.
// Values are encoded and decoded by core/node_codec.h, core/pod_codec.h and core/lock_codec.h (the
// handshake).

namespace hami::core {

// ---- Node annotations (written by the device plugin / scheduler, read by the scheduler) ----
// JSON array of DeviceInfo (or the legacy CSV) of the node's NVIDIA devices.
inline constexpr const char kNodeNvidiaRegister[] = "hami.io/node-nvidia-register";
// JSON pairwise link scores [{"uuid":..,"score":{uuid:int}}]; written when ENABLE_TOPOLOGY_SCORE.
inline constexpr const char kNodeNvidiaScore[] = "hami.io/node-nvidia-score";
// "Requesting_<YYYY-MM-DD HH:MM:SS>" handshake between scheduler and device plugin (NVIDIA).
inline constexpr const char kNodeHandshake[] = "hami.io/node-handshake";
// Prefix of the other vendors' handshake keys: "hami.io/node-handshake-<vendor>".
inline constexpr const char kNodeHandshakePrefix[] = "hami.io/node-handshake-";
// Comma list of device UUIDs excluded from new allocations.
inline constexpr const char kDeviceCordon[] = "hami.io/device-cordon";

// ---- Pod annotations written by the scheduler / device plugin ----
// NVIDIA decision, consumed container by container by the device plugin.
inline constexpr const char kNvidiaDevicesToAllocate[] = "hami.io/vgpu-devices-to-allocate";
// NVIDIA decision, permanent record (the scheduler rebuilds its usage cache from it).
inline constexpr const char kNvidiaDevicesAllocated[] = "hami.io/vgpu-devices-allocated";
// JSON array of dynamic-MIG reservations.
inline constexpr const char kMigAllocations[] = "hami.io/vgpu-mig-allocations";
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
inline constexpr const char kUseGpuType[] = "nvidia.com/use-gputype";
inline constexpr const char kNoUseGpuType[] = "nvidia.com/nouse-gputype";
inline constexpr const char kUseGpuUuid[] = "nvidia.com/use-gpuuuid";
inline constexpr const char kNoUseGpuUuid[] = "nvidia.com/nouse-gpuuuid";
inline constexpr const char kVgpuMode[] = "nvidia.com/vgpu-mode";
inline constexpr const char kNumaBind[] = "nvidia.com/numa-bind";
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

// ---- Default NVIDIA resource names (configurable: core/pod_request.h NvidiaResourceNames) ----
inline constexpr const char kDefaultGpuResource[] = "nvidia.com/gpu";
inline constexpr const char kDefaultGpuMemResource[] = "nvidia.com/gpumem";
inline constexpr const char kDefaultGpuMemPercentageResource[] = "nvidia.com/gpumem-percentage";
inline constexpr const char kDefaultGpuCoresResource[] = "nvidia.com/gpucores";
inline constexpr const char kDefaultGpuPriorityResource[] = "nvidia.com/priority";

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

// ---- Device modes (DeviceInfo::mode, nvidia.com/vgpu-mode) ----
inline constexpr const char kModeHamiCore[] = "hami-core";
inline constexpr const char kModeMig[] = "mig";
inline constexpr const char kModeMps[] = "mps";

}  // namespace hami::core
