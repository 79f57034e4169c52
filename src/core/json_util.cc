#include "core/json_util.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace hami::core::jsonutil {

using nlohmann::json;

StatusOr<json> Parse(std::string_view text, std::string_view what) {
  HAMI_RETURN_IF_ERROR(CheckDepth(text, what));
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return InvalidArgument(what, ": invalid JSON: ", e.what());
  }
}

namespace {
// Bytes CheckDepth stops at outside strings.
constexpr auto kStructural = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {'"', '{', '[', '}', ']'}) t[c] = true;
  return t;
}();
}  // namespace

Status CheckDepth(std::string_view text, std::string_view what, int max_depth) {
  // No more openers than the limit cannot nest past it. Counting them with memchr (vectorised, and
  // stopped once past the limit) settles nearly every real body, such as a /filter's 57 KiB of
  // NodeNames with a handful of brackets, without the byte-by-byte walk below.
  const size_t limit = static_cast<size_t>(std::max(max_depth, 0));
  size_t openers = 0;
  for (const char open : {'[', '{'}) {
    const char* q = text.data();
    const char* const e = q + text.size();
    while (openers <= limit && q < e &&
           (q = static_cast<const char*>(std::memchr(q, open, static_cast<size_t>(e - q))))) {
      ++openers;
      ++q;
    }
  }
  if (openers <= limit) return OkStatus();
  int depth = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* const begin = p;
  const auto* const end = p + text.size();
  while (p < end) {
    while (p < end && !kStructural[*p]) ++p;  // tight loops: this runs over every /filter body
    if (p == end) break;
    const unsigned char c = *p++;
    if (c == '"') {
      // Skip the string: only an unescaped quote ends it.
      for (;;) {
        while (p < end && *p != '"' && *p != '\\') ++p;
        if (p >= end) break;
        if (*p++ == '"') break;
        if (p < end) ++p;  // the escaped byte
      }
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        return InvalidArgument(what, ": JSON nested deeper than ", max_depth, " levels (at byte ",
                               p - begin - 1, ")");
    } else if (depth > 0) {
      --depth;
    }
  }
  return OkStatus();
}

namespace {
const json* Find(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}
}  // namespace

Status ToInt(const json& v, int64_t min, int64_t max, std::string_view what, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max))
      return InvalidArgument(what, ": ", u, " is above the maximum ", max);
    *out = static_cast<int64_t>(u);
    return OkStatus();
  }
  if (!v.is_number_integer()) {
    return InvalidArgument(what, ": expected an integer, got ",
                           v.is_number() ? v.dump() : std::string("JSON ") + v.type_name());
  }
  const int64_t i = v.get<int64_t>();
  if (i < min) return InvalidArgument(what, ": ", i, " is below the minimum ", min);
  if (i > max) return InvalidArgument(what, ": ", i, " is above the maximum ", max);
  *out = i;
  return OkStatus();
}

Status GetInt(const json& obj, const char* key, int64_t min, int64_t max, std::string_view where,
              int64_t* out) {
  const json* v = Find(obj, key);
  if (v == nullptr) return OkStatus();
  return ToInt(*v, min, max, StrCat(where, key), out);
}

Status GetString(const json& obj, const char* key, std::string_view where, std::string* out) {
  const json* v = Find(obj, key);
  if (v == nullptr) return OkStatus();
  if (!v->is_string())
    return InvalidArgument(where, key, ": expected a string, got JSON ", v->type_name());
  *out = v->get<std::string>();
  return OkStatus();
}

Status GetBool(const json& obj, const char* key, std::string_view where, bool* out) {
  const json* v = Find(obj, key);
  if (v == nullptr) return OkStatus();
  if (!v->is_boolean())
    return InvalidArgument(where, key, ": expected true or false, got JSON ", v->type_name());
  *out = v->get<bool>();
  return OkStatus();
}

}  // namespace hami::core::jsonutil
