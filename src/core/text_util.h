#pragma once
// Small text helpers shared by the core codecs (internal to src/core; other modules should use
// the codec functions instead).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hami::core::text {

// Strips ASCII blanks (space, tab, CR, LF) from both ends.
std::string_view Trim(std::string_view s);

// Splits on `sep`, keeping empty fields ("a,,b" -> {"a","","b"}; "" -> {""}).
std::vector<std::string_view> Split(std::string_view s, char sep);

// Splits a comma list, trims each item and drops empty items ("a, b,," -> {"a","b"}).
std::vector<std::string> SplitList(std::string_view s);

// Decimal integer without blanks or '+' ("-12" ok, "1e3", "", " 1" not). nullopt on garbage or
// overflow.
std::optional<int64_t> ParseInt(std::string_view s);

// Go's strconv.ParseBool: 1 t T TRUE true True / 0 f F FALSE false False.
std::optional<bool> ParseBool(std::string_view s);

// Well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Quotes text for an error message, shortening it past 80 characters.
std::string Quote(std::string_view s);

}  // namespace hami::core::text
