#include "webhook/webhook.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "core/annotations.h"
#include "core/json_util.h"
#include "core/numa_alignment.h"
#include "core/text_util.h"
#include "vendors/ascend/ascend.h"
#include "vendors/config.h"
#include "vendors/nvidia/annotations.h"
#include "vendors/remotegpu/remotegpu.h"
#include "webhook/annotation_patch.h"

namespace hami::webhook {

namespace nvidia = vendors::nvidia;

namespace {

constexpr const char kApiVersion[] = "admission.k8s.io/v1";

// A phase's refusal: the message is the whole denial text.
template <typename... Args>
Status Forbidden(const Args&... args) {
  return absl::PermissionDeniedError(StrCat(args...));
}

const Json* Member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string StringMember(const Json& j, const char* key) {
  const Json* v = Member(j, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

Status GetString(const Json& j, const char* key, std::string_view where, std::string* out) {
  const Json* v = Member(j, key);
  if (v == nullptr) return OkStatus();
  if (!v->is_string())
    return InvalidArgument(where, ".", key, " must be a string, got ", v->type_name());
  *out = v->get<std::string>();
  return OkStatus();
}

AdmissionResponse Deny(const std::string& uid, std::string message) {
  AdmissionResponse r;
  r.uid = uid;
  r.allowed = false;
  r.code = 403;
  r.reason = "Forbidden";
  r.message = std::move(message);
  return r;
}

bool Privileged(const Json& container) {
  const Json* sc = Member(container, "securityContext");
  const Json* p = sc ? Member(*sc, "privileged") : nullptr;
  return p && p->is_boolean() && p->get<bool>();
}

// securityContext.capabilities.add names SYS_ADMIN (with or without CAP_, any case) or ALL.
bool AddsSysAdmin(const Json& container) {
  const Json* sc = Member(container, "securityContext");
  const Json* caps = sc ? Member(*sc, "capabilities") : nullptr;
  const Json* add = caps ? Member(*caps, "add") : nullptr;
  if (add == nullptr || !add->is_array()) return false;
  for (const Json& c : *add) {
    if (!c.is_string()) continue;
    std::string name = absl::AsciiStrToUpper(c.get<std::string>());
    if (absl::StartsWith(name, "CAP_")) name.erase(0, 4);
    if (name == "SYS_ADMIN" || name == "ALL") return true;
  }
  return false;
}

// Why `container` may not run in a pod that requests devices ("" = it may).
const char* PrivilegeProblem(const Json& container) {
  if (Privileged(container)) return "is privileged";
  if (AddsSysAdmin(container)) return "adds CAP_SYS_ADMIN";
  return "";
}

AdmissionResponse DenyPrivileged(const std::string& uid, const char* list, const Json& container,
                                 const char* problem, const std::string& count_resource) {
  return Deny(
      uid,
      StrCat(
          "hami: ", list, " container \"", StringMember(container, "name"), "\" ", problem,
          " in a pod that requests GPUs; such a container can reach every GPU of the node, so the "
          "pod's share cannot be enforced. Remove securityContext.privileged and SYS_ADMIN/ALL "
          "from "
          "securityContext.capabilities.add, or the pod's ",
          count_resource, " request"));
}

constexpr const char* kContainerLists[] = {"initContainers", "containers", "ephemeralContainers"};

// request.namespace, else the pod's metadata.namespace.
std::string PodNamespace(const Json& pod, const std::string& request_namespace) {
  if (!request_namespace.empty()) return request_namespace;
  const Json* meta = Member(pod, "metadata");
  return meta != nullptr ? StringMember(*meta, "namespace") : "";
}

// metadata.<which> of a pod when it is an object.
const Json* MetaMap(const Json& pod, const char* which) {
  const Json* meta = Member(pod, "metadata");
  const Json* m = meta ? Member(*meta, which) : nullptr;
  return m && m->is_object() ? m : nullptr;
}

const Json* MapEntry(const Json* map, const std::string& key) {
  if (map == nullptr) return nullptr;
  auto it = map->find(key);
  return it == map->end() ? nullptr : &*it;
}

bool SameEntry(const Json* a, const Json* b) {
  return a == nullptr || b == nullptr ? a == b : *a == *b;
}

// An opt-in selection of pods: the namespace `ns` is one of `namespaces`, or `labels` is not empty
// and the pod carries every one of its key=value labels.
bool Selected(const Json& pod, const std::string& ns, const std::vector<std::string>& namespaces,
              const std::vector<std::pair<std::string, std::string>>& labels) {
  if (!ns.empty() && std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end())
    return true;
  if (labels.empty()) return false;
  const Json* have = MetaMap(pod, "labels");
  return std::all_of(labels.begin(), labels.end(), [&](const auto& kv) {
    const Json* v = MapEntry(have, kv.first);
    return v != nullptr && v->is_string() && v->get<std::string>() == kv.second;
  });
}

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += StrCat(out.empty() ? "" : ", ", k);
  return out;
}

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return !s.empty() && std::find(list.begin(), list.end(), s) != list.end();
}

// spec.schedulerName = `name` unless the pod already names it.
void SetSchedulerName(const Json& spec, const std::string& name, Json* ops) {
  if (StringMember(spec, "schedulerName") != name)
    ops->push_back(Json{{"op", spec.contains("schedulerName") ? "replace" : "add"},
                        {"path", "/spec/schedulerName"},
                        {"value", name}});
}

// Whether the container has an env entry named `name`.
bool HasEnv(const Json& container, const std::string& name) {
  const Json* env = Member(container, "env");
  if (env == nullptr || !env->is_array()) return false;
  return std::any_of(env->begin(), env->end(),
                     [&](const Json& e) { return StringMember(e, "name") == name; });
}

// Whether upstream's NVIDIA MutateAdmission counts `container` as asking for NVIDIA devices: the
// count named in its limits (whatever its value, 0 included), or gpumem/%/cores named there while
// defaultGPUNum > 0. `nvidia` is the enabled NVIDIA vendor, `added` the limits the vendors' Mutate
// adds to the container: NVIDIA's Mutate adds the count exactly when gpumem/%/cores are in the
// limits, defaultGPUNum > 0 and no count is named (the API server admits an extended resource in
// requests only together with the same limit, so a count named anywhere is named in the limits).
// (Upstream also counts a count named only in requests when it adds the exclusive cores; `parsed`
// covers that: it holds the container's NVIDIA request, if any.)
bool NamesNvidia(const Json& container, const core::ContainerRequest* parsed,
                 const vendors::Vendor& nvidia, const std::map<std::string, int64_t>& added) {
  if (parsed != nullptr &&
      std::any_of(parsed->devices.begin(), parsed->devices.end(),
                  [](const core::DeviceRequest& d) { return d.vendor == core::kNvidiaVendor; }))
    return true;
  const std::string& count = nvidia.resources().count;
  if (added.count(count)) return true;
  const Json* res = Member(container, "resources");
  const Json* limits = res ? Member(*res, "limits") : nullptr;
  return limits != nullptr && limits->is_object() && limits->contains(count);
}

// The count resource DenyPrivileged names: NVIDIA's as configured.
std::string NvidiaCount(const vendors::VendorSet& set) {
  const vendors::Vendor* v = set.ByCommonWord(core::kNvidiaVendor);
  return v != nullptr ? v->resources().count : std::string(nvidia::kDefaultGpuResource);
}

// JSON-patch op that sets the container's existing env entry `name` to `value` (upstream appends a
// second entry instead, which Kubernetes resolves to the last one: the same effect).
void ReplaceEnv(Json& ops, const std::string& base, const Json& container, const std::string& name,
                const std::string& value) {
  const Json* env = Member(container, "env");
  if (env == nullptr || !env->is_array()) return;
  const Json entry{{"name", name}, {"value", value}};
  for (size_t i = 0; i < env->size(); ++i) {
    if (StringMember((*env)[i], "name") != name) continue;
    if ((*env)[i] != entry)
      ops.push_back(Json{{"op", "replace"}, {"path", StrCat(base, "/env/", i)}, {"value", entry}});
    return;
  }
}

// JSON-patch ops that add env entries to one container; `replace` entries take the place of an
// entry of the same name, the others are added only where the container lacks the name.
void AddEnvEntries(Json& ops, const std::string& base, const Json& container,
                   const std::vector<Json>& add, const std::vector<Json>& replace = {}) {
  const Json* env = Member(container, "env");
  std::vector<Json> todo;
  for (const Json& e : replace) {
    const std::string name = StringMember(e, "name");
    bool replaced = false;
    for (size_t i = 0; env != nullptr && env->is_array() && i < env->size(); ++i) {
      if (StringMember((*env)[i], "name") != name) continue;
      if ((*env)[i] != e)
        ops.push_back(Json{{"op", "replace"}, {"path", StrCat(base, "/env/", i)}, {"value", e}});
      replaced = true;
      break;
    }
    if (!replaced) todo.push_back(e);
  }
  for (const Json& e : add)
    if (!HasEnv(container, StringMember(e, "name"))) todo.push_back(e);
  if (todo.empty()) return;
  if (env == nullptr || !env->is_array()) {
    ops.push_back(Json{{"op", "add"}, {"path", base + "/env"}, {"value", Json(todo)}});
    return;
  }
  for (Json& e : todo)
    ops.push_back(Json{{"op", "add"}, {"path", base + "/env/-"}, {"value", std::move(e)}});
}

// JSON-patch ops that add env vars to one container.
void AddEnv(Json& ops, const std::string& base, const Json& container,
            const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<Json> add;
  add.reserve(vars.size());
  for (const auto& [k, v] : vars) add.push_back(Json{{"name", k}, {"value", v}});
  AddEnvEntries(ops, base, container, add);
}

// The container's env entry named `name`, or null.
const Json* EnvEntry(const Json& container, const std::string& name) {
  const Json* env = Member(container, "env");
  if (env == nullptr || !env->is_array()) return nullptr;
  for (const Json& e : *env)
    if (StringMember(e, "name") == name) return &e;
  return nullptr;
}

// The vendors' own env entries of one container (vendors::Mutation): literal values and pod field
// references that replace the container's, and values put in front of its literal one.
std::vector<Json> VendorEnvEntries(const Json& container, const phases::ContainerChanges& ch) {
  std::vector<Json> out;
  for (const auto& [name, value] : ch.set_env)
    out.push_back(Json{{"name", name}, {"value", value}});
  for (const auto& [name, path] : ch.env_field_refs)
    out.push_back(Json{{"name", name},
                       {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", path}}}}}});
  for (const auto& [name, value] : ch.env_prepend) {
    const Json* e = EnvEntry(container, name);
    const std::string theirs = e ? StringMember(*e, "value") : "";
    // Already in front (a second admission of the same pod): nothing to do.
    const bool done = theirs == value || theirs.rfind(value + " ", 0) == 0;
    const std::string merged = done ? theirs : theirs.empty() ? value : StrCat(value, " ", theirs);
    out.push_back(Json{{"name", name}, {"value", merged}});
  }
  return out;
}

// JSON-patch ops that mount volumes (name -> path) into one container, unless it mounts them.
void AddVolumeMounts(Json& ops, const std::string& base, const Json& container,
                     const std::map<std::string, std::string>& mounts) {
  const Json* vm = Member(container, "volumeMounts");
  bool exists = vm != nullptr && vm->is_array();
  for (const auto& [name, path] : mounts) {
    if (exists && std::any_of(vm->begin(), vm->end(), [&, &n = name](const Json& m) {
          return StringMember(m, "name") == n;
        }))
      continue;
    const Json mount{{"name", name}, {"mountPath", path}};
    if (exists) {
      ops.push_back(Json{{"op", "add"}, {"path", base + "/volumeMounts/-"}, {"value", mount}});
    } else {
      ops.push_back(
          Json{{"op", "add"}, {"path", base + "/volumeMounts"}, {"value", Json::array({mount})}});
      exists = true;
      vm = nullptr;
    }
  }
}

// Pod-level JSON-patch ops for the vendors' init containers: an emptyDir volume of each one's name
// and the container itself in front of every other init container. Runs after every container op,
// whose paths index spec.initContainers as it was. A pod that already has the volume or the init
// container (a second admission) is left as it is.
void AddInitContainers(Json& ops, const Json& spec,
                       const std::vector<phases::ContainerChanges>& changes) {
  std::vector<vendors::InitContainer> wanted;
  for (const phases::ContainerChanges& ch : changes)
    for (const auto& ic : ch.init_containers)
      if (std::none_of(wanted.begin(), wanted.end(),
                       [&](const vendors::InitContainer& w) { return w.name == ic.name; }))
        wanted.push_back(ic);
  if (wanted.empty()) return;
  auto named = [](const Json* list, const std::string& name) {
    return list != nullptr && list->is_array() &&
           std::any_of(list->begin(), list->end(),
                       [&](const Json& e) { return StringMember(e, "name") == name; });
  };
  const Json* volumes = Member(spec, "volumes");
  bool have_volumes = volumes != nullptr && volumes->is_array();
  for (const auto& ic : wanted) {
    if (named(volumes, ic.name)) continue;
    const Json vol{{"name", ic.name}, {"emptyDir", Json::object()}};
    ops.push_back(
        have_volumes
            ? Json{{"op", "add"}, {"path", "/spec/volumes/-"}, {"value", vol}}
            : Json{{"op", "add"}, {"path", "/spec/volumes"}, {"value", Json::array({vol})}});
    have_volumes = true;
  }
  const Json* inits = Member(spec, "initContainers");
  bool have_inits = inits != nullptr && inits->is_array() && !inits->empty();
  // Inserted at 0 from the last one, so they run in the order the vendors gave.
  for (auto it = wanted.rbegin(); it != wanted.rend(); ++it) {
    if (named(inits, it->name)) continue;
    const Json c{
        {"name", it->name},
        {"image", it->image},
        {"command", it->command},
        {"volumeMounts", Json::array({{{"name", it->name}, {"mountPath", it->mount_path}}})}};
    ops.push_back(
        have_inits
            ? Json{{"op", "add"}, {"path", "/spec/initContainers/0"}, {"value", c}}
            : Json{{"op", "add"}, {"path", "/spec/initContainers"}, {"value", Json::array({c})}});
    have_inits = true;
  }
}

// Upstream's per-pod switches of overwriteEnv: hami.io/overwrite-env on the pod (a boolean as Go's
// ParseBool reads it) and hami.io/overwrite-env-containers (a JSON object of container name to such
// a boolean, as text). A container's entry wins over the pod's; a value that is no boolean, or a
// map that does not read as an object of strings, counts as absent.
constexpr char kOverwriteEnvKey[] = "hami.io/overwrite-env";
constexpr char kOverwriteEnvContainersKey[] = "hami.io/overwrite-env-containers";

struct OverwriteEnvAnnotations {
  std::optional<bool> pod;
  std::map<std::string, std::optional<bool>> containers;  // unreadable values as nullopt
  bool pod_unreadable = false;                            // the key is there, its value no bool
  bool map_unreadable = false;                            // the key is there, not such a map
};

OverwriteEnvAnnotations ReadOverwriteEnv(const std::map<std::string, std::string>& annotations) {
  OverwriteEnvAnnotations out;
  if (auto it = annotations.find(kOverwriteEnvKey); it != annotations.end()) {
    out.pod = core::text::ParseBool(it->second);
    out.pod_unreadable = !out.pod.has_value();
  }
  if (auto it = annotations.find(kOverwriteEnvContainersKey); it != annotations.end()) {
    const Json m = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    out.map_unreadable = !m.is_object();
    for (auto e = m.is_object() ? m.begin() : Json::const_iterator(); m.is_object() && e != m.end();
         ++e) {
      if (!e->is_string()) {
        out.map_unreadable = true;  // Go's json.Unmarshal into map[string]string fails as a whole
        break;
      }
      out.containers[e.key()] = core::text::ParseBool(e->get<std::string>());
    }
    if (out.map_unreadable) out.containers.clear();
  }
  return out;
}

// Whether the webhook sets NVIDIA_VISIBLE_DEVICES=none in `container` (when it names no NVIDIA
// resource). With overwriteEnv configured on, the annotations cannot turn it off: a pod's own
// annotation must not undo the guard, or its containers would see every GPU of the node without
// asking for one. With it off, they turn it on (or keep it off) as upstream's do.
bool OverwriteEnvFor(const OverwriteEnvAnnotations& a, const std::string& container,
                     bool configured) {
  if (configured) return true;
  if (auto it = a.containers.find(container); it != a.containers.end() && it->second)
    return *it->second;
  return a.pod.value_or(false);
}

// Webhook warnings for overwrite-env annotations that will not do what they say.
std::vector<std::string> OverwriteEnvWarnings(const std::map<std::string, std::string>& annotations,
                                              bool configured) {
  const OverwriteEnvAnnotations a = ReadOverwriteEnv(annotations);
  std::vector<std::string> out;
  if (a.pod_unreadable)
    out.push_back(StrCat(kOverwriteEnvKey, ": ",
                         core::text::Quote(annotations.at(kOverwriteEnvKey)),
                         " is not true or false; ignored"));
  if (a.map_unreadable)
    out.push_back(StrCat(kOverwriteEnvContainersKey,
                         ": expected a JSON object of container name to \"true\" or \"false\"; "
                         "ignored"));
  for (const auto& [name, v] : a.containers)
    if (!v)
      out.push_back(StrCat(kOverwriteEnvContainersKey, ": the value for container ",
                           core::text::Quote(name), " is not true or false; ignored"));
  const bool off_asked =
      a.pod == false || std::any_of(a.containers.begin(), a.containers.end(),
                                    [](const auto& e) { return e.second == false; });
  if (configured && off_asked)
    out.push_back(StrCat(kOverwriteEnvKey,
                         ": overwriteEnv is on for this cluster and a pod cannot turn it off; "
                         "containers without an NVIDIA resource get NVIDIA_VISIBLE_DEVICES=none"));
  return out;
}

}  // namespace

std::string EscapePointer(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

StatusOr<AdmissionRequest> ParseAdmissionReview(std::string_view body) {
  HAMI_RETURN_IF_ERROR(core::jsonutil::CheckDepth(body, "AdmissionReview"));
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("AdmissionReview: body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("AdmissionReview: body must be a JSON object");
  std::string api_version, kind;
  HAMI_RETURN_IF_ERROR(GetString(j, "apiVersion", "AdmissionReview", &api_version));
  HAMI_RETURN_IF_ERROR(GetString(j, "kind", "AdmissionReview", &kind));
  if (kind != "AdmissionReview")
    return InvalidArgument("AdmissionReview: kind is \"", kind, "\", want AdmissionReview");
  if (api_version != kApiVersion)
    return InvalidArgument("AdmissionReview: apiVersion is \"", api_version, "\", want ",
                           kApiVersion,
                           " (set admissionReviewVersions: [v1] in the webhook configuration)");
  const Json* req = Member(j, "request");
  if (req == nullptr || !req->is_object())
    return InvalidArgument("AdmissionReview: request is missing");
  AdmissionRequest r;
  HAMI_RETURN_IF_ERROR(GetString(*req, "uid", "request", &r.uid));
  if (r.uid.empty()) return InvalidArgument("AdmissionReview: request.uid is empty");
  HAMI_RETURN_IF_ERROR(GetString(*req, "namespace", "request", &r.namespace_));
  HAMI_RETURN_IF_ERROR(GetString(*req, "operation", "request", &r.operation));
  if (const Json* k = Member(*req, "kind")) {
    if (!k->is_object()) return InvalidArgument("request.kind must be an object");
    HAMI_RETURN_IF_ERROR(GetString(*k, "kind", "request.kind", &r.kind));
  }
  HAMI_RETURN_IF_ERROR(GetString(*req, "subResource", "request", &r.sub_resource));
  if (const Json* u = Member(*req, "userInfo")) {
    if (!u->is_object()) return InvalidArgument("request.userInfo must be an object");
    HAMI_RETURN_IF_ERROR(GetString(*u, "username", "request.userInfo", &r.username));
  }
  if (const Json* o = Member(*req, "object")) {
    if (!o->is_object()) return InvalidArgument("request.object must be an object");
    r.object = *o;
  }
  if (const Json* o = Member(*req, "oldObject")) {
    if (!o->is_object()) return InvalidArgument("request.oldObject must be an object");
    r.old_object = *o;
  }
  if (const Json* d = Member(*req, "dryRun")) {
    if (!d->is_boolean()) return InvalidArgument("request.dryRun must be a boolean");
    r.dry_run = d->get<bool>();
  }
  return r;
}

Json ToJson(const AdmissionResponse& r) {
  Json resp{{"uid", r.uid}, {"allowed", r.allowed}};
  if (!r.allowed || !r.message.empty()) {
    Json st{{"message", r.message}};
    if (r.code != 0) st["code"] = r.code;
    if (!r.reason.empty()) st["reason"] = r.reason;
    resp["status"] = std::move(st);
  }
  if (r.patch) {
    resp["patch"] = absl::Base64Escape(r.patch->dump());
    resp["patchType"] = "JSONPatch";
  }
  if (!r.warnings.empty()) resp["warnings"] = r.warnings;
  return Json{
      {"apiVersion", kApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(resp)}};
}

StatusOr<AdmissionResponse> ParseAdmissionResponse(std::string_view body) {
  HAMI_RETURN_IF_ERROR(core::jsonutil::CheckDepth(body, "AdmissionReview reply"));
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("AdmissionReview reply: not a JSON object");
  const Json* resp = Member(j, "response");
  if (resp == nullptr || !resp->is_object())
    return InvalidArgument("AdmissionReview reply: response is missing");
  AdmissionResponse r;
  HAMI_RETURN_IF_ERROR(GetString(*resp, "uid", "response", &r.uid));
  const Json* allowed = Member(*resp, "allowed");
  if (allowed == nullptr || !allowed->is_boolean())
    return InvalidArgument("response.allowed must be a boolean");
  r.allowed = allowed->get<bool>();
  if (const Json* st = Member(*resp, "status")) {
    r.message = StringMember(*st, "message");
    r.reason = StringMember(*st, "reason");
    if (const Json* c = Member(*st, "code"); c && c->is_number_integer())
      r.code = c->get<int32_t>();
  }
  if (const Json* p = Member(*resp, "patch")) {
    if (!p->is_string()) return InvalidArgument("response.patch must be a base64 string");
    if (StringMember(*resp, "patchType") != "JSONPatch")
      return InvalidArgument("response.patchType must be JSONPatch");
    std::string raw;
    if (!absl::Base64Unescape(p->get<std::string>(), &raw))
      return InvalidArgument("response.patch is not base64");
    Json patch = Json::parse(raw, nullptr, false);
    if (patch.is_discarded() || !patch.is_array())
      return InvalidArgument("response.patch is not a JSON array");
    r.patch = std::move(patch);
  }
  if (const Json* w = Member(*resp, "warnings"); w && w->is_array())
    for (const auto& s : *w)
      if (s.is_string()) r.warnings.push_back(s.get<std::string>());
  return r;
}

OwnedKeys SchedulerOwnedKeys(const vendors::VendorSet& enabled) {
  OwnedKeys k;
  k.annotations = {nvidia::kNvidiaDevicesToAllocate,
                   nvidia::kNvidiaDevicesAllocated,
                   nvidia::kMigAllocations,
                   core::kVgpuNode,
                   core::kVgpuTime,
                   core::kBindTime,
                   core::kBindPhase};
  k.node_agent = {nvidia::kNvidiaDevicesToAllocate, core::kBindPhase};
  k.labels = {core::kVgpuNode};
  auto add = [&k](const vendors::Vendor& v) {
    const vendors::AnnotationKeys& keys = v.keys();
    if (!keys.to_allocate.empty()) {
      k.annotations.insert(keys.to_allocate);
      k.node_agent.insert(keys.to_allocate);
    }
    if (!keys.allocated.empty()) k.annotations.insert(keys.allocated);
    // The vendor's extra decision keys (Cambricon's profile and lock, Ascend's template choice) are
    // whatever its EncodeDecision writes besides the two records: read them off a one-device
    // decision.
    core::PodAllocation sample;
    sample.containers = {{core::ContainerDevice{"sample-0", v.common_word(), 1, 1, 0}}};
    auto encoded = v.EncodeDecision(sample, 0);
    if (!encoded.ok()) return;
    for (const auto& [key, value] : *encoded) {
      if (key == keys.allocated || key == keys.to_allocate) continue;
      k.annotations.insert(key);
      k.node_agent.insert(key);  // device plugins acknowledge in them (Cambricon's ASSIGHED flag)
    }
  };
  for (const auto& v : vendors::AllVendorsWithDefaults()) add(*v);
  for (const auto& v : enabled.vendors()) add(*v);
  // The remote-GPU placement: LUPINE_SERVER comes from it, so a value set at creation would point
  // the pod at a server nobody gave it.
  k.annotations.insert(vendors::remotegpu::kEndpointAnnotation);
  return k;
}

StatusOr<std::string> ServiceAccountUsername(std::string_view value) {
  constexpr std::string_view kPrefix = "system:serviceaccount:";
  std::string_view rest = value;
  if (rest.substr(0, kPrefix.size()) == kPrefix) rest.remove_prefix(kPrefix.size());
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find(':', colon + 1) != std::string_view::npos)
    return InvalidArgument("service account \"", std::string(value), "\": want NAMESPACE:NAME");
  return StrCat(kPrefix, std::string(rest));
}

Webhook::Webhook(WebhookOptions opts)
    : opts_(std::move(opts)), owned_(SchedulerOwnedKeys(*opts_.vendors)) {}

AdmissionResponse Webhook::Review(const AdmissionRequest& req) const {
  AdmissionResponse allow;
  allow.uid = req.uid;
  if (!req.object.is_object()) return allow;
  if (!req.kind.empty() && req.kind != "Pod") return allow;
  if (req.operation == "CREATE") return ReviewCreate(req);
  if (req.operation == "UPDATE") return ReviewUpdate(req);
  return allow;
}

AdmissionResponse Webhook::ReviewUpdate(const AdmissionRequest& req) const {
  AdmissionResponse allow;
  allow.uid = req.uid;
  const Json none = Json::object();
  const Json& old = req.old_object.is_object() ? req.old_object : none;
  std::vector<std::string> changed;
  bool agent_may = true;  // every changed key is one node agents may change
  // The usage keys (usage_apply.h): the profile outside trusted namespaces, the record everywhere.
  const Json* meta = Member(req.object, "metadata");
  const std::string ns = !req.namespace_.empty() ? req.namespace_
                         : meta != nullptr       ? StringMember(*meta, "namespace")
                                                 : "";
  std::vector<std::string> usage_changed;
  for (std::string_view key : {kUsageProfileKey, kUsageAppliedKey}) {
    const std::string k(key);
    if ((key == kUsageProfileKey && NamespaceListed(opts_.usage.trusted_namespaces, ns)) ||
        SameEntry(MapEntry(MetaMap(old, "annotations"), k),
                  MapEntry(MetaMap(req.object, "annotations"), k)))
      continue;
    usage_changed.push_back(k);
  }
  if (!usage_changed.empty() && !Contains(opts_.scheduler_users, req.username))
    return Deny(req.uid,
                StrCat("hami: ", JoinKeys(usage_changed), " may not be changed in namespace \"", ns,
                       "\": hami-scheduler packs pods by their usage profile, so outside the "
                       "namespaces it trusts (--usage-namespaces) only the webhook writes it, "
                       "from a recommendation, at admission"));
  for (const char* which : {"annotations", "labels"}) {
    const bool labels = std::string_view(which) == "labels";
    const Json* before = MetaMap(old, which);
    const Json* after = MetaMap(req.object, which);
    for (const std::string& key : labels ? owned_.labels : owned_.annotations) {
      if (SameEntry(MapEntry(before, key), MapEntry(after, key))) continue;
      changed.push_back(labels ? StrCat("label ", key) : key);
      agent_may = agent_may && !labels && owned_.node_agent.count(key) > 0;
    }
  }
  if (!changed.empty() && !Contains(opts_.scheduler_users, req.username) &&
      !(agent_may && Contains(opts_.node_agent_users, req.username))) {
    return Deny(
        req.uid,
        StrCat("hami: ",
               req.username.empty() ? std::string("a request without a username")
                                    : StrCat("user \"", req.username, "\""),
               " may not change ", JoinKeys(changed),
               ": they record hami-scheduler's device decision and only its service account (and "
               "node agents, for what they consume) write them"));
  }
  // An ephemeral container added to a GPU pod (kubectl debug) is held to the containers' rule.
  const Json* spec = Member(req.object, "spec");
  const Json* added = spec ? Member(*spec, "ephemeralContainers") : nullptr;
  if (added == nullptr || !added->is_array() || added->empty()) return allow;
  const Json* old_spec = Member(old, "spec");
  const Json* had = old_spec ? Member(*old_spec, "ephemeralContainers") : nullptr;
  auto parsed = opts_.vendors->ParsePod(req.object);
  if (!parsed.ok() || !parsed->HasDevices()) return allow;
  for (const Json& c : *added) {
    const std::string name = StringMember(c, "name");
    const bool existed =
        had && had->is_array() && std::any_of(had->begin(), had->end(), [&](const Json& h) {
          return StringMember(h, "name") == name;
        });
    const char* problem = PrivilegeProblem(c);
    if (!existed && *problem)
      return DenyPrivileged(req.uid, "ephemeralContainers", c, problem,
                            NvidiaCount(*opts_.vendors));
  }
  return allow;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMatchLabels(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  if (core::text::Trim(text).empty()) return out;
  for (std::string_view entry : core::text::Split(text, ',')) {
    entry = core::text::Trim(entry);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgument("label selector entry \"", std::string(entry), "\" is not key=value");
    std::string key(core::text::Trim(entry.substr(0, eq)));
    std::string value(core::text::Trim(entry.substr(eq + 1)));
    if (key.empty())
      return InvalidArgument("label selector entry \"", std::string(entry), "\" has no key");
    for (const auto& [k, v] : out)
      if (k == key) return InvalidArgument("label selector names \"", key, "\" twice");
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

namespace phases {

bool TakesOverCpuPod(const Json& pod, const std::string& request_namespace,
                     const WebhookOptions& opts) {
  const CpuPodOptIn& in = opts.cpu_pods;
  if (!in.Enabled()) return false;
  const Json* spec = Member(pod, "spec");
  if (spec == nullptr || !StringMember(*spec, "nodeName").empty()) return false;
  if (const Json* meta = Member(pod, "metadata")) {
    const Json* owners = Member(*meta, "ownerReferences");
    if (owners != nullptr && owners->is_array())
      for (const Json& o : *owners)
        if (o.is_object() && StringMember(o, "kind") == "DaemonSet" && o.value("controller", false))
          return false;
  }
  return Selected(pod, PodNamespace(pod, request_namespace), in.namespaces, in.match_labels);
}

std::vector<std::string> StripOwnedKeys(const Json& pod, const OwnedKeys& owned, Json* ops) {
  std::vector<std::string> stripped;
  for (const char* which : {"annotations", "labels"}) {
    const bool labels = std::string_view(which) == "labels";
    const Json* map = MetaMap(pod, which);
    for (const std::string& key : labels ? owned.labels : owned.annotations) {
      if (MapEntry(map, key) == nullptr) continue;
      ops->push_back(
          Json{{"op", "remove"}, {"path", StrCat("/metadata/", which, "/", EscapePointer(key))}});
      stripped.push_back(labels ? StrCat("label ", key) : key);
    }
  }
  return stripped;
}

Scope ScopeOf(const Json& pod, const WebhookOptions& opts) {
  if (const Json* ignore = MapEntry(MetaMap(pod, "labels"), core::kWebhookLabel);
      ignore && *ignore == "ignore")
    return Scope::kIgnored;
  const Json* spec = Member(pod, "spec");
  const Json* containers = spec ? Member(*spec, "containers") : nullptr;
  // Before the scheduler check, as upstream.
  if (containers == nullptr || !containers->is_array() || containers->empty())
    return Scope::kNoContainers;
  const std::string scheduler = StringMember(*spec, "schedulerName");
  if (!scheduler.empty() && scheduler != opts.scheduler_name &&
      !(scheduler == "default-scheduler" && opts.force_overwrite_default_scheduler))
    return Scope::kIgnored;  // another scheduler owns this pod
  return Scope::kReview;
}

Status DecodePod(const Json& pod, const WebhookOptions& opts, PodUnderReview* out) {
  auto parsed = opts.vendors->ParsePod(pod);
  if (!parsed.ok())
    return InvalidArgument("hami: the pod's device request is invalid: ",
                           std::string(parsed.status().message()));
  out->parsed = std::move(*parsed);
  out->spec = Member(pod, "spec");
  out->containers.clear();
  if (out->spec == nullptr) return OkStatus();
  size_t k = 0;
  for (const char* list : {"initContainers", "containers"}) {
    const Json* arr = Member(*out->spec, list);
    if (arr == nullptr || !arr->is_array()) continue;
    for (size_t i = 0; i < arr->size(); ++i, ++k)
      out->containers.push_back(
          {&(*arr)[i], StrCat("/spec/", list, "/", i),
           k < out->parsed.containers.size() ? &out->parsed.containers[k] : nullptr});
  }
  return OkStatus();
}

StatusOr<std::vector<ContainerChanges>> MutateContainers(const PodUnderReview& pod,
                                                         const vendors::VendorSet& vendors) {
  std::vector<ContainerChanges> out(pod.containers.size());
  const Json empty = Json::object();
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const PodUnderReview::Container& c = pod.containers[i];
    const Json* res = Member(*c.json, "resources");
    const Json& resources = res && res->is_object() ? *res : empty;
    const std::string where =
        StrCat("hami: ", c.path, " \"", StringMember(*c.json, "name"), "\": ");
    for (const auto& v : vendors.vendors()) {
      auto m = v->Mutate(resources, pod.parsed.annotations);
      if (!m.ok()) return InvalidArgument(where, std::string(m.status().message()));
      if (!m->denials.empty()) return InvalidArgument(where, m->denials.front());
      for (const auto& [name, value] : m->add_limits) out[i].add_limits[name] = value;
      for (const auto& kv : m->env) out[i].env.push_back(kv);
      for (const auto& [name, value] : m->env_prepend) {
        const Json* e = EnvEntry(*c.json, name);
        if (e != nullptr && Member(*e, "valueFrom") != nullptr)
          return InvalidArgument(where, "env ", name, " comes from a source (valueFrom), and ",
                                 v->common_word(), " must put ", value,
                                 " in front of it: set it literally, or drop the ",
                                 v->resources().memory, " request");
        out[i].env_prepend[name] = value;
      }
      out[i].set_env.insert(m->set_env.begin(), m->set_env.end());
      out[i].env_field_refs.insert(m->env_field_refs.begin(), m->env_field_refs.end());
      out[i].volume_mounts.insert(m->volume_mounts.begin(), m->volume_mounts.end());
      out[i].init_containers.insert(out[i].init_containers.end(), m->init_containers.begin(),
                                    m->init_containers.end());
    }
  }
  return out;
}

Status CheckMigPreference(const PodUnderReview& pod, const WebhookOptions& opts) {
  if (opts.vendors->ByCommonWord(core::kNvidiaVendor) == nullptr) return OkStatus();
  if (Status s = vendors::nvidia::CheckMigProfilePreference(pod.parsed.annotations,
                                                            opts.mig_profile_allowlist);
      !s.ok())
    return InvalidArgument("hami: ", s.message());
  return OkStatus();
}

Status CheckTrust(const PodUnderReview& pod, const WebhookOptions& opts) {
  const Json& spec = *pod.spec;
  for (const char* list : kContainerLists) {
    const Json* arr = Member(spec, list);
    if (arr == nullptr || !arr->is_array()) continue;
    for (const Json& c : *arr)
      if (const char* problem = PrivilegeProblem(c); *problem)
        return Forbidden(DenyPrivileged("", list, c, problem, NvidiaCount(*opts.vendors)).message);
  }
  if (!StringMember(spec, "nodeName").empty())
    return Forbidden(
        "hami: spec.nodeName is preset (\"", StringMember(spec, "nodeName"),
        "\"); a pod that requests GPUs must be placed by ", opts.scheduler_name,
        " so its devices are reserved. Remove spec.nodeName and use a nodeSelector or node "
        "affinity instead");
  return OkStatus();
}

Status CheckQuota(const Json& pod, const PodUnderReview& parsed,
                  const std::string& request_namespace, const WebhookOptions& opts) {
  if (!opts.quota_check) return OkStatus();
  // The pod's device memory and cores as the quota counts them, by the scheduler's own formula
  // (init, sidecar and app containers), against every enabled vendor's quota resources.
  const std::map<std::string, int64_t> demand =
      opts.vendors->QuotaCharge(core::RequestedDeviceTotalsByVendor(parsed.parsed));
  // request.namespace is the API server's word; a request without it is charged to the object's.
  const Json* meta = Member(pod, "metadata");
  const std::string ns = !request_namespace.empty() ? request_namespace
                         : meta                     ? StringMember(*meta, "namespace")
                                                    : "";
  if (ns.empty())
    return Forbidden(
        "hami: the pod's namespace is unknown (request.namespace and metadata.namespace are "
        "empty), so its GPU quota cannot be checked");
  Status q = opts.quota_check(ns, demand);
  if (!q.ok()) return Forbidden("hami: ", std::string(q.message()));
  return OkStatus();
}

namespace {

// overwriteEnv: upstream's NVIDIA_VISIBLE_DEVICES=none for a container that names no NVIDIA
// resource, in pods without devices too (it would otherwise see every GPU of the node). The pod's
// overwrite-env annotations may turn it on for some containers (OverwriteEnvFor). An entry the
// container has is replaced by an op; otherwise the variable is appended to *env.
class OverwriteEnv {
 public:
  OverwriteEnv(const PodUnderReview& pod, const WebhookOptions& opts)
      : nvidia_(opts.vendors->ByCommonWord(core::kNvidiaVendor)),
        annotations_(ReadOverwriteEnv(pod.parsed.annotations)),
        on_(opts.overwrite_env) {}
  void Apply(const PodUnderReview::Container& c, const ContainerChanges& ch, Json* ops,
             std::vector<std::pair<std::string, std::string>>* env) const {
    if (nvidia_ == nullptr || !OverwriteEnvFor(annotations_, StringMember(*c.json, "name"), on_) ||
        NamesNvidia(*c.json, c.req, *nvidia_, ch.add_limits))
      return;
    if (HasEnv(*c.json, "NVIDIA_VISIBLE_DEVICES"))
      ReplaceEnv(*ops, c.path, *c.json, "NVIDIA_VISIBLE_DEVICES", "none");
    else
      env->emplace_back("NVIDIA_VISIBLE_DEVICES", "none");
  }

 private:
  const vendors::Vendor* nvidia_;
  OverwriteEnvAnnotations annotations_;
  bool on_;
};

}  // namespace

void BuildOverwriteEnvPatch(const PodUnderReview& pod, const std::vector<ContainerChanges>& changes,
                            const WebhookOptions& opts, Json* ops) {
  const OverwriteEnv overwrite(pod, opts);
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    std::vector<std::pair<std::string, std::string>> env;
    overwrite.Apply(pod.containers[i], changes[i], ops, &env);
    AddEnv(*ops, pod.containers[i].path, *pod.containers[i].json, env);
  }
}

void BuildPatch(const PodUnderReview& pod, const std::vector<ContainerChanges>& changes,
                const WebhookOptions& opts, Json* ops) {
  if (!pod.parsed.HasDevices()) return BuildOverwriteEnvPatch(pod, changes, opts, ops);
  const OverwriteEnv overwrite(pod, opts);
  const Json& spec = *pod.spec;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const PodUnderReview::Container& c = pod.containers[i];
    const Json* res = Member(*c.json, "resources");
    const std::map<std::string, int64_t>& defaults = changes[i].add_limits;
    std::vector<std::pair<std::string, std::string>> env = changes[i].env;
    if (!defaults.empty()) {
      const Json* limits = res ? Member(*res, "limits") : nullptr;
      if (res == nullptr || !res->is_object()) {
        Json l = Json::object();
        for (const auto& [name, v] : defaults) l[name] = std::to_string(v);
        ops->push_back(
            Json{{"op", "add"}, {"path", c.path + "/resources"}, {"value", Json{{"limits", l}}}});
      } else if (limits == nullptr || !limits->is_object()) {
        Json l = Json::object();
        for (const auto& [name, v] : defaults) l[name] = std::to_string(v);
        ops->push_back(Json{{"op", "add"}, {"path", c.path + "/resources/limits"}, {"value", l}});
      } else {
        for (const auto& [name, v] : defaults)
          ops->push_back(Json{{"op", "add"},
                              {"path", StrCat(c.path, "/resources/limits/", EscapePointer(name))},
                              {"value", std::to_string(v)}});
      }
      // A value the container also requests is changed there too: an extended resource's request
      // must equal its limit (upstream's Enflame vGCU admission writes both).
      const Json* requests = res && res->is_object() ? Member(*res, "requests") : nullptr;
      if (requests != nullptr && requests->is_object())
        for (const auto& [name, v] : defaults)
          if (requests->contains(name))
            ops->push_back(
                Json{{"op", "replace"},
                     {"path", StrCat(c.path, "/resources/requests/", EscapePointer(name))},
                     {"value", std::to_string(v)}});
    }
    const bool has_nvidia =
        c.req && !c.req->devices.empty() && c.req->devices[0].vendor == core::kNvidiaVendor;
    if (has_nvidia && opts.gpu_core_policy != "default" && !opts.gpu_core_policy.empty())
      env.emplace_back("GPU_CORE_UTILIZATION_POLICY", opts.gpu_core_policy);
    overwrite.Apply(c, changes[i], ops, &env);
    std::vector<Json> add;
    add.reserve(env.size());
    for (const auto& [k, v] : env) add.push_back(Json{{"name", k}, {"value", v}});
    AddEnvEntries(*ops, c.path, *c.json, add, VendorEnvEntries(*c.json, changes[i]));
    AddVolumeMounts(*ops, c.path, *c.json, changes[i].volume_mounts);
  }
  if (opts.region_group >= 0) {
    // Every process of the pod, whatever its user, then shares the region directory the device
    // plugin gives to this group (mode 0770), so the directory need not be world-writable.
    const Json* sc = Member(spec, "securityContext");
    const Json* groups = sc ? Member(*sc, "supplementalGroups") : nullptr;
    const Json gid = opts.region_group;
    if (sc == nullptr || !sc->is_object())
      ops->push_back(Json{{"op", "add"},
                          {"path", "/spec/securityContext"},
                          {"value", {{"supplementalGroups", {gid}}}}});
    else if (groups == nullptr || !groups->is_array())
      ops->push_back(Json{
          {"op", "add"}, {"path", "/spec/securityContext/supplementalGroups"}, {"value", {gid}}});
    else if (std::find(groups->begin(), groups->end(), gid) == groups->end())
      ops->push_back(Json{
          {"op", "add"}, {"path", "/spec/securityContext/supplementalGroups/-"}, {"value", gid}});
  }
  if (!opts.runtime_class_name.empty() && StringMember(spec, "runtimeClassName").empty())
    ops->push_back(Json{
        {"op", "add"}, {"path", "/spec/runtimeClassName"}, {"value", opts.runtime_class_name}});
  SetSchedulerName(spec, opts.scheduler_name, ops);
  AddInitContainers(*ops, spec, changes);  // last: it shifts spec.initContainers
}

}  // namespace phases

AdmissionResponse Webhook::ReviewCreate(const AdmissionRequest& req) const {
  // The pod the phases review: the request's, with the usage phase's changes (its ops first).
  Json pod = req.object;
  AdmissionResponse allow;
  allow.uid = req.uid;
  Json ops = Json::array();
  auto allowed = [&] {
    AdmissionResponse r = allow;
    if (!ops.empty()) r.patch = ops;
    return r;
  };
  auto deny = [&](const Status& s) { return Deny(req.uid, std::string(s.message())); };
  // Scheduler-owned keys go first, from every pod: a decision written at creation is nobody's.
  if (auto stripped = phases::StripOwnedKeys(pod, owned_, &ops); !stripped.empty())
    allow.warnings.push_back(
        StrCat("hami: removed ", JoinKeys(stripped),
               ": only hami-scheduler writes them (they carry its device decision)"));
  const phases::Scope scope = phases::ScopeOf(pod, opts_);
  const Json* meta = Member(pod, "metadata");
  const std::string ns = !req.namespace_.empty() ? req.namespace_
                         : meta != nullptr       ? StringMember(*meta, "namespace")
                                                 : "";
  UsageApplyResult usage =
      ApplyUsage(&pod, ns, scope == phases::Scope::kReview, opts_.usage, *opts_.vendors, &ops);
  for (std::string& w : usage.warnings) allow.warnings.push_back(std::move(w));
  switch (scope) {
    case phases::Scope::kIgnored:
      return allowed();
    case phases::Scope::kNoContainers:
      return Deny(
          req.uid,
          "hami: the pod has no containers (spec.containers is empty); a pod needs at least one");
    case phases::Scope::kReview:
      break;
  }
  // Upstream v2.11: an Ascend `-core` limit in a pod that names no vNPU mode asks for hami-core,
  // written on the pod before the phases read its annotations.
  if (const Json* meta = Member(pod, "metadata"); Member(pod, "spec") != nullptr) {
    std::map<std::string, std::string> annotations;
    if (const Json* a = meta ? Member(*meta, "annotations") : nullptr; a && a->is_object())
      for (const auto& [k, v] : a->items())
        if (v.is_string()) annotations[k] = v.get<std::string>();
    if (auto mode =
            vendors::ImpliedVnpuMode(opts_.vendors->vendors(), *Member(pod, "spec"), annotations)) {
      SetAnnotation(&pod, vendors::kAscendVnpuModeKey, *mode, &ops);
      allow.warnings.push_back(StrCat("hami: ", vendors::kAscendVnpuModeKey, ": ", *mode,
                                      " set: the pod asks for Ascend cores (soft split)"));
    }
  }
  phases::PodUnderReview decoded;
  if (Status s = phases::DecodePod(pod, opts_, &decoded); !s.ok()) return deny(s);
  // A typo in hami.io/numa-alignment surfaces at admission, not in a device-plugin log later.
  if (auto mode = core::NumaAlignmentOf(decoded.parsed.annotations); !mode.ok())
    return deny(mode.status());
  auto changes = phases::MutateContainers(decoded, *opts_.vendors);
  if (!changes.ok()) return deny(changes.status());
  if (Status s = phases::CheckMigPreference(decoded, opts_); !s.ok()) return deny(s);
  for (const std::string& w : OverwriteEnvWarnings(decoded.parsed.annotations, opts_.overwrite_env))
    allow.warnings.push_back(StrCat("hami: ", w));
  bool dra = false;  // converted into DRA claims instead of the device-plugin patch
  if (decoded.parsed.HasDevices()) {
    // Annotations read leniently (as upstream reads them) that will not do what they say.
    for (const std::string& w : opts_.vendors->IgnoredAnnotations(decoded.parsed.annotations))
      allow.warnings.push_back(StrCat("hami: ", w));
    for (const std::string& w : core::IgnoredAnnotations(decoded.parsed.annotations))
      allow.warnings.push_back(StrCat("hami: ", w));
    if (Status s = phases::CheckTrust(decoded, opts_); !s.ok()) return deny(s);
    if (Status s = phases::CheckQuota(pod, decoded, req.namespace_, opts_); !s.ok()) return deny(s);
    if (ConvertsToDra(pod, decoded, req.namespace_)) {
      if (Status s = ConvertToDra(pod, decoded, *changes, req, &ops); !s.ok()) return deny(s);
      dra = true;
    }
  }
  if (!dra) phases::BuildPatch(decoded, *changes, opts_, &ops);
  if (!decoded.parsed.HasDevices() && phases::TakesOverCpuPod(pod, req.namespace_, opts_))
    SetSchedulerName(*decoded.spec, opts_.scheduler_name, &ops);
  if (usage.event && !req.dry_run && opts_.usage.record_event)
    opts_.usage.record_event(std::move(*usage.event));
  return allowed();
}

bool Webhook::ConvertsToDra(const Json& pod, const phases::PodUnderReview& decoded,
                            const std::string& request_namespace) const {
  if (!opts_.dra.Enabled() || opts_.dra_templates == nullptr) return false;
  const bool nvidia = std::any_of(
      decoded.parsed.containers.begin(), decoded.parsed.containers.end(), [](const auto& c) {
        return std::any_of(c.devices.begin(), c.devices.end(), [](const core::DeviceRequest& d) {
          return d.vendor == core::kNvidiaVendor;
        });
      });
  const std::string ns = PodNamespace(pod, request_namespace);
  return nvidia && (Contains(opts_.dra.namespaces, "*") ||
                    Selected(pod, ns, opts_.dra.namespaces, opts_.dra.match_labels));
}

Status Webhook::ConvertToDra(const Json& pod, const phases::PodUnderReview& decoded,
                             const std::vector<phases::ContainerChanges>& changes,
                             const AdmissionRequest& req, Json* ops) const {
  const vendors::Vendor* nvidia = opts_.vendors->ByCommonWord(core::kNvidiaVendor);
  const std::string ns = PodNamespace(pod, req.namespace_);
  if (nvidia == nullptr || ns.empty())
    return Forbidden(
        "hami: the pod's namespace is unknown, so its DRA claim templates have no "
        "namespace");
  std::vector<DraContainer> containers;
  containers.reserve(decoded.containers.size());
  for (const auto& c : decoded.containers) containers.push_back({c.json, c.path, c.req});
  std::vector<int64_t> sizes;
  if (opts_.dra_sizes != nullptr && NeedsDeviceSizes(containers)) {
    auto listed = opts_.dra_sizes->SizesMiB();
    if (!listed.ok())
      return Forbidden(
          "hami: DRA conversion: the GPU sizes for gpumem-percentage cannot be read "
          "from the ResourceSlices: ",
          listed.status().message());
    sizes = std::move(*listed);
  }
  auto conv = ConvertPodToDra(pod, containers, decoded.parsed.selectors, nvidia->resources(), ns,
                              opts_.dra, sizes);
  if (!conv.ok()) return conv.status();
  if (!req.dry_run)  // a dry run creates nothing
    for (const DraTemplate& t : conv->templates)
      if (Status s = opts_.dra_templates->Ensure(ns, t); !s.ok())
        return Forbidden("hami: DRA conversion: ", s.message());
  for (Json& op : conv->ops) ops->push_back(std::move(op));
  // The containers left without a claim get overwriteEnv as in any GPU pod.
  phases::BuildOverwriteEnvPatch(decoded, changes, opts_, ops);
  if (!opts_.runtime_class_name.empty() && StringMember(*decoded.spec, "runtimeClassName").empty())
    ops->push_back(Json{
        {"op", "add"}, {"path", "/spec/runtimeClassName"}, {"value", opts_.runtime_class_name}});
  return OkStatus();
}

std::string Webhook::Handle(std::string_view body) const {
  auto req = ParseAdmissionReview(body);
  if (!req.ok()) {
    AdmissionResponse r;
    r.allowed = false;
    r.code = 400;
    r.reason = "BadRequest";
    r.message = StrCat("hami: ", std::string(req.status().message()));
    return ToJson(r).dump();
  }
  return ToJson(Review(*req)).dump();
}

}  // namespace hami::webhook
