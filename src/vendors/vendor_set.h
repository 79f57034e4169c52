#pragma once
// VendorSet: the enabled vendors as one object the control plane and the simulator use, so that a
// mixed cluster goes through one path:
//  - pods: core::ParsePodJson reads the vendor-neutral part (metadata, containers, CPU and memory,
//    policy annotations) and asks the set (a core::PodDeviceReader) for each container's devices:
//    every enabled vendor's ParseRequest, NVIDIA's first, and NVIDIA's ParseSelectors for the pod;
//  - nodes: every vendor's DecodeNode, NVIDIA's first, with upstream's handshake per vendor key
//    (one rule for all);
//  - decisions: each vendor encodes the devices of its own Type (a pod may mix vendors across
//    containers) and decodes its own allocated key; the union is the pod's usage;
//  - scheduling: it implements scheduler::VendorRules, so the framework checks a non-NVIDIA device
//    with that vendor's CheckCount/CheckDevice and charges it what the vendor's Grant says
//    (template rounding, whole devices). NVIDIA devices stay on the framework's generic checks.
// Immutable after construction; safe for concurrent use.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "core/pod_request.h"
#include "nlohmann/json_fwd.hpp"
#include "scheduler/vendor_rules.h"
#include "vendors/vendor.h"

namespace hami::vendors {

class VendorSet final : public scheduler::VendorRules, public core::PodDeviceReader {
 public:
  explicit VendorSet(std::vector<std::unique_ptr<Vendor>> vendors);
  // LoadVendors(yaml_text) wrapped (empty text: NVIDIA only).
  static StatusOr<std::unique_ptr<VendorSet>> Load(std::string_view yaml_text);
  // The set of a default install (no device-config.yaml): NVIDIA with upstream's defaults. Every
  // component that is given no set uses this one, so a default install and a mixed one run the
  // same code.
  static const VendorSet& NvidiaOnly();

  std::span<const std::unique_ptr<Vendor>> vendors() const { return vendors_; }
  // The vendor whose Type keyword (DeviceInfo::vendor) is `common_word`; null when not enabled.
  const Vendor* ByCommonWord(std::string_view common_word) const;
  // A vendor named by a user: its Type keyword (case-insensitive, "DCU", "Ascend910B3") or, failing
  // that, the first vendor with that registry name ("hygon", "ascend"). Null when none.
  const Vendor* Find(std::string_view name) const;

  // The pod as the scheduler sees it (see above). Errors name the container and resource.
  StatusOr<core::PodRequest> ParsePod(const nlohmann::json& pod) const;
  // core::PodDeviceReader: every enabled vendor's ParseRequest of one container (NVIDIA's first;
  // a container without a resources object asks for nothing) ...
  StatusOr<std::vector<core::DeviceRequest>> ContainerDevices(
      const nlohmann::json& resources,
      const std::map<std::string, std::string>& annotations) const override;
  // ... and PodRequest::selectors: NVIDIA's ParseSelectors (the framework's generic checks apply
  // them to NVIDIA devices; every other vendor's selectors come from Prepare). Empty when NVIDIA is
  // not enabled.
  StatusOr<core::DeviceSelectors> Selectors(
      const std::map<std::string, std::string>& annotations) const override;
  // Every enabled vendor's Vendor::IgnoredAnnotations, in vendor order.
  std::vector<std::string> IgnoredAnnotations(
      const std::map<std::string, std::string>& annotations) const;

  // A node's devices as every enabled vendor reads them (NVIDIA's first, then the others in
  // vendor order). A vendor registers on the node when its registration annotation is present and
  // decodes, or its capacity yields devices. A vendor whose handshake says unhealthy at `now_unix`
  // (docs/upstream-contract.md#node-registration-and-handshake) still registers but contributes no
  // devices; one whose registration does not decode contributes none. Both say why in `errors`
  // ("; "-separated).
  struct NodeDevices {
    std::vector<core::DeviceInfo> devices;
    bool registered = false;  // some vendor registers on the node
    bool unhealthy = false;   // some vendor's handshake went unanswered: its devices dropped
    std::string errors;
  };
  NodeDevices DecodeNode(const NodeView& node, int64_t now_unix,
                         int64_t handshake_timeout_s = kHandshakeTimeoutS) const;
  // Handshake annotations to write on a node, every vendor by the same rule
  // (docs/upstream-contract.md#node-registration-and-handshake): key -> value (a new request, or
  // HandshakeCleanupValue for an unhealthy vendor: upstream's NodeCleanUp). A vendor with a
  // handshake key takes part on a node that carries its registration annotation or its handshake
  // annotation; other nodes (no GPU of that vendor) are left alone.
  std::map<std::string, std::string> HandshakeUpdates(
      const NodeView& node, int64_t now_unix,
      int64_t handshake_timeout_s = kHandshakeTimeoutS) const;

