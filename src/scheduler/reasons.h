#pragma once
// The failure vocabulary of the scheduler (docs/design.md#contracts): why a GPU or a node does not
// fit, and whether waiting can help (retryable: busy now) or not (never: wrong type, too small).
// Per-GPU reasons are upstream HAMi's strings and are aggregated per node as upstream does ("3/8
// CardInsufficientMemory").
#include <array>
#include <cstdint>
#include <string>

namespace hami::scheduler {

enum class Reason : uint8_t {
  kCardNotHealth,
  kCardCordoned,
  kCardTypeMismatch,
  kCardUuidMismatch,
  kCardTimeSlicingExhausted,
  kCardInsufficientMemory,
  kCardInsufficientCore,
  kExclusiveDeviceAllocateConflict,
  kCardComputeUnitsExhausted,
  kNumaNotFit,
  kNodeInsufficientDevice,  // the node has fewer devices of the vendor/type than one container asks
  kInsufficientCpu,         // node CPU (k8s NodeResourcesFit)
  kInsufficientMemory,      // node memory (k8s NodeResourcesFit)
  kCount,
};
inline constexpr int kReasonCount = static_cast<int>(Reason::kCount);

// Upstream spelling, e.g. "CardInsufficientMemory"; node CPU/memory use kube-scheduler's
// "Insufficient cpu" / "Insufficient memory".
const char* ReasonName(Reason r);

// Per-node tally of per-device reasons for the container that failed, plus node-level reasons.
struct FitFailure {
  std::array<uint16_t, kReasonCount> counts{};
  int devices = 0;     // N in "k/N Reason": devices of the node examined
  bool never = false;  // true when at least one cause can never go away on this node
  bool failed = false;
  void Add(Reason r, bool never_fits) {
    ++counts[static_cast<int>(r)];
    never = never || never_fits;
    failed = true;
  }
  void Clear() { *this = FitFailure{}; }
  // "2/8 CardInsufficientMemory, 6/8 CardTypeMismatch"; node-level reasons without "k/N".
  std::string ToString() const;
};

}  // namespace hami::scheduler
