// The MIG geometry of the GPUs the fake driver can partition (A100-SXM4-40GB, A100 80GB, H100
// 80GB): the GPU instance profiles NVML reports for them, with their real sizes, engine counts and
// legal placements, and the rules the fake follows for instance ids. Pure data, no state.
// `hami sim` registers its MIG GPUs from these tables too (src/sim/trace.h), so a simulated MIG
// node offers what a node running on this driver registers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fakegpu {

inline constexpr int kMigMemorySlices = 8;      // memory slices of every modelled GPU
inline constexpr int kMaxGpuInstances = 15;     // GPU instance ids 0..14 (MigGpuInstanceId)
inline constexpr int kMaxComputeInstances = 8;  // compute instance ids per GPU instance
inline constexpr int kMaxMigDevices = 7;  // nvmlDeviceGetMaxMigDeviceCount of the modelled GPUs

struct GiProfile {
  unsigned
      profile;  // NVML_GPU_INSTANCE_PROFILE_* (the index nvmlDeviceGetGpuInstanceProfileInfo takes)
  unsigned id;  // the profile id the instance calls take
  const char* name;    // "1g.10gb"
  unsigned slices;     // compute slices (sliceCount)
  unsigned size;       // memory slices one placement covers
  unsigned instances;  // instanceCount: the most that can exist at once
  unsigned sms, copy_engines, decoders, encoders, jpegs, ofas;
  uint64_t memory_mib;  // memorySizeMB
  unsigned starts;      // bit i: a placement may start at memory slice i
};

struct MigModel {
  const char* name;  // what the table describes ("A100-40GB"), for messages and `hami sim`
  const GiProfile* profiles;
  int count;
  uint64_t memory_mib;  // the GPU's memory (the nvmlDeviceGetMemoryInfo total of its 40/80 GB)
};

// Every modelled GPU, in the order above.
std::span<const MigModel> MigModels();

// A "+me" media-extension profile (NVML's *_REV1: one per GPU, holding the media engines).
bool IsMediaExtension(const GiProfile& p);

// The placements NVML lists for a profile (nvmlDeviceGetGpuInstancePossiblePlacements): one per
// allowed start, `size` memory slices each, by start.
struct GiPlacement {
  unsigned start, size;
};
std::vector<GiPlacement> PossiblePlacements(const GiProfile& p);

// The model of a GPU by its NVML name and memory: an "A100" of at most 48 GiB is an A100-40GB,
// a larger one an A100-80GB, an "H100" of 80 GiB or more an H100-80GB; anything else cannot run MIG
// (nullptr).
const MigModel* MigModelFor(const std::string& name, uint64_t mem_mib);

const GiProfile* GiProfileByIndex(const MigModel& m, unsigned profile);
const GiProfile* GiProfileById(const MigModel& m, unsigned id);

// The GPU instance id of a placement, as a binary partition of the 8 memory slices: the whole GPU
// 0, halves 1-2, quarters 3-6, eighths 7-14 (A100's ids: 7g = 0, 3g at slice 4 = 2, 1g at slice 6 =
// 13). Distinct for placements that do not overlap. -1 for a placement that is not aligned.
int MigGpuInstanceId(unsigned start, unsigned size);

}  // namespace fakegpu
