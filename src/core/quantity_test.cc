#include "core/quantity.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

struct ParseCase {
  const char* text;
  const char* milli;  // expected milli-units as decimal text (may exceed int64)
};

TEST(QuantityTest, ParsesToExactMilli) {
  const ParseCase cases[] = {
      {"0", "0"},
      {"1", "1000"},
      {"+2", "2000"},
      {"-2", "-2000"},
      {"500m", "500"},
      {"1.5", "1500"},
      {"1.", "1000"},
      {".5", "500"},
      {"0.1m", "1"},  // rounded up past 3 decimals
      {"0.0001", "1"},
      {"1.0001", "1001"},
      {"-0.0001", "-1"},  // away from zero
      {"1k", "1000000"},
      {"1M", "1000000000"},
      {"1G", "1000000000000"},
      {"2T", "2000000000000000"},
      {"1P", "1000000000000000000"},
      {"1E", "1000000000000000000000"},
      {"1Ki", "1024000"},
      {"1Mi", "1048576000"},
      {"16Gi", "17179869184000"},
      {"1Ti", "1099511627776000"},
      {"1Pi", "1125899906842624000"},
      {"1Ei", "1152921504606846976000"},
      {"1.5Gi", "1610612736000"},
      {"0.1Ki", "102400"},
      {"0.0001Ki", "103"},  // 102.4m rounded up
      {"1e3", "1000000"},
      {"1E3", "1000000"},
      {"1e+3", "1000000"},
      {"1e-3", "1"},
      {"1e-4", "1"},
      {"12e-1", "1200"},
      {"0e99999999", "0"},
      {"000123.4500", "123450"},
      {"9223372036854775807", "9223372036854775807000"},
      {"9223372036854775807000m", "9223372036854775807000"},
      {"7Ei", "8070450532247928832000"},
      {"1.00000000000000000000000000001", "1001"},
      {"1e-100000", "1"},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantity(c.text);
    ASSERT_TRUE(q.ok()) << c.text << ": " << q.status();
    EXPECT_EQ(StrCat(q->milli()), c.milli) << c.text;
  }
}

struct ErrorCase {
  const char* text;
  const char* message_part;
};

TEST(QuantityTest, RejectsGarbageAndOverflowWithClearErrors) {
  const ErrorCase cases[] = {
      {"", "empty"},
      {"abc", "does not start with a number"},
      {"+", "does not start with a number"},
      {".", "does not start with a number"},
      {"m", "does not start with a number"},
      {"1 ", "unknown suffix \" \""},
      {" 1", "does not start with a number"},
      {"1KI", "unknown suffix \"KI\""},
      {"1K", "unknown suffix \"K\""},  // kilo is lowercase only
      {"1mi", "unknown suffix \"mi\""},
      {"1e", "unknown suffix \"e\""},
      {"1e+", "unknown suffix"},
      {"1e3.5", "unknown suffix"},
      {"1.2.3", "unknown suffix \".3\""},
      {"1Gi1", "unknown suffix"},
      {"--1", "does not start with a number"},
      {"9223372036854775808", "too large"},
      {"9223372036854775807001m", "too large"},
      {"8Ei", "too large"},
      {"10E", "too large"},
      {"1e19", "too large"},
      {"1e100000", "too large"},
      {"100000000000000000000000000000000", "too large"},
      {"1.0000000000000000000001Ki", "too many digits after the point"},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantity(c.text);
    ASSERT_FALSE(q.ok()) << "'" << c.text << "' parsed as " << FormatQuantity(*q);
    EXPECT_NE(std::string(q.status().message()).find(c.message_part), std::string::npos)
        << c.text << ": " << q.status();
  }
}

TEST(QuantityTest, Conversions) {
  struct Case {
    const char* text;
    int64_t units_up, units_down, mib_up, mib_down;
  };
  const Case cases[] = {
      {"1500m", 2, 1, 1, 0},
      {"2", 2, 2, 1, 0},
      {"1Gi", 1073741824, 1073741824, 1024, 1024},
      {"1G", 1000000000, 1000000000, 954, 953},
      {"512Mi", 536870912, 536870912, 512, 512},
      {"0", 0, 0, 0, 0},
      {"-1500m", -1, -2, 0, -1},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantity(c.text);
    ASSERT_TRUE(q.ok()) << c.text;
    EXPECT_EQ(QuantityToUnits(*q, Rounding::kUp), c.units_up) << c.text;
    EXPECT_EQ(QuantityToUnits(*q, Rounding::kDown), c.units_down) << c.text;
    EXPECT_EQ(QuantityToMiB(*q, Rounding::kUp), c.mib_up) << c.text;
    EXPECT_EQ(QuantityToMiB(*q, Rounding::kDown), c.mib_down) << c.text;
  }
  EXPECT_EQ(*QuantityToMilli(*ParseQuantity("250m")), 250);
  EXPECT_FALSE(QuantityToMilli(*ParseQuantity("1E")).ok());  // 10^21 milli > int64
  EXPECT_EQ(*QuantityToExactInt(*ParseQuantity("3")), 3);
  EXPECT_EQ(*QuantityToExactInt(*ParseQuantity("3000m")), 3);
  EXPECT_FALSE(QuantityToExactInt(*ParseQuantity("1500m")).ok());
}

TEST(QuantityTest, JsonForms) {
  struct Case {
    nlohmann::json value;
    bool ok;
    const char* formatted;
  };
  const Case cases[] = {
      {"16Gi", true, "17179869184"},
      {2, true, "2"},
      {-3, true, "-3"},
      {1.5, true, "1500m"},
      {0.1, true, "100m"},
      {1e20, false, ""},
      {uint64_t{18446744073709551615u}, false, ""},
      {nullptr, false, ""},
      {true, false, ""},
      {nlohmann::json::array(), false, ""},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantityJson(c.value);
    EXPECT_EQ(q.ok(), c.ok) << c.value.dump();
    if (q.ok()) {
      EXPECT_EQ(FormatQuantity(*q), c.formatted) << c.value.dump();
    }
  }
}

TEST(QuantityTest, FormatRoundTrips) {
  for (const char* text : {"0", "1", "1500m", "-7", "16Gi", "1e3", "0.1m", "123456789012345678"}) {
    auto q = ParseQuantity(text);
    ASSERT_TRUE(q.ok()) << text;
    auto again = ParseQuantity(FormatQuantity(*q));
    ASSERT_TRUE(again.ok()) << FormatQuantity(*q);
    EXPECT_EQ(*again, *q) << text;
  }
}

}  // namespace
}  // namespace hami::core
