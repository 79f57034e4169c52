#include "core/lock_codec.h"

#include <cctype>
#include <cstdio>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "core/text_util.h"

namespace hami::core {
namespace {

constexpr const char kHandshakeLayout[] = "%Y-%m-%d %H:%M:%S";

// Formats UTC with a zero-padded four-digit year (absl's %Y drops the padding below 1000).
std::string FormatUtc(char date_time_sep, bool zulu, int64_t unix_seconds) {
  const absl::CivilSecond t =
      absl::ToCivilSecond(absl::FromUnixSeconds(unix_seconds), absl::UTCTimeZone());
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04lld-%02d-%02d%c%02d:%02d:%02d%s",
                static_cast<long long>(t.year()), t.month(), t.day(), date_time_sep, t.hour(),
                t.minute(), t.second(), zulu ? "Z" : "");
  return buf;
}

// Parses `text` with `layout` in UTC; nullopt-like failure reported through ok=false.
bool ParseUtc(const char* layout, std::string_view text, int64_t* unix_seconds) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(layout, std::string(text), absl::UTCTimeZone(), &t, &err)) return false;
  *unix_seconds = absl::ToUnixSeconds(t);
  return true;
}

}  // namespace

std::string EncodeNodeLock(const NodeLock& lock) {
  std::string ts = FormatUtc('T', /*zulu=*/true, lock.unix_seconds);  // Go writes UTC as "Z"
  if (lock.pod_namespace.empty() && lock.pod_name.empty()) return ts;
  return StrCat(ts, ",", lock.pod_namespace, ",", lock.pod_name);
}

StatusOr<NodeLock> DecodeNodeLock(std::string_view text) {
  const auto f = text::Split(text::Trim(text), ',');
  NodeLock lock;
  // absl also accepts "infinite-future"/"infinite-past"; a real timestamp starts with its year.
  const bool starts_with_digit = !f[0].empty() && std::isdigit(static_cast<unsigned char>(f[0][0]));
  if (!starts_with_digit || !ParseUtc(absl::RFC3339_full, f[0], &lock.unix_seconds)) {
    return InvalidArgument(
        "node lock ", text::Quote(text), ": ", text::Quote(f[0]),
        " is not an RFC3339 time (expected e.g. \"2026-11-30T03:54:20Z,<namespace>,<pod>\")");
  }
  if (f.size() == 1) return lock;  // legacy: bare timestamp
  if (f.size() != 3 || f[1].empty() || f[2].empty()) {
    return InvalidArgument("node lock ", text::Quote(text),
                           ": expected \"<RFC3339>,<namespace>,<pod>\"");
  }
  lock.pod_namespace = std::string(f[1]);
  lock.pod_name = std::string(f[2]);
  return lock;
}

std::string EncodeHandshake(const Handshake& handshake) {
  return StrCat(handshake.state, "_", FormatUtc(' ', /*zulu=*/false, handshake.unix_seconds));
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
