#pragma once
// Test hooks of the fake libnvidia-ml.so.1 (src/fakes/fake_gpu.h), looked up in the library at
// `path` (loaded once per process; NvmlDiscovery opening the same path shares it).
#include <dlfcn.h>

#include <string>

namespace hami::gpu::testing {

struct FakeNvmlHooks {
  void (*reset)() = nullptr;  // fakegpu_nvml_reset: re-read FAKEGPU_* env
  int (*inject_xid)(int, unsigned long long) = nullptr;  // fakegpu_inject_xid(dev, xid)
  std::string error;                                     // why the hooks are missing, if they are
  bool ok() const { return reset != nullptr && inject_xid != nullptr; }
};

inline FakeNvmlHooks LoadFakeNvmlHooks(const char* path) {
  FakeNvmlHooks h;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    h.error = e ? e : "dlopen failed";
    return h;
  }
  h.reset = reinterpret_cast<void (*)()>(dlsym(lib, "fakegpu_nvml_reset"));
  h.inject_xid =
      reinterpret_cast<int (*)(int, unsigned long long)>(dlsym(lib, "fakegpu_inject_xid"));
  if (!h.ok()) h.error = std::string(path) + " lacks fakegpu_nvml_reset / fakegpu_inject_xid";
  return h;
}

}  // namespace hami::gpu::testing
