#include "dra/slice.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "dra/vendor.h"

namespace hami::dra {

namespace {

using Json = nlohmann::json;

bool IsDnsSubdomain(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    const bool edge = i == 0 || i + 1 == s.size();
    if (!alnum && (edge || (c != '-' && c != '.'))) return false;
  }
  return true;
}

Json StringAttr(const std::string& v) {
  return {{"string", v}};
}

// A KEP-5075 capacity whose default is the whole value, so a request naming none takes it all.
Json Capacity(int64_t value, int64_t min, int64_t step, bool shared) {
  Json c = {{"value", std::to_string(value)}};
  if (shared) {
    c["requestPolicy"] = {{"default", std::to_string(value)},
                          {"validRange",
                           {{"min", std::to_string(min)},
                            {"max", std::to_string(value)},
                            {"step", std::to_string(step)}}}};
  }
  return c;
}

}  // namespace

std::string DeviceName(const gpu::GpuInfo& gpu, const DraVendor* vendor) {
  return (vendor != nullptr ? *vendor : NvidiaDraVendor()).DeviceName(gpu);
}

StatusOr<std::vector<DeviceCapacity>> DeviceCapacities(const std::vector<gpu::GpuInfo>& gpus,
                                                       double memory_scaling,
                                                       const DraVendor* vendor) {
  if (!(memory_scaling > 0)) return InvalidArgument("deviceMemoryScaling must be > 0");
  std::vector<DeviceCapacity> out;
  std::set<int> indices;
  std::set<std::string> uuids;
  for (const auto& g : gpus) {
    if (g.memory_mib <= 0) return InvalidArgument("GPU ", g.uuid, " reports no memory");
    if (g.index < 0 || !indices.insert(g.index).second)
      return InvalidArgument("GPU ", g.uuid, ": index ", g.index, " is negative or taken");
    if (g.uuid.empty() || !uuids.insert(g.uuid).second)
      return InvalidArgument("GPU ", g.index, ": UUID '", g.uuid, "' is empty or taken");
    const auto scaled =
        static_cast<int64_t>(std::llround(static_cast<double>(g.memory_mib) * memory_scaling));
    out.push_back({DeviceName(g, vendor), g.uuid, g.index, scaled, 100});
  }
  return out;
}

std::string SliceName(const std::string& node_name, const std::string& driver) {
  std::string d = driver;
  for (char& c : d)
    if (c == '.') c = '-';
  return StrCat(node_name, "-", d);
}

std::string NormalizePciBusId(const std::string& id) {
  // <domain>:<bus>:<device>.<function>; NVML pads the domain to 8 hex digits.
  const size_t colon = id.find(':');
  if (colon == std::string::npos || colon == 0) return "";
  std::string domain = id.substr(0, colon);
  const std::string rest = id.substr(colon + 1);
  if (domain.size() > 4) {
    if (domain.find_first_not_of('0') < domain.size() - 4) return "";
    domain = domain.substr(domain.size() - 4);
  }
  domain.insert(0, 4 - std::min<size_t>(domain.size(), 4), '0');
  std::string out = domain;
  out += ':';
  out += rest;
  if (out.size() != 12 || out[7] != ':' || out[10] != '.') return "";
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    if (!std::isxdigit(static_cast<unsigned char>(out[i]))) return "";
    out[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(out[i])));
  }
  return out;
}

StatusOr<nlohmann::json> BuildResourceSlice(const std::vector<gpu::GpuInfo>& gpus,
                                            const std::map<std::string, GpuExtras>& extras,
                                            const SliceOptions& o) {
  if (o.node_name.empty() || o.node_uid.empty())
    return InvalidArgument("the ResourceSlice needs the node's name and uid (ownerReference)");
  if (!IsDnsSubdomain(o.driver, 63))
    return InvalidArgument("driver name '", o.driver,
                           "' is not a lower-case DNS subdomain of at most 63 characters");
  if (gpus.size() > 128)
    return InvalidArgument(gpus.size(), " GPUs: a ResourceSlice holds at most 128 devices");
  const DraVendor& vendor = o.vendor != nullptr ? *o.vendor : NvidiaDraVendor();
  HAMI_ASSIGN_OR_RETURN(const std::vector<DeviceCapacity> caps,
                        DeviceCapacities(gpus, o.memory_scaling, &vendor));
  Json devices = Json::array();
  for (size_t i = 0; i < gpus.size(); ++i) {
    const gpu::GpuInfo& g = gpus[i];
    auto it = extras.find(g.uuid);
    Json attrs = vendor.Attributes(g, it != extras.end() ? &it->second : nullptr);
    attrs["type"] = StringAttr(std::string(vendor.device_type()));
    Json d = {{"name", caps[i].name},
              {"attributes", attrs},
              {"capacity",
               {{"memory", Capacity(caps[i].memory_mib * kMiB, kMiB, kMiB, o.shared)},
                // min 0: a claim may take memory and no compute share (HAMi's gpumem without
                // gpucores: no SM limit), as the webhook's conversion asks (cores "0").
                {"cores", Capacity(caps[i].cores, 0, 1, o.shared)}}}};
    if (o.shared) d["allowMultipleAllocations"] = true;
    devices.push_back(std::move(d));
  }
  return Json{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata",
       {{"name", SliceName(o.node_name, o.driver)},
        {"ownerReferences", Json::array({{{"apiVersion", "v1"},
                                          {"kind", "Node"},
                                          {"name", o.node_name},
                                          {"uid", o.node_uid},
                                          {"controller", true}}})}}},
      {"spec",
       {{"driver", o.driver},
        {"nodeName", o.node_name},
        {"pool", {{"name", o.node_name}, {"generation", o.generation}, {"resourceSliceCount", 1}}},
        {"devices", devices}}}};
}

}  // namespace hami::dra
