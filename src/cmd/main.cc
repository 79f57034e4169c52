// `hami`: one binary, one subcommand per component. Each subcommand owns its flags (CLI11) in its
// own *_main.cc; this file is only the dispatch table.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cmd/subcommands.h"

namespace {

struct Subcommand {
  const char* name;
  const char* help;
  int (*run)(int argc, char** argv);
};

constexpr Subcommand kSubcommands[] = {
#define HAMI_SUBCOMMAND(name, fn, help) {name, help, &hami::cmd::fn},
#include "cmd/subcommands.inc"
#undef HAMI_SUBCOMMAND
};

void Usage(FILE* out) {
  std::fprintf(
      out, "usage: hami <command> [flags]   (hami <command> --help for its flags)\n\ncommands:\n");
  for (const auto& s : kSubcommands) std::fprintf(out, "  %-15s %s\n", s.name, s.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) return hami::cmd::VersionMain(argc - 1, argv + 1);
  for (const auto& s : kSubcommands) {
    if (std::string_view(argv[1]) == s.name) return s.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "hami: unknown command '%s'\n\n", argv[1]);
  Usage(stderr);
  return 2;
}
