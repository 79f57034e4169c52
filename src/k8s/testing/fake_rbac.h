#pragma once
// RBAC authorization for the fake API server (FakeApiServer::Authorize): who may do what, decided
// from ClusterRoles, ClusterRoleBindings, Roles and RoleBindings (rbac.authorization.k8s.io/v1) as
// the real RBAC authorizer decides it: a request is allowed when a rule of a role bound to the
// user, one of its groups or its service account matches the API group, the resource
// ("<resource>/<sub>" for a subresource, "*", or "*/<sub>"), the verb ("*" or exact, including
// node-aware verbs such as "associated-node:patch") and, when the rule lists resourceNames, the
// object's name. Roles and RoleBindings apply only in their namespace; nothing denies. Group
// system:masters may do anything.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hami::k8s::testing {

// The authenticated user (TokenReview's status.user).
struct RequestUser {
  std::string name;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  static RequestUser FromJson(const nlohmann::json& user);
};

// What is asked (the authorizer's attributes of a resource request).
struct RequestAttributes {
  std::string verb;       // get, list, watch, create, update, patch, delete, or a synthetic verb
  std::string api_group;  // "" for the core group
  std::string resource;   // plural
  std::string subresource;
  std::string ns;    // "" = cluster scope
  std::string name;  // "" = a collection
};

// The four RBAC kinds; objects of other kinds are ignored.
class RbacPolicy {
 public:
  RbacPolicy() = default;
  // A v1 List, an array or one object.
  explicit RbacPolicy(const nlohmann::json& objects);

  bool Allows(const RequestUser& user, const RequestAttributes& a) const;

 private:
  bool Bound(const nlohmann::json& binding, const RequestUser& user) const;
  bool RoleAllows(const nlohmann::json& role_ref, const std::string& binding_ns,
                  const RequestAttributes& a) const;

  std::map<std::string, nlohmann::json> cluster_roles_;  // name -> rules
  std::map<std::string, nlohmann::json> roles_;          // "<ns>/<name>" -> rules
  std::vector<nlohmann::json> cluster_role_bindings_;
  std::vector<nlohmann::json> role_bindings_;
};

// The API server's words for a refusal, as responsewriters.forbiddenMessage writes them:
// `User "u" cannot patch resource "resourceclaims/status" in API group "resource.k8s.io" in the
// namespace "default"`.
std::string ForbiddenMessage(const RequestUser& user, const RequestAttributes& a);

}  // namespace hami::k8s::testing
