#pragma once
// One interface for every device vendor (docs/upstream-contract.md#vendors, upstream
// pkg/device/devices.go).
// A vendor owns: its extended-resource names and request defaulting, the webhook mutation, the node
// registration annotation and its codec, the handshake key, per-device fit rules with parseable
// refusal reasons, a node score hook, the decision annotations on pods, the use/nouse selector
// annotations and, where we own the device plugin, the Allocate environment.
//
// Everything here is pure (no I/O, no clock: `now` is passed in) and thread-compatible: a Vendor is
// immutable after construction, so one instance serves concurrent scheduling cycles.
//
// Contracts the conformance suite (conformance_test.cc) checks for every backend:
//  - Fit's feasibility does not depend on the order of the devices;
//  - a grant never takes a device beyond its slots, memory or cores;
//  - every refusal renders as "<Reason>: <detail>" and ParseRefusal reads it back;
//  - ScoreNode is 0..100, higher is better, and ranks placements as `score_polarity` declares;
//  - registration and decision annotations round-trip.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"
#include "nlohmann/json_fwd.hpp"
#include "scheduler/reasons.h"
#include "scheduler/vendor_rules.h"

namespace hami::vendors {

// Extended-resource names of one vendor. An empty name means the vendor has no such resource.
struct ResourceNames {
  std::string count;              // number of devices (e.g. nvidia.com/gpu)
  std::string memory;             // memory per device, in `memory_unit_mib` units
  std::string memory_percentage;  // percent of the device's memory
  std::string cores;              // compute per device, in `core_units` units of a whole device
  std::string priority;           // task priority
};

// The node as a vendor may read it: annotations and status.capacity (integers; extended resources).
struct NodeView {
  std::map<std::string, std::string> annotations;
  std::map<std::string, int64_t> capacity;
  std::string name = {};  // metadata.name (capacity-registered vendors derive device ids from it)
  std::map<std::string, std::string> labels = {};  // metadata.labels (AWS Neuron: instance type)
  // The first status.addresses entry of type InternalIP ("" when none): where a remote-GPU server
  // node is reached (vendors/remotegpu).
  std::string internal_ip = {};
};

// Why a device or a node cannot take a request. `reason` is the scheduler's failure vocabulary
// (scheduler/reasons.h; the text is scheduler::ReasonName, upstream's CamelCase strings), so a
// refusal reaches the node's tally unchanged; `never` says waiting cannot help (wrong type, too
// small). Vendor rules without an upstream reason of their own use the scheduler's nearest one: no
// template holds the memory -> CardInsufficientMemory, a count the vendor does not allow ->
// NodeInsufficientDevice, no allowed topology group -> NumaNotFit (the detail says which).
struct Refusal {
  scheduler::Reason reason = scheduler::Reason::kCount;
  std::string detail;
  bool never = false;
  // "<reason>: <detail>" (or just "<reason>" when detail is empty).
  std::string ToString() const;
  bool operator==(const Refusal&) const = default;
};
// Parses Refusal::ToString output: the reason must be a scheduler::ReasonName. Errors name the
// text.
StatusOr<Refusal> ParseRefusal(std::string_view text);

// An init container the webhook puts in front of every other init container of the pod (one per
// name: containers of a pod that each ask for it share one), with an emptyDir volume of its own
// name mounted at `mount_path`.
struct InitContainer {
  std::string name;
  std::string image;
  std::vector<std::string> command;
  std::string mount_path;
  bool operator==(const InitContainer&) const = default;
};

// What the webhook does to one container: limits to add (resource -> integer), environment to
// inject and denials (each an actionable message; any denial rejects the pod). `env` is added only
// where the container does not set the name itself; the other environment fields are the vendor's
// word and replace what the container says (remote GPU: the scheduler's placement, the memory
// limit the library enforces).
struct Mutation {
  std::map<std::string, int64_t> add_limits;
  std::map<std::string, std::string> env;
  std::vector<std::string> denials;
  // name -> value, replacing an entry of that name (literal or from a source).
  std::map<std::string, std::string> set_env = {};
  // name -> a field of the pod (downward API fieldPath), replacing an entry of that name.
  std::map<std::string, std::string> env_field_refs = {};
  // name -> value put in front of the container's literal value ("<value> <theirs>"; the value
  // alone when the name is absent). A container that takes the name from a source is denied:
  // there is nothing to prepend to.
  std::map<std::string, std::string> env_prepend = {};
  // Volumes of `init_containers` mounted into this container: volume name -> mount path.
  std::map<std::string, std::string> volume_mounts = {};
  // Pod level: init containers to run first (see InitContainer).
  std::vector<InitContainer> init_containers = {};
  bool empty() const {
    return add_limits.empty() && env.empty() && denials.empty() && set_env.empty() &&
           env_field_refs.empty() && env_prepend.empty() && volume_mounts.empty() &&
           init_containers.empty();
  }
};

// Result of fitting one container's request on one node's devices of this vendor.
struct FitResult {
  std::vector<core::ContainerDevice> devices;  // exactly request.nums when it fits (index set)
  std::vector<Refusal> refusals;               // per refused device, plus node-level refusals
  bool ok() const { return !devices.empty(); }
  // Upstream's tally: "2/8 CardInsufficientMemory, 1/8 CardTypeMismatch" (N = devices examined).
  std::string Summary(int examined) const;
};

// How ScoreNode ranks placements (0..100, higher is always better; this says better *by what*).
enum class ScorePolarity {
  kNeutral,           // always 0: the vendor adds nothing to the framework's node score (NVIDIA)
  kTopologyCohesion,  // higher when the granted devices are better connected (same group/link)
};

// Fit rules as data, so a scheduler applying its own generic checks can honour them too.
struct Template {
  std::string name;  // e.g. "vir05_1c_16g"
  int64_t memory_mib = 0;
  int cores = 0;  // percent of the device the template takes
  bool operator==(const Template&) const = default;
};
struct FitRules {
  bool whole_device_only = false;     // a request always takes the whole device, exclusively
  int max_devices_per_container = 0;  // 0 = unlimited; template vNPU: 1 unless whole devices
  std::vector<int> allowed_counts;    // empty = any; Kunlun whole XPU: 1, 2, 4, 8
  std::vector<Template> templates;    // memory rounded up to the smallest template that fits
  bool group_rules = false;           // Fit keeps a multi-device grant inside a topology group
                                      // (Kunlun halves): a scheduler lets Fit choose the set
  bool slots_only = false;  // a request takes one slot per device and books no memory or cores
                            // (Vastai, Biren: upstream counts tasks per device only)
  bool pod_on_one_device = false;  // every container of a pod takes the same device (Moore
                                   // Threads: upstream's customFilterRule); the scheduler applies
                                   // it (VendorRules::CheckWithPod), Fit sees one container only
};

// Annotation keys of one vendor.
struct AnnotationKeys {
  std::string node_register;  // registration (empty: devices come from node capacity)
  std::string handshake;      // "hami.io/node-handshake[-<x>]" (empty: none)
  std::string to_allocate;    // decision consumed by the device plugin (empty: none)
  std::string allocated;      // permanent decision record
  std::string use_type, nouse_type, use_uuid, nouse_uuid;  // selector annotations (empty: none)
};

// A namespace ResourceQuota key that a vendor's grants count against (upstream's quota manager:
// `limits.<resource>` for the vendor's memory and core resources). A quota value v limits the
// namespace to v * unit MiB of granted device memory (memory) or v * unit granted cores (every
// device of a multi-device request counts).
struct QuotaKey {
  std::string resource;  // e.g. "hygon.com/dcumem" (the ResourceQuota key without "limits.")
  bool memory = false;   // true: counts granted memory (MiB); false: granted cores
  int64_t unit = 1;      // MiB (or cores) one unit of the quota value stands for
  bool operator==(const QuotaKey&) const = default;
};

// Upstream's CheckHealth over a node's handshake annotation, for every vendor NVIDIA included
// (docs/upstream-contract.md#node-registration-and-handshake): when the value does not
// say "Requesting", the scheduler writes `Requesting_<YYYY-MM-DD HH:MM:SS>` (UTC here); the node is
// unhealthy only when the request is older than `timeout_s` (upstream: 60 s) and the node's
// allocatable count is 0. A "Requesting" value whose time does not parse is left alone and counts
// as healthy, as upstream does. An unhealthy vendor's devices are dropped and its handshake becomes
// `Deleted_<time>` (upstream's NodeCleanUp). A value that says "Deleted" is upstream's
// CheckHealth (healthy, no update): no new request is written and the devices stay out until
// the device plugin answers again (its report replaces the value), so a node whose plugin is gone
// is never offered again on the strength of the scheduler's own cleanup mark.
enum class Handshake { kHealthy, kWriteRequest, kUnhealthy, kCleanedUp };
inline constexpr int64_t kHandshakeTimeoutS = 60;
struct HandshakeDecision {
  Handshake verdict = Handshake::kHealthy;
  std::string write_value;  // set with kWriteRequest
  bool operator==(const HandshakeDecision&) const = default;
};
HandshakeDecision CheckHandshake(std::string_view value, int64_t now_unix,
                                 int64_t allocatable_count, int64_t timeout_s = kHandshakeTimeoutS);
// The value NodeCleanUp writes on an unhealthy vendor's handshake key: `Deleted_<time>`.
std::string HandshakeCleanupValue(int64_t now_unix);

class Vendor {
 public:
  virtual ~Vendor() = default;

