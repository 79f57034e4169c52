// Kunlunxin (docs/upstream-contract.md#node-score-and-choice, docs/vendors.md#kunlunxin): two
// vendors.
//  - kunlun: whole XPUs (kunlunxin.com/xpu) from node capacity, `<node>-kunlun-<i>`, 98304 MiB per
//    card, 1/2/4/8 per container; the 8 cards form two halves (0-3, 4-7; NUMA 0 and 1). The set is
//    upstream's graph choice: a request that fits in one half goes to the half whose free count
//    comes first in the order count..4 (for one card 1, 3, 2, 4: the busier half), taking its
//    lowest free cards; otherwise 2 cards take a cross pair (0-4, 1-5, 2-6, 3-7) and 4 cards one of
//    the cross groups 0-1-4-5, 2-3-6-7, 0-2-4-6, 1-3-5-7, 0-3-4-7, 1-2-5-6 (with 6 free, one that
//    leaves a connected pair). Score: 100 when the grant is one half (or the whole node), 50 when
//    it spans both. Decision: hami.io/kunlun-allocated and BAIDU_COM_DEVICE_IDX (the indices of the
//    last container with devices), both read by the Kunlunxin device plugin.
//  - XPU (vXPU): memory rounded up to the templates 24576/49152/98304 MiB, cores = mem*100/98304;
//    registration JSON hami.io/node-register-xpu, handshake hami.io/node-handshake-xpu; the uuid
//    selectors are hami.io/{use,no-use}-xpu-uuid and the legacy baidu.com/{use,nouse}-gpuuuid.
#include "vendors/kunlun/kunlun.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>

#include "core/text_util.h"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

constexpr int kHalf = 4;
constexpr int64_t kCardMiB = 98304;
constexpr int kCrossPairs[][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
constexpr int kInHalfPairs[][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3},
                                   {4, 5}, {4, 6}, {4, 7}, {5, 6}, {5, 7}, {6, 7}};
constexpr std::array<int, 4> kCrossGroups[] = {{0, 1, 4, 5}, {2, 3, 6, 7}, {0, 2, 4, 6},
                                               {1, 3, 5, 7}, {0, 3, 4, 7}, {1, 2, 5, 6}};

class KunlunXpu : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(auto devs, GenericVendor::DecodeNode(node));
    for (auto& d : devs) d.numa = d.index >= static_cast<int>(devs.size()) / 2 ? 1 : 0;
    return devs;
  }
  int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                const NodeView&) const override {
    if (granted.empty()) return 0;
    if (granted.size() >= 2 * static_cast<size_t>(kHalf)) return 100;
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
    std::map<int, int> by_index;  // free card index -> its position in `devices`
    for (int c : candidates) by_index.emplace(devices[c].index, c);
    std::vector<int> half[2];  // free positions of each half, lowest index first
    for (const auto& [index, pos] : by_index)
      if (index >= 0 && index < 2 * kHalf) half[index / kHalf].push_back(pos);
    auto positions = [&](std::initializer_list<int> idx) {
      std::vector<int> out;
      for (int i : idx) out.push_back(by_index.at(i));
      return out;
    };
    const int n = r.nums;
    if (n == 2 * kHalf) return GenericVendor::ChooseSet(r, devices, candidates);
    if (n != 1 && n != 2 && n != kHalf) return {};
    const int nfree[2] = {static_cast<int>(half[0].size()), static_cast<int>(half[1].size())};
    if (nfree[0] >= n || nfree[1] >= n) {
      static constexpr int kOddOrder[] = {1, 3, 2, 4};
      for (int slots = n; slots <= kHalf; ++slots) {
        const int want = n % 2 == 1 ? kOddOrder[slots - 1] : slots;
        for (int h : {0, 1})
          if (nfree[h] == want) return std::vector<int>(half[h].begin(), half[h].begin() + n);
      }
    }
    auto has = [&](int i) { return by_index.count(i) > 0; };
    if (n == 2) {
      for (const auto& [index, pos] : by_index)
        for (const auto& p : kCrossPairs)
          if ((p[0] == index && has(p[1])) || (p[1] == index && has(p[0])))
            return positions({index, p[0] == index ? p[1] : p[0]});
      return {};
    }
    if (n == kHalf) {
      const size_t free = by_index.size();
      std::vector<int> last;
      for (const auto& g : kCrossGroups) {
        if (!std::all_of(g.begin(), g.end(), has)) continue;
        last = positions({g[0], g[1], g[2], g[3]});
        if (free == 4 || free == 5) return last;
        if (free != 6) continue;
        std::vector<int> rest;  // the two free cards the group leaves
        for (const auto& [index, pos] : by_index)
          if (std::find(g.begin(), g.end(), index) == g.end()) rest.push_back(index);
        auto connected = [&](const int(&p)[2]) {
          return (p[0] == rest[0] && p[1] == rest[1]) || (p[0] == rest[1] && p[1] == rest[0]);
        };
        if (std::any_of(std::begin(kCrossPairs), std::end(kCrossPairs), connected) ||
            std::any_of(std::begin(kInHalfPairs), std::end(kInHalfPairs), connected))
          return last;
      }
      return free == 6 ? last : std::vector<int>{};
    }
    return {};
  }
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t,
                           std::map<std::string, std::string>* out) const override {
    const std::string idx = LastContainerIndices(a);
    if (!idx.empty()) (*out)["BAIDU_COM_DEVICE_IDX"] = idx;
    return OkStatus();
  }
};

// vXPU: the uuid selectors also come from the legacy Kunlun annotations upstream still reads.
class KunlunVxpu : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;
  StatusOr<core::DeviceSelectors> ParseSelectors(
      const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(auto s, GenericVendor::ParseSelectors(a));
    auto add = [&](const char* key, std::vector<std::string>* to) {
      auto it = a.find(key);
      if (it == a.end()) return;
      for (auto& u : core::text::SplitList(it->second))
        if (std::find(to->begin(), to->end(), u) == to->end()) to->push_back(u);
    };
    add("baidu.com/use-gpuuuid", &s.use_uuids);
    add("baidu.com/nouse-gpuuuid", &s.nouse_uuids);
    return s;
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
  xpu.capacity_id_infix = "-kunlun-";  // upstream: `<node>-kunlun-<i>`, type kunlun
  xpu.model = "kunlun";
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
  xpu.capacity_resource = xpu.resources.count;  // upstream reads the (renamed) count resource
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<KunlunXpu>(std::move(xpu)));
  out.push_back(std::make_unique<KunlunVxpu>(std::move(vxpu)));
  return out;
}

}  // namespace hami::vendors
