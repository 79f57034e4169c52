#pragma once
// Codecs of the timestamped coordination annotations
// (docs/upstream-contract.md#node-registration-and-handshake, #decision-annotations-per-vendor):
// the node lock hami.io/mutex.lock and the scheduler/device-plugin handshake
// hami.io/node-handshake[-x].
// Times are Unix seconds (callers take them from an injected hami::Clock); text is UTC.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::core {

struct NodeLock {
  int64_t unix_seconds = 0;   // when the lock was taken
  std::string pod_namespace;  // owner; empty for the legacy bare-timestamp form
  std::string pod_name;
  bool operator==(const NodeLock&) const = default;
};

// "<RFC3339>,<namespace>,<pod>", e.g. "2026-11-30T03:54:20Z,ml,train-0"; a lock without an owner
// encodes as the legacy bare timestamp.
std::string EncodeNodeLock(const NodeLock& lock);
// Accepts both forms; the timestamp may carry an offset ("+08:00") or fractional seconds (dropped).
// Errors: not RFC3339, an owner with a missing or empty namespace or name, extra fields.
StatusOr<NodeLock> DecodeNodeLock(std::string_view text);

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
