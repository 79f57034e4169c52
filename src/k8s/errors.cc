#include "k8s/errors.h"

#include <nlohmann/json.hpp>

namespace hami::k8s {

bool IsRetryableHttpCode(int code) {
  return code == 429 || code == 500 || code == 502 || code == 503 || code == 504;
}

Status StatusFromHttp(int code, std::string_view body, std::string_view what) {
  std::string reason;
  std::string message;
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    if (parsed.contains("reason") && parsed["reason"].is_string()) reason = parsed["reason"];
    if (parsed.contains("message") && parsed["message"].is_string()) message = parsed["message"];
  } else {
    std::string text(body.substr(0, 200));
    message = text.empty() ? "(empty reply)" : StrCat("reply: ", text);
  }
  std::string full =
      StrCat(what, ": ", message, " (HTTP ", code, reason.empty() ? "" : " ", reason, ")");
  switch (code) {
    case 400:
    case 422:
      return absl::InvalidArgumentError(full);
    case 401:
      return absl::UnauthenticatedError(full);
    case 403:
      return absl::PermissionDeniedError(full);
    case 404:
      return absl::NotFoundError(full);
    case 409:
      if (reason == "AlreadyExists") return absl::AlreadyExistsError(full);
      return absl::AbortedError(full);
    case 410:
      return absl::OutOfRangeError(full);
    case 429:
      return absl::ResourceExhaustedError(full);
    case 500:
      return absl::InternalError(full);
    case 502:
    case 503:
      return absl::UnavailableError(full);
    case 504:
      return absl::DeadlineExceededError(full);
    default:
      return absl::UnknownError(full);
  }
}

}  // namespace hami::k8s
