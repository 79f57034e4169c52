#include "monitor/feedback.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/log.h"
#include "vgpu/shared_region.h"

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

void FeedbackLoop::Release() {
  for (const ContainerRegion& cr : store_.Regions()) (void)cr.region->WriteFeedback(1, 0);
}

}  // namespace hami::monitor
