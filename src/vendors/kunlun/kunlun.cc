// Kunlunxin (docs/upstream-contract.md#node-score-and-choice, #vendors): two vendors.
//  - kunlun: whole XPUs (kunlunxin.com/xpu) from node capacity, 98304 MiB per card, 1/2/4/8 per
//    container; the 8 cards form two NUMA halves (0-3, 4-7): a multi-card request is kept inside
//    one half when it fits in one (4 cards: exactly one half). Score: 100 when the grant is one
//    half (or the whole node), 50 when it spans both. Decision: hami.io/kunlun-allocated only.
//  - XPU (vXPU): memory rounded up to the templates 24576/49152/98304 MiB, cores = mem*100/98304;
//    registration JSON hami.io/node-register-xpu, handshake hami.io/node-handshake-xpu.
#include "vendors/kunlun/kunlun.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

constexpr int kHalf = 4;
constexpr int64_t kCardMiB = 98304;

class KunlunXpu : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;
  int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                const NodeView&) const override {
    if (granted.empty()) return 0;
    if (granted.size() >= 2 * kHalf) return 100;
    const int half = devices[granted[0]].index / kHalf;
    for (int g : granted)
      if (devices[g].index / kHalf != half) return 50;
    return 100;
  }

 protected:
  std::vector<int> ChooseSet(const core::DeviceRequest& r,
                             std::span<const core::DeviceInfo> devices,
                             const std::vector<int>& candidates) const override {
    if (static_cast<int>(candidates.size()) < r.nums) return {};
    if (r.nums == 1 || r.nums >= 2 * kHalf) return GenericVendor::ChooseSet(r, devices, candidates);
    // Prefer one half: the half with the fewest free cards that still holds the request (binpack).
    std::map<int, std::vector<int>> halves;  // half -> its candidates, in index order
    for (int c : candidates) halves[devices[c].index / kHalf].push_back(c);
    std::vector<int> best;
    size_t best_free = SIZE_MAX;
    for (const auto& [half, in] : halves)
      if (static_cast<int>(in.size()) >= r.nums && in.size() < best_free) {
        best_free = in.size();
        best.assign(in.begin(), in.begin() + r.nums);
      }
    if (!best.empty() || r.nums == kHalf) return best;  // 4 cards must be one half
    return GenericVendor::ChooseSet(r, devices, candidates);
  }
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeKunlun(const YAML::Node& section) {
  SectionReader r(section, "kunlun");
  Spec xpu;
  xpu.name = "kunlun";
  xpu.common_word = "kunlun";
  xpu.resources = {"kunlunxin.com/xpu", "", "", "", ""};
  xpu.keys = {"",
              "",
              "",
              "hami.io/kunlun-allocated",
              "",
              "",
              "baidu.com/use-gpuuuid",
              "baidu.com/nouse-gpuuuid"};
  xpu.rules.whole_device_only = true;
  xpu.rules.allowed_counts = {1, 2, 4, 8};
  xpu.rules.group_rules = true;
  xpu.polarity = ScorePolarity::kTopologyCohesion;
  xpu.registration = Registration::kCapacity;
  xpu.capacity_resource = "kunlunxin.com/xpu";
  xpu.capacity_device_memory_mib = kCardMiB;
  xpu.model = "P800";
  Spec vxpu;
  vxpu.name = "kunlun";
  vxpu.common_word = "XPU";
  vxpu.resources = {"kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory", "", "", ""};
  vxpu.keys = {"hami.io/node-register-xpu",
               "hami.io/node-handshake-xpu",
               "hami.io/xpu-devices-to-allocate",
               "hami.io/xpu-devices-allocated",
               "",
               "",
               "hami.io/use-xpu-uuid",
               "hami.io/no-use-xpu-uuid"};
  for (int64_t m : {24576, 49152, 98304})
    vxpu.rules.templates.push_back(
        {StrCat(m / 1024, "G"), m, static_cast<int>(m * 100 / kCardMiB)});
  vxpu.rules.max_devices_per_container = 1;
  vxpu.registration = Registration::kJson;
  bool enabled = true;
  HAMI_RETURN_IF_ERROR(r.Bool("enabled", &enabled));
  HAMI_RETURN_IF_ERROR(r.String("resourceCountName", &xpu.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceVCountName", &vxpu.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceVMemoryName", &vxpu.resources.memory));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<KunlunXpu>(std::move(xpu)));
  out.push_back(std::make_unique<GenericVendor>(std::move(vxpu)));
  return out;
}

}  // namespace hami::vendors
