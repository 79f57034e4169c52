#include "extender/refit_auth.h"

#include <algorithm>

namespace hami::extender {
namespace {

constexpr k8s::Resource kTokenReviews{"/apis/authentication.k8s.io/v1", "tokenreviews",
                                      "TokenReview", false};
constexpr char kBoundPodName[] = "authentication.kubernetes.io/pod-name";
constexpr char kBoundPodUid[] = "authentication.kubernetes.io/pod-uid";
// A bound service-account token is a JWT of about 1 KiB; anything far larger is not one.
constexpr size_t kMaxTokenBytes = 16u << 10;

std::string FirstExtra(const Json& user, const char* key) {
  const Json* extra = user.contains("extra") ? &user["extra"] : nullptr;
  if (extra == nullptr || !extra->is_object() || !extra->contains(key)) return "";
  const Json& v = (*extra)[key];
  if (v.is_array() && !v.empty() && v[0].is_string()) return v[0].get<std::string>();
  return "";
}

std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

class TokenReview final : public RefitAuthenticator {
 public:
  TokenReview(k8s::Client* client, std::vector<std::string> usernames)
      : client_(client), usernames_(std::move(usernames)) {}

  Status Authenticate(const std::string& token, const std::string& node) override {
    if (token.empty()) return absl::UnauthenticatedError("no caller credentials presented");
    if (client_ == nullptr) return absl::UnavailableError("no API client to review the token");
    const Json review{{"apiVersion", "authentication.k8s.io/v1"},
                      {"kind", "TokenReview"},
                      {"spec", {{"token", token}}}};
    auto reply = client_->Create(kTokenReviews, "", review);
    if (!reply.ok())
      return absl::UnavailableError(
          StrCat("token review request failed: ", reply.status().message()));
    const Json& status = reply->contains("status") ? (*reply)["status"] : Json();
    if (!status.is_object() || !status.contains("authenticated") ||
        !status["authenticated"].is_boolean() || !status["authenticated"].get<bool>())
      return absl::UnauthenticatedError(
          StrCat("token is not authenticated: ", Str(status, "error")));
    const Json& user = status.contains("user") ? status["user"] : Json();
    const std::string username = Str(user, "username");
    if (std::find(usernames_.begin(), usernames_.end(), username) == usernames_.end())
      return absl::PermissionDeniedError(
          StrCat("caller \"", username, "\" is not a device-plugin service account"));
    const std::string pod_name = FirstExtra(user, kBoundPodName);
    const std::string pod_uid = FirstExtra(user, kBoundPodUid);
    if (pod_name.empty() || pod_uid.empty())
      return absl::PermissionDeniedError("token is not a bound pod service-account token");
    // "system:serviceaccount:<ns>:<name>": the caller pod lives in the account's namespace.
    const std::string ns =
        username.substr(std::string_view("system:serviceaccount:").size(),
                        username.rfind(':') - std::string_view("system:serviceaccount:").size());
    auto pod = client_->Get(k8s::kPods, ns, pod_name);
    if (!pod.ok())
      return absl::PermissionDeniedError(
          StrCat("cannot look up caller pod ", ns, "/", pod_name, ": ", pod.status().message()));
    const Json& meta = pod->contains("metadata") ? (*pod)["metadata"] : Json();
    const Json& spec = pod->contains("spec") ? (*pod)["spec"] : Json();
    if (Str(meta, "uid") != pod_uid)
      return absl::PermissionDeniedError(
          StrCat("caller pod ", ns, "/", pod_name, " no longer matches the token's bound uid"));
    if (Str(spec, "nodeName") != node)
      return absl::PermissionDeniedError(StrCat("caller pod ", ns, "/", pod_name,
                                                " runs on node \"", Str(spec, "nodeName"),
                                                "\", not \"", node, "\""));
    return OkStatus();
  }

 private:
  k8s::Client* client_;
  std::vector<std::string> usernames_;
};

}  // namespace

std::string BearerToken(std::string_view authorization) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (authorization.size() <= kPrefix.size() || authorization.substr(0, kPrefix.size()) != kPrefix)
    return "";
  const std::string_view token = authorization.substr(kPrefix.size());
  if (token.size() > kMaxTokenBytes) return "";
  for (char c : token)
    if (c <= 0x20 || c >= 0x7f) return "";
  return std::string(token);
}

http::HttpResponse ServeRefit(Extender& extender, RefitAuthenticator& auth,
                              const http::HttpRequest& request) {
  auto reply = [](int status, const core::RefitResponse& r) {
    return http::HttpResponse{status, "application/json", core::EncodeRefitResponse(r)};
  };
  if (request.body.empty()) return reply(400, {false, "", "Please send a request body"});
  if (request.body.size() > core::kMaxRefitBodyBytes)
    return reply(413, {false, "",
                       StrCat("refit request body of ", request.body.size(), " bytes exceeds ",
                              core::kMaxRefitBodyBytes)});
  auto req = core::ParseRefitRequest(request.body);
  if (!req.ok())
    return http::HttpResponse{200, "application/json", extender.HandleRefit(request.body)};
  const std::string token = BearerToken(request.authorization);
  if (token.empty())
    return reply(401, {false, "", "no caller credentials presented (Authorization: Bearer)"});
  if (Status s = auth.Authenticate(token, req->node_name); !s.ok()) {
    const int code = absl::IsUnauthenticated(s) ? 401 : absl::IsPermissionDenied(s) ? 403 : 503;
    return reply(code, {false, "", StrCat("refit caller refused: ", s.message())});
  }
  return reply(200, extender.Refit(*req));
}

std::unique_ptr<RefitAuthenticator> TokenReviewAuthenticator(k8s::Client* client,
                                                             std::vector<std::string> usernames) {
  return std::make_unique<TokenReview>(client, std::move(usernames));
}

}  // namespace hami::extender
