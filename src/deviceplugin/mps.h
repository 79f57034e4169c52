#pragma once
// Operating mode mps (nodeconfig `operatingmode: mps`): every GPU of the node is shared through the
// node's NVIDIA MPS control daemon, which the node's admin runs (`nvidia-cuda-mps-control -d`, or
// NVIDIA's MPS control daemon DaemonSet), as upstream HAMi and NVIDIA's device plugin leave it to
// them. A container is an MPS client: it gets the daemon's pipe directory and its per-device limits
// in the environment the CUDA driver reads (no libvgpu), and the MPS server enforces them.
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::deviceplugin {

// The MPS client environment (NVIDIA's MPS documentation, "Environment Variables").
inline constexpr char kEnvMpsPipeDirectory[] = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr char kEnvMpsPinnedMemLimit[] = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
inline constexpr char kEnvMpsActiveThreadPercentage[] = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
inline constexpr char kEnvCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";
// Written by the control daemon into its pipe directory; holds its PID.
inline constexpr char kMpsControlPidFile[] = "nvidia-cuda-mps-control.pid";

// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for the decided devices: "<ordinal>=<MiB>M" joined by commas,
// the i-th device being CUDA ordinal i (the container's CUDA_VISIBLE_DEVICES lists the decided
// UUIDs in decision order, so ordinals follow the decision whatever CUDA_DEVICE_ORDER says). MPS
// reads "M" as MiB, as NVIDIA's MPS control daemon writes it.
std::string MpsPinnedMemLimit(const std::vector<core::ContainerDevice>& devices);

// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for the decided devices: one value per client process, so the
// smallest positive grant of cores (never more than any device granted); 0 when no device grants
// cores (the container is not limited, as libvgpu leaves CUDA_DEVICE_SM_LIMIT=0 unlimited).
int MpsActiveThreadPercentage(const std::vector<core::ContainerDevice>& devices);

// Whether the MPS control daemon of `pipe_dir` runs: its PID file is there, holds a PID, and that
// process exists (the node agent shares the host's PID namespace). A container started without the
// daemon would silently run outside MPS, without any limit, so Allocate refuses it instead: the
// error names the file and how to start the daemon.
Status CheckMpsControlDaemon(const std::string& pipe_dir);

}  // namespace hami::deviceplugin
