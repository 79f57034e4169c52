#pragma once
// Who may call /refit (docs/security.md, "NUMA refit"): only a device plugin, and only for pods on
// its own node. A refit moves another pod's devices, so the route trusts no network position: the
// caller presents its pod's bound service-account token (Authorization: Bearer), and the scheduler
// asks the API server to review it (TokenReview; RBAC: create tokenreviews). The token must
// authenticate as one of the node-agent service accounts (--node-agent-service-account), be bound
// to a pod (authentication.kubernetes.io/pod-name and pod-uid), and that pod must still exist with
// that uid and run on the node the request names. No secret is compared here: the API server
// checks the token; this side only compares the identities it returns.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "extender/extender.h"
#include "http/server.h"
#include "k8s/client.h"

namespace hami::extender {

// The token of an "Authorization: Bearer <token>" value; "" for anything else (no header, another
// scheme, nothing after the prefix, blanks or control bytes inside the token).
std::string BearerToken(std::string_view authorization);

class RefitAuthenticator {
 public:
  virtual ~RefitAuthenticator() = default;
  // OK when `token` may refit pods on `node`; Unauthenticated (no or unknown token) or
  // PermissionDenied (a valid identity that may not) with the reason otherwise.
  virtual Status Authenticate(const std::string& token, const std::string& node) = 0;
};

// The TokenReview check above. `client` must outlive it; `usernames` are the node agents'
// ("system:serviceaccount:<ns>:<name>", webhook::ServiceAccountUsername).
std::unique_ptr<RefitAuthenticator> TokenReviewAuthenticator(k8s::Client* client,
                                                             std::vector<std::string> usernames);

// POST /refit on the scheduler's --http-bind listener (upstream's route, same JSON): 400 for an
// empty body, 413 over core::kMaxRefitBodyBytes; a body that does not parse is an in-band failure
// (200, succeeded false, as upstream); then the caller is authenticated for the request's node: 401
// without a bearer token or with one the API server does not accept, 403 for an identity that may
// not refit there, 503 when the review cannot be made; then Extender::Refit (200, in-band result).
// Every reply is a refit response.
http::HttpResponse ServeRefit(Extender& extender, RefitAuthenticator& auth,
                              const http::HttpRequest& request);

}  // namespace hami::extender