  // Decision annotations of every vendor present in `allocation` (each with its own devices, all
  // containers kept in order). Errors: a device whose Type no enabled vendor owns.
  StatusOr<std::map<std::string, std::string>> EncodeDecision(const core::PodAllocation& allocation,
                                                              int64_t now_unix) const;
  // The pod's devices over all vendors from its allocated keys (containers merged by position).
  // has_any is false when the pod carries no vendor's allocated key.
  StatusOr<core::PodAllocation> DecodeDecision(
      const std::map<std::string, std::string>& annotations, bool* has_any) const;
  // The allocated-key values the pod carries, in vendor order: equal strings = equal decisions.
  std::string DecisionFingerprint(const std::map<std::string, std::string>& annotations) const;

  // Namespace quotas (docs/upstream-contract.md#quota): the quota keys of every enabled vendor
  // (Vendor::QuotaKeys), with its Type keyword.
  struct VendorQuotaKey {
    std::string vendor;
    QuotaKey key;
  };
  std::vector<VendorQuotaKey> QuotaKeys() const;
  // What per-vendor device totals (Type keyword -> MiB and cores, core::DeviceTotalsByVendor or
  // core::RequestedDeviceTotalsByVendor) count against each quota key: resource -> MiB or cores.
  // A vendor that is not enabled, or names no quota resource, counts nothing.
  std::map<std::string, int64_t> QuotaCharge(
      const std::map<std::string, core::DeviceTotals>& by_vendor) const;

  // scheduler::VendorRules: every enabled vendor except NVIDIA.
  bool Covers(const std::string& vendor) const override;
  // Every covered vendor's ParseSelectors of the pod's annotations, once per scheduling cycle.
  std::unique_ptr<const PodState> Prepare(const core::PodRequest& pod) const override;
  // `pod` is what Prepare returned. A vendor whose selector annotations do not parse refuses every
  // device (CardTypeMismatch, never).
  Verdict Check(const PodState& pod, const core::DeviceRequest& request,
                const core::DeviceInfo& device, const core::DeviceUsage& usage) const override;
  // FitRules::pod_on_one_device (Moore Threads): a device is refused (CardNotFoundCustomFilterRule)
  // when the pod's earlier containers hold another device of its vendor on the node.
  Verdict CheckWithPod(const core::DeviceRequest& request,
                       std::span<const core::DeviceInfo> devices, int device,
                       std::span<const int> earlier) const override;
  Take Grant(const core::DeviceRequest& request, const core::DeviceInfo& device) const override;
  // Vendors with FitRules::group_rules, and devices that are parts of a card (DeviceInfo::card:
  // Vastai's dies), are chosen with the vendor's own Fit over the candidates (its group rules, e.g.
  // Kunlun's halves, Vastai's dies of one card); the others leave the choice to the policy.
  bool Pick(const PodState& pod, const core::DeviceRequest& request,
            std::span<const core::DeviceInfo> devices, std::span<const core::DeviceUsage> usage,
            std::span<const int> candidates, std::vector<int>* out) const override;
  // Pooled vendors (remote GPUs): the vendor's pooled(), ChoosePool and PoolNodeOf.
  bool Pooled(const std::string& vendor) const override;
  PoolChoice ChoosePool(const std::string& vendor,
                        std::span<const std::optional<core::DeviceRequest>> requests,
                        std::span<const PoolNode> nodes) const override;
  std::string PoolNodeOf(const core::ContainerDevice& device) const override;
  // The vendor's ScoreNode for kTopologyCohesion vendors, else 0. The scheduler has no node
  // annotations here (empty NodeView): scores read from devices only (Kunlun halves) count.
  int Score(const core::DeviceRequest& request, std::span<const core::DeviceInfo> devices,
            std::span<const int> granted) const override;

 private:
  std::vector<std::unique_ptr<Vendor>> vendors_;
  const Vendor* nvidia_ = nullptr;
  // vendors_ with NVIDIA first (node devices keep the order they always had: NVIDIA's, then the
  // others').
  std::vector<const Vendor*> nvidia_first_;
};

}  // namespace hami::vendors
