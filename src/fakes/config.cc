#include "fakes/config.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <set>

#include "fakes/fake_gpu.h"
#include "fakes/mig_model.h"

namespace fakegpu {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t pos = s.find(sep, begin);
    parts.push_back(s.substr(begin, pos == std::string::npos ? std::string::npos : pos - begin));
    if (pos == std::string::npos) break;
    begin = pos + 1;
  }
  return parts;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool ParseInt(const std::string& text, long long min, long long max, long long* out) {
  std::string t = Trim(text);
  if (t.empty()) return false;
  bool neg = false;
  size_t i = 0;
  if (t[0] == '-') {
    neg = true;
    i = 1;
  }
  uint64_t v = 0;
  if (!ParseUint(t.substr(i), static_cast<uint64_t>(max) + (neg ? 1 : 0), &v)) return false;
  long long s = neg ? -static_cast<long long>(v) : static_cast<long long>(v);
  if (s < min || s > max) return false;
  *out = s;
  return true;
}

}  // namespace

bool ParseUint(const std::string& text, uint64_t max, uint64_t* out) {
  std::string t = Trim(text);
  if (t.empty() || t.size() > 20) return false;
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v > max) return false;
  *out = v;
  return true;
}

std::string DefaultUuid(int index) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-fa4e0000-0000-4000-8000-%012x", static_cast<unsigned>(index));
  return buf;
}

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

void UuidBytes(const std::string& uuid, unsigned char out[16]) {
  std::string hex;
  for (size_t i = 4; i < uuid.size(); ++i) {
    if (std::isxdigit(static_cast<unsigned char>(uuid[i]))) hex.push_back(uuid[i]);
  }
  if (uuid.rfind("GPU-", 0) == 0 && hex.size() == 32) {
    for (int i = 0; i < 16; ++i)
      out[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
    return;
  }
  uint64_t h1 = Fnv1a64(uuid), h2 = Fnv1a64(uuid + "#");
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<unsigned char>(h1 >> (8 * i));
    out[8 + i] = static_cast<unsigned char>(h2 >> (8 * i));
  }
}

bool ParseDevices(const std::string& text, std::vector<DeviceSpec>* out, std::string* err) {
  std::vector<DeviceSpec> devs;
  std::set<std::string> uuids;
  for (const std::string& raw : Split(text, ';')) {
    std::string item = Trim(raw);
    int idx = static_cast<int>(devs.size());
    std::string where = "device " + std::to_string(idx);
    if (item.empty()) {
      *err = where + ": empty entry";
      return false;
    }
    std::vector<std::string> f = Split(item, ':');
    if (f.size() != 3 && f.size() != 4) {
      *err = where + ": want name:memMiB:SMs[:uuid], got '" + item + "'";
      return false;
    }
    DeviceSpec d;
    d.name = Trim(f[0]);
    if (d.name.empty() || d.name.size() >= kNameLen) {
      *err = where + ": name empty or longer than " + std::to_string(kNameLen - 1);
      return false;
    }
    if (!ParseUint(f[1], 1ULL << 24, &d.mem_mib) || d.mem_mib == 0) {
      *err = where + ": memMiB '" + f[1] + "' is not an integer in 1..16777216";
      return false;
    }
    uint64_t sms = 0;
    if (!ParseUint(f[2], 4096, &sms) || sms == 0) {
      *err = where + ": SMs '" + f[2] + "' is not an integer in 1..4096";
      return false;
    }
    d.sms = static_cast<uint32_t>(sms);
    d.uuid = f.size() == 4 ? Trim(f[3]) : DefaultUuid(idx);
    if (d.uuid.rfind("GPU-", 0) != 0 || d.uuid.size() < 5 || d.uuid.size() >= kUuidLen) {
      *err = where + ": uuid '" + d.uuid + "' must start with GPU- and be shorter than 80";
      return false;
    }
    if (!uuids.insert(d.uuid).second) {
      *err = where + ": duplicate uuid " + d.uuid;
      return false;
    }
    devs.push_back(d);
    if (devs.size() > static_cast<size_t>(kMaxDevices)) {
      *err = "more than " + std::to_string(kMaxDevices) + " devices";
      return false;
    }
  }
  *out = std::move(devs);
  return true;
}

