#pragma once
// The fake libnvidia-ml.so.1 for the DRA tests that need NVML's health events: GPUs from a
// FAKEGPU_DEVICES list, state under a test directory, the hooks that inject Xids, and a wait for
// the HealthBoard to see one. Header-only; the test defines the library's path (HAMI_FAKE_NVML).
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dra/health.h"
#include "gpu/nvml_discovery.h"
#include "gpu/testing/fake_nvml_hooks.h"

namespace hami::dra::testing {

struct FakeNvml {
  gpu::testing::FakeNvmlHooks hooks;
  std::unique_ptr<gpu::NvmlDiscovery> nvml;
  std::vector<gpu::GpuInfo> gpus;
  std::string error;  // empty when all of the above are ready
};

// `devices` as FAKEGPU_DEVICES ("NVIDIA A16:16384:40;..."); the fake's state goes to `state_dir`.
inline FakeNvml OpenFakeNvml(const char* library, const std::string& state_dir,
                             const std::string& devices) {
  FakeNvml f;
  setenv("FAKEGPU_STATE", state_dir.c_str(), 1);
  setenv("FAKEGPU_DEVICES", devices.c_str(), 1);
  f.hooks = gpu::testing::LoadFakeNvmlHooks(library);
  if (!f.hooks.ok()) {
    f.error = f.hooks.error;
    return f;
  }
  f.hooks.reset();
  gpu::NvmlOptions o;
  o.library = library;
  auto nvml = gpu::NvmlDiscovery::Open(o);
  if (!nvml.ok()) {
    f.error = std::string(nvml.status().message());
    return f;
  }
  auto gpus = (*nvml)->ListDevices();
  if (!gpus.ok()) {
    f.error = std::string(gpus.status().message());
    return f;
  }
  f.nvml = *std::move(nvml);
  f.gpus = *std::move(gpus);
  return f;
}

// Whether `board` holds `device` unhealthy within five seconds (the health watch is a thread).
inline bool WaitUnhealthy(const HealthBoard& board, const std::string& device) {
  for (int i = 0; i < 500; ++i) {
    uint64_t version = 0;
    for (const auto& e : board.Snapshot(&version))
      if (e.device == device && !e.healthy) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace hami::dra::testing
