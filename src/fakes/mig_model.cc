#include "fakes/mig_model.h"

#include "gpu/nvml_abi.h"

namespace fakegpu {
namespace {

constexpr unsigned kAll1 = 0x7F;  // starts 0..6 (slice 7 backs the 7g profile only)
constexpr unsigned kEven = 0x55;  // 0, 2, 4, 6
constexpr unsigned kTwo = 0x15;   // 0, 2, 4
constexpr unsigned kHalf = 0x11;  // 0, 4
constexpr unsigned kZero = 0x01;

// Sizes as `nvidia-smi mig -lgip` lists them (memory rounded to what NVML reports in MiB).
constexpr GiProfile kA100With40Gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, 4864, kAll1},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, 4864,
     kAll1},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, 9984, kTwo},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, 20096, kHalf},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, 20096, kZero},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, 40448, kZero},
};
constexpr GiProfile kA100With80Gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, 9728, kAll1},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, 9728,
     kAll1},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 14, 1, 1, 0, 0, 0, 19968,
     kEven},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, 19968, kTwo},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, 40192, kHalf},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, 40192, kZero},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, 81152, kZero},
};
constexpr GiProfile kH100With80Gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 9984, kAll1},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 9984,
     kAll1},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, 20096,
     kEven},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 20096, kTwo},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, 40448, kHalf},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 40448, kZero},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 132, 7, 7, 0, 7, 1, 81152, kZero},
};

constexpr MigModel kModels[] = {
    {"A100-40GB", kA100With40Gb, sizeof kA100With40Gb / sizeof kA100With40Gb[0], 40960},
    {"A100-80GB", kA100With80Gb, sizeof kA100With80Gb / sizeof kA100With80Gb[0], 81920},
    {"H100-80GB", kH100With80Gb, sizeof kH100With80Gb / sizeof kH100With80Gb[0], 81920},
};

}  // namespace

const MigModel* MigModelFor(const std::string& name, uint64_t mem_mib) {
  if (name.find("A100") != std::string::npos)
    return mem_mib <= 48 * 1024 ? &kModels[0] : &kModels[1];
  if (name.find("H100") != std::string::npos && mem_mib >= 80 * 1000) return &kModels[2];
  return nullptr;
}

std::span<const MigModel> MigModels() {
  return kModels;
}

bool IsMediaExtension(const GiProfile& p) {
  return p.profile == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
         p.profile == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
}

std::vector<GiPlacement> PossiblePlacements(const GiProfile& p) {
  std::vector<GiPlacement> out;
  for (unsigned s = 0; s < kMigMemorySlices; ++s)
    if (p.starts >> s & 1u) out.push_back({s, p.size});
  return out;
}

const GiProfile* GiProfileByIndex(const MigModel& m, unsigned profile) {
  for (int i = 0; i < m.count; ++i)
    if (m.profiles[i].profile == profile) return &m.profiles[i];
  return nullptr;
}

const GiProfile* GiProfileById(const MigModel& m, unsigned id) {
  for (int i = 0; i < m.count; ++i)
    if (m.profiles[i].id == id) return &m.profiles[i];
  return nullptr;
}

int MigGpuInstanceId(unsigned start, unsigned size) {
  switch (size) {
    case 8:
      return start == 0 ? 0 : -1;
    case 4:
      return start % 4 == 0 && start < 8 ? 1 + static_cast<int>(start / 4) : -1;
    case 2:
      return start % 2 == 0 && start < 8 ? 3 + static_cast<int>(start / 2) : -1;
    case 1:
      return start < 8 ? 7 + static_cast<int>(start) : -1;
    default:
      return -1;
  }
}

}  // namespace fakegpu