bool ParseNvLinks(const std::string& text, int num_devices, std::vector<NvLinkSpec>* out,
                  std::string* err) {
  std::vector<NvLinkSpec> links;
  std::vector<int> used(num_devices, 0);
  if (Trim(text).empty()) {
    out->clear();
    return true;
  }
  for (const std::string& raw : Split(text, ',')) {
    std::string item = Trim(raw);
    size_t dash = item.find('-'), colon = item.find(':');
    long long a = 0, b = 0, n = 0;
    if (dash == std::string::npos || colon == std::string::npos || colon < dash ||
        !ParseInt(item.substr(0, dash), 0, num_devices - 1, &a) ||
        !ParseInt(item.substr(dash + 1, colon - dash - 1), 0, num_devices - 1, &b) ||
        !ParseInt(item.substr(colon + 1), 1, kNvLinkMaxLinks, &n) || a == b) {
      *err = "entry '" + item + "': want a-b:links with distinct device indices < " +
             std::to_string(num_devices) + " and 1..36 links";
      return false;
    }
    used[a] += static_cast<int>(n);
    used[b] += static_cast<int>(n);
    if (used[a] > kNvLinkMaxLinks || used[b] > kNvLinkMaxLinks) {
      *err = "entry '" + item + "': more than 36 links on one device";
      return false;
    }
    links.push_back({static_cast<int>(a), static_cast<int>(b), static_cast<int>(n)});
  }
  *out = std::move(links);
  return true;
}

bool ParseFaults(const std::string& text, std::vector<FaultSpec>* out, std::string* err) {
  std::vector<FaultSpec> faults;
  if (Trim(text).empty()) {
    out->clear();
    return true;
  }
  for (const std::string& raw : Split(text, ',')) {
    std::string item = Trim(raw);
    size_t eq = item.find('=');
    FaultSpec f;
    if (eq == std::string::npos || eq == 0) {
      *err = "entry '" + item + "': want symbol=code[@n]";
      return false;
    }
    f.symbol = Trim(item.substr(0, eq));
    for (char c : f.symbol) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
        *err = "entry '" + item + "': bad symbol name";
        return false;
      }
    }
    std::string rest = item.substr(eq + 1);
    size_t at = rest.find('@');
    long long code = 0;
    if (!ParseInt(rest.substr(0, at), 1, 100000, &code)) {
      *err = "entry '" + item + "': code must be an integer in 1..100000";
      return false;
    }
    f.code = static_cast<int>(code);
    if (at != std::string::npos &&
        (!ParseUint(rest.substr(at + 1), UINT64_MAX, &f.nth) || f.nth == 0)) {
      *err = "entry '" + item + "': @n must be a positive integer";
      return false;
    }
    faults.push_back(f);
  }
  *out = std::move(faults);
  return true;
}

bool ParseXids(const std::string& text, int num_devices, std::vector<XidSpec>* out,
               std::string* err) {
  std::vector<XidSpec> xids;
  if (Trim(text).empty()) {
    out->clear();
    return true;
  }
  for (const std::string& raw : Split(text, ',')) {
    std::string item = Trim(raw);
    std::vector<std::string> f = Split(item, ':');
    long long dev = 0;
    XidSpec x;
    if (f.size() != 3 || !ParseInt(f[0], 0, num_devices - 1, &dev) ||
        !ParseUint(f[1], UINT32_MAX, &x.xid) || !ParseUint(f[2], 86400000ULL, &x.after_ms)) {
      *err =
          "entry '" + item + "': want dev:xid:after_ms with dev < " + std::to_string(num_devices);
      return false;
    }
    x.dev = static_cast<int>(dev);
    xids.push_back(x);
  }
  *out = std::move(xids);
  return true;
}

