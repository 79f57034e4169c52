#include "monitor/feedback.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
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
namespace {

uint64_t RealtimeMicros() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

}  // namespace

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

uint64_t SampleSpans::Since(uint64_t now_us, uint64_t window_us) const {
  if (last_us_ != 0 && last_us_ <= now_us && now_us - last_us_ <= kMaxAgeUs) return last_us_;
  return now_us > window_us ? now_us - window_us : 0;
}

uint64_t SampleSpans::Count(uint64_t since_us, uint64_t newest_us, uint64_t window_us) {
  if (newest_us <= since_us) return 0;
  // Gaps under 20 ms are a period handed out again with a later stamp (docs/design.md).
  if (last_us_ != 0 && newest_us > last_us_ && newest_us - last_us_ >= 20'000 &&
      newest_us - last_us_ <= kMaxAgeUs) {
    gaps_[next_] = newest_us - last_us_;
    next_ = (next_ + 1) % kGaps;
  }
  last_us_ = newest_us;
  return std::min(newest_us - since_us, std::max(window_us, period_us()));
}

uint64_t SampleSpans::period_us() const {
  uint64_t p = 0;
  for (uint64_t g : gaps_) {
    if (g != 0 && (p == 0 || g < p)) p = g;
  }
  return p;
}

void SharePolice::Decided(int64_t mono_ns, uint32_t factor) {
  std::erase_if(factors_, [&](const auto& f) { return mono_ns - f.first > kHistoryNs; });
  factors_.emplace_back(mono_ns, factor);
}

