#include <cstdio>

#include "cmd/log_flags.h"
#include "cmd/subcommands.h"

namespace hami::cmd {
int VersionMain(int, char**) {
  std::printf("%s\n", VersionLine().c_str());
  return 0;
}
}  // namespace hami::cmd
