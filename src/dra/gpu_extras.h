#pragma once
// The ResourceSlice attributes the discovery layer does not read (docs/dra.md#resourceslice-what-
// the-plugin-publishes): driverVersion and cudaComputeCapability from NVML, architecture named from
// the compute capability, the PCIe root from sysfs. Whatever cannot be read is left out.
#include <map>
#include <string>
#include <vector>

#include "dra/slice.h"
#include "gpu/discovery.h"

namespace hami::dra {

// "Pascal" (6.x), "Volta" (7.0, 7.2), "Turing" (7.5), "Ampere" (8.0, 8.6, 8.7), "Ada Lovelace"
// (8.9), "Hopper" (9.0), "Blackwell" (10.x, 12.x); "" for anything else.
std::string ArchitectureOf(int major, int minor);
// A driver version as semver ("535.104.05" -> "535.104.5", "550.54" -> "550.54.0"); "" when not
// made of one to three decimal numbers.
std::string DriverSemver(const std::string& version);
// The PCIe root complex of a GPU: the first component under /sys/devices of the resolved
// <sysfs_root>/bus/pci/devices/<bus id> ("pci0000:3a"); "" when it cannot be resolved.
std::string PcieRoot(const std::string& sysfs_root, const std::string& pci_bus_id);

// Per GPU UUID, for BuildResourceSlice. Loads `nvml_library` (already loaded by the discovery:
// the same handle) for the driver version and each GPU's compute capability.
std::map<std::string, GpuExtras> ReadGpuExtras(const std::string& nvml_library,
                                               const std::vector<gpu::GpuInfo>& gpus,
                                               const std::string& sysfs_root = "/sys");

}  // namespace hami::dra
