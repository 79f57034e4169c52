#pragma once
// Deterministic, platform-independent randomness (xoshiro256** seeded by splitmix64). The standard
// library's distributions differ between implementations, so we never use them where results must
// be reproducible from a seed (the simulator, randomized policies).
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace hami {

class Rng {
 public:
  explicit Rng(uint64_t seed) { Seed(seed); }
  void Seed(uint64_t seed);
  // Uniform 64-bit value.
  uint64_t Next();
  // Uniform integer in [0, n); n must be > 0. Unbiased (Lemire's method with rejection).
  uint64_t Uniform(uint64_t n);
  // Uniform double in [0, 1).
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Fisher-Yates shuffle.
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(Uniform(i));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  uint64_t s_[4];
};

}  // namespace hami
