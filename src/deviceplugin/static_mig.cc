#include "deviceplugin/static_mig.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace hami::deviceplugin {

namespace {

constexpr char kMixedPrefix[] = "nvidia.com/mig-";

std::string Join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

StatusOr<std::string> MixedMigResourceName(const std::string& profile) {
  // The part after the domain is a qualified name of at most 63 characters; "mig-" takes 4.
  if (profile.empty() || profile.size() > 59)
    return InvalidArgument("MIG profile '", profile, "' cannot name a resource (1..59 characters)");
  std::string name = profile;
  for (char& ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '+') {
      ch = '.';
    } else if (!std::isalnum(u) && ch != '.' && ch != '-' && ch != '_') {
      return InvalidArgument("MIG profile '", profile, "' cannot name a resource (character '",
                             std::string(1, ch), "')");
    }
  }
  if (!std::isalnum(static_cast<unsigned char>(name.front())) ||
      !std::isalnum(static_cast<unsigned char>(name.back())))
    return InvalidArgument("MIG profile '", profile,
                           "' cannot name a resource (must start and end with a letter or digit)");
  return kMixedPrefix + name;
}

StatusOr<std::vector<StaticMigResource>> BuildStaticMigResources(
    const std::vector<gpu::GpuInfo>& gpus, gpu::MigControl& mig, const PluginConfig& config) {
  if (config.mig_strategy == "none") return std::vector<StaticMigResource>{};
  std::vector<StaticMigDevice> devices;
  std::set<std::string> profiles;
  std::vector<std::string> mig_off;
  for (const gpu::GpuInfo& g : gpus) {
    if (!g.mig_enabled) {
      mig_off.push_back(g.uuid);
      continue;
    }
    auto listed = mig.ListMigInstances(g.uuid);
    if (!listed.ok())
      return Annotate(listed.status(), StrCat("MIG strategy ", config.mig_strategy, ": GPU ",
                                              g.uuid, ": cannot list its MIG devices"));
    size_t before = devices.size();
    for (const gpu::MigInstance& m : *listed) {
      if (m.uuid.empty()) continue;  // a GPU instance without compute instance: no device
      devices.push_back({m.uuid, g.uuid, m.profile, g.numa_node});
      profiles.insert(m.profile);
    }
    if (devices.size() == before)
      return FailedPrecondition(
          "MIG strategy ", config.mig_strategy, ": GPU ", g.index, " (", g.uuid,
          ") has MIG on but no MIG device: create its instances (nvidia-smi mig -i ", g.index,
          " -cgi <profiles> -C) or turn MIG off (nvidia-smi -i ", g.index, " -mig 0)");
  }
  if (devices.empty()) return std::vector<StaticMigResource>{};
  std::vector<StaticMigResource> out;
  if (config.mig_strategy == "single") {
    if (!mig_off.empty())
      return FailedPrecondition(
          "MIG strategy single: GPU ", mig_off.front(),
          " has MIG off while other GPUs of the node have MIG on; single needs every GPU in the "
          "same MIG mode (use mixed, or change the MIG mode)");
    if (profiles.size() > 1)
      return FailedPrecondition("MIG strategy single: MIG devices of more than one profile (",
                                Join(profiles),
                                ") on the node; single needs one profile (use mixed)");
    out.push_back({config.resource_name, config.socket_name, std::move(devices)});
    return out;
  }
  std::map<std::string, StaticMigResource> by_resource;
  for (StaticMigDevice& d : devices) {
    HAMI_ASSIGN_OR_RETURN(std::string resource, MixedMigResourceName(d.profile));
    StaticMigResource& r = by_resource[resource];
    if (r.resource_name.empty()) {
      r.resource_name = resource;
      r.socket_name = StrCat("nvidia-", resource.substr(resource.find('/') + 1), ".sock");
    }
    r.devices.push_back(std::move(d));
  }
  for (auto& [name, r] : by_resource) out.push_back(std::move(r));
  return out;
}

}  // namespace hami::deviceplugin
