// Iluvatar (docs/upstream-contract.md#vendors): one vendor per chip, resource names per chip
// (iluvatar.ai/<chip>-vgpu, iluvatar.ai/<chip>.vMem in 256 MiB units, iluvatar.ai/<chip>.vCore),
// devices registered as legacy CSV in hami.io/node-<chip>-register; decisions and selectors keyed
// by CommonWord (= chip name by default).
#include "vendors/iluvatar/iluvatar.h"

#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

Spec ChipSpec(const std::string& chip, const std::string& cw) {
  Spec s;
  s.name = "iluvatar";
  s.common_word = cw;
  s.resources = {StrCat("iluvatar.ai/", chip, "-vgpu"), StrCat("iluvatar.ai/", chip, ".vMem"), "",
                 StrCat("iluvatar.ai/", chip, ".vCore"), ""};
  s.keys = {StrCat("hami.io/node-", chip, "-register"),
            StrCat("hami.io/node-handshake-", chip),
            StrCat("hami.io/", cw, "-devices-to-allocate"),
            StrCat("hami.io/", cw, "-devices-allocated"),
            "",
            "",
            StrCat("hami.io/use-", cw, "-uuid"),
            StrCat("hami.io/no-use-", cw, "-uuid")};
  s.memory_unit_mib = 256;
  s.registration = Registration::kCsv;
  return s;
}

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeIluvatar(const YAML::Node& section) {
  std::vector<std::unique_ptr<Vendor>> out;
  if (!section.IsDefined() || section.IsNull()) {
    for (const char* chip : {"MR-V100", "MR-V50", "BI-V150", "BI-V100"})
      out.push_back(std::make_unique<GenericVendor>(ChipSpec(chip, chip)));
    return out;
  }
  if (!section.IsSequence()) return InvalidArgument("iluvatars: expected a list of chips");
  for (size_t i = 0; i < section.size(); ++i) {
    SectionReader r(section[i], StrCat("iluvatars[", i, "]"));
    std::string chip, cw;
    HAMI_RETURN_IF_ERROR(r.String("chipName", &chip));
    if (chip.empty()) return InvalidArgument(StrCat(r.where(), ".chipName: required"));
    cw = chip;
    HAMI_RETURN_IF_ERROR(r.String("commonWord", &cw));
    Spec s = ChipSpec(chip, cw);
    HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
    HAMI_RETURN_IF_ERROR(r.CheckKeys());
    out.push_back(std::make_unique<GenericVendor>(std::move(s)));
  }
  return out;
}

}  // namespace hami::vendors
