#include "dra/device_status.h"

#include <map>

#include "k8s/client.h"

namespace hami::dra {

using Json = nlohmann::json;

namespace {

std::string Key(const Json& e) {
  return StrCat(e.value("driver", ""), "/", e.value("pool", ""), "/", e.value("device", ""), "/",
                e.value("shareID", ""));
}

// The entry without the conditions' lastTransitionTime: what a change is measured on.
Json SansTimes(Json e) {
  if (e.contains("conditions") && e["conditions"].is_array())
    for (auto& c : e["conditions"])
      if (c.is_object()) c.erase("lastTransitionTime");
  return e;
}

}  // namespace

Json DeviceStatusEntries(const ClaimAllocation& claim, const std::vector<DeviceCapacity>& devices,
                         const std::string& driver, const std::string& pool,
                         const std::string& cdi_device_id, int64_t now_unix,
                         const DraVendor* vendor,
                         const std::map<std::string, std::string>& unhealthy) {
  const DraVendor& v = vendor != nullptr ? *vendor : NvidiaDraVendor();
  const std::map<std::string, Usage> armed = claim.ByDevice();
  Json out = Json::array();
  for (const auto& s : claim.shares) {
    const DeviceCapacity* dev = nullptr;
    for (const auto& d : devices)
      if (d.name == s.device) dev = &d;
    const Usage& a = armed.at(s.device);
    Json data = {{"consumed", {{"memoryMiB", s.usage.memory_mib}, {"cores", s.usage.cores}}},
                 {"armed", {{"memoryMiB", a.memory_mib}, {"cores", a.cores}}},
                 {"cdiDeviceID", cdi_device_id}};
    if (dev != nullptr) {
      data["uuid"] = dev->uuid;
      data["index"] = dev->index;
    }
    const std::string gpu = dev != nullptr ? dev->uuid : s.device;
    Json ready = {{"type", "Ready"},
                  {"status", "True"},
                  {"reason", "Prepared"},
                  {"message", v.ArmedMessage(a, gpu)},
                  {"lastTransitionTime", k8s::FormatTime(now_unix)}};
    if (auto bad = unhealthy.find(s.device); bad != unhealthy.end()) {
      ready["status"] = "False";
      ready["reason"] = "Unhealthy";
      ready["message"] = StrCat("GPU ", gpu, " is unhealthy (", bad->second,
                                "); the claim stays prepared, but work on this GPU may fail");
    }
    Json e = {{"driver", driver},
              {"pool", pool},
              {"device", s.device},
              {"conditions", Json::array({std::move(ready)})},
              {"data", std::move(data)}};
    if (!s.share_id.empty()) e["shareID"] = s.share_id;
    out.push_back(std::move(e));
  }
  return out;
}

Json MergeDeviceStatus(const Json& current, const std::string& driver, const std::string& pool,
                       const Json& ours) {
  std::map<std::string, const Json*> stored;
  Json out = Json::array();
  if (current.is_array()) {
    for (const auto& e : current) {
      if (e.is_object() && e.value("driver", "") == driver && e.value("pool", "") == pool) {
        stored[Key(e)] = &e;
        continue;
      }
      out.push_back(e);
    }
  }
  for (const auto& e : ours) {
    auto it = stored.find(Key(e));
    out.push_back(it != stored.end() && SansTimes(*it->second) == SansTimes(e) ? *it->second : e);
  }
  return out;
}

}  // namespace hami::dra
