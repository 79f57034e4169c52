#include "core/mig.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "core/annotations.h"
#include "core/json_util.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kUint32Max = std::numeric_limits<uint32_t>::max();

// Upstream packs 1g and 3g instances from the top slots and the others from slot 0, which keeps
// the low span free for the larger profiles that can only start there.
bool PrefersHighStart(std::string_view profile) {
  return profile.starts_with("1g.") || profile.starts_with("3g.");
}

}  // namespace

bool IsMigDevice(const DeviceInfo& d) {
  return d.mode == kModeMig;
}

uint32_t MigSliceMask(const MigPlacement& p) {
  if (p.start < 0 || p.size <= 0 || p.start >= kMaxMigSlices || p.size > kMaxMigSlices - p.start)
    return 0;
  const uint64_t bits = (uint64_t{1} << p.size) - 1;
  return static_cast<uint32_t>(bits << p.start);
}

Status ValidateMigRegistration(const DeviceInfo& d) {
  const std::string where = StrCat("device ", text::Quote(d.uuid), ": ");
  if (!d.mode.empty() && d.mode != kModeHamiCore && d.mode != kModeMig && d.mode != kModeMps &&
      d.mode != kModeRemote)
    return InvalidArgument(where, "mode ", text::Quote(d.mode),
                           " is not hami-core, mig, mps or remote");
  if (!d.mig_profiles.empty() && d.mode != kModeMig)
    return InvalidArgument(where, "migProfiles given but mode is ", text::Quote(d.mode),
                           ", not mig");
  std::set<std::string> names;
  for (size_t i = 0; i < d.mig_profiles.size(); ++i) {
    const MigProfile& p = d.mig_profiles[i];
    const std::string w = StrCat(where, "migProfiles[", i, "] ", text::Quote(p.name), ": ");
    if (p.name.empty()) return InvalidArgument(where, "migProfiles[", i, "]: name is empty");
    if (!text::IsValidUtf8(p.name)) return InvalidArgument(w, "name is not valid UTF-8");
    if (!names.insert(p.name).second) return InvalidArgument(w, "name appears twice");
    if (p.memory_mib <= 0) return InvalidArgument(w, "memoryMB must be > 0");
    if (p.slice_count <= 0) return InvalidArgument(w, "sliceCount must be > 0");
    if (p.placements.empty()) return InvalidArgument(w, "has no placements");
    std::set<std::pair<int, int>> seen;
    for (size_t k = 0; k < p.placements.size(); ++k) {
      const MigPlacement& pl = p.placements[k];
      if (MigSliceMask(pl) == 0)
        return InvalidArgument(w, "placements[", k, "] {start ", pl.start, ", size ", pl.size,
                               "} must have size > 0 and end by slice ", kMaxMigSlices);
      if (!seen.insert({pl.start, pl.size}).second)
        return InvalidArgument(w, "placements[", k, "] appears twice");
    }
  }
  return OkStatus();
}

std::vector<std::string> ParseMigProfilePreference(std::string_view raw) {
  std::vector<std::string> out;
  for (const std::string& entry : text::SplitList(raw))
    if (std::find(out.begin(), out.end(), entry) == out.end()) out.push_back(entry);
  return out;
}

bool MigProfileMatches(std::string_view profile, std::string_view entry) {
  if (profile == entry) return true;
  const size_t dot = profile.find('.');
  return dot != std::string_view::npos && dot > 0 && profile.substr(0, dot) == entry;
}

