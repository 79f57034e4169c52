// Fuzz target: a ResourceClaim as the extender's DRA placement reads it from the API server
// (untrusted: any user may create claims): its requests (exactly and firstAvailable), the CEL
// selectors of the model's subset, and the allocation on a small fixed node. The same bytes are
// also parsed as one CEL expression and evaluated on a device.
#include <cstddef>
#include <cstdint>
#include <string>

#include "scheduler/dra_allocator.h"

namespace {

using nlohmann::json;
namespace dra = hami::scheduler::dra;

constexpr char kDriver[] = "hami-core-gpu.project-hami.io";

json Gpu(const std::string& name, const std::string& memory) {
  return {{"name", name},
          {"allowMultipleAllocations", true},
          {"attributes", {{"type", {{"string", "hami-gpu"}}}, {"index", {{"int", 0}}}}},
          {"capacity",
           {{"memory",
             {{"value", memory},
              {"requestPolicy",
               {{"default", memory}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
            {"cores",
             {{"value", "100"},
              {"requestPolicy",
               {{"default", "100"},
                {"validRange", {{"min", "0"}, {"max", "100"}, {"step", "1"}}}}}}}}}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<json> kSlices = {
      {{"metadata", {{"name", "n1-gpu"}}},
       {"spec",
        {{"driver", kDriver},
         {"nodeName", "n1"},
         {"pool", {{"name", "n1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
         {"devices", {Gpu("gpu-0", "16Gi"), Gpu("gpu-1", "40Gi")}}}}}};
  static const std::vector<json> kClasses = {
      {{"metadata", {{"name", kDriver}}},
       {"spec",
        {{"selectors",
          {{{"cel", {{"expression", std::string("device.driver == '") + kDriver + "'"}}}}}}}}}};
  const std::string text(reinterpret_cast<const char*>(data), size);
  dra::Device device;
  device.name = "gpu-0";
  device.attributes["type"] = std::string("hami-gpu");
  device.capacity["memory"].value = int64_t{16} << 30;
  if (auto sel = dra::ParseSelector(text); sel.ok()) (void)(*sel)(kDriver, device);
  const json claim = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (claim.is_discarded() || !claim.is_object()) return 0;
  if (!dra::RequestsFromClaim(claim).ok()) return 0;
  hami::Rng rng(1);
  (void)dra::AllocateClaimJson(kSlices, kClasses, {}, claim, "n1", rng);
  return 0;
}