  // Registry/config name ("nvidia", "ascend", ...) and the Type keyword written in decisions
  // (upstream CommonWord: "NVIDIA", "Ascend910B3", "DCU", "MLU", ...).
  virtual const std::string& name() const = 0;
  virtual const std::string& common_word() const = 0;
  virtual const ResourceNames& resources() const = 0;
  virtual const AnnotationKeys& keys() const = 0;
  virtual const FitRules& rules() const = 0;
  virtual ScorePolarity score_polarity() const = 0;

  // The request of one container (`resources` = {"limits":{..},"requests":{..}}) after this
  // vendor's defaulting, or nullopt when the container does not ask for this vendor. Errors name
  // the resource.
  virtual StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources,
      const std::map<std::string, std::string>& pod_annotations) const = 0;
  // The webhook's changes for one container. Errors only for malformed input (bad quantities).
  virtual StatusOr<Mutation> Mutate(
      const nlohmann::json& resources,
      const std::map<std::string, std::string>& pod_annotations) const = 0;
  // use/nouse annotations of this vendor -> selectors (comma lists, blanks dropped).
  virtual StatusOr<core::DeviceSelectors> ParseSelectors(
      const std::map<std::string, std::string>& pod_annotations) const = 0;
  // This vendor's pod annotations that ParseSelectors reads leniently and found unusable, one
  // sentence each (NVIDIA: a non-boolean nvidia.com/numa-bind); the webhook returns them as
  // warnings. Default: none.
  virtual std::vector<std::string> IgnoredAnnotations(
      const std::map<std::string, std::string>& pod_annotations) const {
    return {};
  }

