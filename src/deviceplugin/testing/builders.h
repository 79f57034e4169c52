#pragma once
// Builders for device plugin tests: Dev("GPU-a", 3000, 30), MakePod("p", {{Dev(...)}, {...}}).
#include <string>
#include <vector>

#include "core/model.h"
#include "deviceplugin/pending_pod.h"

namespace hami::deviceplugin::testing {

inline core::ContainerDevice Dev(const std::string& uuid, int64_t mem_mib, int cores) {
  core::ContainerDevice d;
  d.uuid = uuid;
  d.usedmem_mib = mem_mib;
  d.usedcores = cores;
  return d;
}

// Pod "default/<name>", uid "uid-<name>", containers "c0", "c1", ... with the given devices.
inline PendingPod MakePod(const std::string& name,
                          std::vector<std::vector<core::ContainerDevice>> ctrs) {
  PendingPod p;
  p.uid = "uid-" + name;
  p.namespace_ = "default";
  p.name = name;
  int i = 0;
  for (auto& devs : ctrs) {
    PendingContainer c;
    c.index = i;
    c.name = "c" + std::to_string(i++);
    c.devices = std::move(devs);
    p.containers.push_back(std::move(c));
  }
  return p;
}

}  // namespace hami::deviceplugin::testing
