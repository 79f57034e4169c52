// Fuzz target: the Prometheus answer parsers (usage series and kube-state-metrics owners) return
// rows or a Status for any input, never crash, and what they accept makes workloads and a usage
// trace or a Status.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "usage/prometheus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::usage::PromLimits limits;
  limits.max_points = 1 << 12;
  hami::usage::PromWorkloads workloads;
  for (auto read : {hami::usage::PromOwnerRead::kPod, hami::usage::PromOwnerRead::kReplicaSet})
    if (auto rows = hami::usage::ParsePromOwners(text, read, limits); rows.ok())
      workloads = hami::usage::PromWorkloadsOf(*rows, *rows);
  auto series = hami::usage::ParsePromMatrix(text, limits);
  if (!series.ok()) return 0;
  const hami::usage::PromWindow w{1764720000, 1764720000 + 3600, 60};
  int32_t first = 0;
  (void)hami::usage::TraceFromProm(*series, *series, w, &first, &workloads);
  return 0;
}
