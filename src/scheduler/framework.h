#pragma once
// The scheduling framework, in the style of the Kubernetes scheduler framework:
//
//   for every candidate node (under that node's lock, on a consistent snapshot):
//     Filter:  node CPU/memory fit, then device fit per container. The device fit runs upstream
//     HAMi's
//              per-device checks (health, cordon, type, uuid, slots, memory, cores, exclusivity)
//              and asks the profile's GpuPicker which of the fitting devices to take.
//     Score:   the profile's NodeScorer rates the node with the pod placed (raw integer).
//   then once: normalisation to 0..100 (higher is better), host selection (highest score, ties to
//   the node earliest in name order), and the winner is re-evaluated to produce the allocation.
//   Reserve:   when (and only when) the decision is committed to the cache, the profile's
//   ReservePlugins
//              learn from it; Unreserve undoes that when the reservation is rolled back. Everything
//              before Reserve is a pure function of the cache and the learned state.
//
// A policy is a Profile = one GpuPicker + one NodeScorer + how to normalise and select; it lives in
// src/scheduler/policies/<name>/ and is one row of the registry (registry.h). Plugins see a
// request, a node view and per-cycle scratch state; never RPC, never the cache.
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "core/model.h"
#include "scheduler/node_state.h"
#include "scheduler/reasons.h"
#include "scheduler/vendor_rules.h"

namespace hami::scheduler {

// What the namespace's quotas leave for the pod being decided (ScheduleOptions::quota), per vendor:
// the device memory (MiB) and cores it may still be granted on that vendor's devices. While
// fitting, a card whose grant would take the pod past it is skipped like a card without the memory
// (upstream's fitQuota inside every vendor's Fit), counting the pod's earlier grants: every device
// of a multi-device request and the containers before it. The caller still checks the whole
// decision against the quotas (a vendor pair sharing one quota resource is checked only there).
struct QuotaRoom {
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
  struct Vendor {
    std::string vendor;  // the Type keyword (DeviceRequest::vendor, DeviceInfo::vendor)
    int64_t mem_mib = kUnlimited;
    int64_t cores = kUnlimited;
  };
  std::vector<Vendor> vendors;  // only the vendors some quota limits
  // The room of `vendor`'s devices; null when no quota limits them.
  const Vendor* Of(const std::string& vendor) const {
    for (const Vendor& v : vendors)
      if (v.vendor == vendor) return &v;
    return nullptr;
  }
};

struct PickContext;

// A rule the Scheduler adds to one cycle on top of the policy's (the usage rule,
// scheduler/usage_rule.h): a device of a generic (non-MIG) request that passed every other check
// may still be refused. Returns the reason, or Reason::kCount to admit. Thread-safe.
class DeviceGate {
 public:
  virtual ~DeviceGate() = default;
  virtual Reason Admit(const PickContext& ctx, int device, int64_t mem_mib) const = 0;
  // The memory of `device` that a request sized by the card (gpumem-percentage, or a whole card
  // without gpumem) takes its share of. Default: the size the cycle counts the device at
  // (DeviceCaps::devmem_mib); the usage rule answers the card's registered size where it counts
  // the card at its overcommit cap.
  virtual int64_t CardMemory(const PickContext& ctx, int device) const;
};

// Per-cycle (one pod, one Schedule call) scratch state. Plugins may stash parsed per-pod data once
// in PreFilter and read it on every node.
class CycleState {
 public:
  // `rules` (the profile's vendor rules, may be null) prepare their per-pod state here, once.
  CycleState(const core::PodRequest& pod, Rng* rng, const VendorRules* rules = nullptr);

