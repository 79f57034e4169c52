#include "dra/pod_claims.h"

#include <map>

#include "nlohmann/json.hpp"

namespace hami::dra {

namespace {

using Json = nlohmann::json;

const Json& Array(const Json& obj, const char* key) {
  static const Json kEmpty = Json::array();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() ? *it : kEmpty;
}

const Json& Object(const Json& obj, const char* key) {
  static const Json kEmpty = Json::object();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}

std::string String(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::vector<PodRef> ReservedPods(const Json& claim) {
  std::vector<PodRef> out;
  for (const auto& r : Array(Object(claim, "status"), "reservedFor")) {
    if (String(r, "resource") != "pods" || !String(r, "apiGroup").empty()) continue;
    PodRef p{String(r, "name"), String(r, "uid")};
    if (!p.name.empty()) out.push_back(std::move(p));
  }
  return out;
}

std::vector<ContainerClaims> ContainersWithSeveralClaims(const Json& pod,
                                                         const std::set<std::string>& claims) {
  // The pod's claim entry name -> the ResourceClaim object's name.
  std::map<std::string, std::string> objects;
  const Json& spec = Object(pod, "spec");
  for (const auto& s : Array(Object(pod, "status"), "resourceClaimStatuses")) {
    if (!String(s, "resourceClaimName").empty())
      objects[String(s, "name")] = String(s, "resourceClaimName");
  }
  for (const auto& c : Array(spec, "resourceClaims")) {
    if (!String(c, "resourceClaimName").empty())
      objects[String(c, "name")] = String(c, "resourceClaimName");
  }
  std::vector<ContainerClaims> out;
  for (const char* kind : {"initContainers", "containers"}) {
    for (const auto& ctr : Array(spec, kind)) {
      std::set<std::string> used;
      for (const auto& ref : Array(Object(ctr, "resources"), "claims")) {
        auto it = objects.find(String(ref, "name"));
        if (it != objects.end() && claims.count(it->second) > 0) used.insert(it->second);
      }
      if (used.size() >= 2)
        out.push_back({String(ctr, "name"), std::vector<std::string>(used.begin(), used.end())});
    }
  }
  return out;
}

}  // namespace hami::dra
