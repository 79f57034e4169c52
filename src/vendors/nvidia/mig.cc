#include "vendors/nvidia/mig.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/annotations.h"
#include "core/mig.h"
#include "core/text_util.h"

namespace hami::vendors::nvidia {

Status AddMigDecision(const core::PodAllocation& allocation,
                      std::map<std::string, std::string>* annotations) {
  const std::vector<core::MigAllocation> mig = core::MigAllocationsOf(allocation);
  if (!mig.empty()) (*annotations)[core::kMigAllocations] = core::EncodeMigAllocations(mig);
  return OkStatus();
}

Status AttachMigDecision(const std::map<std::string, std::string>& annotations,
                         core::PodAllocation* allocation) {
  const auto it = annotations.find(core::kMigAllocations);
  if (it == annotations.end()) return OkStatus();
  HAMI_ASSIGN_OR_RETURN(std::vector<core::MigAllocation> entries,
                        core::DecodeMigAllocations(it->second));
  core::AttachMigAllocations(entries, allocation);
  return OkStatus();
}

const std::vector<MigAllowlistEntry>& DefaultMigProfileAllowlist() {
  static const std::vector<MigAllowlistEntry> kList = {
      {{"A30"}, {"1g.6gb", "2g.12gb", "4g.24gb"}},
      {{"A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"},
       {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"}},
      {{"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"},
       {"1g.10gb", "2g.20gb", "3g.40gb", "7g.79gb"}},
      {{"H100-PCIE-80GB", "H100-SXM5-80GB"}, {"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}},
      {{"H100-PCIE-94GB", "H100-SXM5-94GB"}, {"1g.12gb", "2g.24gb", "3g.47gb", "7g.94gb"}},
      {{"H20", "H100 on GH200"}, {"1g.12gb", "2g.24gb", "3g.48gb", "7g.96gb"}},
      {{"H200 NVL", "H200-SXM5"}, {"1g.18gb", "2g.35gb", "3g.71gb", "7g.141gb"}},
      {{"B200"}, {"1g.23gb", "2g.45gb", "3g.90gb", "7g.180gb"}},
      {{"RTX PRO 6000 Blackwell Server Edition"}, {"1g.24gb", "2g.48gb", "4g.96gb"}},
  };
  return kList;
}

namespace {

// "<digits>g.<rest>" with a non-empty rest.
bool IsProfileName(std::string_view p) {
  const size_t dot = p.find('.');
  if (dot == std::string_view::npos || dot < 2 || dot + 1 == p.size() || p[dot - 1] != 'g')
    return false;
  for (size_t i = 0; i + 1 < dot; ++i)
    if (!std::isdigit(static_cast<unsigned char>(p[i]))) return false;
  return true;
}

}  // namespace

Status ValidateMigProfileAllowlist(std::span<const MigAllowlistEntry> allowlist) {
  for (size_t i = 0; i < allowlist.size(); ++i) {
    const MigAllowlistEntry& e = allowlist[i];
    if (e.models.empty() || e.profiles.empty())
      return InvalidArgument("[", i, "]: needs at least one model and one profile");
    for (const std::string& m : e.models)
      if (core::text::Trim(m).empty() || !core::text::IsValidUtf8(m))
        return InvalidArgument("[", i, "].models: a model name is empty or not UTF-8");
    for (const std::string& p : e.profiles)
      if (!IsProfileName(p))
        return InvalidArgument("[", i, "].profiles: ", core::text::Quote(p),
                               " is not a MIG profile name like \"3g.20gb\"");
  }
  return OkStatus();
}

Status CheckMigProfilePreference(const std::map<std::string, std::string>& pod_annotations,
                                 std::span<const MigAllowlistEntry> allowlist) {
  const auto it = pod_annotations.find(core::kMigProfilePreference);
  if (it == pod_annotations.end()) return OkStatus();
  const std::vector<std::string> preferred = core::ParseMigProfilePreference(it->second);
  if (preferred.empty())
    return InvalidArgument("annotation ", core::kMigProfilePreference, ": ",
                           core::text::Quote(it->second),
                           " names no profile; expected a comma-separated list of MIG profiles "
                           "such as \"4g.20gb\" or slice classes such as \"4g\"");
  for (const std::string& entry : preferred) {
    bool allowed = false;
    for (const MigAllowlistEntry& e : allowlist)
      for (const std::string& p : e.profiles)
        allowed = allowed || core::MigProfileMatches(p, entry);
    if (!allowed)
      return InvalidArgument("annotation ", core::kMigProfilePreference, ": entry ",
                             core::text::Quote(entry),
                             " matches no profile of the cluster's nvidia.migProfileAllowlist "
                             "(device-config.yaml); name an allowed profile or its slice class");
  }
  return OkStatus();
}

std::vector<core::MigProfile> RegisteredMigProfiles(std::span<const DriverMigProfile> reported) {
  int whole_sms = 0, whole_slices = 0;
  for (const DriverMigProfile& p : reported) {
    whole_sms = std::max(whole_sms, p.sms);
    whole_slices = std::max(whole_slices, p.slices);
  }
  std::vector<core::MigProfile> out;
  out.reserve(reported.size());
  for (const DriverMigProfile& p : reported) {
    core::MigProfile m;
    m.name = p.name;
    m.memory_mib = p.memory_mib;
    m.core = whole_sms > 0 ? p.sms * 100 / whole_sms
                           : (whole_slices > 0 ? p.slices * 100 / whole_slices : 0);
    m.slice_count = p.slices;
    m.placements = p.placements;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace hami::vendors::nvidia
