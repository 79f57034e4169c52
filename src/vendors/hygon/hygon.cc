// Hygon DCU (docs/upstream-contract.md#vendors): memory and core slicing (vDCU); devices registered
// by the DCU device plugin as legacy CSV in hami.io/node-dcu-register.
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
  return MakeGeneric(std::move(s), section, "hygon", {"memoryFactor"});  // upstream key, not read
}

}  // namespace hami::vendors
