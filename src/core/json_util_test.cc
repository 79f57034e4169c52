// jsonutil::CheckDepth: the nesting limit every parser of outside JSON runs first.
#include "core/json_util.h"

#include <gtest/gtest.h>

#include <string>

namespace hami::core::jsonutil {
namespace {

TEST(CheckDepth, Table) {
  struct Case {
    std::string text;
    int max;
    bool ok;
  };
  const Case cases[] = {
      {"", 1, true},
      {"{}", 1, true},
      {"[[]]", 2, true},
      {"[[]]", 1, false},
      {"{\"a\":{\"b\":[1]}}", 3, true},
      {"{\"a\":{\"b\":[1]}}", 2, false},
      {"[\"[[[[[[\"]", 1, true},      // brackets inside a string do not count
      {"[\"\\\"[[[[\"]", 1, true},    // nor after an escaped quote
      {"[\"\\\\\",[[]]]", 2, false},  // an escaped backslash ends the string before the quote
      {"]]]]][[", 2, true},           // stray closers never make room for more openers
      {"]]]]][[[", 2, false},
      {std::string(100000, '['), 1000, false},
      {std::string(1000, '[') + std::string(1000, ']'), 1000, true},
      {std::string(1001, '{'), 1000, false},
      {"\"unterminated [[[[", 1, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 40));
    Status s = CheckDepth(c.text, "body", c.max);
    EXPECT_EQ(s.ok(), c.ok) << s;
    if (!s.ok()) {
      EXPECT_NE(std::string(s.message()).find("nested deeper than"), std::string::npos) << s;
    }
  }
}

TEST(CheckDepth, ParseRefusesDeepDocumentsFirst) {
  auto r = Parse(std::string(8u << 20, '['), "node devices");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("node devices: JSON nested deeper than 1000"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace hami::core::jsonutil
