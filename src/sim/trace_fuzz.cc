// Fuzz target: the trace CSV readers must return a Status for any input, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)hami::sim::ParseNodesCsv(text, "fuzz-nodes.csv");
  (void)hami::sim::ParsePodsCsv(text, "fuzz-pods.csv");
  return 0;
}
