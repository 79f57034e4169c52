#include "scheduler/reasons.h"

#include "common/status.h"

namespace hami::scheduler {

std::string FitFailure::ToString() const {
  std::string out;
  for (int i = 0; i < kReasonCount; ++i) {
    if (counts[i] == 0) continue;
    auto r = static_cast<Reason>(i);
    if (!out.empty()) out += ", ";
    bool node_level = r == Reason::kInsufficientCpu || r == Reason::kInsufficientMemory ||
                      r == Reason::kNumaNotFit || r == Reason::kNodeInsufficientDevice;
    if (node_level) {
      out += ReasonName(r);
    } else {
      out += StrCat(counts[i], "/", devices, " ", ReasonName(r));
    }
  }
  return out;
}

}  // namespace hami::scheduler
