#pragma once
// NVIDIA's keys of upstream HAMi's wire contract: its node annotations, its decision annotations on
// pods, the pod annotations its users write and its default extended-resource names
// (docs/upstream-contract.md#node-registration-and-handshake, #decision-annotations-per-vendor,
// #resource-model). Keys every vendor shares (hami.io/vgpu-node, bind phase, cordon, policies,
// labels) stay in core/annotations.h; every other vendor's keys live in its own folder.

#include "core/mig.h"

namespace hami::vendors::nvidia {

// ---- Node annotations (written by the device plugin / scheduler, read by the scheduler) ----
// JSON array of DeviceInfo (or the legacy CSV) of the node's NVIDIA devices.
inline constexpr const char kNodeNvidiaRegister[] = "hami.io/node-nvidia-register";
// JSON pairwise link scores [{"uuid":..,"score":{uuid:int}}]; written when ENABLE_TOPOLOGY_SCORE.
inline constexpr const char kNodeNvidiaScore[] = "hami.io/node-nvidia-score";
// "Requesting_<YYYY-MM-DD HH:MM:SS>" handshake between scheduler and device plugin (NVIDIA; the
// other vendors' keys are "hami.io/node-handshake-<vendor>").
inline constexpr const char kNodeHandshake[] = "hami.io/node-handshake";

// ---- Pod annotations written by the scheduler / device plugin ----
// NVIDIA decision, consumed container by container by the device plugin.
inline constexpr const char kNvidiaDevicesToAllocate[] = "hami.io/vgpu-devices-to-allocate";
// NVIDIA decision, permanent record (the scheduler rebuilds its usage cache from it).
inline constexpr const char kNvidiaDevicesAllocated[] = "hami.io/vgpu-devices-allocated";
// JSON array of dynamic-MIG reservations (codec: core/mig.h; the webhook strips the key from
// user-written pods).
inline constexpr const char* kMigAllocations = core::kMigAllocations;

// ---- Pod annotations set by users ----
inline constexpr const char kUseGpuType[] = "nvidia.com/use-gputype";
inline constexpr const char kNoUseGpuType[] = "nvidia.com/nouse-gputype";
inline constexpr const char kUseGpuUuid[] = "nvidia.com/use-gpuuuid";
inline constexpr const char kNoUseGpuUuid[] = "nvidia.com/nouse-gpuuuid";
inline constexpr const char kVgpuMode[] = "nvidia.com/vgpu-mode";
inline constexpr const char kNumaBind[] = "nvidia.com/numa-bind";

// ---- Default extended-resource names (configurable: vendors/nvidia/request.h ResourceConfig) ----
inline constexpr const char kDefaultGpuResource[] = "nvidia.com/gpu";
inline constexpr const char kDefaultGpuMemResource[] = "nvidia.com/gpumem";
inline constexpr const char kDefaultGpuMemPercentageResource[] = "nvidia.com/gpumem-percentage";
inline constexpr const char kDefaultGpuCoresResource[] = "nvidia.com/gpucores";
inline constexpr const char kDefaultGpuPriorityResource[] = "nvidia.com/priority";

}  // namespace hami::vendors::nvidia
