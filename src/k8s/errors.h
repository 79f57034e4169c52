#pragma once
// Kubernetes API errors as hami::Status. The HTTP code and the API server's `Status.reason` pick
// the absl code (one code per kind of failure, so callers test kinds with the predicates below),
// and the message carries the server's own `Status.message` plus the request it answered.
//
//   404 NotFound          -> NotFound            409 AlreadyExists -> AlreadyExists
//   409 Conflict          -> Aborted             410 Gone/Expired  -> OutOfRange
//   400/422               -> InvalidArgument     401 -> Unauthenticated, 403 -> PermissionDenied
//   429                   -> ResourceExhausted   500 -> Internal, 503/502/transport -> Unavailable
//   504                   -> DeadlineExceeded
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::k8s {

// Builds the Status for a non-2xx reply. `body` is the reply (normally a metav1.Status JSON object;
// anything else is quoted, truncated), `what` names the request ("GET /api/v1/pods").
Status StatusFromHttp(int http_code, std::string_view body, std::string_view what);

// Kinds without an absl predicate of their own. For the rest use absl::IsNotFound,
// absl::IsAlreadyExists, absl::IsUnavailable, ... directly.
// A write lost an optimistic-concurrency race (409 Conflict): re-read and retry.
inline bool IsConflict(const Status& s) {
  return absl::IsAborted(s);
}
// The resourceVersion is older than the server keeps (watch or list must start over).
inline bool IsGone(const Status& s) {
  return absl::IsOutOfRange(s);
}

// True for replies a client should retry after a pause: 429, 500, 502, 503, 504.
bool IsRetryableHttpCode(int http_code);

}  // namespace hami::k8s
