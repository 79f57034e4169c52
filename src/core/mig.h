#pragma once
// Dynamic MIG (docs/upstream-contract.md#dynamic-mig): a GPU registered with mode "mig" is not
// shared through HAMi-core; every container that lands on it gets one GPU instance of a profile
// the node reports (DeviceInfo::mig_profiles), at one of that profile's legal placements. The
// scheduler reserves profile and placement, charges the profile's memory and cores, and writes
// hami.io/vgpu-mig-allocations; the device plugin creates the instance at that placement.
//
// Here: the pure rules both sides share (placement masks, which profile and placement a request
// gets), the registration check, and the codec of the pod annotation.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::core {

// The annotation the codec below reads and writes (NVIDIA's dynamic MIG decision; the NVIDIA vendor
// names it vendors::nvidia::kMigAllocations, this same array).
inline constexpr const char kMigAllocations[] = "hami.io/vgpu-mig-allocations";

// Slices a device can have as far as we track them (bits of DeviceUsage::mig_slices). NVIDIA's
// GPUs have 8 memory slices; a placement beyond 32 is refused at registration.
inline constexpr int kMaxMigSlices = 32;

bool IsMigDevice(const DeviceInfo& d);

// The bits a placement covers; 0 for a placement outside 0..kMaxMigSlices or of size <= 0.
uint32_t MigSliceMask(const MigPlacement& p);

// Registration check of one device (node_codec calls it for every decoded device): mode is "",
// hami-core, mig, mps or remote; profiles only on a mig device; each profile has a non-empty unique
// name, memoryMB > 0, sliceCount > 0 and at least one placement; each placement has size > 0, ends
// within kMaxMigSlices and appears once. Errors name the device, profile and placement.
Status ValidateMigRegistration(const DeviceInfo& d);

// The profile and placement one container's request gets on a MIG device, upstream's rule: the
// profiles whose memory covers `mem_mib` (and whose cores cover `cores`, where upstream looks at
// memory only: docs/migration.md), smallest memory first, then fewest slices, then registration
// order; for each, its placements from the highest start for 1g.* and 3g.* profiles and from the
// lowest for the others; the first placement that overlaps no slice of `occupied` and whose
// profile fits `free_mem_mib` and `free_cores` wins.
// `preferred` (the pod's nvidia.com/mig-profile-preference, ParseMigProfilePreference) moves the
// profiles it names to the front, entry by entry in its order (each entry's profiles in the order
// above); the others follow in that order. A preferred profile too small for the request, or
// without a free placement, yields to the next: a preference never makes a device refuse a request
// the default order would place. Entries that match no profile of the device are ignored.
struct MigChoice {
  int profile = -1;  // index into DeviceInfo::mig_profiles
  MigPlacement placement;
  bool operator==(const MigChoice&) const = default;
};
struct MigVerdict {
  std::optional<MigChoice> choice;
  bool never = false;  // no profile of the device covers the request at all (waiting cannot help)
};
MigVerdict ChooseMigInstance(const DeviceInfo& d, int64_t mem_mib, int cores, uint32_t occupied,
                             int64_t free_mem_mib, int free_cores,
                             std::span<const std::string> preferred = {});

// The annotation a pod names its preferred MIG profiles with (upstream's name), and how it reads:
// a comma list of profile names ("4g.20gb") or slice classes ("4g", every profile whose name starts
// with "4g."), blanks around entries and empty entries dropped, later duplicates dropped, order
// kept. Empty when nothing is left.
inline constexpr const char kMigProfilePreference[] = "nvidia.com/mig-profile-preference";
std::vector<std::string> ParseMigProfilePreference(std::string_view raw);
// Whether `entry` of a preference names `profile`: the same name, or the profile's slice class (the
// name up to its first '.', when that is not the first character).
bool MigProfileMatches(std::string_view profile, std::string_view entry);

// One entry of hami.io/vgpu-mig-allocations. The runtime identity (mig_uuid, gpu instance and
// compute instance ids) is filled by the device plugin once the instance exists: all three or
// none.
struct MigAllocation {
  int container_index = 0;  // position in the decision (init containers first, as the devices)
  int device_index = 0;     // position within the container's devices
  std::string gpu_uuid;
  std::string profile;
  MigPlacement placement;
  std::string mig_uuid;
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
  bool HasRuntime() const { return !mig_uuid.empty(); }
  bool operator==(const MigAllocation&) const = default;
};

// JSON array in upstream's field order: containerIndex, deviceIndex, gpuUUID, profile,
// placement{start,size}, then migUUID, gpuInstanceID, computeInstanceID when known.
std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations);
// Strict: malformed JSON, wrong types, negative or fractional numbers, an entry without gpuUUID,
// profile or a placement of size > 0, partial runtime identity, two entries for one
// (container, device), all are errors naming the entry. Empty text = no entries.
StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text);

// The MIG grants of a decision, in container and device order.
std::vector<MigAllocation> MigAllocationsOf(const PodAllocation& allocation);
// Puts each entry's profile and placement on the device it names in `allocation`. An entry whose
// (container, device) is absent or names another GPU is left out (a stale annotation from an
// earlier decision): the device then counts as a plain grant. Returns how many were attached.
int AttachMigAllocations(const std::vector<MigAllocation>& entries, PodAllocation* allocation);

// Why a decision's MIG grant on `d` cannot be charged: "" when consistent (d is a MIG device, the
// profile is one it reports, the placement one of the profile's, memory and cores the profile's).
std::string CheckMigGrant(const DeviceInfo& d, const ContainerDevice& grant);

}  // namespace hami::core
