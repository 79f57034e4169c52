// The allocation table against a reference map under random inserts/removes, including clusters
// that wrap around the end of the arena (backward-shift deletion must keep every key findable).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <utility>

#include "vgpu/vgpu_core.h"

namespace {

TEST(VgpuAllocTable, RandomOpsMatchReference) {
  for (unsigned log2 : {4u, 6u, 12u}) {
    vgpu_alloc_table t{};
    ASSERT_EQ(vgpu_at_init(&t, log2), 0);
    std::map<std::pair<uint64_t, int>, std::pair<int, uint64_t>> ref;
    std::mt19937_64 rng(log2);
    const uint64_t cap = 1ull << log2;
    for (int step = 0; step < 20000; step++) {
      uint64_t key = (rng() % (cap * 2)) * 256 + 256;  // dense keys: many collisions
      int kind = 1 + static_cast<int>(rng() % 2);
      if (rng() % 2) {
        int dev = static_cast<int>(rng() % 16);
        uint64_t size = rng() % (1ull << 40);
        int rc = vgpu_at_insert(&t, key, kind, dev, size);
        if (rc == 0) {
          ref[{key, kind}] = {dev, size};
        } else {
          EXPECT_GE(t.count, cap - cap / 8 - 1);  // only a full table refuses
        }
      } else {
        int dev = -1;
        uint64_t size = 0;
        int found = vgpu_at_remove(&t, key, kind, &dev, &size);
        auto it = ref.find({key, kind});
        ASSERT_EQ(found, it != ref.end() ? 1 : 0) << "key " << key;
        if (found) {
          EXPECT_EQ(dev, it->second.first);
          EXPECT_EQ(size, it->second.second);
          ref.erase(it);
        }
      }
      ASSERT_EQ(t.count, ref.size());
    }
    for (const auto& [k, v] : ref) {
      int dev;
      uint64_t size;
      ASSERT_EQ(vgpu_at_remove(&t, k.first, k.second, &dev, &size), 1);
      EXPECT_EQ(size, v.second);
    }
    EXPECT_EQ(t.count, 0u);
    vgpu_at_destroy(&t);
  }
}

TEST(VgpuAllocTable, KindsAreSeparateAndLimitsChecked) {
  vgpu_alloc_table t{};
  ASSERT_EQ(vgpu_at_init(&t, 8), 0);
  EXPECT_EQ(vgpu_at_insert(&t, 42, VGPU_KIND_DPTR, 0, 100), 0);
  EXPECT_EQ(vgpu_at_insert(&t, 42, VGPU_KIND_HANDLE, 1, 200), 0);
  EXPECT_EQ(vgpu_at_insert(&t, 43, VGPU_KIND_DPTR, 0, 1ull << 48), -1);  // size does not fit
  EXPECT_EQ(vgpu_at_insert(&t, 43, VGPU_KIND_DPTR, 256, 1), -1);         // device does not fit
  int dev;
  uint64_t size;
  EXPECT_EQ(vgpu_at_remove(&t, 42, VGPU_KIND_HANDLE, &dev, &size), 1);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(size, 200u);
  EXPECT_EQ(vgpu_at_remove(&t, 42, VGPU_KIND_HANDLE, &dev, &size), 0);
  EXPECT_EQ(vgpu_at_remove(&t, 42, VGPU_KIND_DPTR, &dev, &size), 1);
  EXPECT_EQ(size, 100u);
  vgpu_at_destroy(&t);
}

}  // namespace
