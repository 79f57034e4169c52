#include "k8s/testing/fake_rbac.h"

#include <algorithm>

#include "common/status.h"

namespace hami::k8s::testing {
namespace {

using Json = nlohmann::json;

std::string Str(const Json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_string()) return "";
  return o[key].get<std::string>();
}

const Json& Arr(const Json& o, const char* key) {
  static const Json kEmpty = Json::array();
  if (!o.is_object() || !o.contains(key) || !o[key].is_array()) return kEmpty;
  return o[key];
}

bool HasString(const Json& list, const std::string& want) {
  for (const auto& v : list)
    if (v.is_string() && v.get<std::string>() == want) return true;
  return false;
}

// rbac/v1 helpers.go: VerbMatches, APIGroupMatches, ResourceMatches, ResourceNameMatches.
bool RuleAllows(const Json& rule, const RequestAttributes& a) {
  const Json& verbs = Arr(rule, "verbs");
  if (!HasString(verbs, "*") && !HasString(verbs, a.verb)) return false;
  const Json& groups = Arr(rule, "apiGroups");
  if (!HasString(groups, "*") && !HasString(groups, a.api_group)) return false;
  const std::string combined =
      a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  const Json& resources = Arr(rule, "resources");
  const bool resource_ok = HasString(resources, "*") || HasString(resources, combined) ||
                           (!a.subresource.empty() && HasString(resources, "*/" + a.subresource));
  if (!resource_ok) return false;
  const Json& names = Arr(rule, "resourceNames");
  return names.empty() || (!a.name.empty() && HasString(names, a.name));
}

void Collect(const Json& objects, std::vector<Json>* out) {
  if (objects.is_array()) {
    for (const auto& o : objects) Collect(o, out);
  } else if (objects.is_object() && objects.contains("items") && objects["items"].is_array()) {
    Collect(objects["items"], out);
  } else if (objects.is_object()) {
    out->push_back(objects);
  }
}

}  // namespace

RequestUser RequestUser::FromJson(const Json& user) {
  RequestUser u;
  u.name = Str(user, "username");
  for (const auto& g : Arr(user, "groups"))
    if (g.is_string()) u.groups.push_back(g.get<std::string>());
  if (user.is_object() && user.contains("extra") && user["extra"].is_object()) {
    for (const auto& [k, vs] : user["extra"].items()) {
      auto& dst = u.extra[k];
      if (!vs.is_array()) continue;
      for (const auto& v : vs)
        if (v.is_string()) dst.push_back(v.get<std::string>());
    }
  }
  return u;
}

RbacPolicy::RbacPolicy(const Json& objects) {
  std::vector<Json> all;
  Collect(objects, &all);
  for (auto& o : all) {
    const std::string kind = Str(o, "kind");
    const Json md = o.value("metadata", Json::object());
    if (kind == "ClusterRole") {
      cluster_roles_[Str(md, "name")] = Arr(o, "rules");
    } else if (kind == "Role") {
      roles_[Str(md, "namespace") + "/" + Str(md, "name")] = Arr(o, "rules");
    } else if (kind == "ClusterRoleBinding") {
      cluster_role_bindings_.push_back(std::move(o));
    } else if (kind == "RoleBinding") {
      role_bindings_.push_back(std::move(o));
    }
  }
}

bool RbacPolicy::Bound(const Json& binding, const RequestUser& user) const {
  for (const auto& s : Arr(binding, "subjects")) {
    const std::string kind = Str(s, "kind"), name = Str(s, "name");
    if (kind == "User" && name == user.name) return true;
    if (kind == "Group" &&
        std::find(user.groups.begin(), user.groups.end(), name) != user.groups.end())
      return true;
    if (kind == "ServiceAccount") {
      std::string ns = Str(s, "namespace");
      if (ns.empty()) ns = Str(binding.value("metadata", Json::object()), "namespace");
      if (user.name == StrCat("system:serviceaccount:", ns, ":", name)) return true;
    }
  }
  return false;
}

bool RbacPolicy::RoleAllows(const Json& role_ref, const std::string& binding_ns,
                            const RequestAttributes& a) const {
  const std::string kind = Str(role_ref, "kind"), name = Str(role_ref, "name");
  const Json* rules = nullptr;
  if (kind == "ClusterRole") {
    auto it = cluster_roles_.find(name);
    if (it != cluster_roles_.end()) rules = &it->second;
  } else if (kind == "Role" && !binding_ns.empty()) {
    auto it = roles_.find(binding_ns + "/" + name);
    if (it != roles_.end()) rules = &it->second;
  }
  if (rules == nullptr) return false;
  for (const auto& r : *rules)
    if (RuleAllows(r, a)) return true;
  return false;
}

bool RbacPolicy::Allows(const RequestUser& user, const RequestAttributes& a) const {
  if (std::find(user.groups.begin(), user.groups.end(), "system:masters") != user.groups.end())
    return true;
  for (const auto& b : cluster_role_bindings_)
    if (Bound(b, user) && Str(b.value("roleRef", Json::object()), "kind") == "ClusterRole" &&
        RoleAllows(b["roleRef"], "", a))
      return true;
  if (a.ns.empty()) return false;
  for (const auto& b : role_bindings_) {
    const std::string ns = Str(b.value("metadata", Json::object()), "namespace");
    if (ns == a.ns && Bound(b, user) && RoleAllows(b.value("roleRef", Json::object()), ns, a))
      return true;
  }
  return false;
}

std::string ForbiddenMessage(const RequestUser& user, const RequestAttributes& a) {
  const std::string resource =
      a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  if (!a.ns.empty())
    return StrCat("User \"", user.name, "\" cannot ", a.verb, " resource \"", resource,
                  "\" in API group \"", a.api_group, "\" in the namespace \"", a.ns, "\"");
  return StrCat("User \"", user.name, "\" cannot ", a.verb, " resource \"", resource,
                "\" in API group \"", a.api_group, "\" at the cluster scope");
}

}  // namespace hami::k8s::testing
