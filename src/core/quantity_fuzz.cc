// Fuzz target: resource.Quantity parsing never crashes, and whatever parses survives
// FormatQuantity -> ParseQuantity unchanged and converts without overflow.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "core/quantity.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto q = hami::core::ParseQuantity(text);
  if (q.ok()) {
    const std::string canonical = hami::core::FormatQuantity(*q);
    auto again = hami::core::ParseQuantity(canonical);
    FUZZ_CHECK(again.ok(), canonical.c_str());
    FUZZ_CHECK(*again == *q, canonical.c_str());
    const int64_t up = hami::core::QuantityToUnits(*q, hami::core::Rounding::kUp);
    const int64_t down = hami::core::QuantityToUnits(*q, hami::core::Rounding::kDown);
    FUZZ_CHECK(down <= up && up - down <= 1, canonical.c_str());
    const int64_t mib_up = hami::core::QuantityToMiB(*q, hami::core::Rounding::kUp);
    const int64_t mib_down = hami::core::QuantityToMiB(*q, hami::core::Rounding::kDown);
    FUZZ_CHECK(mib_down <= mib_up && mib_up - mib_down <= 1, canonical.c_str());
    (void)hami::core::QuantityToMilli(*q);
    (void)hami::core::QuantityToExactInt(*q);
  }
  // The same bytes as a JSON value (a number or a string).
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) (void)hami::core::ParseQuantityJson(j);
  return 0;
}
