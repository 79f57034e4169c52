#include "gpu/discovery.h"

namespace hami::gpu {

const char* PcieLevelName(PcieLevel level) {
  switch (level) {
    case PcieLevel::kInternal:
      return "internal";
    case PcieLevel::kSingle:
      return "single";
    case PcieLevel::kMultiple:
      return "multiple";
    case PcieLevel::kHostBridge:
      return "hostbridge";
    case PcieLevel::kNode:
      return "node";
    case PcieLevel::kSystem:
      return "system";
    case PcieLevel::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace hami::gpu
