#pragma once
// The controller's History kept in a ConfigMap it owns (docs/consolidation.md, "State across
// leaders"), so that a new leader keeps the per-pod-day caps, the moves under way (and their
// reservations) and the back-offs of the one before it. One key, kHistoryKey, holds it as JSON.
//
// The ConfigMap lives in the controller's namespace, but it is still read as input: bounded
// (kMaxHistoryBytes; at most kMaxHistoryEntries per map, kMaxInFlight moves under way, 32 minutes
// per pod) and validated field by field (types, string lengths, minutes within the last day and
// at most an hour ahead, back-offs at most a day ahead); entries outside those bounds are dropped,
// a document that is not this shape is refused whole.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "consolidator/snapshot.h"

namespace hami::consolidator {

inline constexpr const char kHistoryKey[] = "history";
inline constexpr size_t kMaxHistoryBytes = size_t{512} * 1024;
inline constexpr size_t kMaxHistoryEntries = 20000;
inline constexpr size_t kMaxInFlight = 1024;

std::string EncodeHistory(const History& h);
// The history of `text` as of `now_minute` (Unix minutes). INVALID_ARGUMENT when it is not a
// history document of this version or passes kMaxHistoryBytes.
StatusOr<History> DecodeHistory(const std::string& text, int32_t now_minute);

}  // namespace hami::consolidator
