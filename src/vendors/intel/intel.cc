// Intel GPUs (docs/vendors.md#intel-gpus): in no HAMi release, so designed from Intel's own device
// plugin and its GPU Aware Scheduling (GAS) contract, the one its users already write:
//  - two vendors, one per kernel driver: IntelI915 (gpu.intel.com/i915) and IntelXe
//    (gpu.intel.com/xe); both share the per-GPU resources gpu.intel.com/millicores (1000 = one
//    whole GPU) and gpu.intel.com/memory.max (bytes);
//  - devices from node capacity as Intel's plugin publishes it: millicores / 1000 GPUs (else the
//    count resource, one share each), the count resource / GPUs shares per GPU (the plugin's
//    shared-dev-num), memory.max / GPUs bytes each; id `<node>-<driver>-card<i>`;
//  - a container asks the count resource n (a share on each of n GPUs) and optionally millicores
//    and memory.max for the whole container, split evenly over its n GPUs as GAS does (rounded
//    up); millicores or memory.max without a count is not a GPU request (GAS ignores it too);
//  - decision: hami.io/<Type>-devices-allocated plus GAS's hand-off that Intel's plugin reads in
//    Allocate: gas-container-cards (per container `card<i>` names joined by ",", containers by
//    "|", in the decision's container order) and gas-ts (decision time, nanoseconds).
#include "vendors/intel/intel.h"

#include <algorithm>
#include <limits>

#include "core/quantity.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

constexpr int64_t kMilliPerGpu = 1000;
constexpr int64_t kBytesPerMiB = 1 << 20;
constexpr int64_t kMaxGpus = 1024;

