#pragma once
// hami.io/numa-alignment: what a pod wants when the GPUs kubelet's Topology Manager lets a
// container have (NUMA-local to the CPUs it pinned) are not the GPUs the scheduler granted.
// Distinct from nvidia.com/numa-bind, which asks at scheduling time for all of a container's GPUs
// to share one NUMA node. Read by the webhook (other values are refused at admission), the device
// plugin (whether to ask the scheduler's NUMA refit) and the scheduler (docs/upstream-contract.md,
// "NUMA refit").
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::core {

inline constexpr const char kNumaAlignment[] = "hami.io/numa-alignment";

enum class NumaAlignment {
  kNone,        // no annotation: a mismatch is only reported, kubelet's choice stands
  kBestEffort,  // ask for the refit; when it fails kubelet's choice stands
  kStrict,      // ask for the refit; when it fails (refit enabled) the allocation fails
};

// The mode a value names: case-insensitive, blanks around it ignored ("best-effort", "strict").
// InvalidArgument naming the key and the value otherwise (an empty value included).
StatusOr<NumaAlignment> ParseNumaAlignment(std::string_view value);
// The pod's mode from its annotations: kNone without the key, else ParseNumaAlignment.
StatusOr<NumaAlignment> NumaAlignmentOf(const std::map<std::string, std::string>& annotations);
std::string_view NumaAlignmentName(NumaAlignment mode);

}  // namespace hami::core
