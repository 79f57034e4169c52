// Cambricon MLU (docs/upstream-contract.md#vendors, docs/vendors.md#cambricon): dynamic sMLU.
// Devices come from node capacity as upstream's scheduler builds them: one card per started 100 of
// cambricon.com/mlu.smlu.vcore, id `<node>-cambricon-mlu-<i>`, type MLU, 100 slots, and
// memory = vmemory capacity * 256 MiB * 100 / vcore capacity (vmemory counts 256 MiB units, on the
// node as in a container's limits). A request needs the count resource; cores default to 100 (the
// whole card) also when memory is given. The decision adds the profile the device plugin creates,
// CAMBRICON_DSMLU_PROFILE=<idx>_<cores>_<mem/256> of the pod's first device, the
// CAMBRICON_DSMLU_ASSIGNED=false marker and the lock cambricon.com/dsmlu.lock (RFC3339 time,
// expires after 2 minutes).
#include "vendors/cambricon/cambricon.h"

#include "absl/time/time.h"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace {

constexpr int64_t kMemoryUnitMiB = 256;

class CambriconVendor : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;

  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, spec_.resources.count));
    if (!count) return std::optional<core::DeviceRequest>();  // upstream: no count, no request
    HAMI_ASSIGN_OR_RETURN(auto r, GenericVendor::ParseRequest(resources, a));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, spec_.resources.cores));
    if (r && !cores) r->coresreq = 100;
    return r;
  }
  // Upstream's admission adds nothing for Cambricon (the core default lives in ParseRequest).
  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>& a) const override {
    HAMI_RETURN_IF_ERROR(GenericVendor::Mutate(resources, a).status());
    return Mutation{};
  }

 protected:
  Status AddDecisionExtras(const core::PodAllocation& a, int64_t now_unix,
                           std::map<std::string, std::string>* out) const override {
    for (const auto& c : a.containers) {
      if (c.empty()) continue;
      const core::ContainerDevice& d = c.front();
      (*out)["CAMBRICON_DSMLU_PROFILE"] =
          StrCat(d.index >= 0 ? d.index : 0, "_", d.usedcores, "_", d.usedmem_mib / kMemoryUnitMiB);
      break;
    }
    (*out)["CAMBRICON_DSMLU_ASSIGNED"] = "false";
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
  s.memory_unit_mib = kMemoryUnitMiB;
  s.registration = Registration::kCapacity;
  s.capacity_resource = "cambricon.com/mlu.smlu.vcore";
  s.capacity_per_device = 100;
  s.capacity_device_memory_mib = 24576;
  s.capacity_slots = 100;
  s.capacity_id_infix = "-cambricon-mlu-";
  s.model = "MLU";
  SectionReader r(section, "cambricon");
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  // The node's capacity is read under the (possibly renamed) core resource, as upstream does.
  s.capacity_resource = s.resources.cores;
  return One<CambriconVendor>(std::move(s));
}

}  // namespace hami::vendors