bool SharePolice::Charge(int64_t from_ns, int64_t to_ns, uint32_t pct, uint32_t share_pct,
                         int64_t period_ns) {
  // The highest factor libvgpu may have run the span at: those decided within it or up to kLagNs
  // before it (the one in force at its start among them).
  uint32_t factor = 0;
  for (const auto& [t, f] : factors_) {
    if (t >= from_ns - kLagNs && t <= to_ns) factor = std::max(factor, f);
  }
  if (factor == 0) factor = factors_.empty() ? VGPU_SHARE_FACTOR_ONE : factors_.back().second;
  allowed_ = std::min<uint32_t>(100, vgpu_share_pct(share_pct, factor)) + 1;
  const int64_t span = std::max<int64_t>(to_ns - from_ns, 0);
  debt_ns_ = std::clamp<int64_t>(debt_ns_ + (int64_t{pct} - int64_t{allowed_}) * span / 100, 0,
                                 2'000'000'000);
  if (!on_ && debt_ns_ > std::max<int64_t>(50'000'000, period_ns)) {
    on_ = true;
    return true;
  }
  if (on_ && debt_ns_ == 0) on_ = false;
  return false;
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
  const int64_t now_ns = clock_.MonotonicNanos();
  const uint64_t now_us = RealtimeMicros();
  const uint64_t window_us = static_cast<uint64_t>(std::max<int64_t>(window_ns, 0)) / 1000;
  // Per uuid, once per tick: the samples NVML closed since the last one counted, and the span they
  // stand for (CLOCK_MONOTONIC [from, to]; none when no new sample).
  struct Tick {
    bool fresh = false;
    int64_t from_ns = 0, to_ns = 0, period_ns = 0;
  };
  std::map<std::string, Tick> ticks;
  std::map<std::string, uint32_t> attributed;  // per uuid: sum of containers' percent
  ProcessFiles files;
  std::vector<ShareInput> inputs;
  std::vector<ContainerRegion> used;
  std::vector<std::vector<std::string>> uuids;
  std::vector<std::vector<uint32_t>> measured;  // per container and device: NVML percent
  std::map<std::pair<std::string, std::string>, Launches> waves;
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
      DeviceSamples& ds = samples_[d.uuid];
      if (!ticks.count(d.uuid)) {
        Tick& tk = ticks[d.uuid];
        const uint64_t since = ds.spans.Since(now_us, window_us);
        auto rows = telemetry_.ProcessSamples(d.uuid, since, now_us);
        uint64_t newest = 0;
        if (rows.ok()) {
          for (const ProcessSample& r : *rows) newest = std::max(newest, r.end_us);
        }
        if (const uint64_t span_us = ds.spans.Count(since, newest, window_us); span_us > 0) {
          ds.rows.clear();
          for (const ProcessSample& r : *rows) ds.rows.push_back({r.pid, r.sm_pct});
          ds.end_us = newest;
          tk.fresh = true;
          tk.to_ns = now_ns - static_cast<int64_t>(now_us > newest ? now_us - newest : 0) * 1000;
          tk.from_ns = tk.to_ns - static_cast<int64_t>(span_us) * 1000;
          ds.from_ns = tk.from_ns;
        }
        tk.period_ns = static_cast<int64_t>(ds.spans.period_us()) * 1000;
        // The newest rows say who is busy until the next sample, unless the device went silent.
        const uint64_t stale_us = 2 * std::max(window_us, ds.spans.period_us());
        if (ds.end_us + stale_us < now_us) ds.rows.clear();
      }
      const uint32_t pct = ContainerSmPercent(snap->processes, ds.rows, &files, cr.region.get());
      attributed[d.uuid] += pct;
      auto key = std::make_pair(cr.dir, d.uuid);
      auto prev = waves_.find(key);
      const bool launched = prev != waves_.end() && prev->second.waves != d.waves_launched;
      Launches& l = waves[key];
      l.waves = d.waves_launched;
      l.grew_ns = launched ? now_ns : prev != waves_.end() ? prev->second.grew_ns : 0;
      // NVML's rows stand for a whole period that closed up to a period ago: for a container whose
      // launches libvgpu counts, busy time in a span that began before its last launch (+ 50 ms
      // for its queue to drain) is that launch's, not news that it is busy now (it would hold its
      // neighbours at factor 1 for up to two periods after it went idle).
      const bool counted = prev != waves_.end() && prev->second.counted && l.grew_ns != 0;
      const bool nvml_busy = pct > 0 && (!counted || ds.from_ns > l.grew_ns + 50'000'000);
      // Launches within the window: a limited container may wait for its tokens over a tick.
      const bool recent = l.grew_ns != 0 && now_ns - l.grew_ns <= window_ns;
      in.devices.push_back({d.uuid, t.found ? t.max_sm_pct : 100, recent || nvml_busy});
      us.push_back(d.uuid);
      ms.push_back(pct);
    }
    inputs.push_back(std::move(in));
    uuids.push_back(std::move(us));
    measured.push_back(std::move(ms));
    used.push_back(cr);
  }
  waves_ = std::move(waves);
  std::erase_if(samples_, [&](const auto& kv) { return !ticks.count(kv.first); });
  // Device time NVML saw that no container accounts for: somebody unknown is busy.
  std::set<std::string> unexplained;
  for (const auto& [uuid, tk] : ticks) {
    uint32_t total = 0;
    for (const ProcessUtil& r : samples_[uuid].rows) total += r.sm_pct;
    if (total > attributed[uuid] + 5) unexplained.insert(uuid);
  }
  std::vector<ShareDecision> decisions = DecideShares(inputs, unexplained);
  const std::vector<std::vector<bool>> lent = LentDevices(inputs, decisions);
  for (size_t i = 0; i < used.size(); ++i) {
    for (size_t k = 0; k < uuids[i].size(); ++k) {
      const ShareInput::Device& d = inputs[i].devices[k];
      waves_[{used[i].dir, d.uuid}].counted =
          inputs[i].armed && d.share_pct > 0 && inputs[i].policy != VGPU_POLICY_DISABLE &&
          vgpu_share_pct(d.share_pct, decisions[i].factor[k]) < 100;
    }
  }
  // Policing, per sample span: what the container used of it against what it was allowed then.
  std::map<std::pair<std::string, std::string>, SharePolice> police;
  for (size_t i = 0; i < used.size(); ++i) {
    if (!inputs[i].armed) continue;
    for (size_t k = 0; k < uuids[i].size(); ++k) {
      const ShareInput::Device& d = inputs[i].devices[k];
      if (d.share_pct == 0 || d.share_pct >= 100 || inputs[i].policy == VGPU_POLICY_DISABLE)
        continue;
      SharePolice p = police_[{used[i].dir, d.uuid}];
      p.Decided(now_ns, decisions[i].factor[k]);
      const Tick& tk = ticks[d.uuid];
      if (tk.fresh && p.Charge(tk.from_ns, tk.to_ns, measured[i][k], d.share_pct, tk.period_ns)) {
        spdlog::log(p.warned ? spdlog::level::debug : spdlog::level::warn,
                    "monitor: shares: {} used {} % of {} over its {} %: blocked until it is repaid",
                    used[i].dir, measured[i][k], d.uuid, p.last_allowed_pct() - 1);
        p.warned = true;
      }
      if (p.blocked()) decisions[i].blocked = true;
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
