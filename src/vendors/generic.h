#pragma once
// GenericVendor: the shared engine behind every backend. A backend is a Spec (data: names, keys,
// units, fit rules, where devices are registered) plus a few overridden hooks for what is truly its
// own (Ascend modes, Kunlun groups, Cambricon lock, ...). NVIDIA overrides parsing and codecs with
// core's upstream-exact ones.
#include <memory>
#include <string>
#include <vector>

#include "vendors/vendor.h"

namespace hami::vendors {

// Where a vendor's devices come from.
enum class Registration {
  kJson,  // node annotation, core JSON DeviceInfo array (hami.io/node-nvidia-register format)
  kCsv,   // node annotation, legacy CSV `id,count,devmem,devcore,type,numa,health[,index,mode]:`
  kCapacity,  // node status.capacity of `capacity_resource` (devices = capacity /
              // capacity_per_device)
};

// The largest memoryFactor (MiB per unit of the memory resource) a vendor section may set: 1 TiB.
inline constexpr int64_t kMaxMemoryUnitMib = int64_t{1024} * 1024;

struct Spec {
  std::string name;         // registry/config name
  std::string common_word;  // Type keyword in decisions
  ResourceNames resources;
  AnnotationKeys keys;
  FitRules rules;
  ScorePolarity polarity = ScorePolarity::kNeutral;
  int64_t memory_unit_mib =
      1;                 // one unit of resources.memory in MiB (Moore Threads 512, Iluvatar 256)
  int core_units = 100;  // resources.cores value that means a whole device (Moore Threads 16)
  // The webhook refuses resources.cores above `core_units` (upstream rejects it since its v2.10
  // line, PR #2784, where it used to clamp); the scheduler still clamps a pod that skipped it.
  bool refuse_cores_above_whole = false;
  Registration registration = Registration::kJson;
  // kCapacity only: which capacity counts devices, how much of it one device is (a remainder
  // counts as one more device, as upstream's loop does), the memory each device has when the node
  // does not publish a memory capacity (else memory capacity * memory_unit_mib * per_device /
  // capacity), the slots and cores per device, and the device id `<node name><id_infix><i>`
  // (upstream's, e.g. "-cambricon-mlu-").
  std::string capacity_resource;
  int64_t capacity_per_device = 1;
  int64_t capacity_device_memory_mib = 0;
  int capacity_slots = 1;
  int capacity_devcore = 100;
  std::string capacity_id_infix;
  std::string model;  // DeviceInfo::type given to capacity-registered devices
};

class GenericVendor : public Vendor {
 public:
  explicit GenericVendor(Spec spec) : spec_(std::move(spec)) {}

  const std::string& name() const override { return spec_.name; }
  const std::string& common_word() const override { return spec_.common_word; }
  const ResourceNames& resources() const override { return spec_.resources; }
  const AnnotationKeys& keys() const override { return spec_.keys; }
  const FitRules& rules() const override { return spec_.rules; }
  ScorePolarity score_polarity() const override { return spec_.polarity; }
  const Spec& spec() const { return spec_; }

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources,
      const std::map<std::string, std::string>& pod_annotations) const override;
  StatusOr<Mutation> Mutate(
      const nlohmann::json& resources,
      const std::map<std::string, std::string>& pod_annotations) const override;
  StatusOr<core::DeviceSelectors> ParseSelectors(
      const std::map<std::string, std::string>& pod_annotations) const override;
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override;
  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override;
  std::optional<Refusal> CheckCount(const core::DeviceRequest& request,
                                    const core::DeviceSelectors& selectors) const override;
  std::optional<Refusal> CheckDevice(const core::DeviceRequest& request,
                                     const core::DeviceInfo& device, const core::DeviceUsage& usage,
                                     const core::DeviceSelectors& selectors) const override;
  core::ContainerDevice Grant(const core::DeviceRequest& request,
                              const core::DeviceInfo& device) const override;
  FitResult Fit(const core::DeviceRequest& request, std::span<const core::DeviceInfo> devices,
                std::span<const core::DeviceUsage> usage, const core::DeviceSelectors& selectors,
                const NodeView& node) const override;
  int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                const NodeView& node) const override;
  StatusOr<std::map<std::string, std::string>> EncodeDecision(const core::PodAllocation& allocation,
                                                              int64_t now_unix) const override;
  StatusOr<core::PodAllocation> DecodeDecision(
      const std::map<std::string, std::string>& pod_annotations) const override;
  // A quota value counts in the memory resource's own unit (memory_unit_mib: Hygon's and Ascend's
  // memoryFactor, Cambricon's 256 MiB, Moore Threads' 512 MiB), as the pod's limits do; cores as
  // granted.
  std::vector<QuotaKey> QuotaKeys() const override;

 protected:
  // Picks request.nums of `candidates` (device positions, sorted by device index). Default: the
  // first ones. Topology vendors override to keep a group together. Empty = no acceptable set.
  virtual std::vector<int> ChooseSet(const core::DeviceRequest& request,
                                     std::span<const core::DeviceInfo> devices,
                                     const std::vector<int>& candidates) const;
  // Extra decision annotations (Cambricon lock, Ascend template choice). Default none.
  virtual Status AddDecisionExtras(const core::PodAllocation& allocation, int64_t now_unix,
                                   std::map<std::string, std::string>* out) const {
    return OkStatus();
  }
  // Memory (MiB) and cores (percent) a request takes on a device, before template rounding.
  bool UsesTemplate(const core::DeviceRequest& request, const core::DeviceInfo& device) const;
  static int64_t ResolveMemory(const core::DeviceRequest& request, const core::DeviceInfo& device);

  Spec spec_;
};

// Helpers shared by backends.
// An integer extended resource from limits, then requests; nullopt when absent. Errors name it.
StatusOr<std::optional<int64_t>> ReadResource(const nlohmann::json& resources,
                                              const std::string& name);
// "i,j,..": the device indices of the last container of `allocation` that has devices (what the
// Moore Threads and Kunlunxin device plugins read); empty when no container has one.
std::string LastContainerIndices(const core::PodAllocation& allocation);
// The smallest template whose memory is >= mem_mib; nullptr when none.
const Template* SmallestTemplate(const std::vector<Template>& templates, int64_t mem_mib);

}  // namespace hami::vendors
