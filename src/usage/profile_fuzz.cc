// Fuzz target: the hami.io/usage-profile parser returns a profile or a Status for any input, never
// crashes, and what it accepts formats back to text that parses to the same profile.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "usage/recommend.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = hami::usage::ParseUsageProfile(text);
  if (!p.ok()) return 0;
  const std::string again = hami::usage::FormatUsageProfile(*p);
  auto q = hami::usage::ParseUsageProfile(again);
  if (!q.ok() || *q != *p || hami::usage::FormatUsageProfile(*q) != again) std::abort();
  return 0;
}
