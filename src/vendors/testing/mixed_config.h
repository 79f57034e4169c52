#pragma once
// The vendor configuration of the mixed-cluster tests (library, webhook, control plane): NVIDIA,
// Hygon, Cambricon and one Ascend chip (910B3) with two vNPU templates. Tests that need more
// vendors append their sections.
namespace hami::vendors::testing {

inline constexpr const char kMixedConfig[] = R"(
nvidia: {}
hygon: {}
cambricon: {}
vnpus:
- chipName: 910B3
  commonWord: Ascend910B3
  aiCore: 20
  templates:
  - {name: vir05_1c_16g, memory: 16384, aiCore: 5}
  - {name: vir10_3c_32g, memory: 32768, aiCore: 10}
)";

}  // namespace hami::vendors::testing
