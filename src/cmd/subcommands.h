#pragma once
// Entry points of the subcommands; argv[0] is the subcommand name.
namespace hami::cmd {
#define HAMI_SUBCOMMAND(name, fn, help) int fn(int argc, char** argv);
#include "cmd/subcommands.inc"
#undef HAMI_SUBCOMMAND
}  // namespace hami::cmd