bool ParseMigDevices(const std::string& text, const std::vector<DeviceSpec>& devices,
                     std::vector<int>* out, std::string* err) {
  std::vector<int> mig;
  if (Trim(text).empty()) {
    out->clear();
    return true;
  }
  const int n = static_cast<int>(devices.size());
  for (const std::string& raw : Split(text, ',')) {
    std::string item = Trim(raw);
    long long dev = 0;
    if (!ParseInt(item, 0, n - 1, &dev)) {
      *err = "entry '" + item + "': want a device index < " + std::to_string(n);
      return false;
    }
    const DeviceSpec& d = devices[static_cast<size_t>(dev)];
    if (MigModelFor(d.name, d.mem_mib) == nullptr) {
      *err = "device " + item + " (" + d.name + ") cannot run MIG (only A100 and H100 80GB can)";
      return false;
    }
    for (int seen : mig) {
      if (seen == dev) {
        *err = "device " + item + " named twice";
        return false;
      }
    }
    mig.push_back(static_cast<int>(dev));
  }
  *out = std::move(mig);
  return true;
}

Config LoadConfig(const GetEnv& getenv_fn, std::vector<std::string>* warnings) {
  Config c;
  auto warn = [&](const char* var, const std::string& why) {
    warnings->push_back(std::string("fakegpu: ") + var + ": " + why + "; using default");
  };
  const char* devices = getenv_fn(FAKEGPU_ENV_DEVICES);
  std::string devices_text = devices ? devices : FAKEGPU_DEFAULT_DEVICES;
  std::string err;
  if (!ParseDevices(devices_text, &c.devices, &err)) {
    warn(FAKEGPU_ENV_DEVICES, err);
    devices_text = FAKEGPU_DEFAULT_DEVICES;
    ParseDevices(devices_text, &c.devices, &err);
  }
  const char* state = getenv_fn(FAKEGPU_ENV_STATE);
  if (state && *state) {
    c.state_path = state;
  } else {
    // Processes configured alike share the state; FAKEGPU_MIG is part of it (it sets the modes the
    // state starts with).
    std::string key = devices_text;
    if (const char* m = getenv_fn(FAKEGPU_ENV_MIG); m && *m) key += std::string("\nmig=") + m;
    char buf[128];
    std::snprintf(buf, sizeof buf, "/dev/shm/fakegpu-%u-%016llx", static_cast<unsigned>(getuid()),
                  static_cast<unsigned long long>(Fnv1a64(key)));
    c.state_path = buf;
  }
  auto num = [&](const char* var, uint64_t min, uint64_t max, uint64_t* field) {
    const char* v = getenv_fn(var);
    if (!v) return;
    uint64_t x = 0;
    if (!ParseUint(v, max, &x) || x < min) {
      warn(var, "'" + std::string(v) + "' is not an integer in " + std::to_string(min) + ".." +
                    std::to_string(max));
      return;
    }
    *field = x;
  };
  num(FAKEGPU_ENV_CTX_OVERHEAD_MIB, 0, 1 << 20, &c.ctx_overhead_mib);
  num(FAKEGPU_ENV_WAVE_US, 1, 10000000, &c.wave_us);
  num(FAKEGPU_ENV_MAX_BACKLOG_US, 0, 100000000, &c.max_backlog_us);
  num(FAKEGPU_ENV_NVML_SAMPLE_MS, 0, 10000, &c.nvml_sample_ms);
  uint64_t cuda_version = static_cast<uint64_t>(c.cuda_version);
  num(FAKEGPU_ENV_CUDA_VERSION, 2000, 99990, &cuda_version);
  c.cuda_version = static_cast<int>(cuda_version);
  int ndev = static_cast<int>(c.devices.size());
  if (const char* v = getenv_fn(FAKEGPU_ENV_NVLINK);
      v && !ParseNvLinks(v, ndev, &c.nvlinks, &err)) {
    warn(FAKEGPU_ENV_NVLINK, err);
  }
  if (const char* v = getenv_fn(FAKEGPU_ENV_XID); v && !ParseXids(v, ndev, &c.xids, &err)) {
    warn(FAKEGPU_ENV_XID, err);
  }
  if (const char* v = getenv_fn(FAKEGPU_ENV_FAULTS); v && !ParseFaults(v, &c.faults, &err)) {
    warn(FAKEGPU_ENV_FAULTS, err);
  }
  if (const char* v = getenv_fn(FAKEGPU_ENV_MIG);
      v && !ParseMigDevices(v, c.devices, &c.mig_devices, &err)) {
    warn(FAKEGPU_ENV_MIG, err);
  }
  if (const char* v = getenv_fn(FAKEGPU_ENV_INIT_FAIL); v && *v) {
    std::string t = Trim(v);
    if (t == "1") {
      c.init_fail = true;
    } else if (t != "0") {
      warn(FAKEGPU_ENV_INIT_FAIL, "'" + t + "' is not 0 or 1");
    }
  }
  if (const char* v = getenv_fn(FAKEGPU_ENV_DRIVER_VERSION); v) {
    std::string t = Trim(v);
    if (t.empty() || t.size() >= 80) {
      warn(FAKEGPU_ENV_DRIVER_VERSION, "empty or longer than 79 characters");
    } else {
      c.driver_version = t;
    }
  }
  return c;
}

