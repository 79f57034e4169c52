#include "fakes/time_scale.h"

int fakegpu_parse_time_scale(const char* s, uint64_t* out) {
  if (!s || !*s) return -1;
  uint64_t v = 0;
  for (const char* p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (uint64_t)(*p - '0');
    if (v > FAKEGPU_TIME_SCALE_MAX) return -1;
  }
  if (v < 1) return -1;
  *out = v;
  return 0;
}
