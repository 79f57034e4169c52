#include "core/lock_codec.h"

#include <cctype>
#include <cstdio>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/text_util.h"

namespace hami::core {
namespace {

constexpr const char kHandshakeLayout[] = "%Y-%m-%d %H:%M:%S";

// Formats UTC as "YYYY-MM-DD HH:MM:SS" with a zero-padded four-digit year (absl's %Y drops the
// padding below 1000).
std::string FormatUtc(int64_t unix_seconds) {
  const absl::CivilSecond t =
      absl::ToCivilSecond(absl::FromUnixSeconds(unix_seconds), absl::UTCTimeZone());
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04lld-%02d-%02d %02d:%02d:%02d",
                static_cast<long long>(t.year()), t.month(), t.day(), t.hour(), t.minute(),
                t.second());
  return buf;
}

// Parses `text` with `layout` in UTC; false when it does not parse.
bool ParseUtc(const char* layout, std::string_view text, int64_t* unix_seconds) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(layout, std::string(text), absl::UTCTimeZone(), &t, &err)) return false;
  *unix_seconds = absl::ToUnixSeconds(t);
  return true;
}

}  // namespace

std::string EncodeHandshake(const Handshake& handshake) {
  return StrCat(handshake.state, "_", FormatUtc(handshake.unix_seconds));
}

StatusOr<Handshake> DecodeHandshake(std::string_view text) {
  const std::string_view t = text::Trim(text);
  const size_t us = t.find('_');
  if (us == std::string_view::npos) {
    return InvalidArgument("handshake ", text::Quote(text),
                           ": expected \"<State>_<YYYY-MM-DD HH:MM:SS>\"");
  }
  Handshake h;
  h.state = std::string(t.substr(0, us));
  bool word = !h.state.empty();
  for (char c : h.state) word = word && std::isalpha(static_cast<unsigned char>(c));
  if (!word)
    return InvalidArgument("handshake ", text::Quote(text), ": state ", text::Quote(h.state),
                           " is not a word such as Requesting");
  const std::string_view when = t.substr(us + 1);
  // The layout has a fixed width; absl would also accept e.g. single-digit fields.
  if (when.size() != 19 || !ParseUtc(kHandshakeLayout, when, &h.unix_seconds)) {
    return InvalidArgument("handshake ", text::Quote(text), ": time ", text::Quote(when),
                           " is not \"YYYY-MM-DD HH:MM:SS\"");
  }
  return h;
}

}  // namespace hami::core