std::vector<int> VisibleDevices(const char* env, const std::vector<std::string>& uuids) {
  std::vector<int> all;
  for (size_t i = 0; i < uuids.size(); ++i) all.push_back(static_cast<int>(i));
  if (env == nullptr) return all;
  std::vector<int> visible;
  std::string text = env;
  if (Trim(text).empty()) return visible;
  for (const std::string& raw : Split(text, ',')) {
    std::string item = Trim(raw);
    int found = -1;
    long long idx = 0;
    if (!item.empty() && std::isdigit(static_cast<unsigned char>(item[0]))) {
      if (ParseInt(item, 0, static_cast<long long>(uuids.size()) - 1, &idx))
        found = static_cast<int>(idx);
    } else if (item.rfind("GPU-", 0) == 0 && item.size() > 4) {
      int matches = 0;
      for (size_t i = 0; i < uuids.size(); ++i) {
        if (uuids[i].rfind(item, 0) == 0) {
          ++matches;
          found = static_cast<int>(i);
        }
      }
      if (matches != 1) found = -1;
    }
    if (found < 0) break;
    bool dup = false;
    for (int v : visible) dup = dup || v == found;
    if (dup) break;
    visible.push_back(found);
  }
  return visible;
}

void ComputeCapability(const std::string& name, int* major, int* minor) {
  struct Row {
    const char* token;
    int major, minor;
  };
  static const Row kRows[] = {
      {"GH200", 9, 0}, {"H100", 9, 0},  {"H200", 9, 0}, {"H800", 9, 0}, {"GB200", 10, 0},
      {"B200", 10, 0}, {"B100", 10, 0}, {"L40", 8, 9},  {"L4", 8, 9},   {"A100", 8, 0},
      {"A800", 8, 0},  {"A30", 8, 0},   {"A40", 8, 6},  {"A10", 8, 6},  {"RTX A", 8, 6},
      {"T4", 7, 5},    {"V100", 7, 0},  {"P100", 6, 0}, {"P40", 6, 1},  {"P4", 6, 1},
      {"M60", 5, 2},   {"M40", 5, 2},   {"K80", 3, 7},
  };
  for (const Row& r : kRows) {
    if (name.find(r.token) != std::string::npos) {
      *major = r.major;
      *minor = r.minor;
      return;
    }
  }
  *major = 8;
  *minor = 0;
}

bool PagesManagedMemory(const std::string& name) {
  int major = 0, minor = 0;
  ComputeCapability(name, &major, &minor);
  return major >= 6;
}

}  // namespace fakegpu
