#pragma once
// Readers of the openb trace CSVs (Alibaba cluster-trace-gpu-v2023, see data/openb/README.md).
// Columns are found by header name; extra columns are ignored. Errors name file, line and field.
// Heterogeneous clusters (docs/vendors.md): an optional `vendor` column in both files names the
// device vendor of a node's GPUs and of a task's request (a Type keyword such as NVIDIA, DCU, MLU,
// Ascend310P, or a registry name such as hygon); empty or absent = NVIDIA. Models and gpu_spec of
// NVIDIA rows must be openb models; other vendors' models are free text.
// MIG (docs/sim.md, "MIG nodes"): an optional `mig` column in the node file puts the node's GPUs in
// MIG mode with a named profile set (SimMigProfileSets: "A100-40GB", or "A100-40GB:2" for the first
// two GPUs only; the model of such a node is free text); an optional `mode` column (hami-core |
// mps) puts every GPU of a node in that operating mode (docs/sim.md, "MPS nodes"); optional
// `vgpu_mode` (hami-core | mig | mps) and `mig_profile_preference` ('|'-separated profiles or slice
// classes) columns in the pod file become the pod's nvidia.com/vgpu-mode and
// nvidia.com/mig-profile-preference.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::sim {

// GPU models of the openb traces ("G1".."G3" are undisclosed models).
const std::vector<std::string>& KnownGpuModels();

struct TraceNode {
  std::string name;  // sn
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;     // empty when gpus == 0
  std::string vendor{};  // `vendor` column; "" = NVIDIA
  std::string mig{};     // `mig` column: a SimMigProfileSets name; "" = no GPU in MIG mode
  int mig_gpus = 0;      // GPUs 0..mig_gpus-1 are in MIG mode (all when the column names no count)
  bool mps = false;      // `mode` column mps: every GPU registers mode mps
};

// The MIG profile sets a trace node can name, one per GPU the fake driver models
// (src/fakes/mig_model.h: "A100-40GB", "A100-80GB", "H100-80GB"): the migProfiles a node running
// on that driver registers for such a GPU in MIG mode (NVML's exact MiB, cores from the SMs,
// placements; vendors::nvidia::RegisteredMigProfiles), and the GPU's memory.
struct SimMigProfileSet {
  std::string name;
  int64_t memory_mib = 0;  // the GPU's memory as NVML reports it (what the node registers)
  std::vector<core::MigProfile> profiles;
};
const std::vector<SimMigProfileSet>& SimMigProfileSets();
// The set of that name, or null.
const SimMigProfileSet* FindSimMigProfileSet(std::string_view name);

struct TraceTask {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                                  // per GPU, 1..1000 when num_gpu > 0
  std::vector<std::string> gpu_spec;                  // allowed models ("A|B"); empty = any
  std::string vendor{};                               // `vendor` column; "" = NVIDIA
  std::string vgpu_mode{};                            // `vgpu_mode` column: "", hami-core, mig, mps
  std::vector<std::string> mig_profile_preference{};  // `mig_profile_preference` column
  // Total GPU milli requested: num_gpu * gpu_milli.
  int64_t total_gpu_milli() const { return int64_t{num_gpu} * gpu_milli; }
};

// `source` names the input in error messages ("nodes.csv").
StatusOr<std::vector<TraceNode>> ParseNodesCsv(std::string_view text, std::string_view source);
StatusOr<std::vector<TraceTask>> ParsePodsCsv(std::string_view text, std::string_view source);
StatusOr<std::vector<TraceNode>> ReadNodesCsv(const std::string& path);
StatusOr<std::vector<TraceTask>> ReadPodsCsv(const std::string& path);

}  // namespace hami::sim
