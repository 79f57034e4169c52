#pragma once
// Codec of the scheduler/device-plugin handshake hami.io/node-handshake[-x]
// (docs/upstream-contract.md#node-registration-and-handshake). hami-cpp takes no node lock
// (docs/design.md), so upstream's hami.io/mutex.lock has no codec here.
// Times are Unix seconds (callers take them from an injected hami::Clock); text is UTC.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::core {

struct Handshake {
  std::string state;  // "Requesting" (scheduler) or another word (e.g. "Reported", "Deleted")
  int64_t unix_seconds = 0;
  bool operator==(const Handshake&) const = default;
};
inline constexpr const char kHandshakeRequesting[] = "Requesting";

// "<state>_<YYYY-MM-DD HH:MM:SS>", e.g. "Requesting_2026-11-30 03:54:20".
std::string EncodeHandshake(const Handshake& handshake);
// Errors: no '_', a state that is not a single word of letters, a time not in that layout.
StatusOr<Handshake> DecodeHandshake(std::string_view text);

}  // namespace hami::core
