// Hygon DCU (docs/upstream-contract.md#vendors): memory and core slicing (vDCU); devices registered
// by the DCU device plugin as legacy CSV in hami.io/node-dcu-register. `memoryFactor` (upstream's
// key, default 1) is the MiB one unit of hygon.com/dcumem stands for.
#include "vendors/hygon/hygon.h"

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeHygon(const YAML::Node& section) {
  Spec s;
  s.name = "hygon";
  s.common_word = "DCU";
  s.resources = {"hygon.com/dcunum", "hygon.com/dcumem", "", "hygon.com/dcucores", ""};
  s.keys = {"hami.io/node-dcu-register",       "hami.io/node-handshake-dcu",
            "hami.io/dcu-devices-to-allocate", "hami.io/dcu-devices-allocated",
            "hygon.com/use-dcutype",           "hygon.com/nouse-dcutype",
            "hygon.com/use-gpuuuid",           "hygon.com/nouse-gpuuuid"};
  s.registration = Registration::kCsv;
  s.refuse_cores_above_whole = true;  // upstream's Hygon admission range check
  SectionReader r(section, "hygon");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  HAMI_RETURN_IF_ERROR(r.Int("memoryFactor", &s.memory_unit_mib));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  if (s.memory_unit_mib < 1 || s.memory_unit_mib > kMaxMemoryUnitMib)
    return InvalidArgument(
        StrCat("hygon.memoryFactor: ", s.memory_unit_mib, " must be in 1..", kMaxMemoryUnitMib));
  return One<GenericVendor>(std::move(s));
}

}  // namespace hami::vendors
