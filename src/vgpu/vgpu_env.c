/* Environment parsing for libvgpu: strict, allocation-free, never crashes on any input. */
#include <stdint.h>
#include <string.h>

#include "vgpu/vgpu_core.h"

static const char* skip_space(const char* s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; }

/* Matches the unit text [u, end) case-insensitively against `name`. */
static int unit_is(const char* u, size_t n, const char* name) {
  size_t i = 0;
  for (; i < n && name[i]; i++) {
    if (lower((unsigned char)u[i]) != name[i]) return 0;
  }
  return i == n && name[i] == 0;
}

int vgpu_parse_mem_size(const char* s, uint64_t* out) {
  if (!s || !out) return -1;
  s = skip_space(s);
  if (*s < '0' || *s > '9') return -1;
  uint64_t whole = 0;
  while (*s >= '0' && *s <= '9') {
    uint64_t d = (uint64_t)(*s - '0');
    if (whole > (UINT64_MAX - d) / 10) return -1;
    whole = whole * 10 + d;
    s++;
  }
  /* Fraction: up to 9 digits kept as numerator over 10^digits. */
  uint64_t frac = 0, frac_den = 1;
  if (*s == '.') {
    s++;
    if (*s < '0' || *s > '9') return -1;
    while (*s >= '0' && *s <= '9') {
      if (frac_den < 1000000000ull) {
        frac = frac * 10 + (uint64_t)(*s - '0');
        frac_den *= 10;
      }
      s++;
    }
  }
  const char* u = s;
  while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) s++;
  size_t n = (size_t)(s - u);
  s = skip_space(s);
  if (*s != 0) return -1;
  unsigned shift;
  if (n == 0 || unit_is(u, n, "b")) {
    shift = 0;
  } else {
    static const char kUnits[] = "kmgt";
    const char* p = strchr(kUnits, lower((unsigned char)u[0]));
    if (!p) return -1;
    shift = 10u * (unsigned)(p - kUnits + 1);
    if (!(n == 1 || (n == 2 && (unit_is(u + 1, 1, "i") || unit_is(u + 1, 1, "b"))) ||
          (n == 3 && unit_is(u + 1, 2, "ib")))) {
      return -1;
    }
  }
  if (shift > 0 && whole > (UINT64_MAX >> shift)) return -1;
  uint64_t v = whole << shift;
  if (frac) {
    /* frac/frac_den * 2^shift without 128-bit math: frac < 2^30, so frac << 20 fits; precision 2^-20 unit. */
    uint64_t f = shift <= 20 ? (frac << shift) / frac_den : ((frac << 20) / frac_den) << (shift - 20);
    if (v > UINT64_MAX - f) return -1;
    v += f;
  }
  *out = v;
  return 0;
}

int vgpu_parse_int(const char* s, int32_t* out) {
  if (!s || !out) return -1;
  s = skip_space(s);
  int neg = 0;
  if (*s == '-' || *s == '+') neg = (*s++ == '-');
  if (*s < '0' || *s > '9') return -1;
  int64_t v = 0;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (*s++ - '0');
    if (v > 2147483648ll) return -1;
  }
  s = skip_space(s);
  if (*s != 0) return -1;
  if (neg) v = -v;
  if (v > INT32_MAX || v < INT32_MIN) return -1;
  *out = (int32_t)v;
  return 0;
}

int vgpu_parse_percent(const char* s, uint32_t* out) {
  int32_t v;
  if (vgpu_parse_int(s, &v) != 0 || v < 0 || v > 100) return -1;
  *out = (uint32_t)v;
  return 0;
}

int vgpu_parse_policy(const char* s, uint32_t* out) {
  if (!s || !out) return -1;
  s = skip_space(s);
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (unit_is(s, n, "default") || n == 0) {
    *out = VGPU_POLICY_DEFAULT;
  } else if (unit_is(s, n, "force")) {
    *out = VGPU_POLICY_FORCE;
  } else if (unit_is(s, n, "disable")) {
    *out = VGPU_POLICY_DISABLE;
  } else {
    return -1;
  }
  return 0;
}

int vgpu_parse_visible_devices(const char* s, vgpu_visible_entry* out, int max) {
  if (!s || !out || max <= 0) return -1;
  int count = 0;
  while (*s && count < max) {
    s = skip_space(s);
    const char* start = s;
    while (*s && *s != ',') s++;
    const char* end = s;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t n = (size_t)(end - start);
    if (n == 0) return count > 0 ? count : -1;
    vgpu_visible_entry* e = &out[count];
    e->index = -1;
    e->id[0] = 0;
    int numeric = 1;
    for (size_t i = 0; i < n; i++) numeric &= (start[i] >= '0' && start[i] <= '9');
    if (numeric) {
      if (n > 6) return count > 0 ? count : -1;
      int32_t v = 0;
      for (size_t i = 0; i < n; i++) v = v * 10 + (start[i] - '0');
      e->index = v;
    } else {
      if (n >= VGPU_UUID_LEN) return count > 0 ? count : -1;
      if (!(n > 4 && (memcmp(start, "GPU-", 4) == 0 || memcmp(start, "MIG-", 4) == 0))) {
        return count > 0 ? count : -1; /* the driver stops at the first invalid entry */
      }
      memcpy(e->id, start, n);
      e->id[n] = 0;
    }
    count++;
    if (*s == ',') s++;
  }
  return count;
}
