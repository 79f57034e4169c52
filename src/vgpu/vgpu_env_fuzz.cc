// Fuzz target for libvgpu's environment and limits-file parsers: any bytes, no crash, and parsed
// values stay in range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "vgpu/vgpu_core.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data),
                size);  // NUL-terminated copy; may hold inner NULs
  uint64_t mem = 0;
  (void)vgpu_parse_mem_size(s.c_str(), &mem);
  uint32_t pct = 0;
  if (vgpu_parse_percent(s.c_str(), &pct) == 0 && pct > 100) abort();
  uint32_t policy = 0;
  if (vgpu_parse_policy(s.c_str(), &policy) == 0 && policy > VGPU_POLICY_DISABLE) abort();
  int32_t v = 0;
  (void)vgpu_parse_int(s.c_str(), &v);
  vgpu_visible_entry e[8];
  int n = vgpu_parse_visible_devices(s.c_str(), e, 8);
  if (n > 8) abort();
  for (int i = 0; i < n; i++) {
    if (e[i].index < 0 && std::string(e[i].id).size() >= VGPU_UUID_LEN) abort();
  }
  // The device plugin's limits file: raw bytes (inner NULs included); every kept entry is governed
  // and fits.
  static vgpu_cfg cfg;
  int first_bad = 0;
  int bad = vgpu_parse_limits(reinterpret_cast<const char*>(data), size, &cfg, &first_bad);
  if (bad < 0 || cfg.count < 0 || cfg.count > VGPU_CFG_MAX || (bad > 0) != (first_bad > 0)) abort();
  for (int i = 0; i < cfg.count; i++) {
    const vgpu_cfg_entry& x = cfg.e[i];
    if (!vgpu_cfg_key_governed(x.key, std::string(x.key).size())) abort();
    if (std::string(x.value).size() >= VGPU_CFG_VALUE_LEN) abort();
    if (vgpu_cfg_get(&cfg, x.key) != x.value && std::string(vgpu_cfg_get(&cfg, x.key)) != x.value)
      abort();
  }
  int b = 0;
  (void)vgpu_parse_bool(s.c_str(), &b);
  uint32_t permille = 0;
  if (vgpu_parse_scaling(s.c_str(), &permille) == 0 &&
      (permille == 0 || permille > VGPU_SCALING_MAX_PERMILLE))
    abort();
  return 0;
}
