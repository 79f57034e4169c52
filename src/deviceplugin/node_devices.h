#pragma once
// From discovered GPUs + config to what the node advertises: kubelet replicas ("<uuid>-<n>") and
// the registration entries (core::DeviceInfo) of hami.io/node-nvidia-register.
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "core/node_codec.h"
#include "deviceplugin/config.h"
#include "gpu/discovery.h"

namespace hami::deviceplugin {

// GPUs left after filterdevices (uuid or index).
std::vector<gpu::GpuInfo> FilterDevices(const std::vector<gpu::GpuInfo>& gpus,
                                        const PluginConfig& config);

// Replica IDs of one GPU: "<uuid>-0" .. "<uuid>-<split-1>".
std::vector<std::string> ReplicaIds(const std::string& uuid, int split_count);
// The GPU UUID of a replica ID ("GPU-a-3" -> "GPU-a"); error when it is not "<uuid>-<n>".
StatusOr<std::string> ReplicaUuid(const std::string& replica_id);

// Registration entries, one per GPU (after FilterDevices): count = split, devmem scaled (or the
// preconfigured memory when NVML reports 0), devcore = 100 * core scaling, type = "NVIDIA-<model>",
// numa >= 0, health from `healthy` (by UUID; absent = healthy), mode hami-core. In operating mode
// mig, a GPU whose MIG mode is on registers mode "mig" with its profiles (RegisteredMigProfiles),
// its physical memory and devcore 100; a GPU with MIG off stays hami-core.
std::vector<core::DeviceInfo> BuildNodeDevices(const std::vector<gpu::GpuInfo>& gpus,
                                               const std::map<std::string, bool>& healthy,
                                               const PluginConfig& config);

// What --report-node-capacity writes into the Node's status.capacity and .allocatable: the sums of
// devmem (MiB) and devcore over the healthy devices, under config's memory and cores resource
// names; empty when the option is off.
std::map<std::string, int64_t> NodeCapacity(const std::vector<core::DeviceInfo>& devices,
                                            const PluginConfig& config);

// The migProfiles of a MIG GPU from NVML's profiles (vendors::nvidia::RegisteredMigProfiles, the
// rule `hami sim` registers its MIG GPUs with too).
std::vector<core::MigProfile> RegisteredMigProfiles(const std::vector<gpu::MigProfileInfo>& ps);

// Pairwise link scores for hami.io/node-nvidia-score (upstream's weights,
// docs/upstream-contract.md#topology-and-numa): the PCIe
// path scores cross-CPU 10, same CPU 20, host bridge 30, multiple switches 40, single switch 50,
// same board 60, plus 100 per NVLink. Excluded GPUs are left out; `links` index GPUs by NVML index.
core::LinkScores BuildLinkScores(const std::vector<gpu::GpuInfo>& gpus,
                                 const std::vector<gpu::GpuLink>& links,
                                 const PluginConfig& config);
int PairScore(const gpu::GpuLink& link);

}  // namespace hami::deviceplugin
