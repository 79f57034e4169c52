// Fuzz target: a default install's VendorSet::ParsePod (core::ParsePodJson with NVIDIA's request
// rules) never crashes on any JSON, and a pod that parses satisfies the defaulting invariants; its
// requests, placed on fake devices, survive the decision codec and the effective-usage collapse
// without exceeding the raw sum.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "core/pod_codec.h"
#include "core/pod_request.h"
#include "nlohmann/json.hpp"
#include "vendors/vendor_set.h"

using namespace hami::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto pod = hami::vendors::VendorSet::NvidiaOnly().ParsePod(j);
  if (!pod.ok()) return 0;
  PodAllocation alloc;
  bool seen_app = false;
  int64_t raw_mem = 0;
  for (const auto& c : pod->containers) {
    FUZZ_CHECK(c.cpu_milli >= 0 && c.memory_mib >= 0, c.name.c_str());
    if (c.kind == ContainerKind::kApp) seen_app = true;
    FUZZ_CHECK(c.kind == ContainerKind::kApp || !seen_app, "init containers come first");
    std::vector<ContainerDevice> devs;
    for (const auto& r : c.devices) {
      FUZZ_CHECK(r.nums >= 1 && r.nums <= 1024, c.name.c_str());
      FUZZ_CHECK((r.memreq_mib > 0) != (r.mem_percentage > 0), "exactly one memory form");
      FUZZ_CHECK(r.mem_percentage <= 100 && r.coresreq >= 0 && r.coresreq <= 100, c.name.c_str());
      for (int i = 0; i < r.nums && i < 8; ++i) {
        ContainerDevice d;
        d.uuid = "GPU-" + std::to_string(i);
        d.usedmem_mib = r.memreq_mib > 0 ? r.memreq_mib : 1000 * r.mem_percentage;
        d.usedcores = r.coresreq;
        raw_mem += d.usedmem_mib;
        devs.push_back(d);
      }
    }
    alloc.containers.push_back(std::move(devs));
  }
  auto enc = EncodePodDevices(alloc);
  FUZZ_CHECK(enc.ok(), "encodable");
  auto dec = DecodePodDevices(*enc);
  FUZZ_CHECK(dec.ok() && dec->containers == alloc.containers, enc->c_str());
  int64_t effective_mem = 0;
  for (const auto& [uuid, u] : EffectiveDeviceUsage(ContainerKinds(*pod), *dec))
    effective_mem += u.usedmem_mib;
  FUZZ_CHECK(effective_mem <= raw_mem, "collapse never exceeds the raw sum");
  return 0;
}
