#include "core/numa_alignment.h"

#include "absl/strings/ascii.h"
#include "core/text_util.h"

namespace hami::core {

StatusOr<NumaAlignment> ParseNumaAlignment(std::string_view value) {
  const std::string mode = absl::AsciiStrToLower(std::string(text::Trim(value)));
  if (mode == "best-effort") return NumaAlignment::kBestEffort;
  if (mode == "strict") return NumaAlignment::kStrict;
  return absl::InvalidArgumentError(StrCat("invalid ", kNumaAlignment, " annotation \"", value,
                                           "\": expected \"best-effort\" or \"strict\""));
}

StatusOr<NumaAlignment> NumaAlignmentOf(const std::map<std::string, std::string>& annotations) {
  auto it = annotations.find(kNumaAlignment);
  if (it == annotations.end()) return NumaAlignment::kNone;
  return ParseNumaAlignment(it->second);
}

std::string_view NumaAlignmentName(NumaAlignment mode) {
  switch (mode) {
    case NumaAlignment::kBestEffort:
      return "best-effort";
    case NumaAlignment::kStrict:
      return "strict";
    case NumaAlignment::kNone:
      break;
  }
  return "none";
}

}  // namespace hami::core
