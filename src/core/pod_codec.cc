#include "core/pod_codec.h"

#include <limits>

#include "core/json_util.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

bool BadField(std::string_view s) {
  return s.empty() || s.find_first_of(",:;") != std::string_view::npos;
}

}  // namespace

StatusOr<std::string> EncodePodDevices(const PodAllocation& allocation) {
  std::string out;
  for (size_t c = 0; c < allocation.containers.size(); ++c) {
    for (size_t i = 0; i < allocation.containers[c].size(); ++i) {
      const ContainerDevice& d = allocation.containers[c][i];
      const std::string where = StrCat("container ", c, " device ", i, ": ");
      if (BadField(d.uuid))
        return InvalidArgument(where, "uuid ", text::Quote(d.uuid),
                               " is empty or holds ',', ':' or ';'");
      if (BadField(d.vendor))
        return InvalidArgument(where, "vendor ", text::Quote(d.vendor),
                               " is empty or holds ',', ':' or ';'");
      if (d.usedmem_mib < 0 || d.usedmem_mib > kInt32Max)
        return InvalidArgument(where, "memory ", d.usedmem_mib, " MiB is outside 0..", kInt32Max);
      if (d.usedcores < 0) return InvalidArgument(where, "cores ", d.usedcores, " is negative");
      out += StrCat(d.uuid, ",", d.vendor, ",", d.usedmem_mib, ",", d.usedcores, ":");
    }
    out += ";";
  }
  return out;
}

StatusOr<PodAllocation> DecodePodDevices(std::string_view text) {
  PodAllocation out;
  std::string_view t = text::Trim(text);
  if (t.empty()) return out;
  if (t.back() == ';') t.remove_suffix(1);  // the last container's terminator
  std::vector<std::string_view> containers = text::Split(t, ';');
  for (size_t c = 0; c < containers.size(); ++c) {
    std::vector<ContainerDevice> devices;
    size_t i = 0;
    for (std::string_view item : text::Split(containers[c], ':')) {
      if (item.empty()) continue;
      const std::string where =
          StrCat("pod devices container ", c, " device ", i, " ", text::Quote(item), ": ");
      const auto f = text::Split(item, ',');
      if (f.size() < 4)
        return InvalidArgument(where, "has ", f.size(), " fields, expected UUID,Type,MemMiB,Cores");
      if (f[0].empty()) return InvalidArgument(where, "uuid is empty");
      if (f[1].empty()) return InvalidArgument(where, "type is empty");
      const auto mem = text::ParseInt(f[2]);
      if (!mem || *mem < 0 || *mem > kInt32Max)
        return InvalidArgument(where, "memory ", text::Quote(f[2]), " is not an integer in 0..",
                               kInt32Max);
      const auto cores = text::ParseInt(f[3]);
      if (!cores || *cores < 0 || *cores > kInt32Max)
        return InvalidArgument(where, "cores ", text::Quote(f[3]), " is not an integer in 0..",
                               kInt32Max);
      ContainerDevice d;
      d.uuid = std::string(f[0]);
      d.vendor = std::string(f[1]);
      d.usedmem_mib = *mem;
      d.usedcores = static_cast<int>(*cores);
      devices.push_back(std::move(d));
      ++i;
    }
    out.containers.push_back(std::move(devices));
  }
  return out;
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
    if (a.runtime) {
      o["migUUID"] = a.runtime->mig_uuid;
      o["gpuInstanceID"] = a.runtime->gpu_instance_id;
      o["computeInstanceID"] = a.runtime->compute_instance_id;
    }
    arr.push_back(std::move(o));
  }
  // Invalid UTF-8 (only possible from callers, never from our decoders) becomes U+FFFD as in Go.
  return arr.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

StatusOr<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text) {
  using jsonutil::GetInt;
  using jsonutil::GetString;
  HAMI_ASSIGN_OR_RETURN(json arr, jsonutil::Parse(text, "MIG allocations"));
  if (!arr.is_array())
    return InvalidArgument("MIG allocations: expected a JSON array, got ", arr.type_name());
  std::vector<MigAllocation> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& e = arr[i];
    const std::string where = StrCat("MIG allocations[", i, "].");
    if (!e.is_object())
      return InvalidArgument(where, " expected a JSON object, got ", e.type_name());
    MigAllocation a;
    int64_t v = 0;
    HAMI_RETURN_IF_ERROR(GetInt(e, "containerIndex", 0, kInt32Max, where, &v));
    a.container_index = static_cast<int>(v);
    v = 0;
    HAMI_RETURN_IF_ERROR(GetInt(e, "deviceIndex", 0, kInt32Max, where, &v));
    a.device_index = static_cast<int>(v);
    HAMI_RETURN_IF_ERROR(GetString(e, "gpuUUID", where, &a.gpu_uuid));
    if (a.gpu_uuid.empty()) return InvalidArgument(where, "gpuUUID is missing or empty");
    HAMI_RETURN_IF_ERROR(GetString(e, "profile", where, &a.profile));
    if (a.profile.empty()) return InvalidArgument(where, "profile is missing or empty");
    if (const auto it = e.find("placement"); it != e.end() && !it->is_null()) {
      if (!it->is_object())
        return InvalidArgument(where, "placement: expected a JSON object, got ", it->type_name());
      int64_t start = 0, size = 0;
      HAMI_RETURN_IF_ERROR(GetInt(*it, "start", 0, kInt32Max, where + "placement.", &start));
      HAMI_RETURN_IF_ERROR(GetInt(*it, "size", 0, kInt32Max, where + "placement.", &size));
      a.placement = MigPlacement{static_cast<int>(start), static_cast<int>(size)};
    }
    const int present = int(e.contains("migUUID") && !e["migUUID"].is_null()) +
                        int(e.contains("gpuInstanceID") && !e["gpuInstanceID"].is_null()) +
                        int(e.contains("computeInstanceID") && !e["computeInstanceID"].is_null());
    if (present != 0 && present != 3) {
      return InvalidArgument(where,
                             "runtime fields migUUID, gpuInstanceID, computeInstanceID must be all "
                             "present or all absent, found ",
                             present, " of 3");
    }
    if (present == 3) {
      MigAllocation::Runtime r;
      HAMI_RETURN_IF_ERROR(GetString(e, "migUUID", where, &r.mig_uuid));
      v = 0;
      HAMI_RETURN_IF_ERROR(GetInt(e, "gpuInstanceID", 0, kInt32Max, where, &v));
      r.gpu_instance_id = static_cast<int>(v);
      v = 0;
      HAMI_RETURN_IF_ERROR(GetInt(e, "computeInstanceID", 0, kInt32Max, where, &v));
      r.compute_instance_id = static_cast<int>(v);
      a.runtime = std::move(r);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace hami::core
