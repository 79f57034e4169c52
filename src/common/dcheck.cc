#include "common/dcheck.h"

#include <cstdio>
#include <cstdlib>

namespace hami::internal {

void DcheckFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "%s:%d: HAMI_DCHECK(%s) failed%s%s\n", file, line, condition,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace hami::internal
