#pragma once
// The failure vocabulary of the scheduler (docs/design.md#contracts): why a GPU or a node does not
// fit, and whether waiting can help (retryable: busy now) or not (never: wrong type, too small).
// Per-GPU reasons are upstream HAMi's strings and are aggregated per node as upstream does ("3/8
// CardInsufficientMemory").
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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
  kCardMigTopologyInfeasible,     // MIG device: no profile covers the request, or no free placement
  kCardNotFoundCustomFilterRule,  // a vendor's rule over the pod's other grants refused the device
                                  // (Moore Threads: every container of a pod on one GPU)
  kResourceQuotaNotFit,           // the card's grant would take the pod past its namespace's quota
  kCardUsageProfileNotFit,        // the usage rule (usage_rule.h): the time-aligned profiles of the
                            // card's pods and the pod's own do not fit it, or past the overcommit
                            // cap
  kNumaNotFit,
  kNodeInsufficientDevice,  // the node has fewer devices of the vendor/type than one container asks
  kInsufficientCpu,         // node CPU (k8s NodeResourcesFit)
  kInsufficientMemory,      // node memory (k8s NodeResourcesFit)
  kCount,
};
inline constexpr int kReasonCount = static_cast<int>(Reason::kCount);

// The one place reasons become text: upstream's spelling, e.g. "CardInsufficientMemory"; node
// CPU/memory use kube-scheduler's "Insufficient cpu" / "Insufficient memory". Inline so that
// modules that only name reasons (vendors' refusals) need not link the scheduler.
inline const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kCardNotHealth:
      return "CardNotHealth";
    case Reason::kCardCordoned:
      return "CardCordoned";
    case Reason::kCardTypeMismatch:
      return "CardTypeMismatch";
    case Reason::kCardUuidMismatch:
      return "CardUuidMismatch";
    case Reason::kCardTimeSlicingExhausted:
      return "CardTimeSlicingExhausted";
    case Reason::kCardInsufficientMemory:
      return "CardInsufficientMemory";
    case Reason::kCardInsufficientCore:
      return "CardInsufficientCore";
    case Reason::kExclusiveDeviceAllocateConflict:
      return "ExclusiveDeviceAllocateConflict";
    case Reason::kCardComputeUnitsExhausted:
      return "CardComputeUnitsExhausted";
    case Reason::kCardMigTopologyInfeasible:
      return "CardMigTopologyInfeasible";
    case Reason::kCardNotFoundCustomFilterRule:
      return "CardNotFoundCustomFilterRule";
    case Reason::kResourceQuotaNotFit:
      return "ResourceQuotaNotFit";
    case Reason::kCardUsageProfileNotFit:
      return "CardUsageProfileNotFit";
    case Reason::kNumaNotFit:
      return "NumaNotFit";
    case Reason::kNodeInsufficientDevice:
      return "NodeInsufficientDevice";
    case Reason::kInsufficientCpu:
      return "Insufficient cpu";
    case Reason::kInsufficientMemory:
      return "Insufficient memory";
    case Reason::kCount:
      break;
  }
  return "Unknown";
}

// The inverse of ReasonName (exact spelling); nullopt for any other text.
inline std::optional<Reason> ParseReason(std::string_view name) {
  for (int i = 0; i < kReasonCount; ++i)
    if (name == ReasonName(static_cast<Reason>(i))) return static_cast<Reason>(i);
  return std::nullopt;
}

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