  const core::PodRequest& pod() const { return *pod_; }
  // Randomness for randomized policies; never null during a cycle.
  Rng& rng() const { return *rng_; }
  // Effective node resources of the pod (core::EffectivePodRequest: init containers, sidecars,
  // apps).
  int64_t cpu_milli() const { return cpu_milli_; }
  int64_t memory_mib() const { return memory_mib_; }
  bool has_devices() const { return has_devices_; }
  // The pod's only device request when it has exactly one (the common case: a fast path), else
  // null.
  const core::DeviceRequest* single_request() const { return single_request_; }
  int single_request_container() const { return single_container_; }
  // The vendor rules' per-pod state (VendorRules::Prepare: their selectors, parsed once per cycle);
  // null when the cycle was built without rules.
  const VendorRules::PodState* vendor_state() const { return vendor_state_.get(); }
  // True when the pod restricts devices by type, mode or uuid.
  bool has_device_selectors() const { return has_selectors_; }
  // GPUs per device type in the cluster this cycle decides in (set by Scheduler::Schedule; null
  // when the cycle runs without a cache, e.g. in a test).
  const GpuCapacity* gpu_capacity() const { return capacity_.get(); }
  void set_gpu_capacity(std::shared_ptr<const GpuCapacity> c) { capacity_ = std::move(c); }
  // The namespace's quota room (ScheduleOptions::quota; not owned), and that of one request's
  // vendor: null when nothing limits it (the common case costs one null check per request).
  // The Scheduler's extra device rule for this cycle (not owned); null = none.
  void set_gate(const DeviceGate* g) { gate_ = g; }
  const DeviceGate* gate() const { return gate_; }
  void set_quota(const QuotaRoom* q) { quota_ = q != nullptr && !q->vendors.empty() ? q : nullptr; }
  const QuotaRoom::Vendor* QuotaFor(const core::DeviceRequest& r) const {
    return quota_ == nullptr ? nullptr : quota_->Of(r.vendor);
  }

  // Typed plugin data keyed by the plugin's address. Write replaces.
  template <typename T>
  T* Write(const void* key, T value) {
    for (auto& [k, d] : data_)
      if (k == key) {
        d = std::make_unique<Holder<T>>(std::move(value));
        return &static_cast<Holder<T>*>(d.get())->value;
      }
    data_.emplace_back(key, std::make_unique<Holder<T>>(std::move(value)));
    return &static_cast<Holder<T>*>(data_.back().second.get())->value;
  }
  template <typename T>
  const T* Read(const void* key) const {
    for (const auto& [k, d] : data_)
      if (k == key) return &static_cast<const Holder<T>*>(d.get())->value;
    return nullptr;
  }

 private:
  struct Base {
    virtual ~Base() = default;
  };
  template <typename T>
  struct Holder : Base {
    explicit Holder(T v) : value(std::move(v)) {}
    T value;
  };
  const core::PodRequest* pod_;
  Rng* rng_;
  int64_t cpu_milli_ = 0;
  int64_t memory_mib_ = 0;
  bool has_devices_ = false;
  bool has_selectors_ = false;
  const core::DeviceRequest* single_request_ = nullptr;
  int single_container_ = -1;
  std::shared_ptr<const GpuCapacity> capacity_;
  const QuotaRoom* quota_ = nullptr;
  const DeviceGate* gate_ = nullptr;
  std::unique_ptr<const VendorRules::PodState> vendor_state_;
  std::vector<std::pair<const void*, std::unique_ptr<Base>>> data_;
};

// What a GpuPicker sees when choosing devices for one container's request on one node.
struct PickContext {
  const CycleState& cycle;
  const NodeState& node;
  // Usage including the pod's earlier containers (later containers see earlier ones).
  std::span<const core::DeviceUsage> usage;
  const core::DeviceRequest& request;
  // Devices (positions in node.info.devices) the pod's earlier containers were granted on this
  // node, for vendor rules over the whole pod (VendorRules::CheckWithPod).
  std::span<const int> earlier = {};
  // MIG devices: choose profiles in the default order, without the pod's
  // nvidia.com/mig-profile-preference (set when the request's instances on one device fit only so).
  bool mig_default_order = false;
  // Memory this request takes on device `d` (resolves gpumem-percentage against that device).
  int64_t MemFor(int d) const;
  // Free milli of device `d` under `usage`.
  int FreeMilliOf(int d) const {
    return usage.data() == node.usage.data() ? node.free_milli[d]
                                             : FreeMilli(node.info.devices[d], usage[d]);
  }
};

// Chooses which fitting devices a container gets (upstream: the gpu-scheduler-policy sort order).
class GpuPicker {
 public:
  virtual ~GpuPicker() = default;
  // Once per cycle, before any node: parse per-pod options. An error rejects the pod (bad
  // annotation).
  virtual Status PreFilter(CycleState& cycle) const { return OkStatus(); }
  // A veto on a device that passed the generic checks (e.g. mutex: only idle cards). Return the
  // reason to count, or Reason::kCount to admit.
  virtual Reason Admit(const PickContext& ctx, int device) const { return Reason::kCount; }
  // False unless the picker overrides Admit (saves a virtual call per device on the hot path).
  bool vetoes() const { return vetoes_; }
  // Appends request.nums devices chosen among `candidates` (ascending device index, each fits on
  // its own) to `out`, or fewer when no acceptable choice exists (the node then fails for this
  // pod).
  virtual void Pick(const PickContext& ctx, std::span<const int> candidates,
                    std::vector<int>* out) const = 0;
  // numa-bind: whether the NUMA nodes are tried from the highest id down (upstream HAMi's order for
  // most of its policies) instead of from the lowest up.
  virtual bool HighNumaFirst(const CycleState& cycle) const { return false; }

