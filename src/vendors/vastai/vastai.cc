// Vastai (docs/vendors.md#vastai), as upstream's scheduler models it: devices registered by the
// Vastai device plugin as the JSON DeviceInfo array in hami.io/node-va-register (handshake
// hami.io/node-handshake-va); a container asks vastaitech.com/va: n and takes one time slice on
// each of n devices (no memory or cores are booked: upstream counts tasks per device only);
// decisions hami.io/Vastai-devices-to-allocate and hami.io/Vastai-devices-allocated; uuid selectors
// vastaitech.com/use-gpuuuid and vastaitech.com/nouse-gpuuuid. Upstream's die mode (dies of one
// card, grouped by the card id in the registration's customInfo) is not modelled: docs/vendors.md.
#include "vendors/vastai/vastai.h"

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {

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
  s.registration = Registration::kJson;
  return MakeGeneric(std::move(s), section, "vastai");
}

}  // namespace hami::vendors
