#pragma once
// JSON helpers shared by the core codecs. They read Go-encoded objects: an absent or null member
// keeps the caller's zero value, a member of the wrong type is an error naming `where` and the key.
// CheckDepth is for every parser of a JSON body that came from outside (HTTP handlers, codecs).
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "nlohmann/json.hpp"

namespace hami::core::jsonutil {

// Deepest nesting of objects/arrays accepted from outside. The API server's decoder allows 10000
// levels; a real Pod, NodeList or AdmissionReview is under 30 deep. 1000 keeps every recursive walk
// over a parsed document (nlohmann's copy, compare and dump recurse) far inside a thread's stack,
// sanitizers included.
inline constexpr int kMaxDepth = 1000;

// One linear pass, O(1) memory, no allocation: an error when `text` nests objects/arrays deeper
// than max_depth (brackets inside strings do not count). Says nothing else about validity; run it
// before any parser builds a tree. The error names `what` and the depth.
Status CheckDepth(std::string_view text, std::string_view what, int max_depth = kMaxDepth);

// Parses text without letting an exception escape (nesting over kMaxDepth is refused first); the
// error carries nlohmann's position.
StatusOr<nlohmann::json> Parse(std::string_view text, std::string_view what);

// An integer JSON value in [min, max]; rejects fractions ("1.5") like Go's decoder does. `what`
// names the value in the error.
Status ToInt(const nlohmann::json& v, int64_t min, int64_t max, std::string_view what,
             int64_t* out);

// Integer member in [min, max] (ToInt); absent or null keeps *out.
Status GetInt(const nlohmann::json& obj, const char* key, int64_t min, int64_t max,
              std::string_view where, int64_t* out);
Status GetString(const nlohmann::json& obj, const char* key, std::string_view where,
                 std::string* out);
Status GetBool(const nlohmann::json& obj, const char* key, std::string_view where, bool* out);

}  // namespace hami::core::jsonutil
