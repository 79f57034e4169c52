#include "fakes/runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace fakegpu {
namespace {

std::mutex g_mu;
std::atomic<Runtime*> g_runtime{nullptr};

Runtime* Load() {
  auto rt = std::make_unique<Runtime>();
  std::vector<std::string> warnings;
  rt->cfg = LoadConfig([](const char* name) { return std::getenv(name); }, &warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "%s\n", w.c_str());
  std::string err;
  rt->state.reset(SharedState::Open(rt->cfg, &err));
  if (!rt->state) {
    std::fprintf(stderr, "fakegpu: %s; using a process-private state\n", err.c_str());
    rt->state.reset(SharedState::OpenPrivate(rt->cfg));
    if (!rt->state) std::abort();  // cannot even map anonymous memory
  }
  rt->start_mono_ns = MonoNs();
  rt->num_faults = rt->cfg.faults.size();
  rt->faults = std::make_unique<Runtime::Fault[]>(rt->num_faults);
  for (size_t i = 0; i < rt->num_faults; ++i) rt->faults[i].spec = rt->cfg.faults[i];
  return rt.release();
}

}  // namespace

Runtime& GetRuntime() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt != nullptr) return *rt;
  std::lock_guard<std::mutex> lock(g_mu);
  rt = g_runtime.load(std::memory_order_relaxed);
  if (rt == nullptr) {
    rt = Load();
    g_runtime.store(rt, std::memory_order_release);
  }
  return *rt;
}

void ResetRuntime() {
  std::lock_guard<std::mutex> lock(g_mu);
  // Test-only path: the caller guarantees no other thread is inside the library.
  delete g_runtime.exchange(nullptr, std::memory_order_acq_rel);
}

int FaultCode(const char* symbol) {
  Runtime& rt = GetRuntime();
  for (size_t i = 0; i < rt.num_faults; ++i) {
    Runtime::Fault& f = rt.faults[i];
    if (std::strcmp(f.spec.symbol.c_str(), symbol) != 0) continue;
    uint64_t n = f.calls.fetch_add(1, std::memory_order_relaxed) + 1;
    if (f.spec.nth == 0 || f.spec.nth == n) return f.spec.code;
  }
  return 0;
}

}  // namespace fakegpu
