// Per-process runtime shared by the code of each fake library: configuration, shared state, faults.
// Each library links its own copy (symbols are hidden), so libcuda and libnvidia-ml have separate
// runtimes that meet in the shared state file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "fakes/config.h"
#include "fakes/shared_state.h"

#define FAKEGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace fakegpu {

struct Runtime {
  Config cfg;
  std::unique_ptr<SharedState> state;  // never null
  uint64_t start_mono_ns = 0;
  struct Fault {
    FaultSpec spec;
    std::atomic<uint64_t> calls{0};
  };
  std::unique_ptr<Fault[]> faults;
  size_t num_faults = 0;
};

// Loads the runtime on first use (environment, state file); malformed variables are reported on
// stderr.
Runtime& GetRuntime();
// Test hook: drop the runtime; the next GetRuntime() re-reads the environment. No other thread may
// be inside the library meanwhile.
void ResetRuntime();
// The CUresult / nvmlReturn_t to fail this call of `symbol` with, or 0.
int FaultCode(const char* symbol);

}  // namespace fakegpu
