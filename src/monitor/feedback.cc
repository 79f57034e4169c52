#include "monitor/feedback.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "vgpu/shared_region.h"
#include "vgpu/vgpu_core.h"

namespace hami::monitor {

std::vector<FeedbackDecision> DecideFeedback(const std::vector<ContainerActivity>& containers) {
  // uuid -> priority -> number of active containers
  std::map<std::string, std::map<int32_t, int>> active;
  for (const ContainerActivity& c : containers) {
    std::set<std::string> seen;  // a container counts once per GPU
    for (const auto& d : c.devices) {
      if (d.active && seen.insert(d.uuid).second) ++active[d.uuid][c.priority];
    }
  }
  std::vector<FeedbackDecision> out;
  out.reserve(containers.size());
  for (const ContainerActivity& c : containers) {
    bool higher = false, crowded = false;
    for (const auto& d : c.devices) {
      auto it = active.find(d.uuid);
      if (it == active.end()) continue;
      for (const auto& [prio, n] : it->second) {
        if (prio < c.priority && n > 0) higher = true;
        if (prio == c.priority && n >= 2) crowded = true;
      }
    }
    FeedbackDecision dec;
    dec.recent_kernel = higher ? -1 : 0;
    dec.utilization_switch = (higher || crowded || c.policy == VGPU_POLICY_FORCE) ? 1 : 0;
    out.push_back(dec);
  }
  return out;
}

bool DeviceActive(const RegionDevice& d, int64_t now_mono_ns, int64_t window_ns, uint32_t sm_pct) {
  if (sm_pct > 0) return true;
  if (d.last_launch_ns == 0) return false;
  int64_t last = static_cast<int64_t>(d.last_launch_ns);
  return last <= now_mono_ns + window_ns && now_mono_ns - last <= window_ns;
}

std::optional<bool> ProcessFiles::HasOpen(uint32_t pid, uint64_t device, uint64_t inode) {
  auto it = cache_.find(pid);
  if (it == cache_.end()) {
    std::optional<std::set<std::pair<uint64_t, uint64_t>>> files;
    std::string dir = proc_root_ + "/" + std::to_string(pid) + "/fd";
    if (DIR* d = opendir(dir.c_str())) {
      files.emplace();
      // NOLINTNEXTLINE(concurrency-mt-unsafe): glibc's readdir races only on a shared DIR*
      while (struct dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        struct stat st;
        if (stat((dir + "/" + e->d_name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
          files->insert({static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)});
        }
      }
      closedir(d);
    }
    it = cache_.emplace(pid, std::move(files)).first;
  }
  if (!it->second) return std::nullopt;
  return it->second->count({device, inode}) > 0;
}

uint32_t ContainerSmPercent(const std::vector<RegionProcess>& procs,
                            const std::vector<ProcessUtil>& rows, ProcessFiles* files,
                            const MappedRegion* region) {
  uint32_t sum = 0;
  for (const ProcessUtil& row : rows) {
    if (files != nullptr && region != nullptr) {
      std::optional<bool> open = files->HasOpen(row.pid, region->device(), region->inode());
      if (open.has_value()) {
        if (*open) sum += row.sm_pct;
        continue;
      }
    }
    for (const RegionProcess& p : procs) {
      uint32_t pid = p.host_pid != 0 ? p.host_pid : p.pid;
      if (pid == row.pid) {
        sum += row.sm_pct;
        break;
      }
    }
  }
  return std::min<uint32_t>(sum, 100);
}

void ActivityLog::Saw(const std::string& dir, const std::string& uuid, int64_t mono_ns) {
  MutexLock l(mu_);
  int64_t& t = last_[{dir, uuid}];
  t = std::max(t, mono_ns);
}

int64_t ActivityLog::LastSeen(const std::string& dir, const std::string& uuid) const {
  MutexLock l(mu_);
  auto it = last_.find({dir, uuid});
  return it == last_.end() ? 0 : it->second;
}

void ActivityLog::Retain(const std::vector<ContainerRegion>& live) {
  std::set<std::string> dirs;
  for (const ContainerRegion& r : live) dirs.insert(r.dir);
  MutexLock l(mu_);
  std::erase_if(last_, [&](const auto& kv) { return !dirs.count(kv.first.first); });
}

std::vector<ShareDecision> DecideShares(const std::vector<ShareInput>& containers,
                                        const std::set<std::string>& unexplained) {
  // Per GPU: the highest busy priority, and among its busy containers what "force" ones hold, what
  // "default" ones hold, and whether one of unknown share is busy.
  struct Gpu {
    int32_t top = INT32_MAX;
    uint32_t fixed = 0, flex = 0;
    bool unknown = false;
  };
  std::map<std::string, Gpu> gpus;
  for (const ShareInput& c : containers) {
    for (const auto& d : c.devices) {
      Gpu& g = gpus[d.uuid];
      if (d.busy) g.top = std::min(g.top, c.priority);
    }
  }
  for (const ShareInput& c : containers) {
    std::set<std::string> seen;
    for (const auto& d : c.devices) {
      Gpu& g = gpus[d.uuid];
      if (!d.busy || c.priority != g.top || !seen.insert(d.uuid).second) continue;
      const bool limited =
          c.armed && d.share_pct > 0 && d.share_pct < 100 && c.policy != VGPU_POLICY_DISABLE;
      if (!limited) {
        g.unknown = true;
      } else if (c.policy == VGPU_POLICY_FORCE) {
        g.fixed += d.share_pct;
      } else {
        g.flex += d.share_pct;
      }
    }
  }
  std::vector<ShareDecision> out;
  out.reserve(containers.size());
  for (const ShareInput& c : containers) {
    ShareDecision dec;
    for (const auto& d : c.devices) {
      if (gpus[d.uuid].top < c.priority) dec.blocked = true;
    }
    for (const auto& d : c.devices) {
      const Gpu& g = gpus[d.uuid];
      uint64_t f = VGPU_SHARE_FACTOR_ONE;
      if (d.busy && !dec.blocked && c.priority == g.top && c.policy == VGPU_POLICY_DEFAULT &&
          g.flex > 0 && g.fixed < 100 && !g.unknown && !unexplained.count(d.uuid)) {
        f = (100 - uint64_t{g.fixed}) * VGPU_SHARE_FACTOR_ONE / g.flex;  // rounded down
        f = std::clamp<uint64_t>(f, VGPU_SHARE_FACTOR_ONE, VGPU_SHARE_FACTOR_MAX);
      }
      dec.factor.push_back(static_cast<uint32_t>(f));
    }
    out.push_back(std::move(dec));
  }
  return out;
}

std::vector<std::vector<bool>> LentDevices(const std::vector<ShareInput>& containers,
                                           const std::vector<ShareDecision>& decisions) {
  std::set<std::string> lending;  // GPUs where a busy container gets more than its limit
  for (size_t i = 0; i < containers.size() && i < decisions.size(); ++i) {
    const auto& devs = containers[i].devices;
    for (size_t k = 0; k < devs.size() && k < decisions[i].factor.size(); ++k) {
      if (devs[k].busy && decisions[i].factor[k] > VGPU_SHARE_FACTOR_ONE)
        lending.insert(devs[k].uuid);
    }
  }
  std::vector<std::vector<bool>> out;
  out.reserve(containers.size());
  for (const ShareInput& c : containers) {
    std::vector<bool> lent;
    lent.reserve(c.devices.size());
    for (const auto& d : c.devices) lent.push_back(!d.busy && lending.count(d.uuid) > 0);
    out.push_back(std::move(lent));
  }
  return out;
}

TrustedLimits ReadTrustedLimits(const std::string& limits_path) {
  TrustedLimits t;
  std::ifstream in(limits_path);
  if (!in) return t;
  t.found = true;
  std::string line;
  for (int n = 0; n < 256 && std::getline(in, line); ++n) {
    size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    uint32_t v = 0;
    int32_t i = 0;
    if (key.rfind("CUDA_DEVICE_SM_LIMIT", 0) == 0) {
      if (vgpu_parse_percent(value.c_str(), &v) == 0) t.max_sm_pct = std::max(t.max_sm_pct, v);
    } else if (key == "CUDA_TASK_PRIORITY") {
      if (vgpu_parse_int(value.c_str(), &i) == 0) t.priority = i;
    } else if (key == "GPU_CORE_UTILIZATION_POLICY") {
      if (vgpu_parse_policy(value.c_str(), &v) == 0) t.policy = v;
    }
  }
  return t;
}

bool WriteShareLines(const std::string& limits_path, const std::string& lines) {
  // O_NOFOLLOW: the file is the device plugin's, on the host; never a link planted there.
  int fd = open(limits_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  std::string text(size_t{64} * 1024, '\0');
  ssize_t n = pread(fd, text.data(), text.size(), 0);
  bool ok = n >= 0;
  if (ok) {
    text.resize(static_cast<size_t>(n));
    // The share lines start at the first line that begins with the prefix; else they are appended.
    const std::string prefix = VGPU_SHARE_PREFIX;
    size_t start = text.rfind(prefix, 0) == 0 ? 0 : text.find("\n" + prefix);
    std::string out = lines;
    if (start == std::string::npos) {
      start = text.size();
      if (!text.empty() && text.back() != '\n') out.insert(0, "\n");
    } else if (start > 0 || text[0] != '#') {
      ++start;  // after the newline
    }
    // In place, at a fixed offset, so that a reader never sees the file without its lines; a
    // reader that reads while they are rewritten finds a line whose checksum fails and keeps its
    // previous value.
    ok = pwrite(fd, out.data(), out.size(), static_cast<off_t>(start)) ==
         static_cast<ssize_t>(out.size());
    if (ok && text.size() > start + out.size())
      ok = ftruncate(fd, static_cast<off_t>(start + out.size())) == 0;
  }
  close(fd);
  return ok;
}

FeedbackLoop::FeedbackLoop(RegionStore& store, GpuTelemetry& telemetry, const Clock& clock,
                           int64_t window_ns, ActivityLog* activity)
    : store_(store),
      telemetry_(telemetry),
      clock_(clock),
      window_ns_(window_ns),
      activity_(activity) {}

FeedbackStats FeedbackLoop::Tick() {
  FeedbackStats stats;
  store_.Rescan();
  std::vector<ContainerRegion> regions = store_.Regions();
  std::vector<ContainerRegion> used;
  std::vector<ContainerActivity> inputs;
  std::map<std::string, std::vector<ProcessUtil>> util;  // per uuid, fetched once per tick
  ProcessFiles files;
  const int64_t now = clock_.MonotonicNanos();
  for (const ContainerRegion& cr : regions) {
    auto snap = cr.region->Snapshot();
    if (!snap.ok()) {
      ++stats.errors;
      continue;
    }
    ContainerActivity a;
    a.priority = snap->priority;
    a.policy = snap->policy;
    for (const RegionDevice& d : snap->devices) {
      auto it = util.find(d.uuid);
      if (it == util.end()) {
        auto rows = telemetry_.ProcessUtilization(d.uuid, window_ns_ / 1'000'000);
        it = util.emplace(d.uuid, rows.ok() ? std::move(*rows) : std::vector<ProcessUtil>{}).first;
      }
      uint32_t pct = ContainerSmPercent(snap->processes, it->second, &files, cr.region.get());
      if (pct > 0 && activity_ != nullptr) activity_->Saw(cr.dir, d.uuid, now);
      a.devices.push_back({d.uuid, DeviceActive(d, now, window_ns_, pct)});
    }
    inputs.push_back(std::move(a));
    used.push_back(cr);
  }
  if (activity_ != nullptr) activity_->Retain(regions);
  std::vector<FeedbackDecision> decisions = DecideFeedback(inputs);
  for (size_t i = 0; i < used.size(); ++i) {
    Status s =
        used[i].region->WriteFeedback(decisions[i].utilization_switch, decisions[i].recent_kernel);
    if (!s.ok()) {
      ++stats.errors;
      spdlog::warn("monitor: feedback: {}", std::string(s.message()));
      continue;
    }
    ++stats.containers;
    stats.switched_on += decisions[i].utilization_switch;
    stats.blocked += decisions[i].recent_kernel < 0 ? 1 : 0;
  }
  return stats;
}

int FeedbackLoop::ShareTick(int64_t window_ns) {
  store_.Rescan();
  std::vector<ContainerRegion> regions = store_.Regions();
  const std::string root = store_.options().root;
  std::map<std::string, std::vector<ProcessUtil>> util;  // per uuid
  std::map<std::string, uint32_t> attributed;            // per uuid: sum of containers' percent
  ProcessFiles files;
  std::vector<ShareInput> inputs;
  std::vector<ContainerRegion> used;
  std::vector<std::vector<std::string>> uuids;
  std::vector<std::vector<uint32_t>> measured;  // per container and device: NVML percent
  std::map<std::pair<std::string, std::string>, uint64_t> waves;
  for (const ContainerRegion& cr : regions) {
    auto snap = cr.region->Snapshot();
    if (!snap.ok()) continue;
    const TrustedLimits t = ReadTrustedLimits(root + "/" + cr.dir + ".limits");
    ShareInput in;
    in.armed = t.found;
    in.priority = t.found ? t.priority : snap->priority;
    in.policy = t.found ? t.policy : snap->policy;
    std::vector<std::string> us;
    std::vector<uint32_t> ms;
    for (const RegionDevice& d : snap->devices) {
      auto it = util.find(d.uuid);
      if (it == util.end()) {
        auto rows = telemetry_.ProcessUtilization(d.uuid, window_ns / 1'000'000);
        it = util.emplace(d.uuid, rows.ok() ? std::move(*rows) : std::vector<ProcessUtil>{}).first;
      }
      const uint32_t pct = ContainerSmPercent(snap->processes, it->second, &files, cr.region.get());
      attributed[d.uuid] += pct;
      auto key = std::make_pair(cr.dir, d.uuid);
      auto prev = waves_.find(key);
      const bool launched = prev != waves_.end() && prev->second != d.waves_launched;
      waves[key] = d.waves_launched;
      in.devices.push_back({d.uuid, t.found ? t.max_sm_pct : 100, launched || pct > 0});
      us.push_back(d.uuid);
      ms.push_back(pct);
    }
    inputs.push_back(std::move(in));
    uuids.push_back(std::move(us));
    measured.push_back(std::move(ms));
    used.push_back(cr);
  }
  waves_ = std::move(waves);
  // Device time NVML saw that no container accounts for: somebody unknown is busy.
  std::set<std::string> unexplained;
  for (const auto& [uuid, rows] : util) {
    uint32_t total = 0;
    for (const ProcessUtil& r : rows) total += r.sm_pct;
    if (total > attributed[uuid] + 5) unexplained.insert(uuid);
  }
  std::vector<ShareDecision> decisions = DecideShares(inputs, unexplained);
  const std::vector<std::vector<bool>> lent = LentDevices(inputs, decisions);
  const int64_t now_ns = clock_.MonotonicNanos();
  const int64_t dt = std::clamp<int64_t>(now_ns - last_share_ns_, 0, 1'000'000'000);
  last_share_ns_ = now_ns;
  std::map<std::pair<std::string, std::string>, Police> police;
  for (size_t i = 0; i < used.size(); ++i) {
    if (!inputs[i].armed) continue;
    for (size_t k = 0; k < uuids[i].size(); ++k) {
      const ShareInput::Device& d = inputs[i].devices[k];
      if (d.share_pct == 0 || d.share_pct >= 100 || inputs[i].policy == VGPU_POLICY_DISABLE)
        continue;
      Police p = police_[{used[i].dir, d.uuid}];
      std::erase_if(p.factors, [&](const auto& f) { return now_ns - f.first > 500'000'000; });
      p.factors.emplace_back(now_ns, decisions[i].factor[k]);
      uint32_t factor = 0;
      for (const auto& f : p.factors) factor = std::max(factor, f.second);
      const int64_t allowed = std::min<int64_t>(100, vgpu_share_pct(d.share_pct, factor)) + 1;
      p.debt_ns = std::clamp<int64_t>(p.debt_ns + (int64_t{measured[i][k]} - allowed) * dt / 100, 0,
                                      2'000'000'000);
      if (!p.on && p.debt_ns > 50'000'000) {
        spdlog::log(p.warned ? spdlog::level::debug : spdlog::level::warn,
                    "monitor: shares: {} used {} % of {} over its {} %: blocked until it is repaid",
                    used[i].dir, measured[i][k], d.uuid, allowed - 1);
        p.warned = true;
        p.on = true;
      } else if (p.on && p.debt_ns == 0) {
        p.on = false;
      }
      if (p.on) decisions[i].blocked = true;
      police[{used[i].dir, d.uuid}] = std::move(p);
    }
  }
  police_ = std::move(police);
  const uint64_t now_ms = static_cast<uint64_t>(now_ns) / 1'000'000;
  int written = 0;
  for (size_t i = 0; i < used.size(); ++i) {
    if (!inputs[i].armed) continue;
    std::string lines;
    char buf[256];
    for (size_t k = 0; k < uuids[i].size(); ++k) {
      const int state = decisions[i].blocked ? VGPU_SHARE_BLOCKED
                        : lent[i][k]         ? VGPU_SHARE_LENT
                                             : 0;
      int n = vgpu_format_share(buf, sizeof buf, uuids[i][k].c_str(), decisions[i].factor[k], state,
                                now_ms);
      if (n > 0) lines.append(buf, static_cast<size_t>(n));
    }
    if (WriteShareLines(root + "/" + used[i].dir + ".limits", lines)) ++written;
  }
  return written;
}

ShareThread::ShareThread(FeedbackLoop& loop, int64_t interval_ms)
    : thread_([this, &loop, interval_ms] {
        const int64_t window_ns = std::max<int64_t>(2 * interval_ms, 100) * 1'000'000;
        for (;;) {
          loop.ShareTick(window_ns);
          MutexLock l(mu_);
          if (cv_.WaitFor(mu_, std::chrono::milliseconds(interval_ms),
                          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }))
            return;
        }
      }) {}

ShareThread::~ShareThread() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void FeedbackLoop::Release() {
  for (const ContainerRegion& cr : store_.Regions()) (void)cr.region->WriteFeedback(1, 0);
}

}  // namespace hami::monitor
