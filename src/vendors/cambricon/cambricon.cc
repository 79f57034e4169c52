// Cambricon MLU (docs/upstream-contract.md#vendors): dynamic sMLU. Devices come from node capacity
// (cambricon.com/mlu.smlu.vcore, 100 per card; memory from the vmemory capacity). The decision
// adds the profile the device plugin creates, CAMBRICON_DSMLU_PROFILE=<idx>_<cores>_<mem/256>, the
// CAMBRICON_DSMLU_ASSIGHED=false marker (upstream's spelling) and the lock
// cambricon.com/dsmlu.lock (RFC3339 time, expires after 2 minutes).
#include "vendors/cambricon/cambricon.h"

#include "absl/time/time.h"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

class CambriconVendor : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;

 protected:
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t now_unix,
                           std::map<std::string, std::string>* out) const override {
    std::string profile;
    for (const auto& c : a.containers)
      for (const auto& d : c) {
        const int idx = d.index >= 0 ? d.index : 0;
        profile +=
            StrCat(profile.empty() ? "" : ",", idx, "_", d.usedcores, "_", d.usedmem_mib / 256);
      }
    (*out)["CAMBRICON_DSMLU_PROFILE"] = profile;
    (*out)["CAMBRICON_DSMLU_ASSIGHED"] = "false";
    (*out)["cambricon.com/dsmlu.lock"] = absl::FormatTime(
        "%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(now_unix), absl::UTCTimeZone());
    return OkStatus();
  }
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeCambricon(const YAML::Node& section) {
  Spec s;
  s.name = "cambricon";
  s.common_word = "MLU";
  s.resources = {"cambricon.com/vmlu", "cambricon.com/mlu.smlu.vmemory", "",
                 "cambricon.com/mlu.smlu.vcore", ""};
  s.keys = {"",
            "",
            "hami.io/cambricon-mlu-devices-to-allocate",
            "hami.io/cambricon-mlu-devices-allocated",
            "cambricon.com/use-mlutype",
            "cambricon.com/nouse-mlutype",
            "cambricon.com/use-gpuuuid",
            "cambricon.com/nouse-gpuuuid"};
  s.registration = Registration::kCapacity;
  s.capacity_resource = "cambricon.com/mlu.smlu.vcore";
  s.capacity_per_device = 100;
  s.capacity_device_memory_mib = 24576;
  s.capacity_slots = 100;
  s.model = "MLU370";
  SectionReader r(section, "cambricon");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  return One<CambriconVendor>(std::move(s));
}

}  // namespace hami::vendors
