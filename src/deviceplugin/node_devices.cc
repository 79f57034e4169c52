#include "deviceplugin/node_devices.h"

#include <algorithm>
#include <cctype>

#include "core/annotations.h"
#include "vendors/nvidia/mig.h"

namespace hami::deviceplugin {

std::vector<gpu::GpuInfo> FilterDevices(const std::vector<gpu::GpuInfo>& gpus,
                                        const PluginConfig& c) {
  std::vector<gpu::GpuInfo> out;
  for (const auto& g : gpus) {
    bool by_uuid =
        std::find(c.exclude_uuids.begin(), c.exclude_uuids.end(), g.uuid) != c.exclude_uuids.end();
    bool by_index = std::find(c.exclude_indices.begin(), c.exclude_indices.end(), g.index) !=
                    c.exclude_indices.end();
    if (!by_uuid && !by_index) out.push_back(g);
  }
  return out;
}

std::vector<std::string> ReplicaIds(const std::string& uuid, int split_count) {
  std::vector<std::string> ids;
  ids.reserve(split_count);
  for (int i = 0; i < split_count; ++i) ids.push_back(StrCat(uuid, "-", i));
  return ids;
}

StatusOr<std::string> ReplicaUuid(const std::string& id) {
  auto dash = id.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == id.size())
    return InvalidArgument("device ID '", id, "' is not <gpu-uuid>-<replica>");
  for (size_t i = dash + 1; i < id.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(id[i])))
      return InvalidArgument("device ID '", id, "' is not <gpu-uuid>-<replica>");
  }
  return id.substr(0, dash);
}

std::vector<core::MigProfile> RegisteredMigProfiles(const std::vector<gpu::MigProfileInfo>& ps) {
  std::vector<vendors::nvidia::DriverMigProfile> reported;
  reported.reserve(ps.size());
  for (const gpu::MigProfileInfo& p : ps) {
    vendors::nvidia::DriverMigProfile& r = reported.emplace_back();
    r.name = p.name;
    r.slices = p.slices;
    r.sms = p.sms;
    r.memory_mib = p.memory_mib;
    for (const auto& pl : p.placements) r.placements.push_back({pl.start, pl.size});
  }
  return vendors::nvidia::RegisteredMigProfiles(reported);
}

std::vector<core::DeviceInfo> BuildNodeDevices(const std::vector<gpu::GpuInfo>& gpus,
                                               const std::map<std::string, bool>& healthy,
                                               const PluginConfig& c) {
  std::vector<core::DeviceInfo> out;
  for (const auto& g : FilterDevices(gpus, c)) {
    core::DeviceInfo d;
    d.uuid = g.uuid;
    d.index = g.index;
    d.count = c.split_count;
    int64_t mem = g.memory_mib > 0 ? g.memory_mib : c.preconfigured_memory_mib;
    d.devmem_mib = static_cast<int64_t>(static_cast<double>(mem) * c.memory_scaling);
    d.devcore = static_cast<int>(100.0 * c.core_scaling);
    d.type = StrCat("NVIDIA-", g.model);
    d.numa = g.numa_node < 0 ? 0 : g.numa_node;
    auto h = healthy.find(g.uuid);
    d.health = h == healthy.end() ? true : h->second;
    // Mode mps: shared as in hami-core (count, scaled cores), through the node's MPS daemon.
    d.mode = c.mode == core::kModeMps ? core::kModeMps : core::kModeHamiCore;
    if (c.mode == core::kModeMig && g.mig_enabled && !g.mig_profiles.empty()) {
      // Instances are not shared through libvgpu: no scaling (upstream's rule), the profiles
      // are the unit.
      d.mode = core::kModeMig;
      d.devmem_mib = g.memory_mib;
      d.devcore = 100;
      d.mig_profiles = RegisteredMigProfiles(g.mig_profiles);
    }
    out.push_back(std::move(d));
  }
  return out;
}

int PairScore(const gpu::GpuLink& link) {
  int pcie = 0;
  switch (link.pcie) {
    case gpu::PcieLevel::kSystem:
      pcie = 10;
      break;
    case gpu::PcieLevel::kNode:
      pcie = 20;
      break;
    case gpu::PcieLevel::kHostBridge:
      pcie = 30;
      break;
    case gpu::PcieLevel::kMultiple:
      pcie = 40;
      break;
    case gpu::PcieLevel::kSingle:
      pcie = 50;
      break;
    case gpu::PcieLevel::kInternal:
      pcie = 60;
      break;
    case gpu::PcieLevel::kUnknown:
      break;
  }
  return pcie + 100 * link.nvlinks;
}

core::LinkScores BuildLinkScores(const std::vector<gpu::GpuInfo>& gpus,
                                 const std::vector<gpu::GpuLink>& links,
                                 const PluginConfig& config) {
  std::map<int, std::string> uuid_of;
  for (const auto& g : FilterDevices(gpus, config)) uuid_of[g.index] = g.uuid;
  core::LinkScores out;
  for (const auto& [index, uuid] : uuid_of) out[uuid];  // every kept GPU has an entry
  for (const auto& l : links) {
    auto a = uuid_of.find(l.a), b = uuid_of.find(l.b);
    if (a == uuid_of.end() || b == uuid_of.end()) continue;
    int s = PairScore(l);
    out[a->second][b->second] = s;
    out[b->second][a->second] = s;
  }
  return out;
}

std::map<std::string, int64_t> NodeCapacity(const std::vector<core::DeviceInfo>& devices,
                                            const PluginConfig& config) {
  if (!config.report_node_capacity) return {};
  int64_t memory = 0;
  int64_t cores = 0;
  for (const auto& d : devices) {
    if (!d.health) continue;
    memory += d.devmem_mib;
    cores += d.devcore;
  }
  return {{config.memory_resource_name, memory}, {config.cores_resource_name, cores}};
}

}  // namespace hami::deviceplugin
