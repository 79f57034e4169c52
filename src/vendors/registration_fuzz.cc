// Fuzz target: every vendor's registration decoder (dispatched by the first byte), decision decoder
// and the config loader never crash; what decodes re-encodes to something that decodes the same.
#include <cstdint>
#include <string>

#include "common/log.h"
#include "core/annotations.h"
#include "core/fuzz_check.h"
#include "vendors/config.h"
#include "vendors/nvidia/annotations.h"

using namespace hami::vendors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet =
      (spdlog::set_level(spdlog::level::off), true);  // config logs ignored keys
  (void)quiet;
  static const auto* all = new std::vector<std::unique_ptr<Vendor>>(AllVendorsWithDefaults());
  if (size == 0) return 0;
  const Vendor& v = *(*all)[data[0] % all->size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  NodeView node;
  if (!v.keys().node_register.empty()) node.annotations[v.keys().node_register] = text;
  node.annotations["hami-vnpu-core"] = "true";
  if (auto devs = v.DecodeNode(node); devs.ok()) {
    NodeView out;
    if (v.EncodeNode(*devs, &out).ok()) {
      auto back = v.DecodeNode(out);
      FUZZ_CHECK(back.ok() && *back == *devs, text.c_str());
    }
    (void)v.ScoreNode(*devs, {}, node);
  }
  if (auto a = v.DecodeDecision({{v.keys().allocated, text}}); a.ok()) {
    if (auto enc = v.EncodeDecision(*a, 0); enc.ok()) {
      auto back = v.DecodeDecision(*enc);
      FUZZ_CHECK(back.ok() && *back == *a, text.c_str());
    }
  }
  // NVIDIA's MIG annotation beside a decision record: what attaches re-encodes the same.
  if (v.keys().allocated == hami::vendors::nvidia::kNvidiaDevicesAllocated) {
    const std::map<std::string, std::string> ann{
        {v.keys().allocated, "GPU-a,NVIDIA,5120,14:;GPU-b,NVIDIA,10240,28:GPU-a,NVIDIA,5120,14:;"},
        {hami::core::kMigAllocations, text}};
    if (auto a = v.DecodeDecision(ann); a.ok()) {
      if (auto enc = v.EncodeDecision(*a, 0); enc.ok()) {
        auto back = v.DecodeDecision(*enc);
        FUZZ_CHECK(back.ok() && *back == *a, text.c_str());
      }
    }
  }
  (void)ParseRefusal(text);
  (void)LoadVendors(text);
  return 0;
}
