// Extra C entry points for tests (fakes/fake_gpu.h); linked into both fake libraries.
#include "fakes/fake_gpu.h"
#include "fakes/runtime.h"

FAKEGPU_EXPORT unsigned long long fakegpu_busy_ns(int dev, int pid) {
  fakegpu::SharedState& s = *fakegpu::GetRuntime().state;
  if (dev < 0 || dev >= s.num_devices() || pid < 0) return 0;
  return s.BusyNs(dev, pid);
}

FAKEGPU_EXPORT int fakegpu_inject_xid(int dev, unsigned long long xid) {
  fakegpu::SharedState& s = *fakegpu::GetRuntime().state;
  if (dev < 0 || dev >= s.num_devices()) return -1;
  s.InjectXid(dev, xid);
  return 0;
}

FAKEGPU_EXPORT unsigned long long fakegpu_mem_used(int dev, int pid) {
  fakegpu::SharedState& s = *fakegpu::GetRuntime().state;
  if (dev < 0 || dev >= s.num_devices() || pid < 0) return 0;
  return s.UsedBytes(dev, pid);
}
