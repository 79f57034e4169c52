// Fuzz target for the FAKEGPU_* environment parsers: never crash, and what they accept is
// consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "fakes/config.h"

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
  return 0;
}
