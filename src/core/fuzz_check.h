#pragma once
// FUZZ_CHECK(cond, what): aborts with a message when a property of a fuzz target fails, so the
// fuzz driver (and libFuzzer) report the input. Only for *_fuzz.cc files.
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                                    \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "%s:%d: property failed: %s (%s)\n", __FILE__, __LINE__, #cond, what); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (0)
