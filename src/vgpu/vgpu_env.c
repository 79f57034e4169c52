/* Environment parsing for libvgpu: strict, allocation-free, never crashes on any input. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vgpu/vgpu_core.h"

static const char* skip_space(const char* s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

static int lower(int c) {
  return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

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
    /* frac/frac_den * 2^shift without 128-bit math: frac < 2^30, so frac << 20 fits; precision
     * 2^-20 unit. */
    uint64_t f =
        shift <= 20 ? (frac << shift) / frac_den : ((frac << 20) / frac_den) << (shift - 20);
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

static int is_digits(const char* s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
  }
  return 1;
}

static int key_is(const char* k, size_t n, const char* name) {
  return strlen(name) == n && memcmp(k, name, n) == 0;
}

int vgpu_cfg_key_governed(const char* k, size_t n) {
  static const char* const kExact[] = {
      "CUDA_DEVICE_MEMORY_LIMIT",    "CUDA_DEVICE_SM_LIMIT", "CUDA_DEVICE_MEMORY_SHARED_CACHE",
      "GPU_CORE_UTILIZATION_POLICY", "CUDA_TASK_PRIORITY",   "CUDA_OVERSUBSCRIBE",
      "CUDA_DEVICE_MEMORY_SCALING"};
  for (size_t i = 0; i < sizeof(kExact) / sizeof(kExact[0]); i++) {
    if (key_is(k, n, kExact[i])) return 1;
  }
  static const char* const kIndexed[] = {"CUDA_DEVICE_MEMORY_LIMIT_", "CUDA_DEVICE_SM_LIMIT_"};
  for (size_t i = 0; i < 2; i++) {
    size_t p = strlen(kIndexed[i]);
    if (n > p && n <= p + 4 && memcmp(k, kIndexed[i], p) == 0 && is_digits(k + p, n - p)) return 1;
  }
  return 0;
}

static void trim(const char** b, const char** e) {
  while (*b < *e && (**b == ' ' || **b == '\t' || **b == '\r')) (*b)++;
  while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r')) (*e)--;
}

const char* vgpu_cfg_get(const vgpu_cfg* cfg, const char* key) {
  if (!cfg || !key) return NULL;
  for (int i = 0; i < cfg->count; i++) {
    if (strcmp(cfg->e[i].key, key) == 0) return cfg->e[i].value;
  }
  return NULL;
}

int vgpu_parse_limits(const char* text, size_t len, vgpu_cfg* cfg, int* first_bad) {
  int bad = 0, line = 0;
  if (first_bad) *first_bad = 0;
  if (!cfg) return -1;
  cfg->count = 0;
  if (!text) return 0;
  const char* p = text;
  const char* end = text + len;
  while (p < end) {
    line++;
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    const char* le = nl ? nl : end;
    const char* b = p;
    const char* e = le;
    p = nl ? nl + 1 : end;
    trim(&b, &e);
    if (b == e || *b == '#') continue;
    const char* eq = memchr(b, '=', (size_t)(e - b));
    int ok = eq != NULL && memchr(b, 0, (size_t)(e - b)) == NULL;
    const char *kb = b, *ke = eq, *vb = eq ? eq + 1 : NULL, *ve = e;
    if (ok) {
      trim(&kb, &ke);
      trim(&vb, &ve);
      ok = vgpu_cfg_key_governed(kb, (size_t)(ke - kb)) && (size_t)(ve - vb) < VGPU_CFG_VALUE_LEN &&
           cfg->count < VGPU_CFG_MAX;
    }
    if (ok) {
      char key[VGPU_CFG_KEY_LEN];
      memcpy(key, kb, (size_t)(ke - kb));
      key[ke - kb] = 0;
      ok = vgpu_cfg_get(cfg, key) == NULL;
      if (ok) {
        vgpu_cfg_entry* x = &cfg->e[cfg->count++];
        memcpy(x->key, key, sizeof(key));
        memcpy(x->value, vb, (size_t)(ve - vb));
        x->value[ve - vb] = 0;
      }
    }
    if (!ok) {
      if (!bad && first_bad) *first_bad = line;
      bad++;
    }
  }
  return bad;
}

int vgpu_parse_bool(const char* s, int* out) {
  if (!s || !out) return -1;
  s = skip_space(s);
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (n == 0 || unit_is(s, n, "false") || unit_is(s, n, "0")) {
    *out = 0;
  } else if (unit_is(s, n, "true") || unit_is(s, n, "1")) {
    *out = 1;
  } else {
    return -1;
  }
  return 0;
}