 protected:
  bool vetoes_ = false;
};

// Where the pod would go on one node.
struct Placement {
  PodDelta delta;                                    // effective usage added to the node
  std::vector<std::vector<DeviceDelta>> containers;  // per container (PodRequest order)
  int64_t gpu_milli = 0;  // sum over the pod's devices of the milli it takes (effective usage)
  int gpus = 0;           // devices the pod takes (effective usage)
  int vendor_score = 0;   // sum of VendorRules::Score over the pod's covered requests (tie-break)
  void Clear() {
    delta.devices.clear();
    delta.cpu_milli = delta.memory_mib = 0;
    delta.pod_class = kNoPodClass;
    for (auto& c : containers) c.clear();
    gpu_milli = 0;
    gpus = 0;
    vendor_score = 0;
  }
};

// UpperBound's answer when the scorer cannot bound the node's score.
inline constexpr int64_t kNoBound = INT64_MAX;

// Rates a feasible node with the pod placed. Raw scores are integers; the framework normalises them
// once (Profile::normalize) into 0..100, higher is better.
class NodeScorer {
 public:
  virtual ~NodeScorer() = default;
  virtual Status PreFilter(CycleState& cycle) const { return OkStatus(); }
  // `node` is the state before the pod; `placement` is where the pod would go.
  virtual int64_t Score(const CycleState& cycle, const NodeState& node,
                        const Placement& placement) const = 0;
  // A value >= Score(...) for any placement of the cycle's pod on a node with this summary, or
  // kNoBound. Lets the scheduler examine nodes best bound first and stop when no node left can beat
  // (or tie earlier in name order with) the best one found: the decision is the same as scoring
  // every node. Called only when bounded() (saves a virtual call per node otherwise); must not use
  // randomness.
  virtual int64_t UpperBound(const CycleState& cycle, const NodeSummary& node) const {
    return kNoBound;
  }
  bool bounded() const { return bounded_; }

