// Biren (docs/vendors.md#biren), as upstream's scheduler models it: devices registered by the Biren
// device plugin as the JSON DeviceInfo array in hami.io/node-biren-register (handshake
// hami.io/node-handshake-biren); a container asks birentech.com/gpu: n and takes one time slice on
// each of n devices (no memory or cores are booked); decisions hami.io/Biren-devices-to-allocate
// and hami.io/Biren-devices-allocated; uuid selectors birentech.com/use-gpuuuid and
// birentech.com/nouse-gpuuuid. The `mutex` policy is the scheduler's (its policy veto), as for
// every vendor.
#include "vendors/biren/biren.h"

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeBiren(const YAML::Node& section) {
  Spec s;
  s.name = "biren";
  s.common_word = "Biren";
  s.resources = {"birentech.com/gpu", "", "", "", ""};
  s.keys = {"hami.io/node-biren-register",
            "hami.io/node-handshake-biren",
            "hami.io/Biren-devices-to-allocate",
            "hami.io/Biren-devices-allocated",
            "",
            "",
            "birentech.com/use-gpuuuid",
            "birentech.com/nouse-gpuuuid"};
  s.rules.slots_only = true;
  s.registration = Registration::kJson;
  return MakeGeneric(std::move(s), section, "biren");
}

}  // namespace hami::vendors
