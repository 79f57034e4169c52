// Fuzz target: the usage-trace reader returns a trace or a Status for any input, never crashes, and
// what it accepts formats back to text it reads to the same trace.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "usage/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::usage::Limits limits;
  limits.max_minute = 1 << 12;  // keeps FormatUsageTrace (minutes x pods) small
  auto t = hami::usage::ParseUsageTrace(text, "fuzz.csv", limits);
  if (!t.ok()) return 0;
  auto again = hami::usage::ParseUsageTrace(hami::usage::FormatUsageTrace(*t), "again", limits);
  if (!again.ok() || again->pods.size() != t->pods.size() || again->minutes != t->minutes)
    std::abort();
  for (size_t i = 0; i < t->pods.size(); ++i)
    if (again->pods[i].duty != t->pods[i].duty || again->pods[i].mem_mib != t->pods[i].mem_mib)
      std::abort();
  return 0;
}
