#include "core/numa_alignment.h"

#include <gtest/gtest.h>

namespace hami::core {
namespace {

// Upstream pkg/util/numa_alignment_test.go, TestGetNumaAlignmentModeByPod, row by row. One row
// differs: upstream's revision that ships the refit accepts "strict" (the earlier test refused it
// "until the refit can enforce it"); ours enforces it (docs/migration.md).
TEST(NumaAlignmentTest, TestGetNumaAlignmentModeByPod) {
  struct Case {
    const char* name;
    std::map<std::string, std::string> annotations;
    NumaAlignment want;
    bool want_error;
  };
  const Case cases[] = {
      {"pod without annotations defaults to none", {}, NumaAlignment::kNone, false},
      {"pod without the annotation defaults to none",
       {{"other", "value"}},
       NumaAlignment::kNone,
       false},
      {"best-effort", {{kNumaAlignment, "best-effort"}}, NumaAlignment::kBestEffort, false},
      {"surrounding whitespace is tolerated",
       {{kNumaAlignment, " best-effort "}},
       NumaAlignment::kBestEffort,
       false},
      {"upper case best-effort is accepted",
       {{kNumaAlignment, "BEST-EFFORT"}},
       NumaAlignment::kBestEffort,
       false},
      {"strict is enforced by the refit",
       {{kNumaAlignment, "strict"}},
       NumaAlignment::kStrict,
       false},
      {"explicit empty value is rejected", {{kNumaAlignment, ""}}, NumaAlignment::kNone, true},
      {"unknown value is rejected", {{kNumaAlignment, "required"}}, NumaAlignment::kNone, true},
      {"boolean values from numa-bind are not valid modes",
       {{kNumaAlignment, "true"}},
       NumaAlignment::kNone,
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = NumaAlignmentOf(c.annotations);
    EXPECT_EQ(!got.ok(), c.want_error) << got.status();
    if (got.ok()) {
      EXPECT_EQ(*got, c.want);
    }
  }
}

TEST(NumaAlignmentTest, TestParseNumaAlignmentModeErrorMentionsKeyAndValue) {
  auto got = ParseNumaAlignment("bogus");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(kNumaAlignment), std::string::npos);
  EXPECT_NE(got.status().message().find("bogus"), std::string::npos);
}

TEST(NumaAlignmentTest, NamesRoundTrip) {
  for (NumaAlignment m : {NumaAlignment::kBestEffort, NumaAlignment::kStrict}) {
    auto back = ParseNumaAlignment(NumaAlignmentName(m));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, m);
  }
}

}  // namespace
}  // namespace hami::core