MigVerdict ChooseMigInstance(const DeviceInfo& d, int64_t mem_mib, int cores, uint32_t occupied,
                             int64_t free_mem_mib, int free_cores,
                             std::span<const std::string> preferred) {
  std::vector<int> order(d.mig_profiles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const MigProfile &pa = d.mig_profiles[a], &pb = d.mig_profiles[b];
    if (pa.memory_mib != pb.memory_mib) return pa.memory_mib < pb.memory_mib;
    return pa.slice_count < pb.slice_count;
  });
  if (!preferred.empty()) {
    // Each entry's profiles first, in the entry's order; then the rest in the default order.
    std::vector<int> ordered;
    std::vector<char> taken(order.size(), 0);
    for (const std::string& entry : preferred)
      for (size_t k = 0; k < order.size(); ++k)
        if (!taken[k] && MigProfileMatches(d.mig_profiles[order[k]].name, entry)) {
          ordered.push_back(order[k]);
          taken[k] = 1;
        }
    for (size_t k = 0; k < order.size(); ++k)
      if (!taken[k]) ordered.push_back(order[k]);
    order = std::move(ordered);
  }
  MigVerdict v;
  v.never = true;
  std::vector<MigPlacement> placements;
  for (int i : order) {
    const MigProfile& p = d.mig_profiles[i];
    if (p.memory_mib < mem_mib || p.core < cores) continue;
    v.never = false;
    if (p.memory_mib > free_mem_mib || p.core > free_cores) continue;
    placements = p.placements;
    const bool high = PrefersHighStart(p.name);
    std::stable_sort(placements.begin(), placements.end(),
                     [high](const MigPlacement& a, const MigPlacement& b) {
                       return high ? a.start > b.start : a.start < b.start;
                     });
    for (const MigPlacement& pl : placements) {
      const uint32_t mask = MigSliceMask(pl);
      if (mask != 0 && (mask & occupied) == 0) {
        v.choice = MigChoice{i, pl};
        return v;
      }
    }
  }
  return v;
}

