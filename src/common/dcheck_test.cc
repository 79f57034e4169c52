#include "common/dcheck.h"

#include <gtest/gtest.h>

namespace hami {
namespace {

TEST(DcheckTest, ChecksOnlyWhenOn) {
  int evaluated = 0;
  auto holds = [&evaluated](bool v) {
    ++evaluated;
    return v;
  };
  HAMI_DCHECK(holds(true), "never printed");
  EXPECT_EQ(evaluated, HAMI_DCHECK_IS_ON() ? 1 : 0);
  if (HAMI_DCHECK_IS_ON()) {
    EXPECT_DEATH(HAMI_DCHECK(1 + 1 == 3, "arithmetic ", 42),
                 "HAMI_DCHECK\\(1 \\+ 1 == 3\\) failed: arithmetic 42");
    EXPECT_DEATH(HAMI_DCHECK(false), "HAMI_DCHECK\\(false\\) failed");
  } else {
    HAMI_DCHECK(holds(false), "off: not evaluated, so no abort");
    EXPECT_EQ(evaluated, 0);
  }
}

}  // namespace
}  // namespace hami
