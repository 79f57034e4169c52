#include "webhook/usage_apply.h"

#include <algorithm>

#include "core/model.h"
#include "core/text_util.h"
#include "k8s/names.h"
#include "usage/recommend.h"
#include "webhook/annotation_patch.h"
#include "webhook/webhook.h"

namespace hami::webhook {

namespace {

using Json = nlohmann::json;

static_assert(kUsageProfileKey == usage::kUsageProfileAnnotation);

constexpr int64_t kMaxGpumemMib = int64_t{1} << 24;  // usage::Limits::max_mem_mib

std::string Str(const Json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A limit as the API server stores an extended resource: an integer string (or a JSON number).
std::optional<int64_t> LimitValue(const Json* limits, const std::string& key) {
  if (limits == nullptr || !limits->is_object() || !limits->contains(key)) return std::nullopt;
  const Json& v = (*limits)[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  return core::text::ParseInt(v.get<std::string>());
}

// MiB per unit of the vendor's memory resource (memoryFactor), read the way the scheduler reads
// it: a probe container asking one unit.
int64_t MibPerMemoryUnit(const vendors::VendorSet& vendors, const vendors::Vendor& nvidia) {
  const Json probe{{"metadata", {{"name", "probe"}}},
                   {"spec",
                    {{"containers", Json::array({{{"name", "c"},
                                                  {"resources",
                                                   {{"limits",
                                                     {{nvidia.resources().count, "1"},
                                                      {nvidia.resources().memory, "1"}}}}}}})}}}};
  auto parsed = vendors.ParsePod(probe);
  if (!parsed.ok()) return 1;
  for (const auto& c : parsed->containers)
    for (const auto& d : c.devices)
      if (d.vendor == core::kNvidiaVendor && d.memreq_mib > 0) return d.memreq_mib;
  return 1;
}

// Sets pod[...]/resources/limits/<key> (and requests/<key> when the container requests it) to
// `value`, with the ops that do the same.
void SetLimit(Json* container, const std::string& path, const std::string& key, int64_t value,
              Json* ops) {
  const std::string v = std::to_string(value);
  Json& c = *container;
  if (!c.contains("resources") || !c["resources"].is_object()) {
    c["resources"] = Json{{"limits", {{key, v}}}};
    ops->push_back(Json{{"op", "add"}, {"path", path + "/resources"}, {"value", c["resources"]}});
    return;
  }
  Json& res = c["resources"];
  if (!res.contains("limits") || !res["limits"].is_object()) {
    res["limits"] = Json{{key, v}};
    ops->push_back(
        Json{{"op", "add"}, {"path", path + "/resources/limits"}, {"value", res["limits"]}});
  } else {
    ops->push_back(Json{{"op", res["limits"].contains(key) ? "replace" : "add"},
                        {"path", StrCat(path, "/resources/limits/", EscapePointer(key))},
                        {"value", v}});
    res["limits"][key] = v;
  }
  // An extended resource's request must equal its limit.
  if (res.contains("requests") && res["requests"].is_object() && res["requests"].contains(key)) {
    ops->push_back(Json{{"op", "replace"},
                        {"path", StrCat(path, "/resources/requests/", EscapePointer(key))},
                        {"value", v}});
    res["requests"][key] = v;
  }
}

Json* Annotations(Json* pod) {
  if (!pod->is_object()) return nullptr;
  auto meta = pod->find("metadata");
  if (meta == pod->end() || !meta->is_object()) return nullptr;
  auto ann = meta->find("annotations");
  return ann == meta->end() || !ann->is_object() ? nullptr : &*ann;
}

// The Event's object: the pod when it has a name, else its controller (a ReplicaSet's pods are
// named by the API server after admission).
std::optional<Json> EventObject(const Json& pod, const std::string& ns) {
  const Json meta = pod.value("metadata", Json::object());
  if (const std::string name = Str(meta, "name"); !name.empty())
    return Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", ns}, {"name", name}};
  const Json refs = meta.is_object() ? meta.value("ownerReferences", Json::array()) : Json();
  if (!refs.is_array()) return std::nullopt;
  for (const Json& r : refs) {
    if (!r.is_object() || r.value("controller", Json(false)) != Json(true)) continue;
    Json ref{{"kind", Str(r, "kind")}, {"namespace", ns}, {"name", Str(r, "name")}};
    if (!Str(r, "apiVersion").empty()) ref["apiVersion"] = Str(r, "apiVersion");
    if (!Str(r, "uid").empty()) ref["uid"] = Str(r, "uid");
    return ref;
  }
  return std::nullopt;
}

// The one container of the pod that asks NVIDIA devices, when it is an app container asking one
// GPU: its index in spec.containers; -2 when no container asks any, -1 otherwise.
int TargetContainer(const Json& pod, const vendors::VendorSet& vendors) {
  auto parsed = vendors.ParsePod(pod);
  if (!parsed.ok()) return -1;
  const Json& spec = pod["spec"];
  const size_t inits = spec.contains("initContainers") && spec["initContainers"].is_array()
                           ? spec["initContainers"].size()
                           : 0;
  int target = -1, users = 0;
  for (size_t k = 0; k < parsed->containers.size(); ++k)
    for (const core::DeviceRequest& d : parsed->containers[k].devices) {
      if (d.vendor != core::kNvidiaVendor || d.nums <= 0) continue;
      ++users;
      if (k >= inits && d.nums == 1) target = static_cast<int>(k - inits);
    }
  return users == 0 ? -2 : users == 1 ? target : -1;
}

}  // namespace

void SetAnnotation(Json* pod, const std::string& key, const std::string& value, Json* ops) {
  Json& p = *pod;
  if (!p.contains("metadata") || !p["metadata"].is_object()) {
    p["metadata"] = Json{{"annotations", {{key, value}}}};
    ops->push_back(Json{{"op", "add"}, {"path", "/metadata"}, {"value", p["metadata"]}});
    return;
  }
  Json& meta = p["metadata"];
  if (!meta.contains("annotations") || !meta["annotations"].is_object()) {
    const bool had = meta.contains("annotations");
    meta["annotations"] = Json{{key, value}};
    ops->push_back(Json{{"op", had ? "replace" : "add"},
                        {"path", "/metadata/annotations"},
                        {"value", meta["annotations"]}});
    return;
  }
  ops->push_back(Json{{"op", meta["annotations"].contains(key) ? "replace" : "add"},
                      {"path", StrCat("/metadata/annotations/", EscapePointer(key))},
                      {"value", value}});
  meta["annotations"][key] = value;
}

bool NamespaceListed(const std::vector<std::string>& list, const std::string& ns) {
  return std::any_of(list.begin(), list.end(),
                     [&](const std::string& n) { return n == "*" || (!ns.empty() && n == ns); });
}

StatusOr<UsageRecommendations> ParseUsageRecommendations(std::string_view text) {
  if (text.size() > kMaxRecommendationsBytes)
    return InvalidArgument("recommendations: ", text.size(), " bytes, more than the ",
                           kMaxRecommendationsBytes, " read");
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("recommendations: not JSON");
  if (!j.is_object() || !j.contains("workloads") || !j["workloads"].is_object())
    return InvalidArgument(
        "recommendations: no \"workloads\" object (expected the output of hami recommend "
        "--format json)");
  UsageRecommendations out;
  for (const auto& [key, w] : j["workloads"].items()) {
    const std::string where = StrCat("recommendations: workload \"", key, "\": ");
    const size_t slash = key.find('/');
    if (slash == std::string::npos ||
        !k8s::ValidateDns1123Label(std::string_view(key).substr(0, slash)).ok() ||
        !k8s::ValidateDns1123Subdomain(std::string_view(key).substr(slash + 1)).ok())
      return InvalidArgument(where,
                             "the name must be <namespace>/<workload> (a namespace, '/', then "
                             "a Kubernetes object name), as hami recommend --prometheus "
                             "names workloads and a usage trace's workload column must");
    if (!w.is_object()) return InvalidArgument(where, "not an object");
    UsageRecommendation r;
    const Json mem = w.value("gpumem_mib", Json());
    if (!mem.is_number_integer() || mem.get<int64_t>() <= 0 || mem.get<int64_t>() > kMaxGpumemMib)
      return InvalidArgument(where, "gpumem_mib must be an integer in 1..", kMaxGpumemMib);
    r.gpumem_mib = mem.get<int64_t>();
    const Json cores = w.value("gpucores", Json(0));
    if (!cores.is_number_integer() || cores.get<int64_t>() < 0 || cores.get<int64_t>() > 100)
      return InvalidArgument(where, "gpucores must be an integer in 0..100");
    r.gpucores = static_cast<int>(cores.get<int64_t>());
    const Json profile = w.value("profile", Json());
    if (!profile.is_string()) return InvalidArgument(where, "profile must be a string");
    r.profile = profile.get<std::string>();
    if (auto p = usage::ParseUsageProfile(r.profile); !p.ok())
      return InvalidArgument(where, "profile: ", p.status().message());
    out.emplace(key, std::move(r));
  }
  return out;
}

std::string WorkloadKeyOf(const Json& pod, const std::string& namespace_) {
  if (namespace_.empty() || !pod.is_object()) return "";
  const Json meta = pod.value("metadata", Json::object());
  if (!meta.is_object()) return "";
  const Json refs = meta.value("ownerReferences", Json::array());
  if (refs.is_array()) {
    for (const Json& r : refs) {
      if (!r.is_object() || r.value("controller", Json(false)) != Json(true)) continue;
      std::string name = Str(r, "name");
      if (name.empty()) continue;
      const std::string hash = Str(meta.value("labels", Json::object()), "pod-template-hash");
      if (Str(r, "kind") == "ReplicaSet" && !hash.empty() && name.size() > hash.size() + 1 &&
          name.compare(name.size() - hash.size() - 1, std::string::npos, "-" + hash) == 0)
        name.resize(name.size() - hash.size() - 1);
      return StrCat(namespace_, "/", name);
    }
  }
  std::string name = Str(meta, "name");
  if (name.empty()) {
    name = Str(meta, "generateName");
    while (!name.empty() && name.back() == '-') name.pop_back();
  }
  return name.empty() ? "" : StrCat(namespace_, "/", name);
}

UsageApplyResult ApplyUsage(Json* pod, const std::string& ns, bool review,
                            const UsageApplyOptions& options, const vendors::VendorSet& vendors,
                            Json* ops) {
  UsageApplyResult out;
  const bool trusted = NamespaceListed(options.trusted_namespaces, ns);
  if (Json* ann = Annotations(pod)) {
    for (std::string_view key : {kUsageAppliedKey, kUsageProfileKey}) {
      const std::string k(key);
      if (!ann->contains(k) || (key == kUsageProfileKey && trusted)) continue;
      ops->push_back(Json{{"op", "remove"}, {"path", "/metadata/annotations/" + EscapePointer(k)}});
      ann->erase(k);
      out.warnings.push_back(
          key == kUsageAppliedKey
              ? StrCat("hami: removed ", k, ": only the webhook writes it")
              : StrCat("hami: removed ", k, ": namespace \"", ns,
                       "\" is not one whose usage profiles hami-scheduler trusts "
                       "(--usage-namespaces); there a profile comes only from a recommendation"));
    }
  }
  const std::shared_ptr<const UsageRecommendations> recs =
      options.current_recommendations ? options.current_recommendations() : options.recommendations;
  if (!review || recs == nullptr || recs->empty()) return out;

  // Opt-in: the workload's own word first, then its namespace's.
  std::optional<bool> own;
  if (const Json* ann = Annotations(pod);
      ann != nullptr && ann->contains(std::string(kUsageApplyKey))) {
    const Json& v = (*ann)[std::string(kUsageApplyKey)];
    if (v.is_string()) own = core::text::ParseBool(v.get<std::string>());
    if (!own)
      out.warnings.push_back(StrCat("hami: ", kUsageApplyKey, " ", v.dump(),
                                    " is not a boolean (\"true\" or \"false\"); ignored"));
  }
  const bool workload_opted = own.value_or(false);
  if (!(own ? *own : NamespaceListed(options.apply_namespaces, ns))) return out;
  const std::string key = WorkloadKeyOf(*pod, ns);
  auto found = recs->find(key);
  if (found == recs->end()) {
    if (workload_opted)
      out.warnings.push_back(StrCat("hami: ", kUsageApplyKey,
                                    " is set but there is no usage "
                                    "recommendation for workload \"",
                                    key, "\""));
    return out;
  }
  const UsageRecommendation& rec = found->second;
  const vendors::Vendor* nvidia = vendors.ByCommonWord(core::kNvidiaVendor);
  const int target = nvidia != nullptr ? TargetContainer(*pod, vendors) : -2;
  if (target == -2) return out;  // no NVIDIA GPU: nothing to right-size
  if (target < 0) {
    out.warnings.push_back(
        StrCat("hami: the usage recommendation of workload \"", key,
               "\" is not applied: it is made for pods with one container using one NVIDIA GPU"));
    return out;
  }
  Json& container = (*pod)["spec"]["containers"][static_cast<size_t>(target)];
  const std::string path = StrCat("/spec/containers/", target);
  const vendors::ResourceNames& names = nvidia->resources();
  const Json* limits = container.contains("resources") && container["resources"].is_object() &&
                               container["resources"].contains("limits")
                           ? &container["resources"]["limits"]
                           : nullptr;
  if (limits != nullptr && limits->is_object() && limits->contains(names.memory_percentage)) {
    out.warnings.push_back(StrCat("hami: the usage recommendation of workload \"", key,
                                  "\" is not applied: container \"", Str(container, "name"),
                                  "\" sets ", names.memory_percentage));
    return out;
  }
  const std::string opt_in = workload_opted ? "workload" : "namespace";
  Json applied{{"workload", key},
               {"opt_in", opt_in},
               {"container", Str(container, "name")},
               {"recommended_gpumem_mib", rec.gpumem_mib}};
  std::vector<std::string> said;

  // Memory, in the resource's units (memoryFactor MiB each), rounded up.
  const int64_t unit = MibPerMemoryUnit(vendors, *nvidia);
  const int64_t want = (rec.gpumem_mib + unit - 1) / unit;
  const std::optional<int64_t> mem = LimitValue(limits, names.memory);
  int64_t mem_now = want;
  if (mem && *mem > want && !workload_opted) {
    mem_now = *mem;
    said.push_back(StrCat(names.memory, " kept at ", *mem, " (recommended ", want,
                          "; lowering a limit needs ", kUsageApplyKey, ": \"true\")"));
  } else if (!mem || *mem != want) {
    SetLimit(&container, path, names.memory, want, ops);
    said.push_back(
        StrCat(names.memory, " ", want, " (was ", mem ? std::to_string(*mem) : "unset", ")"));
  }
  applied["gpumem"] = mem_now;
  if (mem) applied["was_gpumem"] = *mem;

  // Cores only when the recommendation sets them; a container's 0 is no SM limit, the most.
  if (rec.gpucores > 0) {
    const std::optional<int64_t> cores = LimitValue(limits, names.cores);
    const bool lowers = cores && (*cores == 0 || *cores > rec.gpucores);
    if (lowers && !workload_opted) {
      said.push_back(StrCat(names.cores, " kept at ", *cores, " (recommended ", rec.gpucores, ")"));
      applied["gpucores"] = *cores;
    } else {
      if (!cores || *cores != rec.gpucores) {
        SetLimit(&container, path, names.cores, rec.gpucores, ops);
        said.push_back(StrCat(names.cores, " ", rec.gpucores, " (was ",
                              cores ? std::to_string(*cores) : "unset", ")"));
      }
      applied["gpucores"] = rec.gpucores;
    }
  }

  // The profile: a trusted pod's own is kept unless the workload opted in itself.
  const Json* ann = Annotations(pod);
  const bool own_profile = ann != nullptr && ann->contains(std::string(kUsageProfileKey));
  if (own_profile && !workload_opted) {
    applied["profile"] = "kept";
    said.push_back(StrCat(kUsageProfileKey, " kept (the pod's own)"));
  } else {
    SetAnnotation(pod, std::string(kUsageProfileKey), rec.profile, ops);
    applied["profile"] = "recommended";
    said.push_back(StrCat(kUsageProfileKey, " set"));
  }
  SetAnnotation(pod, std::string(kUsageAppliedKey), applied.dump(), ops);

  if (auto object = EventObject(*pod, ns)) {
    k8s::EventSpec ev;
    ev.involved_object = std::move(*object);
    ev.reason = std::string(kUsageAppliedReason);
    std::string what;
    for (const std::string& s : said) what += StrCat(what.empty() ? "" : "; ", s);
    ev.message = StrCat("hami: usage recommendation of workload ", key, " (", opt_in,
                        " opt-in) for container \"", Str(container, "name"), "\": ", what);
    out.event = std::move(ev);
  }
  return out;
}

}  // namespace hami::webhook
