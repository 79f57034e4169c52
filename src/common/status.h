#pragma once
// Status at boundaries: every function that outside input or the environment can break returns
// hami::Status / hami::StatusOr<T> (absl's types) with a message a user can act on.
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hami {

// Concatenates anything streamable into a std::string. (Debian's abseil is built with its own
// absl::string_view, so StrCat does not accept std::string_view; this does.)
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

inline Status OkStatus() {
  return absl::OkStatus();
}

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return absl::InvalidArgumentError(StrCat(args...));
}
template <typename... Args>
Status NotFound(const Args&... args) {
  return absl::NotFoundError(StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return absl::FailedPreconditionError(StrCat(args...));
}
template <typename... Args>
Status Unavailable(const Args&... args) {
  return absl::UnavailableError(StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return absl::InternalError(StrCat(args...));
}
template <typename... Args>
Status ResourceExhausted(const Args&... args) {
  return absl::ResourceExhaustedError(StrCat(args...));
}
template <typename... Args>
Status Aborted(const Args&... args) {
  return absl::AbortedError(StrCat(args...));
}

// Prefixes a status message with context ("pods.csv:12: field cpu_milli: ...").
inline Status Annotate(const Status& s, std::string_view context) {
  if (s.ok()) return s;
  return Status(s.code(), StrCat(context, ": ", std::string(s.message())));
}

}  // namespace hami

#define HAMI_STATUS_CONCAT_INNER_(a, b) a##b
#define HAMI_STATUS_CONCAT_(a, b) HAMI_STATUS_CONCAT_INNER_(a, b)

#define HAMI_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::hami::Status hami_status_ = (expr);        \
    if (!hami_status_.ok()) return hami_status_; \
  } while (0)

// `tmp` is the name of the variable declared here and `lhs` may itself be a declaration
// (`auto x`): neither can be parenthesized, so bugprone-macro-parentheses is wrong about them.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define HAMI_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)

#define HAMI_ASSIGN_OR_RETURN(lhs, expr) \
  HAMI_ASSIGN_OR_RETURN_IMPL_(HAMI_STATUS_CONCAT_(hami_statusor_, __LINE__), lhs, expr)
