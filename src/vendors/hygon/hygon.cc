// Hygon (docs/upstream-contract.md#vendors): memory and core slicing; devices registered by the
// Hygon device plugin as legacy CSV. Upstream renamed DCU to HCU in its v2.11 line (PR #2969:
// hygon.com/hcu*, hami.io/node-hcu-register, hami.io/hcu-devices-*, Type HCU); both are served
// here, as two backends of the one `hygon:` section, so existing DCU pods and nodes keep working
// next to nodes running the HCU plugin. `memoryFactor` (upstream's key, default 1) is the MiB one
// unit of the memory resource stands for, for both.
#include "vendors/hygon/hygon.h"

#include <string_view>

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

// One generation's names: `word` is "dcu" or "hcu", `type` its Type keyword.
Spec HygonSpec(std::string_view word, std::string_view type) {
  Spec s;
  s.name = "hygon";
  s.common_word = std::string(type);
  s.resources = {StrCat("hygon.com/", word, "num"), StrCat("hygon.com/", word, "mem"), "",
                 StrCat("hygon.com/", word, "cores"), ""};
  s.keys = {StrCat("hami.io/node-", word, "-register"),
            StrCat("hami.io/node-handshake-", word),
            StrCat("hami.io/", word, "-devices-to-allocate"),
            StrCat("hami.io/", word, "-devices-allocated"),
            StrCat("hygon.com/use-", word, "type"),
            StrCat("hygon.com/nouse-", word, "type"),
            "hygon.com/use-gpuuuid",
            "hygon.com/nouse-gpuuuid"};
  s.registration = Registration::kCsv;
  s.refuse_cores_above_whole = true;  // upstream's Hygon admission range check
  return s;
}

// The Hygon plugins register their devices' mode as "hami" (the plugin's strategy=hami, upstream
// reads any word there): it is the hami-core soft split.
class HygonVendor final : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    auto it = node.annotations.find(spec_.keys.node_register);
    if (it == node.annotations.end() || it->second.find(",hami:") == std::string::npos)
      return GenericVendor::DecodeNode(node);
    NodeView copy = node;
    std::string& text = copy.annotations[it->first];
    for (size_t at = text.find(",hami:"); at != std::string::npos; at = text.find(",hami:", at))
      text.replace(at, 6, ",hami-core:");
    return GenericVendor::DecodeNode(copy);
  }
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeHygon(const YAML::Node& section) {
  Spec dcu = HygonSpec("dcu", "DCU"), hcu = HygonSpec("hcu", "HCU");
  SectionReader r(section, "hygon");
  // The section's resource names rename the generation they name: a v2.11 file names hygon.com/hcu*
  // (its defaults), an older one hygon.com/dcu* or names of its own (which stay DCU's, as before).
  ResourceNames names = dcu.resources;
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &names));
  const bool names_hcu = names.count.rfind("hygon.com/hcu", 0) == 0;
  (names_hcu ? hcu : dcu).resources = names;
  HAMI_RETURN_IF_ERROR(r.Int("memoryFactor", &dcu.memory_unit_mib));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  if (dcu.memory_unit_mib < 1 || dcu.memory_unit_mib > kMaxMemoryUnitMib)
    return InvalidArgument(
        StrCat("hygon.memoryFactor: ", dcu.memory_unit_mib, " must be in 1..", kMaxMemoryUnitMib));
  hcu.memory_unit_mib = dcu.memory_unit_mib;
  std::vector<std::unique_ptr<Vendor>> out;
  out.push_back(std::make_unique<HygonVendor>(std::move(dcu)));
  out.push_back(std::make_unique<HygonVendor>(std::move(hcu)));
  return out;
}

}  // namespace hami::vendors
