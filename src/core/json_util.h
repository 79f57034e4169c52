#pragma once
// JSON helpers shared by the core codecs (internal to src/core). They read Go-encoded objects:
// an absent or null member keeps the caller's zero value, a member of the wrong type is an
// error naming `where` and the key.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "nlohmann/json.hpp"

namespace hami::core::jsonutil {

// Parses text without letting an exception escape; the error carries nlohmann's position.
StatusOr<nlohmann::json> Parse(std::string_view text, std::string_view what);

// An integer JSON value in [min, max]; rejects fractions ("1.5") like Go's decoder does. `what`
// names the value in the error.
Status ToInt(const nlohmann::json& v, int64_t min, int64_t max, std::string_view what, int64_t* out);

// Integer member in [min, max] (ToInt); absent or null keeps *out.
Status GetInt(const nlohmann::json& obj, const char* key, int64_t min, int64_t max,
              std::string_view where, int64_t* out);
Status GetString(const nlohmann::json& obj, const char* key, std::string_view where, std::string* out);
Status GetBool(const nlohmann::json& obj, const char* key, std::string_view where, bool* out);

}  // namespace hami::core::jsonutil
