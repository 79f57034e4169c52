#include "dra/cdi.h"

#include <algorithm>

#include "nlohmann/json.hpp"

namespace hami::dra {

namespace {

using Json = nlohmann::json;

// The kind's "<vendor>-<class>", as CDI's GenerateTransientSpecName names transient specs.
std::string SpecBaseName(const std::string& kind) {
  std::string s = kind;
  std::replace(s.begin(), s.end(), '/', '-');
  return s;
}

}  // namespace

std::string CdiKind(const std::string& driver) {
  return StrCat("k8s.", driver, "/claim");
}

StatusOr<ClaimEdits> BuildClaimEdits(const ClaimAllocation& claim,
                                     const std::vector<DeviceCapacity>& devices,
                                     const std::string& driver,
                                     const deviceplugin::PluginConfig& config,
                                     const DraVendor* vendor) {
  HAMI_RETURN_IF_ERROR(CheckName(claim.ref.uid, "claim uid"));
  const std::map<std::string, Usage> by_device = claim.ByDevice();
  std::vector<ClaimDevice> held;
  for (const auto& d : devices) {
    auto it = by_device.find(d.name);
    if (it != by_device.end()) held.push_back({d, it->second});
  }
  std::sort(held.begin(), held.end(), [](const ClaimDevice& a, const ClaimDevice& b) {
    return a.device.index < b.device.index;
  });
  if (held.size() != by_device.size() || held.empty())
    return FailedPrecondition("claim ", claim.ref.uid, ": a device is not on this node");
  auto edits = (vendor != nullptr ? *vendor : NvidiaDraVendor()).Edits(claim.ref, held, config);
  if (!edits.ok()) return Annotate(edits.status(), StrCat("claim ", claim.ref.uid));

  ClaimEdits out;
  out.kind = CdiKind(driver);
  out.cdi_device_id = StrCat(out.kind, "=", claim.ref.uid);
  out.spec_file_name = StrCat(SpecBaseName(out.kind), "_", claim.ref.uid, ".json");
  out.edits = *std::move(edits);
  Json env = Json::array();
  for (const auto& [k, v] : out.edits.env) env.push_back(StrCat(k, "=", v));
  // Parents before children (the region directory at the hook dir before libvgpu.so and the limits
  // file inside it), as CDI's own Apply sorts them: a runtime applying the list in order must not
  // hide the files under the directory mount.
  std::vector<deviceplugin::MountSpec> sorted = out.edits.mounts;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return std::count(a.container_path.begin(), a.container_path.end(), '/') <
           std::count(b.container_path.begin(), b.container_path.end(), '/');
  });
  Json mounts = Json::array();
  for (const auto& m : sorted) {
    mounts.push_back({{"hostPath", m.host_path},
                      {"containerPath", m.container_path},
                      {"type", "bind"},
                      {"options", {"bind", m.read_only ? "ro" : "rw", "nosuid", "nodev"}}});
  }
  const Json spec = {
      {"cdiVersion", "0.6.0"},
      {"kind", out.kind},
      {"annotations", {{"hami.io/claim", StrCat(claim.ref.namespace_, "/", claim.ref.name)}}},
      {"devices", Json::array({{{"name", claim.ref.uid},
                                {"containerEdits", {{"env", env}, {"mounts", mounts}}}}})}};
  out.spec_json = spec.dump(2) + "\n";
  return out;
}

}  // namespace hami::dra
