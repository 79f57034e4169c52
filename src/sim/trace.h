#pragma once
// Readers of the openb trace CSVs (Alibaba cluster-trace-gpu-v2023, see data/openb/README.md).
// Columns are found by header name; extra columns are ignored. Errors name file, line and field.
// Heterogeneous clusters (docs/vendors.md): an optional `vendor` column in both files names the
// device vendor of a node's GPUs and of a task's request (a Type keyword such as NVIDIA, DCU, MLU,
// Ascend310P, or a registry name such as hygon); empty or absent = NVIDIA. Models and gpu_spec of
// NVIDIA rows must be openb models; other vendors' models are free text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

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
};

struct TraceTask {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                  // per GPU, 1..1000 when num_gpu > 0
  std::vector<std::string> gpu_spec;  // allowed models ("A|B"); empty = any
  std::string vendor{};               // `vendor` column; "" = NVIDIA
  // Total GPU milli requested: num_gpu * gpu_milli.
  int64_t total_gpu_milli() const { return int64_t{num_gpu} * gpu_milli; }
};

// `source` names the input in error messages ("nodes.csv").
StatusOr<std::vector<TraceNode>> ParseNodesCsv(std::string_view text, std::string_view source);
StatusOr<std::vector<TraceTask>> ParsePodsCsv(std::string_view text, std::string_view source);
StatusOr<std::vector<TraceNode>> ReadNodesCsv(const std::string& path);
StatusOr<std::vector<TraceTask>> ReadPodsCsv(const std::string& path);

}  // namespace hami::sim
