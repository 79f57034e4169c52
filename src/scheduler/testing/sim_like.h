#pragma once
// Devices as the simulator registers them: memory 1000*k MiB so that milli maps to MiB exactly.
#include "scheduler/testing/builders.h"

namespace hami::scheduler::testing {

inline constexpr int64_t kSimGpuMem = 16000;  // 16 MiB per milli

inline NodeBuilder SimNode(const std::string& name, int gpus, int64_t cpu = 64000) {
  return NodeBuilder(name).Cpu(cpu).Memory(262144).Gpus(gpus, kSimGpuMem, "T4", 1000, 100);
}
// A pod of num_gpu GPUs of gpu_milli each (the openb task model).
inline PodBuilder SimPod(const std::string& uid, int num_gpu, int gpu_milli, int64_t cpu = 1000) {
  PodBuilder b(uid);
  if (num_gpu == 0) return b.Cpu(cpu, 0);
  return b.Gpu(num_gpu, kSimGpuMem * gpu_milli / 1000, gpu_milli / 10, cpu, 0);
}

}  // namespace hami::scheduler::testing
