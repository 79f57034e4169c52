#pragma once
// Kubernetes resource.Quantity ("16Gi", "500m", "1.5", "1e3") parsed exactly into integers
// (docs/upstream-contract.md#resource-quantities). No floating point anywhere: the value is held as
// a signed count of milli-units, rounded up (away from zero) past 3 decimal places as the API
// server does ("0.1m" -> 1m).
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/numeric/int128.h"
#include "common/status.h"
#include "nlohmann/json_fwd.hpp"

namespace hami::core {

// How a conversion to a coarser unit treats a remainder.
enum class Rounding {
  kUp,    // ceil: right for requests (never under-reserve)
  kDown,  // floor: right for capacities (never over-promise)
};

// An exact quantity: value = milli / 1000. |value| <= 2^63-1 (the API server's bound).
class Quantity {
 public:
  Quantity() = default;
  static Quantity FromMilli(absl::int128 milli) { return Quantity(milli); }
  absl::int128 milli() const { return milli_; }
  bool IsNegative() const { return milli_ < 0; }
  bool operator==(const Quantity&) const = default;

 private:
  explicit Quantity(absl::int128 milli) : milli_(milli) {}
  absl::int128 milli_ = 0;
};

// Parses the API server's grammar: [+-] digits[.digits] [suffix], suffix one of
// "" m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent e<int>/E<int>. Case matters ("M" mega,
// "m" milli, "Mi" mebi). No whitespace. Errors (InvalidArgument) name the offending text and
// say what was expected; values beyond 2^63-1 are an overflow error. Limitation: a binary
// suffix with more than 21 digits after the point is rejected rather than rounded.
StatusOr<Quantity> ParseQuantity(std::string_view text);

// Parses a JSON quantity: a string in the grammar above, or a bare JSON number (accepted by the
// API server on input). Anything else is InvalidArgument.
StatusOr<Quantity> ParseQuantityJson(const nlohmann::json& value);

// The value in milli-units (CPU "500m" -> 500). Error if it does not fit in int64.
StatusOr<int64_t> QuantityToMilli(const Quantity& q);
// The value in whole units ("2" -> 2, "1500m" -> 2 with kUp, 1 with kDown). Always fits.
int64_t QuantityToUnits(const Quantity& q, Rounding rounding = Rounding::kUp);
// The value as an exact integer: error unless it has no fraction (extended resources such as
// nvidia.com/gpu must be whole numbers, like Go's Quantity.AsInt64).
StatusOr<int64_t> QuantityToExactInt(const Quantity& q);
// A byte count converted to MiB ("1Gi" -> 1024; "1G" -> 954 with kUp, 953 with kDown).
int64_t QuantityToMiB(const Quantity& q, Rounding rounding = Rounding::kUp);

// Canonical-ish text for diagnostics and round-trip tests: a decimal integer when whole,
// otherwise "<n>m" ("1.5" -> "1500m", "1Gi" -> "1073741824").
std::string FormatQuantity(const Quantity& q);

}  // namespace hami::core
