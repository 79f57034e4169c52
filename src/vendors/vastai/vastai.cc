// Vastai (docs/vendors.md#vastai), as upstream's scheduler models it: devices registered by the
// Vastai device plugin as the JSON DeviceInfo array in hami.io/node-va-register (handshake
// hami.io/node-handshake-va); a container asks vastaitech.com/va: n and takes one time slice on
// each of n devices (no memory or cores are booked: upstream counts tasks per device only);
// decisions hami.io/Vastai-devices-to-allocate and hami.io/Vastai-devices-allocated; uuid selectors
// vastaitech.com/use-gpuuuid and vastaitech.com/nouse-gpuuuid.
//
// Die mode: a card the device plugin registers die by die carries
// `"custominfo":{"DeviceStrategy":"die","AIC":"<card id>"}` on each die. Its dies keep their card
// in DeviceInfo::card, so that (as upstream does)
//  - a request for several dies takes them from as few cards as it can: the cards with the most
//    fitting dies first, each card's dies from the last registered (upstream walks the devices from
//    the end); one die is the last registered one that fits;
//  - the node score of a grant is the share of its dies on its most used card (0..100);
//  - under the `mutex` policy a card with a die in use is busy as a whole (the scheduler's policy
//    veto reads DeviceInfo::card).
#include "vendors/vastai/vastai.h"

#include <algorithm>
#include <map>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

constexpr char kCustomInfo[] = "custominfo";
constexpr char kStrategy[] = "DeviceStrategy";
constexpr char kDieStrategy[] = "die";
constexpr char kCardId[] = "AIC";

bool EqualFold(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The card of one registered device from its custominfo ("" when it is not a die). Go's decoder
// matches the custominfo key case-insensitively; the keys inside it are map keys, exact.
StatusOr<std::string> DieCard(const nlohmann::json& entry, std::string_view where) {
  if (!entry.is_object()) return std::string();
  for (const auto& [key, info] : entry.items()) {
    if (!EqualFold(key, kCustomInfo) || info.is_null()) continue;
    if (!info.is_object())
      return InvalidArgument(where, key, ": expected a JSON object, got ", info.type_name());
    auto strategy = info.find(kStrategy);
    if (strategy == info.end() || strategy->is_null()) return std::string();
    if (!strategy->is_string())
      return InvalidArgument(where, key, ".", kStrategy, ": expected a string, got ",
                             strategy->type_name());
    if (strategy->get<std::string>() != kDieStrategy) return std::string();
    auto card = info.find(kCardId);
    if (card == info.end() || !card->is_string() || card->get<std::string>().empty())
      return InvalidArgument(where, key, ".", kCardId,
                             ": a die needs the id of its card (a non-empty string)");
    return card->get<std::string>();
  }
  return std::string();
}

class VastaiVendor : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;

  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(std::vector<core::DeviceInfo> devs, GenericVendor::DecodeNode(node));
    if (devs.empty()) return devs;
    const std::string& key = spec_.keys.node_register;
    // The generic decoder accepted the text: a JSON array with one entry per device, in order, or
    // the legacy CSV, which carries no custominfo.
    const auto arr = nlohmann::json::parse(node.annotations.at(key), nullptr, false);
    if (!arr.is_array()) return devs;
    if (arr.size() != devs.size())
      return InvalidArgument(key, ": node devices: ", arr.size(), " entries for ", devs.size(),
                             " devices");
    for (size_t i = 0; i < devs.size(); ++i) {
      HAMI_ASSIGN_OR_RETURN(devs[i].card, DieCard(arr[i], StrCat(key, ": node devices[", i, "] (",
                                                                 devs[i].uuid, "): ")));
    }
    return devs;
  }

  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override {
    HAMI_RETURN_IF_ERROR(GenericVendor::EncodeNode(devices, node));
    if (std::none_of(devices.begin(), devices.end(),
                     [](const core::DeviceInfo& d) { return !d.card.empty(); }))
      return OkStatus();
    std::string& text = node->annotations[spec_.keys.node_register];
    // Keep the generic encoder's key order; custominfo comes last, as in upstream's DeviceInfo.
    auto arr = nlohmann::ordered_json::parse(text, nullptr, false);
    if (!arr.is_array() || arr.size() != devices.size())
      return Internal("vastai: the generic registration is not one JSON entry per device");
    for (size_t i = 0; i < devices.size(); ++i)
      if (!devices[i].card.empty())
        arr[i][kCustomInfo] = {{kCardId, devices[i].card}, {kStrategy, kDieStrategy}};
    text = arr.dump();
    return OkStatus();
  }

  // Upstream's die-mode score: the share of the grant's dies on its most used card; 0 when a
  // granted device is not a die.
  int ScoreNode(std::span<const core::DeviceInfo> devices, std::span<const int> granted,
                const NodeView&) const override {
    std::map<std::string, int> per_card;
    for (int g : granted) {
      if (devices[g].card.empty()) return 0;
      ++per_card[devices[g].card];
    }
    int most = 0;
    for (const auto& [card, n] : per_card) most = std::max(most, n);
    const int total = static_cast<int>(granted.size());
    return total == 0 ? 0 : 100 * most / total;
  }

 protected:
  std::vector<int> ChooseSet(const core::DeviceRequest& r,
                             std::span<const core::DeviceInfo> devices,
                             const std::vector<int>& candidates) const override {
    if (std::none_of(candidates.begin(), candidates.end(),
                     [&](int c) { return !devices[c].card.empty(); }))
      return GenericVendor::ChooseSet(r, devices, candidates);
    if (static_cast<int>(candidates.size()) < r.nums) return {};
    // From the last registered die, as upstream walks them.
    const std::vector<int> order(candidates.rbegin(), candidates.rend());
    if (r.nums == 1) return {order.front()};
    // Cards in the order their first die comes, then the fullest first (stable: ties keep it).
    std::vector<std::vector<int>> cards;
    std::vector<const std::string*> ids;
    for (int c : order) {
      const std::string& id = devices[c].card.empty() ? devices[c].uuid : devices[c].card;
      auto it =
          std::find_if(ids.begin(), ids.end(), [&](const std::string* s) { return *s == id; });
      if (it == ids.end()) {
        ids.push_back(&id);
        cards.push_back({c});
      } else {
        cards[it - ids.begin()].push_back(c);
      }
    }
    std::stable_sort(cards.begin(), cards.end(),
                     [](const auto& a, const auto& b) { return a.size() > b.size(); });
    std::vector<int> out;
    for (const auto& card : cards)
      for (int c : card)
        if (static_cast<int>(out.size()) < r.nums) out.push_back(c);
    return out;
  }
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeVastai(const YAML::Node& section) {
  Spec s;
  s.name = "vastai";
  s.common_word = "Vastai";
  s.resources = {"vastaitech.com/va", "", "", "", ""};
  s.keys = {"hami.io/node-va-register",
            "hami.io/node-handshake-va",
            "hami.io/Vastai-devices-to-allocate",
            "hami.io/Vastai-devices-allocated",
            "",
            "",
            "vastaitech.com/use-gpuuuid",
            "vastaitech.com/nouse-gpuuuid"};
  s.rules.slots_only = true;
  s.polarity = ScorePolarity::kTopologyCohesion;  // die mode: dies of one card score higher
  s.registration = Registration::kJson;
  SectionReader r(section, "vastai");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  return One<VastaiVendor>(std::move(s));
}

}  // namespace hami::vendors