std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations) {
  ordered_json arr = ordered_json::array();
  for (const auto& a : allocations) {
    ordered_json o = ordered_json::object();
    o["containerIndex"] = a.container_index;
    o["deviceIndex"] = a.device_index;
    o["gpuUUID"] = a.gpu_uuid;
    o["profile"] = a.profile;
    o["placement"] = ordered_json{{"start", a.placement.start}, {"size", a.placement.size}};
    if (!a.mig_uuid.empty()) o["migUUID"] = a.mig_uuid;
    if (a.gpu_instance_id) o["gpuInstanceID"] = *a.gpu_instance_id;
    if (a.compute_instance_id) o["computeInstanceID"] = *a.compute_instance_id;
    arr.push_back(std::move(o));
  }
  return arr.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text) {
  std::vector<MigAllocation> out;
  if (text::Trim(text).empty()) return out;
  HAMI_ASSIGN_OR_RETURN(json arr, jsonutil::Parse(text, kMigAllocations));
  if (!arr.is_array())
    return InvalidArgument(kMigAllocations, ": expected a JSON array, got ", arr.type_name());
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& e = arr[i];
    const std::string where = StrCat(kMigAllocations, "[", i, "].");
    if (!e.is_object())
      return InvalidArgument(where, " expected a JSON object, got ", e.type_name());
    MigAllocation a;
    int64_t v = 0;
    HAMI_RETURN_IF_ERROR(jsonutil::GetInt(e, "containerIndex", 0, kInt32Max, where, &v));
    a.container_index = static_cast<int>(v);
    v = 0;
    HAMI_RETURN_IF_ERROR(jsonutil::GetInt(e, "deviceIndex", 0, kInt32Max, where, &v));
    a.device_index = static_cast<int>(v);
    HAMI_RETURN_IF_ERROR(jsonutil::GetString(e, "gpuUUID", where, &a.gpu_uuid));
    HAMI_RETURN_IF_ERROR(jsonutil::GetString(e, "profile", where, &a.profile));
    if (const auto it = e.find("placement"); it != e.end() && !it->is_null()) {
      if (!it->is_object())
        return InvalidArgument(where, "placement: expected a JSON object, got ", it->type_name());
      int64_t start = 0, size = 0;
      HAMI_RETURN_IF_ERROR(jsonutil::GetInt(*it, "start", 0, kInt32Max, where, &start));
      HAMI_RETURN_IF_ERROR(jsonutil::GetInt(*it, "size", 0, kInt32Max, where, &size));
      a.placement = MigPlacement{static_cast<int>(start), static_cast<int>(size)};
    }
    HAMI_RETURN_IF_ERROR(jsonutil::GetString(e, "migUUID", where, &a.mig_uuid));
    for (const auto& [key, field] : {std::pair{"gpuInstanceID", &a.gpu_instance_id},
                                     std::pair{"computeInstanceID", &a.compute_instance_id}}) {
      if (const auto it = e.find(key); it != e.end() && !it->is_null()) {
        int64_t id = 0;
        HAMI_RETURN_IF_ERROR(jsonutil::ToInt(*it, 0, kUint32Max, StrCat(where, key), &id));
        *field = static_cast<uint32_t>(id);
      }
    }
    if (a.gpu_uuid.empty() || a.profile.empty() || a.placement.size <= 0)
      return InvalidArgument(where, " incomplete: gpuUUID, profile and a placement of size > 0 ",
                             "are required");
    if (!text::IsValidUtf8(a.gpu_uuid) || !text::IsValidUtf8(a.profile) ||
        !text::IsValidUtf8(a.mig_uuid))
      return InvalidArgument(where, " gpuUUID, profile and migUUID must be valid UTF-8");
    const int runtime =
        !a.mig_uuid.empty() + a.gpu_instance_id.has_value() + a.compute_instance_id.has_value();
    if (runtime != 0 && runtime != 3)
      return InvalidArgument(where, " partial runtime identity: migUUID, gpuInstanceID and ",
                             "computeInstanceID go together");
    if (!seen.insert({a.container_index, a.device_index}).second)
      return InvalidArgument(where, " a second entry for container ", a.container_index, " device ",
                             a.device_index);
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<MigAllocation> MigAllocationsOf(const PodAllocation& allocation) {
  std::vector<MigAllocation> out;
  for (size_t c = 0; c < allocation.containers.size(); ++c) {
    const auto& devs = allocation.containers[c];
    for (size_t k = 0; k < devs.size(); ++k) {
      if (devs[k].mig_profile.empty()) continue;
      MigAllocation a;
      a.container_index = static_cast<int>(c);
      a.device_index = static_cast<int>(k);
      a.gpu_uuid = devs[k].uuid;
      a.profile = devs[k].mig_profile;
      a.placement = devs[k].mig_placement;
      out.push_back(std::move(a));
    }
  }
  return out;
}

int AttachMigAllocations(const std::vector<MigAllocation>& entries, PodAllocation* allocation) {
  int attached = 0;
  for (const auto& e : entries) {
    if (static_cast<size_t>(e.container_index) >= allocation->containers.size()) continue;
    auto& devs = allocation->containers[e.container_index];
    if (static_cast<size_t>(e.device_index) >= devs.size()) continue;
    ContainerDevice& d = devs[e.device_index];
    if (d.uuid != e.gpu_uuid) continue;
    d.mig_profile = e.profile;
    d.mig_placement = e.placement;
    ++attached;
  }
  return attached;
}

std::string CheckMigGrant(const DeviceInfo& d, const ContainerDevice& grant) {
  if (grant.mig_profile.empty()) return "";
  if (!IsMigDevice(d))
    return StrCat("MIG instance ", text::Quote(grant.mig_profile), " on device ", d.uuid,
                  ", which is not in mig mode");
  const auto p = std::find_if(d.mig_profiles.begin(), d.mig_profiles.end(),
                              [&](const MigProfile& m) { return m.name == grant.mig_profile; });
  if (p == d.mig_profiles.end())
    return StrCat("MIG profile ", text::Quote(grant.mig_profile), " is not one device ", d.uuid,
                  " reports");
  if (std::find(p->placements.begin(), p->placements.end(), grant.mig_placement) ==
      p->placements.end())
    return StrCat("MIG placement {start ", grant.mig_placement.start, ", size ",
                  grant.mig_placement.size, "} is not a placement of ", p->name, " on device ",
                  d.uuid);
  if (grant.usedmem_mib != p->memory_mib || grant.usedcores != p->core)
    return StrCat("MIG grant of ", p->name, " on device ", d.uuid, " claims ", grant.usedmem_mib,
                  " MiB and ", grant.usedcores, " cores; the profile has ", p->memory_mib,
                  " MiB and ", p->core);
  return "";
}

}  // namespace hami::core
