/* FAKEGPU_TIME_SCALE's parser (libfakegpu_time.so, see fake_time.c), apart so that the fakes' env
 * fuzz target covers it. C, no allocation, no C++ runtime. */
#ifndef FAKES_TIME_SCALE_H_
#define FAKES_TIME_SCALE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKEGPU_TIME_SCALE_MAX 1000

/* A decimal integer in 1..FAKEGPU_TIME_SCALE_MAX, digits only: 0 with *out set, else -1 (*out
 * untouched). */
__attribute__((visibility("hidden"))) int fakegpu_parse_time_scale(const char* s, uint64_t* out);

#ifdef __cplusplus
}
#endif

#endif /* FAKES_TIME_SCALE_H_ */
