#include <cstdio>

#include "cmd/subcommands.h"

namespace hami::cmd {
int VersionMain(int, char**) {
  std::printf("hami-cpp %s\n", HAMI_VERSION);
  return 0;
}
}  // namespace hami::cmd
