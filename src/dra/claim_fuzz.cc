// Fuzz target: ResourceClaim JSON from the API server (untrusted: any user may create claims).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dra/claim.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<hami::dra::DeviceCapacity> kDevices = {
      {"gpu-0", "GPU-0", 0, 16384, 100}, {"gpu-1", "GPU-1", 1, 16384, 100}};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto a = hami::dra::ParseClaimText(text, {"ns", "c1", "uid-1"}, "hami-core-gpu.project-hami.io",
                                     "node-a", kDevices);
  if (a.ok()) (void)a->ByDevice();
  return 0;
}
