// Fuzz target: the NUMA refit's wire (the /refit body the scheduler reads from the network, and the
// reply the device plugin reads) never crashes, every request that parses is valid by its own
// rules and round-trips, and every reply that parses round-trips.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "core/refit_wire.h"

using namespace hami::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto r = ParseRefitRequest(text); r.ok()) {
    FUZZ_CHECK(!r->allowed_device_uuids.empty(), text.c_str());
    FUZZ_CHECK(r->allowed_device_uuids.size() <= kMaxRefitAllowedDevices, text.c_str());
    FUZZ_CHECK(r->container_index >= 0, text.c_str());
    const std::string enc = EncodeRefitRequest(*r);
    auto back = ParseRefitRequest(enc);
    FUZZ_CHECK(back.ok(), enc.c_str());
    FUZZ_CHECK(*back == *r, enc.c_str());
  }
  if (auto r = ParseRefitResponse(text); r.ok()) {
    const std::string enc = EncodeRefitResponse(*r);
    auto back = ParseRefitResponse(enc);
    FUZZ_CHECK(back.ok(), enc.c_str());
    // Strings that are not UTF-8 are replaced when encoded; compare the rest.
    FUZZ_CHECK(back->succeeded == r->succeeded, enc.c_str());
  }
  if (auto d = DecodeContainerDevices(text); d.ok()) {
    auto enc = EncodeContainerDevices(*d);
    FUZZ_CHECK(enc.ok(), std::string(enc.status().message()).c_str());
    auto back = DecodeContainerDevices(*enc);
    FUZZ_CHECK(back.ok() && *back == *d, enc->c_str());
  }
  return 0;
}