class IntelGpu : public GenericVendor {
 public:
  IntelGpu(Spec spec, std::string driver)
      : GenericVendor(std::move(spec)), driver_(std::move(driver)) {}

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    if (!count || *count == 0) return std::optional<core::DeviceRequest>();
    if (*count > kMaxGpus) return InvalidArgument(StrCat(n.count, ": ", *count, " exceeds 1024"));
    HAMI_ASSIGN_OR_RETURN(auto milli, ReadResource(resources, n.cores));
    HAMI_ASSIGN_OR_RETURN(auto bytes, ReadBytes(resources, n.memory));
    core::DeviceRequest r;
    r.vendor = spec_.common_word;
    r.nums = static_cast<int>(*count);
    const int64_t per_milli = (milli.value_or(0) + *count - 1) / *count;
    const int64_t per_bytes = (bytes.value_or(0) + *count - 1) / *count;
    r.coresreq = static_cast<int>(std::min<int64_t>((per_milli * 100 + 999) / kMilliPerGpu, 101));
    r.memreq_mib = (per_bytes + kBytesPerMiB - 1) / kBytesPerMiB;
    return std::optional<core::DeviceRequest>(r);
  }

  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(auto req, ParseRequest(resources, a));
    Mutation m;
    if (req && req->coresreq > 100)
      m.denials.push_back(StrCat(spec_.resources.cores, ": more than ", kMilliPerGpu,
                                 " millicores per GPU; ask for more ", spec_.resources.count));
    return m;
  }

  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    const ResourceNames& n = spec_.resources;
    auto cap = [&](const std::string& k) {
      auto it = node.capacity.find(k);
      return it == node.capacity.end() ? int64_t{0} : it->second;
    };
    const int64_t shares = cap(n.count), milli = cap(n.cores), bytes = cap(n.memory);
    if (shares <= 0) return std::vector<core::DeviceInfo>();
    const int64_t gpus = milli >= kMilliPerGpu ? milli / kMilliPerGpu : shares;
    if (gpus > kMaxGpus || shares / gpus > std::numeric_limits<int32_t>::max())
      return InvalidArgument(
          StrCat("capacity ", n.count, "=", shares, ", ", n.cores, "=", milli, ": out of range"));
    if (bytes < 0) return InvalidArgument(StrCat("capacity ", n.memory, "=", bytes, ": negative"));
    std::vector<core::DeviceInfo> out;
    for (int64_t i = 0; i < gpus; ++i) {
      core::DeviceInfo d;
      d.uuid = StrCat(node.name, "-", driver_, "-card", i);
      d.index = static_cast<int>(i);
      d.count = static_cast<int>(shares / gpus);
      d.devmem_mib = bytes / gpus / kBytesPerMiB;
      d.devcore = 100;
      d.type = spec_.common_word;
      d.vendor = spec_.common_word;
      d.health = true;
      out.push_back(d);
    }
    return out;
  }

  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override {
    int64_t shares = 0, mib = 0;
    for (const auto& d : devices) shares += d.count, mib += d.devmem_mib;
    const ResourceNames& n = spec_.resources;
    node->capacity[n.count] = shares;
    node->capacity[n.cores] = static_cast<int64_t>(devices.size()) * kMilliPerGpu;
    node->capacity[n.memory] = mib * kBytesPerMiB;
    return OkStatus();
  }

 protected:
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t now_unix,
                           std::map<std::string, std::string>* out) const override {
    std::string cards;
    bool any = false;
    for (size_t c = 0; c < a.containers.size(); ++c) {
      if (c > 0) cards += "|";
      for (size_t i = 0; i < a.containers[c].size(); ++i) {
        cards += StrCat(i > 0 ? "," : "", "card", a.containers[c][i].index);
        any = true;
      }
    }
    if (!any) return OkStatus();
    (*out)["gas-container-cards"] = cards;
    (*out)["gas-ts"] = StrCat(now_unix * 1000000000LL);
    return OkStatus();
  }

 private:
  // memory.max is in bytes (any quantity: "8Gi"); errors name the resource.
  static StatusOr<std::optional<int64_t>> ReadBytes(const nlohmann::json& resources,
                                                    const std::string& name) {
    for (const char* part : {"limits", "requests"}) {
      auto p = resources.is_object() ? resources.find(part) : resources.end();
      if (p == resources.end() || !p->is_object() || !p->contains(name)) continue;
      HAMI_ASSIGN_OR_RETURN(core::Quantity q, core::ParseQuantityJson(p->at(name)));
      auto v = core::QuantityToExactInt(q);
      if (!v.ok() || *v < 0)
        return InvalidArgument(StrCat(part, ".", name, ": must be a whole number of bytes >= 0"));
      return std::optional<int64_t>(*v);
    }
    return std::optional<int64_t>();
  }

  std::string driver_;
};

Spec DriverSpec(const char* driver, const char* word) {
  Spec s;
  s.name = "intel";
  s.common_word = word;
  s.resources = {StrCat("gpu.intel.com/", driver), "gpu.intel.com/memory.max", "",
                 "gpu.intel.com/millicores", ""};
  s.keys = {"", "", "", StrCat("hami.io/", word, "-devices-allocated"), "", "", "", ""};
  s.registration = Registration::kCapacity;
  s.capacity_resource = s.resources.count;
  return s;
}

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeIntel(const YAML::Node& section) {
  Spec i915 = DriverSpec("i915", "IntelI915"), xe = DriverSpec("xe", "IntelXe");
  SectionReader r(section, "intel");
  bool enabled = true;
  HAMI_RETURN_IF_ERROR(r.Bool("enabled", &enabled));
  HAMI_RETURN_IF_ERROR(r.String("resourceCountName", &i915.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceXeCountName", &xe.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceMemoryName", &i915.resources.memory));
  HAMI_RETURN_IF_ERROR(r.String("resourceCoreName", &i915.resources.cores));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  xe.resources.memory = i915.resources.memory;
  xe.resources.cores = i915.resources.cores;
  i915.capacity_resource = i915.resources.count;
  xe.capacity_resource = xe.resources.count;
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<IntelGpu>(std::move(i915), "i915"));
  out.push_back(std::make_unique<IntelGpu>(std::move(xe), "xe"));
  return out;
}

}  // namespace hami::vendors
