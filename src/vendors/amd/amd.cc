// AMD (docs/upstream-contract.md#vendors): memory limit plus CU masking; devices registered as JSON
// in hami.io/node-amd-register. The handshake key follows the hami.io/node-handshake-<x> pattern
// (constructed: upstream's published values do not include AMD's).
#include "vendors/amd/amd.h"

#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeAmd(const YAML::Node& section) {
  Spec s;
  s.name = "amd";
  s.common_word = "AMD";
  s.resources = {"amd.com/gpu", "amd.com/gpumem", "", "amd.com/gpucores", ""};
  s.keys = {"hami.io/node-amd-register",
            "hami.io/node-handshake-amd",
            "hami.io/amd-devices-to-allocate",
            "hami.io/amd-devices-allocated",
            "amd.com/use-gputype",
            "amd.com/nouse-gputype",
            "amd.com/use-gpu-uuid",
            "amd.com/nouse-gpu-uuid"};
  s.registration = Registration::kJson;
  return MakeGeneric(std::move(s), section, "amd");
}

}  // namespace hami::vendors
