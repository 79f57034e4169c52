// Fuzz target: a pod object from the API server (decision annotation, containers, env, resources)
// must give a pending pod or a Status, never a crash; a pod is trusted only with the scheduler's
// bind phase, node and schedulerName.
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
    // Trusted only as the scheduler leaves a pod it bound here.
    if ((*r)->refused.empty()) {
      const nlohmann::json& md = pod["metadata"];
      if (!md.is_object() || !md.contains("annotations") || !md.at("annotations").is_object())
        __builtin_trap();
      const nlohmann::json& ann = md.at("annotations");
      if (ann.value("hami.io/bind-phase", nlohmann::json()) != "allocating" ||
          ann.value("hami.io/vgpu-node", nlohmann::json()) != "node1" ||
          pod["spec"].value("schedulerName", nlohmann::json()) != "hami-scheduler")
        __builtin_trap();
    }
  }
  return 0;
}
