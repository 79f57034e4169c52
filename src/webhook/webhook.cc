#include "webhook/webhook.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "core/annotations.h"

namespace hami::webhook {
namespace {

constexpr const char kApiVersion[] = "admission.k8s.io/v1";

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
  if (!v->is_string()) return InvalidArgument(where, ".", key, " must be a string, got ", v->type_name());
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

// An env var of a container, or nullptr.
bool HasEnv(const Json& container, const std::string& name) {
  const Json* env = Member(container, "env");
  if (env == nullptr || !env->is_array()) return false;
  return std::any_of(env->begin(), env->end(), [&](const Json& e) { return e.is_object() && e.value("name", "") == name; });
}

// JSON-patch ops that add env vars to one container.
void AddEnv(Json& ops, const std::string& base, const Json& container, const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::pair<std::string, std::string>> todo;
  for (const auto& v : vars)
    if (!HasEnv(container, v.first)) todo.push_back(v);
  if (todo.empty()) return;
  const Json* env = Member(container, "env");
  if (env == nullptr || !env->is_array()) {
    Json arr = Json::array();
    for (const auto& [k, v] : todo) arr.push_back(Json{{"name", k}, {"value", v}});
    ops.push_back(Json{{"op", "add"}, {"path", base + "/env"}, {"value", std::move(arr)}});
    return;
  }
  for (const auto& [k, v] : todo)
    ops.push_back(Json{{"op", "add"}, {"path", base + "/env/-"}, {"value", Json{{"name", k}, {"value", v}}}});
}

}  // namespace

std::string EscapePointer(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

StatusOr<AdmissionRequest> ParseAdmissionReview(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("AdmissionReview: body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("AdmissionReview: body must be a JSON object");
  std::string api_version, kind;
  HAMI_RETURN_IF_ERROR(GetString(j, "apiVersion", "AdmissionReview", &api_version));
  HAMI_RETURN_IF_ERROR(GetString(j, "kind", "AdmissionReview", &kind));
  if (kind != "AdmissionReview") return InvalidArgument("AdmissionReview: kind is \"", kind, "\", want AdmissionReview");
  if (api_version != kApiVersion)
    return InvalidArgument("AdmissionReview: apiVersion is \"", api_version, "\", want ", kApiVersion,
                           " (set admissionReviewVersions: [v1] in the webhook configuration)");
  const Json* req = Member(j, "request");
  if (req == nullptr || !req->is_object()) return InvalidArgument("AdmissionReview: request is missing");
  AdmissionRequest r;
  HAMI_RETURN_IF_ERROR(GetString(*req, "uid", "request", &r.uid));
  if (r.uid.empty()) return InvalidArgument("AdmissionReview: request.uid is empty");
  HAMI_RETURN_IF_ERROR(GetString(*req, "namespace", "request", &r.namespace_));
  HAMI_RETURN_IF_ERROR(GetString(*req, "operation", "request", &r.operation));
  if (const Json* k = Member(*req, "kind")) {
    if (!k->is_object()) return InvalidArgument("request.kind must be an object");
    HAMI_RETURN_IF_ERROR(GetString(*k, "kind", "request.kind", &r.kind));
  }
  if (const Json* o = Member(*req, "object")) {
    if (!o->is_object()) return InvalidArgument("request.object must be an object");
    r.object = *o;
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
  return Json{{"apiVersion", kApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(resp)}};
}

StatusOr<AdmissionResponse> ParseAdmissionResponse(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("AdmissionReview reply: not a JSON object");
  const Json* resp = Member(j, "response");
  if (resp == nullptr || !resp->is_object()) return InvalidArgument("AdmissionReview reply: response is missing");
  AdmissionResponse r;
  HAMI_RETURN_IF_ERROR(GetString(*resp, "uid", "response", &r.uid));
  const Json* allowed = Member(*resp, "allowed");
  if (allowed == nullptr || !allowed->is_boolean()) return InvalidArgument("response.allowed must be a boolean");
  r.allowed = allowed->get<bool>();
  if (const Json* st = Member(*resp, "status")) {
    r.message = StringMember(*st, "message");
    r.reason = StringMember(*st, "reason");
    if (const Json* c = Member(*st, "code"); c && c->is_number_integer()) r.code = c->get<int32_t>();
  }
  if (const Json* p = Member(*resp, "patch")) {
    if (!p->is_string()) return InvalidArgument("response.patch must be a base64 string");
    if (StringMember(*resp, "patchType") != "JSONPatch") return InvalidArgument("response.patchType must be JSONPatch");
    std::string raw;
    if (!absl::Base64Unescape(p->get<std::string>(), &raw)) return InvalidArgument("response.patch is not base64");
    Json patch = Json::parse(raw, nullptr, false);
    if (patch.is_discarded() || !patch.is_array()) return InvalidArgument("response.patch is not a JSON array");
    r.patch = std::move(patch);
  }
  if (const Json* w = Member(*resp, "warnings"); w && w->is_array())
    for (const auto& s : *w)
      if (s.is_string()) r.warnings.push_back(s.get<std::string>());
  return r;
}

AdmissionResponse Webhook::Review(const AdmissionRequest& req) const {
  AdmissionResponse allow;
  allow.uid = req.uid;
  if (req.operation != "CREATE" || !req.object.is_object()) return allow;
  if (!req.kind.empty() && req.kind != "Pod") return allow;
  const Json& pod = req.object;
  const Json* meta = Member(pod, "metadata");
  if (meta) {
    const Json* labels = Member(*meta, "labels");
    if (labels && labels->is_object() && labels->value(core::kWebhookLabel, "") == "ignore") return allow;
  }
  const Json* spec = Member(pod, "spec");
  if (spec == nullptr || !spec->is_object()) return allow;
  const std::string scheduler = StringMember(*spec, "schedulerName");
  if (!scheduler.empty() && scheduler != opts_.scheduler_name &&
      !(scheduler == "default-scheduler" && opts_.force_overwrite_default_scheduler))
    return allow;  // another scheduler owns this pod

  auto parsed = opts_.vendors ? opts_.vendors->ParsePod(pod, opts_.resources) : core::ParsePodJson(pod, opts_.resources);
  if (!parsed.ok())
    return Deny(req.uid, StrCat("hami: the pod's device request is invalid: ", std::string(parsed.status().message())));
  if (!parsed->HasDevices()) return allow;

  // Decision-order index -> the container JSON and its patch path.
  struct Ctr {
    const Json* json;
    std::string path;
    const core::ContainerRequest* req;
  };
  std::vector<Ctr> ctrs;
  size_t k = 0;
  for (const char* list : {"initContainers", "containers"}) {
    const Json* arr = Member(*spec, list);
    if (arr == nullptr || !arr->is_array()) continue;
    for (size_t i = 0; i < arr->size(); ++i, ++k)
      ctrs.push_back({&(*arr)[i], StrCat("/spec/", list, "/", i), k < parsed->containers.size() ? &parsed->containers[k] : nullptr});
  }

  for (const auto& c : ctrs)
    if (c.req && !c.req->devices.empty() && Privileged(*c.json))
      return Deny(req.uid, StrCat("hami: container \"", c.req->name,
                                  "\" is privileged and requests GPUs; a privileged container sees every GPU of the "
                                  "node, so its share cannot be enforced. Remove securityContext.privileged or the ",
                                  opts_.resources.nvidia.count, " request"));
  if (!StringMember(*spec, "nodeName").empty())
    return Deny(req.uid, StrCat("hami: spec.nodeName is preset (\"", StringMember(*spec, "nodeName"),
                                "\"); a pod that requests GPUs must be placed by ", opts_.scheduler_name,
                                " so its devices are reserved. Remove spec.nodeName and use a nodeSelector or node "
                                "affinity instead"));
  if (opts_.quota_check) {
    // The pod's device memory and cores as the quota counts them: max(peak init, sum of the others).
    int64_t run_mem = 0, run_cores = 0, init_mem = 0, init_cores = 0;
    for (const auto& c : parsed->containers)
      for (const auto& d : c.devices) {
        if (d.vendor != core::kNvidiaVendor) continue;  // the quota keys are NVIDIA's resources
        const int64_t mem = static_cast<int64_t>(d.nums) * d.memreq_mib, cores = static_cast<int64_t>(d.nums) * d.coresreq;
        if (c.kind == core::ContainerKind::kInit) {
          init_mem = std::max(init_mem, mem);
          init_cores = std::max(init_cores, cores);
        } else {
          run_mem += mem;
          run_cores += cores;
        }
      }
    Status q = opts_.quota_check(req.namespace_, std::max(run_mem, init_mem), std::max(run_cores, init_cores));
    if (!q.ok()) return Deny(req.uid, StrCat("hami: ", std::string(q.message())));
  }

  Json ops = Json::array();
  for (const auto& c : ctrs) {
    const Json* res = Member(*c.json, "resources");
    auto defaults = core::ComputeAdmissionDefaults(res ? *res : Json::object(), opts_.resources);
    std::vector<std::pair<std::string, std::string>> env;
    if (defaults.ok() && opts_.vendors && !opts_.vendors->nvidia_enabled()) defaults->clear();
    if (defaults.ok() && opts_.vendors && res && res->is_object()) {
      // Every other enabled vendor's defaulting of this container (NVIDIA's is the line above).
      for (const auto& v : opts_.vendors->vendors()) {
        if (v->common_word() == core::kNvidiaVendor) continue;
        auto m = v->Mutate(*res, parsed->annotations);
        if (!m.ok()) return Deny(req.uid, StrCat("hami: ", c.path, ": ", std::string(m.status().message())));
        if (!m->denials.empty()) return Deny(req.uid, StrCat("hami: ", c.path, ": ", m->denials.front()));
        for (const auto& [name, value] : m->add_limits) (*defaults)[name] = value;
        for (const auto& kv : m->env) env.push_back(kv);
      }
    }
    if (defaults.ok() && !defaults->empty()) {
      const Json* limits = res ? Member(*res, "limits") : nullptr;
      if (res == nullptr || !res->is_object()) {
        Json l = Json::object();
        for (const auto& [name, v] : *defaults) l[name] = std::to_string(v);
        ops.push_back(Json{{"op", "add"}, {"path", c.path + "/resources"}, {"value", Json{{"limits", l}}}});
      } else if (limits == nullptr || !limits->is_object()) {
        Json l = Json::object();
        for (const auto& [name, v] : *defaults) l[name] = std::to_string(v);
        ops.push_back(Json{{"op", "add"}, {"path", c.path + "/resources/limits"}, {"value", l}});
      } else {
        for (const auto& [name, v] : *defaults)
          ops.push_back(Json{{"op", "add"},
                             {"path", StrCat(c.path, "/resources/limits/", EscapePointer(name))},
                             {"value", std::to_string(v)}});
      }
    }
    const bool has_devices = c.req && !c.req->devices.empty();
    const bool has_nvidia = has_devices && c.req->devices[0].vendor == core::kNvidiaVendor;
    if (has_nvidia) {
      if (c.req->devices[0].priority >= 0) env.emplace_back("CUDA_TASK_PRIORITY", std::to_string(c.req->devices[0].priority));
      if (opts_.gpu_core_policy != "default" && !opts_.gpu_core_policy.empty())
        env.emplace_back("GPU_CORE_UTILIZATION_POLICY", opts_.gpu_core_policy);
    } else if (!has_devices && opts_.overwrite_env) {
      env.emplace_back("NVIDIA_VISIBLE_DEVICES", "none");
    }
    AddEnv(ops, c.path, *c.json, env);
  }
  if (!opts_.runtime_class_name.empty() && StringMember(*spec, "runtimeClassName").empty())
    ops.push_back(Json{{"op", "add"}, {"path", "/spec/runtimeClassName"}, {"value", opts_.runtime_class_name}});
  if (scheduler != opts_.scheduler_name)
    ops.push_back(Json{{"op", spec->contains("schedulerName") ? "replace" : "add"},
                       {"path", "/spec/schedulerName"},
                       {"value", opts_.scheduler_name}});
  AdmissionResponse out = allow;
  if (!ops.empty()) out.patch = std::move(ops);
  return out;
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
