#pragma once
// HAMI_DCHECK(condition, message parts...): an invariant of our own code, checked in debug builds.
//
// For contracts between our own components (a reserve is matched by its unreserve, an index is in
// range, what was reserved fits the capacity), never for outside input: input that can be wrong is
// answered with a Status (common/status.h). A failed check prints the file, line, condition and
// message to stderr and aborts.
//
// Checks are on when NDEBUG is not defined (the asan and tsan presets, Debug builds) or when the
// build defines HAMI_DCHECKS (cmake -DHAMI_DCHECKS=ON, any preset); otherwise the condition is
// still compiled (so it cannot rot) but never evaluated. Code that only feeds a check (a loop over
// devices) goes under `if (HAMI_DCHECK_IS_ON())`. docs/design.md, "Invariant checks".
#include <string>

#include "common/status.h"

#if !defined(NDEBUG) || defined(HAMI_DCHECKS)
#define HAMI_DCHECK_IS_ON() true
#else
#define HAMI_DCHECK_IS_ON() false
#endif

namespace hami::internal {
[[noreturn]] void DcheckFailed(const char* file, int line, const char* condition,
                               const std::string& message);
}  // namespace hami::internal

#define HAMI_DCHECK(condition, ...)                                                  \
  do {                                                                               \
    if (HAMI_DCHECK_IS_ON() && !(condition))                                         \
      ::hami::internal::DcheckFailed(__FILE__, __LINE__, #condition,                 \
                                     ::hami::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (false)
