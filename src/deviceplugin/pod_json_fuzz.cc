// Fuzz target: a pod object from the API server (decision annotation, containers, env, resources)
// must give a pending pod or a Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "deviceplugin/k8s_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto pod = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (pod.is_discarded()) return 0;
  auto r = hami::deviceplugin::PendingFromPodJson(pod, "node1");
  if (r.ok() && r->has_value()) {
    // Every pending container names devices (empty entries are skipped).
    for (const auto& c : (*r)->containers)
      if (c.devices.empty()) __builtin_trap();
  }
  return 0;
}
