// Fuzz target: the pod decision annotations (hami.io/vgpu-devices-*, hami.io/vgpu-mig-allocations)
// and the handshake never crash, and every value that decodes re-encodes to text that decodes to
// the same value.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "core/lock_codec.h"
#include "core/mig.h"
#include "core/pod_codec.h"

using namespace hami::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto a = DecodePodDevices(text); a.ok()) {
    auto enc = EncodePodDevices(*a);
    FUZZ_CHECK(enc.ok(), std::string(enc.status().message()).c_str());
    auto back = DecodePodDevices(*enc);
    FUZZ_CHECK(back.ok(), enc->c_str());
    FUZZ_CHECK(*back == *a, enc->c_str());
  }
  if (auto m = DecodeMigAllocations(text); m.ok()) {
    const std::string enc = EncodeMigAllocations(*m);
    auto back = DecodeMigAllocations(enc);
    FUZZ_CHECK(back.ok() && *back == *m, enc.c_str());
  }
  if (auto h = DecodeHandshake(text); h.ok()) {
    const std::string enc = EncodeHandshake(*h);
    auto back = DecodeHandshake(enc);
    FUZZ_CHECK(back.ok() && *back == *h, enc.c_str());
  }
  return 0;
}
