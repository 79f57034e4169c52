#pragma once
// Codecs of the decision annotations on pods
// (docs/upstream-contract.md#decision-annotations-per-vendor):
// hami.io/vgpu-devices-to-allocate and hami.io/vgpu-devices-allocated (same format). Keys:
// vendors/nvidia/annotations.h. (hami.io/vgpu-mig-allocations has its own codec: core/mig.h.)
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::core {

// `UUID,Type,UsedmemMiB,Usedcores:` per device, each container terminated by ';' (a container
// without devices keeps its slot as a bare ';'). Containers in PodAllocation order (init and
// sidecar containers first, then app containers). Example with two containers:
//   GPU-0fc3...,NVIDIA,3000,30:;GPU-0fc3...,NVIDIA,5000,0:;
// PodAllocation::node and ContainerDevice::index are not encoded. Errors: an empty uuid or
// vendor, one holding ',' ':' or ';', negative memory or cores, memory beyond int32 MiB.
StatusOr<std::string> EncodePodDevices(const PodAllocation& allocation);

// The inverse of EncodePodDevices (node left empty, index -1). Blanks around the whole text are
// ignored; "" is no containers, ";;" two empty ones; a missing final ';' is tolerated; fields
// after the fourth of a device are ignored (upstream does the same). Errors name the container
// and device: fewer than 4 fields, empty uuid or type, memory/cores not integers in 0..2^31-1.
StatusOr<PodAllocation> DecodePodDevices(std::string_view text);

}  // namespace hami::core
