#include "scheduler/reasons.h"

#include "common/status.h"

namespace hami::scheduler {

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kCardNotHealth:
      return "CardNotHealth";
    case Reason::kCardCordoned:
      return "CardCordoned";
    case Reason::kCardTypeMismatch:
      return "CardTypeMismatch";
    case Reason::kCardUuidMismatch:
      return "CardUuidMismatch";
    case Reason::kCardTimeSlicingExhausted:
      return "CardTimeSlicingExhausted";
    case Reason::kCardInsufficientMemory:
      return "CardInsufficientMemory";
    case Reason::kCardInsufficientCore:
      return "CardInsufficientCore";
    case Reason::kExclusiveDeviceAllocateConflict:
      return "ExclusiveDeviceAllocateConflict";
    case Reason::kCardComputeUnitsExhausted:
      return "CardComputeUnitsExhausted";
    case Reason::kNumaNotFit:
      return "NumaNotFit";
    case Reason::kNodeInsufficientDevice:
      return "NodeInsufficientDevice";
    case Reason::kInsufficientCpu:
      return "Insufficient cpu";
    case Reason::kInsufficientMemory:
      return "Insufficient memory";
    case Reason::kCount:
      break;
  }
  return "Unknown";
}

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
