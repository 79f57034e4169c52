#include "common/rng.h"

#include <algorithm>
#include <map>

#include "gtest/gtest.h"

namespace hami {
namespace {

TEST(RngTest, SameSeedSameSequence) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= (x != c.Next());
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, UniformStaysInRangeAndCoversIt) {
  Rng r(7);
  std::map<uint64_t, int> seen;
  for (int i = 0; i < 6000; ++i) {
    uint64_t v = r.Uniform(6);
    ASSERT_LT(v, 6u);
    seen[v]++;
  }
  ASSERT_EQ(seen.size(), 6u);
  for (auto& [v, n] : seen) EXPECT_NEAR(n, 1000, 150) << v;
}

TEST(RngTest, ShuffleIsAPermutation) {
  Rng r(1);
  std::vector<int> v{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.Shuffle(v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sorted[i], i);
}

}  // namespace
}  // namespace hami
