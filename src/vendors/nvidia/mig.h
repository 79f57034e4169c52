#pragma once
// NVIDIA's dynamic-MIG pieces above the pure rules of core/mig.h: the decision annotation
// (hami.io/vgpu-mig-allocations) the NVIDIA backend writes beside the generic decision records and
// reads back, and the cluster's MIG profile allowlist (device-config.yaml
// nvidia.migProfileAllowlist) with the admission check of a pod's nvidia.com/mig-profile-preference
// against it. And the registration rule shared by the device plugin and `hami sim`: which
// migProfiles a GPU in MIG mode registers from what the driver reports.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::vendors::nvidia {

// Adds hami.io/vgpu-mig-allocations when `allocation` (NVIDIA's devices only) holds MIG grants.
Status AddMigDecision(const core::PodAllocation& allocation,
                      std::map<std::string, std::string>* annotations);

// Puts the MIG grants of the pod's hami.io/vgpu-mig-allocations on `allocation` (decoded from the
// allocated record). A malformed annotation is an error (only the scheduler writes it); entries
// that name no device of the record are ignored (core::AttachMigAllocations).
Status AttachMigDecision(const std::map<std::string, std::string>& annotations,
                         core::PodAllocation* allocation);

// One entry of nvidia.migProfileAllowlist: the MIG profiles the cluster allows on the GPU models
// named. Policy only: each node reports the memory, cores and placements of its profiles.
struct MigAllowlistEntry {
  std::vector<std::string> models;    // e.g. "A100-SXM4-40GB"
  std::vector<std::string> profiles;  // e.g. "3g.20gb"
  bool operator==(const MigAllowlistEntry&) const = default;
};

// The list upstream's Helm chart ships (A30, A100 40/80 GB, H100 80/94 GB, H20, H200, B200, RTX
// PRO 6000 Blackwell): what a device-config.yaml without the key gets.
const std::vector<MigAllowlistEntry>& DefaultMigProfileAllowlist();

// Upstream's rule for the list: every entry names at least one model and one profile, and every
// profile reads "<N>g.<rest>" (ours: N is digits and <rest> is not empty). Errors name the entry
// and the profile.
Status ValidateMigProfileAllowlist(std::span<const MigAllowlistEntry> allowlist);

// The admission check of nvidia.com/mig-profile-preference (upstream's
// validateMigProfilePreference): absent is fine; a value with no entry (" , ") and an entry that
// matches no profile of any allowlist entry (core::MigProfileMatches: the name or its slice
// class, on any model) are errors whose message names the annotation, the value or entry, and
// migProfileAllowlist.
Status CheckMigProfilePreference(const std::map<std::string, std::string>& pod_annotations,
                                 std::span<const MigAllowlistEntry> allowlist);

// One GPU instance profile as the driver reports it for a GPU in MIG mode (NVML's
// nvmlGpuInstanceProfileInfo and the placements nvmlDeviceGetGpuInstancePossiblePlacements lists).
struct DriverMigProfile {
  std::string name;  // "1g.10gb"
  int slices = 0;    // compute slices (sliceCount)
  int sms = 0;       // streaming multiprocessors (multiprocessorCount)
  int64_t memory_mib = 0;
  std::vector<core::MigPlacement> placements;
};

// The migProfiles a GPU registers from the driver's profiles (in the driver's order, without the
// "+me" media variants: the caller leaves those out): name, memory and placements as reported,
// sliceCount = compute slices, `core` = the profile's SMs in percent of the largest profile's (the
// whole GPU), rounded down, so a grant never claims compute it lacks (by slices when no SM count is
// reported).
std::vector<core::MigProfile> RegisteredMigProfiles(std::span<const DriverMigProfile> reported);

}  // namespace hami::vendors::nvidia
