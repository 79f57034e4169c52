#pragma once
// The transient CDI spec of one prepared claim
// (docs/dra.md#cdi-how-the-container-gets-the-gpu-and-the-limits): only the claim's devices
// visible, the vendor's limiter armed with what the claim consumed (dra/vendor.h). For NVIDIA the
// container part is the device plugin's own (deviceplugin/allocate_env.h), so both paths arm
// libvgpu the same way. Pure: no files are touched here.
#include <string>
#include <vector>

#include "common/status.h"
#include "deviceplugin/allocate_env.h"
#include "deviceplugin/config.h"
#include "dra/claim.h"
#include "dra/slice.h"
#include "dra/vendor.h"

namespace hami::dra {

// The container name the claim's region directory and limits file are keyed by:
// <region-root>/<claim uid>_dra and <claim uid>_dra.limits.
inline constexpr char kRegionSuffix[] = "dra";

struct ClaimEdits {
  std::string kind;            // "k8s.<driver>/claim"
  std::string cdi_device_id;   // "<kind>=<claim uid>"
  std::string spec_file_name;  // "k8s.<driver>-claim_<claim uid>.json" (a transient spec)
  std::string spec_json;       // the spec's text
  VendorEdits edits;           // env, mounts, and the host files and directories to make
};

// "k8s.<driver>/claim".
std::string CdiKind(const std::string& driver);

// The claim's edits. The devices are handed to the vendor in index order whatever the order of the
// results, so (NVIDIA) CUDA_DEVICE_MEMORY_LIMIT_<i> names the i-th GPU CUDA numbers in the
// container; shares of one device are summed. `config` supplies the libvgpu paths (libvgpu,
// ld.so.preload, region root, container hook dir, lock dir) and settings; its device list strategy
// is forced to envvar (the CDI device is the only thing the runtime is given). `vendor` null:
// NVIDIA. Errors: a claim uid that cannot name a file or a CDI device, a device not on this node,
// the vendor's errors (NVIDIA: a device granting 0 MiB, those of BuildContainerAllocation).
StatusOr<ClaimEdits> BuildClaimEdits(const ClaimAllocation& claim,
                                     const std::vector<DeviceCapacity>& devices,
                                     const std::string& driver,
                                     const deviceplugin::PluginConfig& config,
                                     const DraVendor* vendor = nullptr);

}  // namespace hami::dra
