#include "extender/wire.h"

#include <cctype>

namespace hami::extender {
namespace {

bool EqualFold(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

StatusOr<Json> ParseObject(std::string_view body, std::string_view what) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(what, ": body is not valid JSON");
  if (!j.is_object()) return InvalidArgument(what, ": body must be a JSON object, got ", j.type_name());
  return j;
}

Status GetStringFold(const Json& obj, std::string_view key, std::string_view what, std::string* out) {
  const Json* v = FindKeyFold(obj, key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_string()) return InvalidArgument(what, ": field ", key, " must be a string, got ", v->type_name());
  *out = v->get<std::string>();
  return OkStatus();
}

Status GetStringMap(const Json& obj, std::string_view key, std::string_view what,
                    std::map<std::string, std::string>* out) {
  const Json* v = FindKeyFold(obj, key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_object()) return InvalidArgument(what, ": field ", key, " must be an object, got ", v->type_name());
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) return InvalidArgument(what, ": field ", key, "[\"", k, "\"] must be a string");
    (*out)[k] = val.get<std::string>();
  }
  return OkStatus();
}

Status GetNodeList(const Json& obj, std::string_view what, std::optional<std::vector<Json>>* out) {
  const Json* nodes = FindKeyFold(obj, "Nodes");
  if (nodes == nullptr || nodes->is_null()) return OkStatus();
  if (!nodes->is_object()) return InvalidArgument(what, ": field Nodes must be a NodeList object or null");
  std::vector<Json> items;
  auto it = nodes->find("items");
  if (it != nodes->end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument(what, ": field Nodes.items must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& n = (*it)[i];
      const Json* meta = n.is_object() ? FindKeyFold(n, "metadata") : nullptr;
      const Json* name = meta && meta->is_object() ? FindKeyFold(*meta, "name") : nullptr;
      if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty())
        return InvalidArgument(what, ": Nodes.items[", i, "] has no metadata.name");
      items.push_back(n);
    }
  }
  *out = std::move(items);
  return OkStatus();
}

Status GetNames(const Json& obj, std::string_view what, std::optional<std::vector<std::string>>* out) {
  const Json* names = FindKeyFold(obj, "NodeNames");
  if (names == nullptr || names->is_null()) return OkStatus();
  if (!names->is_array()) return InvalidArgument(what, ": field NodeNames must be an array of strings or null");
  std::vector<std::string> v;
  v.reserve(names->size());
  for (size_t i = 0; i < names->size(); ++i) {
    if (!(*names)[i].is_string()) return InvalidArgument(what, ": NodeNames[", i, "] must be a string");
    v.push_back((*names)[i].get<std::string>());
  }
  *out = std::move(v);
  return OkStatus();
}

Json NodeListJson(const std::optional<std::vector<Json>>& nodes) {
  if (!nodes) return nullptr;
  Json items = Json::array();
  for (const auto& n : *nodes) items.push_back(n);
  return Json{{"metadata", Json::object()}, {"items", std::move(items)}};
}

Json NamesJson(const std::optional<std::vector<std::string>>& names) {
  if (!names) return nullptr;
  return Json(*names);
}

Json MapJson(const std::map<std::string, std::string>& m) {
  // Go encodes a nil map as null, an empty non-nil one as {}; kube-scheduler accepts both.
  Json out = Json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

}  // namespace

const Json* FindKeyFold(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it != obj.end()) return &*it;
  for (auto i = obj.begin(); i != obj.end(); ++i)
    if (EqualFold(i.key(), key)) return &i.value();
  return nullptr;
}

std::vector<std::string> ExtenderArgs::CandidateNames() const {
  if (node_names) return *node_names;
  std::vector<std::string> out;
  if (nodes)
    for (const auto& n : *nodes) out.push_back(FindKeyFold(*FindKeyFold(n, "metadata"), "name")->get<std::string>());
  return out;
}

StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderArgs";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderArgs args;
  const Json* pod = FindKeyFold(j, "Pod");
  if (pod == nullptr || !pod->is_object()) return InvalidArgument(kWhat, ": field Pod must be a Pod object");
  args.pod = *pod;
  HAMI_RETURN_IF_ERROR(GetNodeList(j, kWhat, &args.nodes));
  HAMI_RETURN_IF_ERROR(GetNames(j, kWhat, &args.node_names));
  return args;
}

Json ToJson(const ExtenderArgs& args) {
  return Json{{"Pod", args.pod}, {"Nodes", NodeListJson(args.nodes)}, {"NodeNames", NamesJson(args.node_names)}};
}

Json ToJson(const ExtenderFilterResult& r) {
  return Json{{"Nodes", NodeListJson(r.nodes)},
              {"NodeNames", NamesJson(r.node_names)},
              {"FailedNodes", MapJson(r.failed_nodes)},
              {"FailedAndUnresolvableNodes", MapJson(r.failed_and_unresolvable)},
              {"Error", r.error}};
}

StatusOr<ExtenderFilterResult> ParseExtenderFilterResult(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderFilterResult";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderFilterResult r;
  HAMI_RETURN_IF_ERROR(GetNodeList(j, kWhat, &r.nodes));
  HAMI_RETURN_IF_ERROR(GetNames(j, kWhat, &r.node_names));
  HAMI_RETURN_IF_ERROR(GetStringMap(j, "FailedNodes", kWhat, &r.failed_nodes));
  HAMI_RETURN_IF_ERROR(GetStringMap(j, "FailedAndUnresolvableNodes", kWhat, &r.failed_and_unresolvable));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "Error", kWhat, &r.error));
  return r;
}

StatusOr<ExtenderBindingArgs> ParseExtenderBindingArgs(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderBindingArgs";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderBindingArgs a;
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "PodName", kWhat, &a.pod_name));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "PodNamespace", kWhat, &a.pod_namespace));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "PodUID", kWhat, &a.pod_uid));
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "Node", kWhat, &a.node));
  if (a.pod_name.empty()) return InvalidArgument(kWhat, ": field PodName is empty");
  if (a.pod_namespace.empty()) return InvalidArgument(kWhat, ": field PodNamespace is empty");
  if (a.node.empty()) return InvalidArgument(kWhat, ": field Node is empty");
  return a;
}

Json ToJson(const ExtenderBindingArgs& a) {
  return Json{{"PodName", a.pod_name}, {"PodNamespace", a.pod_namespace}, {"PodUID", a.pod_uid}, {"Node", a.node}};
}

Json ToJson(const ExtenderBindingResult& r) { return Json{{"Error", r.error}}; }

StatusOr<ExtenderBindingResult> ParseExtenderBindingResult(std::string_view body) {
  constexpr std::string_view kWhat = "ExtenderBindingResult";
  HAMI_ASSIGN_OR_RETURN(Json j, ParseObject(body, kWhat));
  ExtenderBindingResult r;
  HAMI_RETURN_IF_ERROR(GetStringFold(j, "Error", kWhat, &r.error));
  return r;
}

Json ToJson(const std::vector<HostPriority>& list) {
  Json out = Json::array();
  for (const auto& h : list) out.push_back(Json{{"Host", h.host}, {"Score", h.score}});
  return out;
}

}  // namespace hami::extender
