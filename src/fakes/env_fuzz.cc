// Fuzz target for the FAKEGPU_* environment parsers: never crash, and what they accept is
// consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "fakes/config.h"
#include "fakes/time_scale.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string err;
  std::vector<fakegpu::DeviceSpec> devs;
  if (fakegpu::ParseDevices(text, &devs, &err)) {
    if (devs.empty() || devs.size() > static_cast<size_t>(fakegpu::kMaxDevices)) std::abort();
    std::set<std::string> uuids;
    for (const auto& d : devs) {
      if (d.name.empty() || d.mem_mib == 0 || d.sms == 0 || d.uuid.rfind("GPU-", 0) != 0)
        std::abort();
      if (!uuids.insert(d.uuid).second) std::abort();
    }
  } else if (err.empty()) {
    std::abort();
  }
  std::vector<fakegpu::NvLinkSpec> links;
  if (fakegpu::ParseNvLinks(text, 4, &links, &err)) {
    for (const auto& l : links) {
      if (l.a == l.b || l.a < 0 || l.b < 0 || l.a >= 4 || l.b >= 4 || l.links <= 0) std::abort();
    }
  }
  std::vector<fakegpu::FaultSpec> faults;
  if (fakegpu::ParseFaults(text, &faults, &err)) {
    for (const auto& f : faults) {
      if (f.symbol.empty() || f.code <= 0) std::abort();
    }
  }
  std::vector<fakegpu::XidSpec> xids;
  if (fakegpu::ParseXids(text, 3, &xids, &err)) {
    for (const auto& x : xids) {
      if (x.dev < 0 || x.dev >= 3) std::abort();
    }
  }
  const std::vector<std::string> uuids = {"GPU-aa", "GPU-ab", "GPU-b"};
  std::vector<int> vis = fakegpu::VisibleDevices(text.c_str(), uuids);
  std::set<int> seen;
  for (int v : vis) {
    if (v < 0 || v >= 3 || !seen.insert(v).second) std::abort();
  }
  unsigned char bytes[16];
  fakegpu::UuidBytes(text, bytes);
  // FAKEGPU_TIME_SCALE (as the environment holds it: up to the first NUL). Accepted: digits only
  // (no sign or space), the value in range and the one the digits spell.
  const std::string z(text.c_str());
  uint64_t scale = 0;
  if (fakegpu_parse_time_scale(z.c_str(), &scale) == 0) {
    if (z.empty() || z.find_first_not_of("0123456789") != std::string::npos) std::abort();
    if (scale < 1 || scale > FAKEGPU_TIME_SCALE_MAX ||
        std::to_string(scale) != z.substr(z.find_first_not_of('0')))
      std::abort();
  }
  return 0;
}
