#pragma once
// Thread-safe forms of the libc calls clang-tidy's concurrency-mt-unsafe flags.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace hami {

// An environment variable's value; nullopt when it is not set (set but empty is ""). The production
// binaries never change their environment (no setenv, putenv or unsetenv outside the test helpers),
// so getenv cannot race with a writer.
inline std::optional<std::string> GetEnv(const char* name) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the environment is never written (see above)
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// The variable's value, or `fallback` when it is unset or empty.
inline std::string GetEnvOr(const char* name, std::string fallback = "") {
  std::optional<std::string> v = GetEnv(name);
  return v && !v->empty() ? *std::move(v) : std::move(fallback);
}

// strerror's text for an errno value. strerror may share one buffer between threads; the GNU
// strerror_r returns the message, in `buf` or in a static string.
inline std::string ErrnoText(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof buf);
}

// The calling thread's last dlopen/dlsym error, or "unknown error".
inline std::string DlErrorText() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): glibc keeps dlerror's state per thread
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

}  // namespace hami
