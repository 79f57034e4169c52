// MetaX (docs/upstream-contract.md#node-score-and-choice, #vendors): two vendors.
//  - Metax-GPU: whole cards from node capacity metax-tech.com/gpu; node score from the pairwise
//    losses in metax-tech.com/gpu.topology.losses (lower loss = better connected = higher score).
//    Format (constructed; upstream gives only the key): JSON {"<i>,<j>": loss} over device indices.
//  - Metax-SGPU: memory and core slicing, devices registered in metax-tech.com/node-gpu-devices
//  (JSON,
//    same DeviceInfo array; constructed), QoS policy metax-tech.com/sgpu-qos-policy
//    (best-effort|fixed-share|burst-share) and class metax-tech.com/sgpu-app-class
//    (online|offline), validated by the webhook.
#include "vendors/metax/metax.h"

#include <algorithm>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

constexpr const char kLosses[] = "metax-tech.com/gpu.topology.losses";
constexpr int64_t kMaxLoss = 2000;  // upstream scores 2000 - loss

class MetaxGpu : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;
  int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                const NodeView& node) const override {
    if (granted.size() < 2) return 100;  // one card has no link to lose
    auto it = node.annotations.find(kLosses);
    if (it == node.annotations.end()) return 0;
    const auto j = nlohmann::json::parse(it->second, nullptr, false);
    if (!j.is_object()) return 0;
    int64_t loss = 0;
    for (size_t a = 0; a < granted.size(); ++a)
      for (size_t b = a + 1; b < granted.size(); ++b) {
        int i = devices[granted[a]].index, k = devices[granted[b]].index;
        if (i > k) std::swap(i, k);
        auto e = j.find(StrCat(i, ",", k));
        loss += (e != j.end() && e->is_number_integer())
                    ? std::clamp<int64_t>(e->get<int64_t>(), 0, kMaxLoss)
                    : kMaxLoss;
      }
    const int64_t pairs = static_cast<int64_t>(granted.size() * (granted.size() - 1) / 2);
    return static_cast<int>(100 - 100 * loss / (pairs * kMaxLoss));
  }
};

class MetaxSgpu : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;
  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(Mutation m, GenericVendor::Mutate(resources, a));
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, spec_.resources.count));
    if (!count && m.add_limits.empty()) return m;  // container does not use sGPU
    auto check = [&](const char* key, std::initializer_list<const char*> allowed) {
      auto it = a.find(key);
      if (it == a.end()) return;
      for (const char* v : allowed)
        if (it->second == v) return;
      std::string list;
      for (const char* v : allowed) list += StrCat(list.empty() ? "" : "|", v);
      m.denials.push_back(StrCat(key, "=\"", it->second, "\": expected ", list));
    };
    check("metax-tech.com/sgpu-qos-policy", {"best-effort", "fixed-share", "burst-share"});
    check("metax-tech.com/sgpu-app-class", {"online", "offline"});
    return m;
  }
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeMetax(const YAML::Node& section) {
  SectionReader r(section, "metax");
  Spec gpu;
  gpu.name = "metax";
  gpu.common_word = "Metax-GPU";
  gpu.resources = {"metax-tech.com/gpu", "", "", "", ""};
  gpu.keys = {"",
              "",
              "hami.io/metax-gpu-devices-to-allocate",
              "hami.io/metax-gpu-devices-allocated",
              "",
              "",
              "metax-tech.com/use-gpuuuid",
              "metax-tech.com/nouse-gpuuuid"};
  gpu.rules.whole_device_only = true;
  gpu.polarity = ScorePolarity::kTopologyCohesion;
  gpu.registration = Registration::kCapacity;
  gpu.capacity_resource = "metax-tech.com/gpu";
  gpu.capacity_device_memory_mib = 65536;
  gpu.capacity_id_infix = "-metax-";  // upstream: `<node>-metax-<i>`, type Metax-GPU, 1 slot
  gpu.model = "Metax-GPU";
  Spec sgpu;
  sgpu.name = "metax";
  sgpu.common_word = "Metax-SGPU";
  sgpu.resources = {"metax-tech.com/sgpu", "metax-tech.com/vmemory", "", "metax-tech.com/vcore",
                    ""};
  sgpu.keys = {"metax-tech.com/node-gpu-devices",
               "",
               "hami.io/metax-sgpu-devices-to-allocate",
               "hami.io/metax-sgpu-devices-allocated",
               "",
               "",
               "metax-tech.com/use-gpuuuid",
               "metax-tech.com/nouse-gpuuuid"};
  sgpu.registration = Registration::kJson;
  bool enabled = true;
  HAMI_RETURN_IF_ERROR(r.Bool("enabled", &enabled));
  HAMI_RETURN_IF_ERROR(r.String("resourceCountName", &gpu.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceVCountName", &sgpu.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceVMemoryName", &sgpu.resources.memory));
  HAMI_RETURN_IF_ERROR(r.String("resourceVCoreName", &sgpu.resources.cores));
  r.Ignore({"sgpuTopologyAware"});  // upstream key, not read
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  gpu.capacity_resource = gpu.resources.count;  // upstream reads the (renamed) count resource
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<MetaxGpu>(std::move(gpu)));
  out.push_back(std::make_unique<MetaxSgpu>(std::move(sgpu)));
  return out;
}

}  // namespace hami::vendors