  // The node's devices of this vendor (vendor = common_word()). A node without this vendor's
  // annotation/capacity has none (not an error). Errors name the annotation and device.
  virtual StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const = 0;
  // The registration annotation value as this vendor's device plugin writes it (for tests, fakes
  // and the sim). Capacity-based vendors fill `node->capacity` instead.
  virtual Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const = 0;

  // Request-level count rules (devices per container, allowed counts) that no device can lift;
  // nullopt = the count is acceptable. Fit applies it first; a scheduler checking devices one by
  // one applies it too.
  virtual std::optional<Refusal> CheckCount(const core::DeviceRequest& request,
                                            const core::DeviceSelectors& selectors) const = 0;
  // Whether one device can take one unit of `request` given its usage; nullopt = fits.
  virtual std::optional<Refusal> CheckDevice(const core::DeviceRequest& request,
                                             const core::DeviceInfo& device,
                                             const core::DeviceUsage& usage,
                                             const core::DeviceSelectors& selectors) const = 0;
  // What the container takes on a device that passed CheckDevice (memory resolved and rounded).
  virtual core::ContainerDevice Grant(const core::DeviceRequest& request,
                                      const core::DeviceInfo& device) const = 0;
  // Chooses request.nums devices (reference first-fit honouring the vendor's group rules).
  virtual FitResult Fit(const core::DeviceRequest& request,
                        std::span<const core::DeviceInfo> devices,
                        std::span<const core::DeviceUsage> usage,
                        const core::DeviceSelectors& selectors, const NodeView& node) const = 0;
  // 0..100, higher is better per score_polarity(); `granted` are indices into `devices`.
  virtual int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                        const NodeView& node) const = 0;

  // Pod annotations carrying the decision: to_allocate + allocated (upstream
  // `UUID,Type,mem,cores:` / `;` format with this vendor's Type) plus vendor extras (Cambricon
  // lock, Ascend template choice). `now_unix` stamps time-based extras.
  virtual StatusOr<std::map<std::string, std::string>> EncodeDecision(
      const core::PodAllocation& allocation, int64_t now_unix) const = 0;
  // The allocated-key decision of a pod (only this vendor's devices), for the usage cache.
  virtual StatusOr<core::PodAllocation> DecodeDecision(
      const std::map<std::string, std::string>& pod_annotations) const = 0;

  // The quota keys this vendor's grants count against. Default: its memory resource (one unit =
  // 1 MiB) and its cores resource, where it names them.
  virtual std::vector<QuotaKey> QuotaKeys() const {
    std::vector<QuotaKey> out;
    if (!resources().memory.empty()) out.push_back({resources().memory, true, 1});
    if (!resources().cores.empty()) out.push_back({resources().cores, false, 1});
    return out;
  }

  // ---- Pooled vendors (remote GPUs; scheduler::VendorRules::Pooled) ----
  // True when this vendor's devices are served to pods on other nodes.
  virtual bool pooled() const { return false; }
  // The serving node for a whole pod (scheduler::VendorRules::ChoosePool).
  virtual scheduler::VendorRules::PoolChoice ChoosePool(
      std::span<const std::optional<core::DeviceRequest>> requests,
      std::span<const scheduler::VendorRules::PoolNode> nodes) const {
    return {};
  }
  // The node serving a granted device ("" = not known from the grant).
  virtual std::string PoolNodeOf(const core::ContainerDevice& device) const { return {}; }
  // Annotations a decision served by `node` carries besides EncodeDecision's (remote GPU: the
  // server's endpoint). Errors: the node cannot serve (e.g. no address).
  virtual StatusOr<std::map<std::string, std::string>> PoolAnnotations(const NodeView& node) const {
    return std::map<std::string, std::string>();
  }

  // Container environment for Allocate, where we own the device plugin (NVIDIA); empty otherwise.
  virtual std::map<std::string, std::string> AllocateEnv(
      const std::vector<core::ContainerDevice>& devices) const {
    return {};
  }
};

}  // namespace hami::vendors