int vgpu_parse_scaling(const char* s, uint32_t* permille) {
  if (!s || !permille) return -1;
  s = skip_space(s);
  if (*s < '0' || *s > '9') return -1;
  uint64_t v = 0; /* the whole part, then thousandths */
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (uint64_t)(*s - '0');
    if (v > VGPU_SCALING_MAX_PERMILLE / 1000) return -1;
    s++;
  }
  v *= 1000;
  if (*s == '.') {
    s++;
    if (*s < '0' || *s > '9') return -1;
    uint64_t place = 100;
    while (*s >= '0' && *s <= '9') {
      v += (uint64_t)(*s - '0') * place; /* digits past the third are dropped */
      place /= 10;
      s++;
    }
  }
  s = skip_space(s);
  if (*s != 0 || v == 0 || v > VGPU_SCALING_MAX_PERMILLE) return -1;
  *permille = (uint32_t)v;
  return 0;
}

/* ---- The node monitor's share lines (see vgpu_core.h). ---- */
static uint32_t fnv1a32(const char* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 16777619u;
  }
  return h;
}

int vgpu_format_share(char* buf, size_t cap, const char* uuid, uint32_t factor, int state,
                      uint64_t mono_ms) {
  const size_t pre = sizeof(VGPU_SHARE_PREFIX) - 1;
  if (!buf || !uuid || !uuid[0] || strlen(uuid) >= VGPU_UUID_LEN || strpbrk(uuid, " \n") ||
      factor < VGPU_SHARE_FACTOR_ONE || factor > VGPU_SHARE_FACTOR_MAX || state < 0 ||
      state > VGPU_SHARE_LENT || mono_ms > 9999999999999ull)
    return -1;
  int n = snprintf(buf, cap, "%s%s %07u %d %013llu ", VGPU_SHARE_PREFIX, uuid, factor, state,
                   (unsigned long long)mono_ms);
  if (n < 0 || (size_t)n + 10 > cap) return -1;
  uint32_t h = fnv1a32(buf + pre, (size_t)n - pre - 1);
  int m = snprintf(buf + n, cap - (size_t)n, "%08x\n", h);
  return m == 9 ? n + m : -1;
}

static int digits(const char* p, size_t n, uint64_t* out) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  *out = v;
  return 0;
}

int vgpu_find_share(const char* text, size_t len, const char* uuid, uint64_t now_ms,
                    uint32_t* factor, int* state) {
  const size_t pre = sizeof(VGPU_SHARE_PREFIX) - 1;
  if (!text || !uuid || !uuid[0]) return 0;
  const size_t ulen = strlen(uuid);
  /* "<uuid> FFFFFFF B TTTTTTTTTTTTT HHHHHHHH" */
  const size_t body = ulen + 1 + 7 + 1 + 1 + 1 + 13 + 1 + 8;
  const char* p = text;
  const char* end = text + len;
  while (p < end) {
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    const char* le = nl ? nl : end;
    const char* b = p;
    p = nl ? nl + 1 : end;
    if ((size_t)(le - b) != pre + body || memcmp(b, VGPU_SHARE_PREFIX, pre) != 0) continue;
    b += pre;
    if (memcmp(b, uuid, ulen) != 0 || b[ulen] != ' ') continue;
    const char* f = b + ulen + 1;
    uint64_t fv, bv, tv, hv = 0;
    if (f[7] != ' ' || f[9] != ' ' || f[23] != ' ' || digits(f, 7, &fv) || digits(f + 8, 1, &bv) ||
        digits(f + 10, 13, &tv))
      continue;
    for (int i = 0; i < 8; i++) {
      char c = f[24 + i];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) {
        hv = ~0ull;
        break;
      }
      hv = hv << 4 | (uint64_t)d;
    }
    if (hv != fnv1a32(b, (size_t)(f + 23 - b))) continue; /* torn or forged by hand */
    if (fv < VGPU_SHARE_FACTOR_ONE || fv > VGPU_SHARE_FACTOR_MAX || bv > VGPU_SHARE_LENT) continue;
    if (tv + VGPU_SHARE_STALE_MS < now_ms || tv > now_ms + VGPU_SHARE_STALE_MS) return 0;
    if (factor) *factor = (uint32_t)fv;
    if (state) *state = (int)bv;
    return 1;
  }
  return 0;
}

uint32_t vgpu_share_pct(uint32_t pct, uint32_t factor) {
  uint64_t v = ((uint64_t)pct * factor + VGPU_SHARE_FACTOR_ONE / 2) / VGPU_SHARE_FACTOR_ONE;
  return v > 100 ? 100 : (uint32_t)v;
}