 protected:
  bool bounded_ = false;
};

enum class Normalize {
  kClamp,   // raw scores are already 0..100 (clamped as a safeguard)
  kMinMax,  // integer min-max over the feasible nodes: 100*(s-min)/(max-min); all 100 when equal
};
enum class HostSelection {
  kHighestScore,     // highest normalised score; ties go to the node earliest in name order
  kUniformFeasible,  // a uniformly random feasible node (scores are ignored)
};

// Learns from the decisions that are kept (the Reserve/Unreserve extension points of the Kubernetes
// scheduling framework). Reserve runs once per committed decision, after the cache has taken it;
// Unreserve undoes exactly that when the reservation is rolled back (bind failed, pod filtered
// again, decision patch lost); Forget drops the record of a pod that ran and left, keeping what it
// taught (the policies learn the arrivals, not the running set). Unknown uids are ignored.
// Thread-safe. Schedule never calls these, so deciding has no side effect: a pod that is retried,
// explained or dry-run a thousand times is learned once, when it is reserved.
class ReservePlugin {
 public:
  virtual ~ReservePlugin() = default;
  virtual void Reserve(const core::PodRequest& pod, const PodDelta& delta) = 0;
  virtual void Unreserve(const std::string& uid) = 0;
  virtual void Forget(const std::string& uid) = 0;
};

// A ReservePlugin over a model with Observe(uid, pod) / Unobserve(uid) / Forget(uid) (the FGD shape
// model, fgd-balance's CPU demand).
template <typename Model>
class ObservingPlugin final : public ReservePlugin {
 public:
  explicit ObservingPlugin(std::shared_ptr<Model> model) : model_(std::move(model)) {}
  void Reserve(const core::PodRequest& pod, const PodDelta&) override {
    model_->Observe(pod.uid, pod);
  }
  void Unreserve(const std::string& uid) override { model_->Unobserve(uid); }
  void Forget(const std::string& uid) override { model_->Forget(uid); }

 private:
  std::shared_ptr<Model> model_;
};

struct Profile {
  std::string name;
  std::unique_ptr<GpuPicker> picker;
  std::unique_ptr<NodeScorer> scorer;
  std::vector<std::shared_ptr<ReservePlugin>>
      reserve;  // learning policies only; empty for the others
  Normalize normalize = Normalize::kClamp;
  HostSelection selection = HostSelection::kHighestScore;
  const VendorRules* vendor_rules =
      nullptr;  // per-device rules of non-generic vendors; null = none
};

// Reusable buffers of one evaluation thread (no allocation per node once warm).
struct EvalScratch {
  std::vector<core::DeviceUsage> base;
  std::vector<core::DeviceUsage> work;
  std::vector<int> candidates;
  std::vector<int> picked;
  std::vector<DeviceDelta> init_peak;
  std::vector<int> pod_devices;  // positions granted to the pod's containers so far (multi-request)
  const VendorRules* scored_by =
      nullptr;  // set by a pick: the rules that covered it (null: generic)
  // Set by a pick: `picked` names a MIG device more than once (several instances of one request on
  // one GPU, as upstream places them), and whether those instances fit only in the default
  // profile order (PickContext::mig_default_order).
  bool mig_repeats = false;
  bool mig_default_order = false;
  // Set by a pick: the quota room left to the request (its vendor's room less what the pod holds of
  // that vendor's devices so far); quota_limited false when no quota limits the vendor.
  bool quota_limited = false;
  int64_t quota_mem_left = 0;
  int64_t quota_cores_left = 0;
};

// Filters the pod against one node and, when it fits, fills `placement`. Otherwise fills `why`
// (when not null). `node` must not change during the call (the caller holds the node's lock).
bool EvaluateNode(const Profile& profile, const CycleState& cycle, const NodeState& node,
                  EvalScratch& scratch, Placement* placement, FitFailure* why);

// False when the pod cannot fit a node with this summary (node CPU/memory; for requests on the
// generic per-device checks also usable devices and the largest free memory and cores of a device):
// a necessary condition of EvaluateNode, O(requests of the pod). Keep it one when the checks
// change.
bool MayFit(const Profile& profile, const CycleState& cycle, const NodeSummary& node);

// Normalised 0..100 scores from raw scores, per the profile.
void NormalizeScores(Normalize how, std::span<int64_t> scores);

// True when `type` matches `pattern` as a case-insensitive substring (use-gputype semantics).
bool TypeMatches(const std::string& type, const std::string& pattern);

}  // namespace hami::scheduler
