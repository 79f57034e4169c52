#include "core/quantity.h"

#include <limits>

#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using absl::int128;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// The largest magnitude in milli-units: (2^63 - 1) * 1000 (< 2^73).
const int128 kMaxMilli = int128(kInt64Max) * 1000;

struct Suffix {
  const char* text;
  int dec_exp;  // power of ten
  int bin_exp;  // power of two
};
// Binary suffixes first so "Mi" is not read as "M" + garbage.
constexpr Suffix kSuffixes[] = {
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
    {"Ei", 0, 60}, {"m", -3, 0},  {"", 0, 0},    {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

int128 Pow10(int n) {
  int128 r = 1;
  for (int i = 0; i < n; ++i) r *= 10;
  return r;
}

// Parses an all-digit string of at most 38 digits.
int128 DigitsValue(std::string_view digits) {
  int128 r = 0;
  for (char c : digits) r = r * 10 + (c - '0');
  return r;
}

Status Overflow(std::string_view text) {
  return InvalidArgument("quantity \"", text, "\" is too large (the limit is 2^63-1)");
}

// Reads the suffix: a unit from the table or an exponent e<int>/E<int>.
Status ParseSuffix(std::string_view text, std::string_view suffix, int64_t* dec_exp, int* bin_exp) {
  for (const auto& s : kSuffixes) {
    if (suffix == s.text) {
      *dec_exp = s.dec_exp;
      *bin_exp = s.bin_exp;
      return OkStatus();
    }
  }
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    std::string_view exp = suffix.substr(1);
    bool negative = false;
    if (exp[0] == '+' || exp[0] == '-') {
      negative = exp[0] == '-';
      exp.remove_prefix(1);
    }
    bool ok = !exp.empty();
    int64_t v = 0;
    for (char c : exp) {
      if (c < '0' || c > '9') {
        ok = false;
        break;
      }
      // Saturate: any exponent beyond +-100000 already overflows or rounds to 1m.
      v = std::min<int64_t>(v * 10 + (c - '0'), 100000);
    }
    if (ok) {
      *dec_exp = negative ? -v : v;
      *bin_exp = 0;
      return OkStatus();
    }
  }
  return InvalidArgument("quantity \"", text, "\" has an unknown suffix \"", suffix,
                         "\" (expected one of m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an "
                         "exponent such as e3)");
}

}  // namespace

StatusOr<Quantity> ParseQuantity(std::string_view text) {
  if (text.empty())
    return InvalidArgument("quantity is empty (expected e.g. \"2\", \"500m\", \"16Gi\")");
  if (text.size() > 256) return InvalidArgument("quantity is longer than 256 characters");
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    pos = 1;
  }
  const size_t int_begin = pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  std::string_view int_digits = text.substr(int_begin, pos - int_begin);
  std::string_view frac_digits;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_begin = ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    frac_digits = text.substr(frac_begin, pos - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return InvalidArgument(
        "quantity \"", text,
        "\" does not start with a number (expected e.g. \"2\", \"500m\", \"16Gi\")");
  }
  int64_t dec_exp = 0;
  int bin_exp = 0;
  HAMI_RETURN_IF_ERROR(ParseSuffix(text, text.substr(pos), &dec_exp, &bin_exp));

  // value = D * 10^(dec_exp - frac) * 2^bin_exp with D the significant digits.
  std::string digits = std::string(int_digits) + std::string(frac_digits);
  int64_t frac = static_cast<int64_t>(frac_digits.size());
  size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return Quantity();  // zero, whatever the suffix
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    --frac;
  }
  const int64_t len = static_cast<int64_t>(digits.size());
  const int64_t e = dec_exp - frac + 3;  // power of ten of D in milli-units
  int128 milli;
  if (e >= 0) {
    // D >= 10^(len-1), so len-1+e >= 22 means >= 10^22 > kMaxMilli.
    if (len + e >= 23) return Overflow(text);
    const int128 v = DigitsValue(digits) * Pow10(static_cast<int>(e));
    if (v > (kMaxMilli >> bin_exp)) return Overflow(text);
    milli = v << bin_exp;
  } else {
    const int64_t k = -e;  // digits below one milli-unit
    const int64_t int_len = std::max<int64_t>(0, len - k);
    if (int_len >= 23) return Overflow(text);
    const int128 q = DigitsValue(std::string_view(digits).substr(0, static_cast<size_t>(int_len)));
    if (q > (kMaxMilli >> bin_exp)) return Overflow(text);
    milli = q << bin_exp;
    if (bin_exp == 0) {
      milli += 1;  // the last significant digit is non-zero: there is a remainder; round up
    } else {
      if (k > 18) {
        return InvalidArgument(
            "quantity \"", text,
            "\" has too many digits after the point for a binary suffix (at most 21)");
      }
      // ceil(R * 2^b / 10^k) with R < 10^18: exact in 128 bits.
      const int128 r = DigitsValue(std::string_view(digits).substr(static_cast<size_t>(int_len)));
      const int128 p = Pow10(static_cast<int>(k));
      milli += ((r << bin_exp) + p - 1) / p;
    }
  }
  if (milli > kMaxMilli) return Overflow(text);
  return Quantity::FromMilli(negative ? -milli : milli);
}

StatusOr<Quantity> ParseQuantityJson(const nlohmann::json& value) {
  if (value.is_string()) return ParseQuantity(value.get_ref<const std::string&>());
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(kInt64Max))
      return InvalidArgument("quantity ", v, " is too large (the limit is 2^63-1)");
    return Quantity::FromMilli(int128(static_cast<int64_t>(v)) * 1000);
  }
  if (value.is_number_integer()) return Quantity::FromMilli(int128(value.get<int64_t>()) * 1000);
  if (value.is_number_float()) return ParseQuantity(value.dump());
  return InvalidArgument("quantity must be a string such as \"2\" or \"16Gi\", got JSON ",
                         value.type_name());
}

StatusOr<int64_t> QuantityToMilli(const Quantity& q) {
  const int128 m = q.milli();
  if (m > int128(kInt64Max) || m < -int128(kInt64Max)) {
    return InvalidArgument("quantity ", FormatQuantity(q),
                           " does not fit in 64 bits as milli-units");
  }
  return static_cast<int64_t>(m);
}

namespace {
// Divides by a positive divisor with the requested rounding (kUp = towards +inf).
int128 DivRound(int128 n, int128 d, Rounding rounding) {
  int128 q = n / d;  // truncates towards zero
  const int128 r = n % d;
  if (r != 0) {
    if (rounding == Rounding::kUp && n > 0) q += 1;
    if (rounding == Rounding::kDown && n < 0) q -= 1;
  }
  return q;
}
}  // namespace

int64_t QuantityToUnits(const Quantity& q, Rounding rounding) {
  // |milli| <= (2^63-1)*1000, so the quotient always fits.
  return static_cast<int64_t>(DivRound(q.milli(), 1000, rounding));
}

StatusOr<int64_t> QuantityToExactInt(const Quantity& q) {
  if (q.milli() % 1000 != 0) {
    return InvalidArgument("quantity ", FormatQuantity(q), " must be a whole number");
  }
  return static_cast<int64_t>(q.milli() / 1000);
}

int64_t QuantityToMiB(const Quantity& q, Rounding rounding) {
  return static_cast<int64_t>(DivRound(q.milli(), int128(1000) << 20, rounding));
}

std::string FormatQuantity(const Quantity& q) {
  if (q.milli() % 1000 == 0) return StrCat(q.milli() / 1000);
  return StrCat(q.milli(), "m");
}

}  // namespace hami::core
