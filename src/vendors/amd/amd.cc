// AMD (docs/upstream-contract.md#vendors): memory limit plus CU masking; devices registered as JSON
// in hami.io/node-amd-register. The handshake key follows the hami.io/node-handshake-<x> pattern
// (constructed: upstream's published values do not include AMD's).
//
// Upstream's v2.11 line (pkg/device/amd): a device's devcore is its number of compute units and
// amd.com/gpucores a percentage of them (1..100; omitted = all of them); amd.com/gpumem-percentage
// a share of its memory (0..100). Out-of-range values are refused, not clamped. On RDNA the CU
// mask works per WGP (a pair of CUs): the AMD device plugin publishes customInfo.cuPerWGP and hands
// out whole WGPs, so the compute units booked are rounded up to whole WGPs (never above the card).
#include "vendors/amd/amd.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "common/mutex.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"

namespace hami::vendors {
namespace {

// A member of a Go-decoded registration entry: struct fields match keys case-insensitively.
const nlohmann::json* Field(const nlohmann::json& entry, std::string_view lower_name) {
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (absl::AsciiStrToLower(it.key()) == lower_name) return &it.value();
  return nullptr;
}

// Upstream's cuPerWGP(customInfo): a whole number in 2..INT32_MAX, else no rounding (CDNA
// publishes 1; a fractional, larger or non-numeric value is ignored). customInfo is a Go map, so
// the key is exact.
int CuPerWgp(const nlohmann::json& entry) {
  const nlohmann::json* info = Field(entry, "custominfo");
  if (info == nullptr || !info->is_object()) return 1;
  auto it = info->find("cuPerWGP");
  if (it == info->end() || !it->is_number()) return 1;
  const double v = it->get<double>();
  if (!(v > 1) || v > std::numeric_limits<int32_t>::max() || v != std::floor(v)) return 1;
  return static_cast<int>(v);
}

class AmdVendor : public GenericVendor {
 public:
  using GenericVendor::GenericVendor;

  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>& a) const override {
    HAMI_ASSIGN_OR_RETURN(Mutation m, GenericVendor::Mutate(resources, a));
    if (Status s = CheckRanges(resources); !s.ok()) m.denials.emplace_back(s.message());
    return m;
  }
  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>& a) const override {
    HAMI_RETURN_IF_ERROR(CheckRanges(resources));
    HAMI_ASSIGN_OR_RETURN(auto r, GenericVendor::ParseRequest(resources, a));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, spec_.resources.cores));
    if (r && !cores) r->coresreq = 100;  // upstream: an omitted core limit means all the CUs
    return r;
  }
  // Upstream's Fit: memory is the request, else the percentage of the card (at least 1 MiB), else
  // the whole card; compute units are the percentage of the card's CUs (at least one), or all of
  // them for a whole-card memory request without a percentage.
  core::ContainerDevice Grant(const core::DeviceRequest& r,
                              const core::DeviceInfo& d) const override {
    core::ContainerDevice g = GenericVendor::Grant(r, d);
    if (r.memreq_mib <= 0 && r.mem_percentage > 0 && d.devmem_mib > 0)
      g.usedmem_mib = std::max<int64_t>(d.devmem_mib * r.mem_percentage / 100, 1);
    if (g.usedmem_mib <= 0) g.usedmem_mib = d.devmem_mib;
    if (r.coresreq > 0) {
      const int64_t cus = std::max(d.devcore * r.coresreq / 100, 1);
      const int64_t unit = CuPerWgpOf(d.uuid);
      g.usedcores = static_cast<int>(std::min<int64_t>((cus + unit - 1) / unit * unit, d.devcore));
    } else
      g.usedcores = d.devmem_mib > 0 && g.usedmem_mib >= d.devmem_mib ? d.devcore : 0;
    return g;
  }
  // Keeps each device's cuPerWGP from the registration (core::DeviceInfo has no customInfo).
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(auto devs, GenericVendor::DecodeNode(node));
    auto it = node.annotations.find(spec_.keys.node_register);
    if (devs.empty() || it == node.annotations.end()) return devs;
    const auto j = nlohmann::json::parse(it->second, nullptr, false);
    MutexLock l(mu_);
    for (const auto& d : devs) cu_per_wgp_.erase(d.uuid);
    if (!j.is_array()) return devs;  // CSV: no customInfo
    for (const auto& e : j) {
      const nlohmann::json* id = e.is_object() ? Field(e, "id") : nullptr;
      if (id == nullptr || !id->is_string()) continue;
      if (const int unit = CuPerWgp(e); unit > 1) cu_per_wgp_[id->get<std::string>()] = unit;
    }
    return devs;
  }

 private:
  int64_t CuPerWgpOf(const std::string& uuid) const {
    MutexLock l(mu_);
    auto it = cu_per_wgp_.find(uuid);
    return it == cu_per_wgp_.end() ? 1 : it->second;
  }
  Status CheckRanges(const nlohmann::json& resources) const {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto pct, ReadResource(resources, n.memory_percentage));
    if (pct && (*pct < 0 || *pct > 100))
      return InvalidArgument(
          StrCat(n.memory_percentage, "=", *pct, ": must be an integer between 0 and 100"));
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
    if (count && cores && (*cores < 1 || *cores > 100))
      return InvalidArgument(
          StrCat(n.cores, "=", *cores, ": must be an integer percentage between 1 and 100"));
    return OkStatus();
  }

  mutable Mutex mu_;
  // Device UUID -> CUs per WGP where above 1, from the latest registration that listed it.
  mutable std::map<std::string, int> cu_per_wgp_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeAmd(const YAML::Node& section) {
  Spec s;
  s.name = "amd";
  s.common_word = "AMD";
  s.resources = {"amd.com/gpu", "amd.com/gpumem", "amd.com/gpumem-percentage", "amd.com/gpucores",
                 ""};
  s.keys = {"hami.io/node-amd-register",
            "hami.io/node-handshake-amd",
            "hami.io/amd-devices-to-allocate",
            "hami.io/amd-devices-allocated",
            "amd.com/use-gputype",
            "amd.com/nouse-gputype",
            "amd.com/use-gpu-uuid",
            "amd.com/nouse-gpu-uuid"};
  s.registration = Registration::kJson;
  SectionReader r(section, "amd");
  // Upstream v2.11's keys not served yet: the pod's runtimeClassName and the priority resource
  // (AMD_TASK_PRIORITY) are not set here (docs/migration.md).
  r.Ignore({"runtimeClassName", "resourcePriorityName"});
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &s.resources));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  return One<AmdVendor>(std::move(s));
}

}  // namespace hami::vendors
