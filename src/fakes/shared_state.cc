#include "fakes/shared_state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace fakegpu {

uint64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t RealUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000ULL + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

uint64_t ProcStartTime(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces and parentheses
  if (p == nullptr) return 0;
  // Fields after ")" start with field 3 (state); starttime is field 22.
  for (int field = 2; field < 22 && p != nullptr; ++field) p = std::strchr(p + 1, ' ');
  return p == nullptr ? 0 : std::strtoull(p + 1, nullptr, 10);
}

void SleepUntilMono(uint64_t t_ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(t_ns / 1000000000ULL);
  ts.tv_nsec = static_cast<long>(t_ns % 1000000000ULL);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void SharedState::Init(Region* r, const Config& cfg) {
  std::memset(static_cast<void*>(r), 0, offsetof(Region, devs));
  r->version = kStateVersion;
  r->size = sizeof(Region);
  r->num_devices = static_cast<uint32_t>(cfg.devices.size());
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&r->mu, &attr);
  pthread_mutexattr_destroy(&attr);
  for (size_t i = 0; i < cfg.devices.size(); ++i) {
    DeviceRec& d = r->devs[i];
    const DeviceSpec& s = cfg.devices[i];
    std::memset(d.name, 0, sizeof d.name);
    std::memset(d.uuid, 0, sizeof d.uuid);
    std::memcpy(d.name, s.name.data(), std::min(s.name.size(), sizeof d.name - 1));
    std::memcpy(d.uuid, s.uuid.data(), std::min(s.uuid.size(), sizeof d.uuid - 1));
    d.total_bytes = s.mem_mib << 20;
    d.sms = s.sms;
    for (int& p : d.nvlink_peer) p = -1;
    d.busy_until_ns = 0;
    d.busy_sched_ns = 0;
    d.ring_count = 0;
    MigRec& m = r->mig[i];
    std::memset(&m, 0, sizeof m);
    m.capable = MigModelFor(s.name, s.mem_mib) != nullptr ? 1 : 0;
    for (int dev : cfg.mig_devices) m.enabled |= (dev == static_cast<int>(i) && m.capable) ? 1 : 0;
  }
  for (const NvLinkSpec& l : cfg.nvlinks) {
    for (int k = 0; k < l.links; ++k) {
      for (int side = 0; side < 2; ++side) {
        DeviceRec& d = r->devs[side == 0 ? l.a : l.b];
        for (int& p : d.nvlink_peer) {
          if (p < 0) {
            p = side == 0 ? l.b : l.a;
            break;
          }
        }
      }
    }
  }
  __atomic_store_n(&r->magic, kStateMagic, __ATOMIC_RELEASE);
}

SharedState* SharedState::OpenPrivate(const Config& cfg) {
  void* p =
      mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  Init(static_cast<Region*>(p), cfg);
  return new SharedState(static_cast<Region*>(p), sizeof(Region));
}

SharedState* SharedState::Open(const Config& cfg, std::string* err) {
  const std::string& path = cfg.state_path;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = "cannot open state file " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = "cannot stat " + path + ": " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  size_t size = sizeof(Region);
  bool fresh = static_cast<size_t>(st.st_size) < offsetof(Region, mu);
  if (fresh && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    *err = "cannot size " + path + ": " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  if (!fresh && static_cast<size_t>(st.st_size) != size) {
    *err = "state file " + path + " has size " + std::to_string(st.st_size) + ", want " +
           std::to_string(size) + " (another layout version)";
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *err = "cannot mmap " + path + ": " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  Region* r = static_cast<Region*>(p);
  uint32_t magic = __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE);
  if (magic == 0) {
    Init(r, cfg);
  } else if (magic != kStateMagic || r->version != kStateVersion || r->size != size ||
             r->num_devices == 0 || r->num_devices > static_cast<uint32_t>(kMaxDevices)) {
    *err = "state file " + path + " has another layout (magic/version mismatch)";
    munmap(p, size);
    close(fd);
    return nullptr;
  }
  flock(fd, LOCK_UN);
  close(fd);
  return new SharedState(r, size);
}

SharedState::~SharedState() {
  munmap(r_, size_);
}

std::vector<std::string> SharedState::Uuids() const {
  std::vector<std::string> out;
  for (int i = 0; i < num_devices(); ++i) out.emplace_back(r_->devs[i].uuid);
  return out;
}

void SharedState::Lock() {
  int rc = pthread_mutex_lock(&r_->mu);
  if (rc == EOWNERDEAD)
    pthread_mutex_consistent(&r_->mu);  // the dead holder's updates are small; keep them
}

ProcRec* SharedState::SelfLocked() {
  int pid = static_cast<int>(getpid());
  if (self_slot_ >= 0 && self_pid_ == pid && r_->procs[self_slot_].pid == pid &&
      r_->procs[self_slot_].live) {
    return &r_->procs[self_slot_];
  }
  self_pid_ = pid;
  self_slot_ = -1;
  int free_slot = -1, dead_slot = -1;
  for (int i = 0; i < kMaxProcs; ++i) {
    ProcRec& p = r_->procs[i];
    if (p.pid == pid) {  // a stale record of an earlier process with our pid: take it over
      free_slot = i;
      break;
    }
    if (p.pid == 0 && free_slot < 0) free_slot = i;
    if (p.pid != 0 && !p.live && dead_slot < 0) dead_slot = i;
  }
  int slot = free_slot >= 0 ? free_slot : dead_slot;
  if (slot < 0) {
    ReclaimDeadLocked(/*deep=*/true);
    for (int i = 0; i < kMaxProcs && slot < 0; ++i) {
      if (!r_->procs[i].live) slot = i;
    }
    if (slot < 0) return nullptr;
  }
  ProcRec& p = r_->procs[slot];
  std::memset(&p, 0, sizeof p);
  p.pid = pid;
  p.live = 1;
  p.start_time = ProcStartTime(pid);
  self_slot_ = slot;
  return &p;
}

void SharedState::ReclaimDeadLocked(bool deep) {
  for (ProcRec& p : r_->procs) {
    if (!p.live || p.pid <= 0) continue;
    bool dead = kill(p.pid, 0) != 0 && errno == ESRCH;
    if (!dead && deep && p.start_time != 0) {
      uint64_t t = ProcStartTime(p.pid);
      dead = t != 0 && t != p.start_time;
    }
    if (!dead) continue;
    p.live = 0;
    std::memset(p.mem_bytes, 0, sizeof p.mem_bytes);
    std::memset(p.managed_bytes, 0, sizeof p.managed_bytes);
    std::memset(p.contexts, 0, sizeof p.contexts);
  }
}

uint64_t SharedState::RoomLocked(int dev) const {
  uint64_t used = 0;
  for (const ProcRec& p : r_->procs) {
    if (p.live) used += p.mem_bytes[dev] + p.managed_bytes[dev];
  }
  uint64_t total = r_->devs[dev].total_bytes;
  return used <= total ? total - used : 0;
}

bool SharedState::Charge(int dev, uint64_t bytes) {
  Lock();
  ProcRec* self = SelfLocked();
  bool ok = false;
  if (self != nullptr) {
    for (int attempt = 0; attempt < 2 && !ok; ++attempt) {
      if (attempt == 1) ReclaimDeadLocked(/*deep=*/true);
      ok = bytes <= RoomLocked(dev);
    }
    if (!ok && PagesManagedMemory(r_->devs[dev].name)) {  // page managed memory out to the host
      uint64_t room = RoomLocked(dev), resident = 0;
      for (const ProcRec& p : r_->procs) resident += p.live ? p.managed_bytes[dev] : 0;
      if (bytes <= room + resident) {
        for (ProcRec& p : r_->procs) {
          if (!p.live || room >= bytes) continue;
          uint64_t take = std::min(p.managed_bytes[dev], bytes - room);
          p.managed_bytes[dev] -= take;
          room += take;
        }
        ok = true;
      }
    }
    if (ok) self->mem_bytes[dev] += bytes;
  }
  Unlock();
  return ok;
}

void SharedState::Uncharge(int dev, uint64_t bytes) {
  Lock();
  if (ProcRec* self = SelfLocked()) self->mem_bytes[dev] -= std::min(bytes, self->mem_bytes[dev]);
  Unlock();
}

uint64_t SharedState::ChargeManaged(int dev, uint64_t bytes) {
  Lock();
  ProcRec* self = SelfLocked();
  uint64_t resident = 0;
  if (self != nullptr) {
    if (RoomLocked(dev) < bytes) ReclaimDeadLocked();  // system calls only when short of room
    resident = std::min(bytes, RoomLocked(dev));
    self->managed_bytes[dev] += resident;
  }
  Unlock();
  return resident;
}

void SharedState::UnchargeManaged(int dev, uint64_t bytes) {
  Lock();
  if (ProcRec* self = SelfLocked())
    self->managed_bytes[dev] -= std::min(bytes, self->managed_bytes[dev]);
  Unlock();
}

void SharedState::AddContext(int dev, int delta) {
  Lock();
  if (ProcRec* self = SelfLocked()) {
    int64_t n = static_cast<int64_t>(self->contexts[dev]) + delta;
    self->contexts[dev] = static_cast<uint32_t>(std::max<int64_t>(0, n));
  }
  Unlock();
}

void SharedState::ReleaseSelf() {
  Lock();
  int pid = static_cast<int>(getpid());
  for (ProcRec& p : r_->procs) {
    if (p.pid == pid && p.live) {
      p.live = 0;
      std::memset(p.mem_bytes, 0, sizeof p.mem_bytes);
      std::memset(p.managed_bytes, 0, sizeof p.managed_bytes);
      std::memset(p.contexts, 0, sizeof p.contexts);
    }
  }
  self_slot_ = -1;
  Unlock();
}

uint64_t SharedState::UsedBytes(int dev, int pid) {
  Lock();
  ReclaimDeadLocked();
  uint64_t used = 0;
  for (const ProcRec& p : r_->procs) {
    if (p.live && (pid == 0 || p.pid == pid)) used += p.mem_bytes[dev] + p.managed_bytes[dev];
  }
  Unlock();
  return used;
}

std::vector<SharedState::ProcUsage> SharedState::Processes(int dev) {
  std::vector<ProcUsage> out;
  Lock();
  ReclaimDeadLocked();
  for (const ProcRec& p : r_->procs) {
    if (p.live && (p.contexts[dev] > 0 || p.mem_bytes[dev] > 0))
      out.push_back({p.pid, p.mem_bytes[dev]});
  }
  Unlock();
  return out;
}

uint64_t SharedState::OwnQueueWaitLocked(ProcRec* self, int dev, uint64_t now, uint64_t start,
                                         uint64_t max_backlog_ns) {
  while (self->queue_len > 0 && self->queue[self->queue_head].end_ns <= now) {
    self->queue_head = (self->queue_head + 1) % kProcQueue;
    --self->queue_len;
  }
  // Runs of one device are in time order (the device is FIFO): from the newest back, the first run
  // that takes the pending work over the bound is where the wait ends.
  uint64_t after = 0;  // own work on dev queued after the run looked at
  for (uint32_t k = self->queue_len; k-- > 0;) {
    const QueuedRun& q = self->queue[(self->queue_head + k) % kProcQueue];
    if (q.dev != dev || q.end_ns <= now) continue;
    uint64_t rest = q.end_ns - std::max(q.start_ns, now);
    if (after + rest > max_backlog_ns) return q.end_ns - (max_backlog_ns - after);
    after += rest;
  }
  if (self->queue_len < static_cast<uint32_t>(kProcQueue)) return 0;
  const QueuedRun& tail = self->queue[(self->queue_head + self->queue_len - 1) % kProcQueue];
  if (tail.dev == dev && tail.end_ns == start) return 0;  // merges into the newest run
  // Full: drop the runs that have ended (behind an older one on another device), else wait for the
  // first to end.
  QueuedRun kept[kProcQueue];
  uint32_t n = 0;
  uint64_t first_end = UINT64_MAX;
  for (uint32_t k = 0; k < self->queue_len; ++k) {
    const QueuedRun& q = self->queue[(self->queue_head + k) % kProcQueue];
    if (q.end_ns <= now) continue;
    kept[n++] = q;
    first_end = std::min(first_end, q.end_ns);
  }
  std::copy(kept, kept + n, self->queue);
  self->queue_head = 0;
  self->queue_len = n;
  return n < static_cast<uint32_t>(kProcQueue) ? 0 : first_end;
}

void SharedState::QueueRunLocked(ProcRec* self, int dev, uint64_t start, uint64_t end) {
  if (self->queue_len > 0) {
    QueuedRun& tail = self->queue[(self->queue_head + self->queue_len - 1) % kProcQueue];
    // Back to back on one device: one run. (A full queue cannot be reached: the launch waited.)
    if ((tail.dev == dev && tail.end_ns == start) ||
        self->queue_len == static_cast<uint32_t>(kProcQueue)) {
      tail.end_ns = std::max(tail.end_ns, end);
      return;
    }
  }
  self->queue[(self->queue_head + self->queue_len) % kProcQueue] = QueuedRun{start, end, dev, 0};
  ++self->queue_len;
}

uint64_t SharedState::Launch(int dev, uint64_t dur_ns, uint64_t max_backlog_ns) {
  DeviceRec& d = r_->devs[dev];
  int pid = static_cast<int>(getpid());
  while (true) {
    Lock();
    uint64_t now = MonoNs();
    uint64_t start = std::max(now, d.busy_until_ns);
    ProcRec* self = SelfLocked();
    // Without a process slot (all 256 taken by live processes) the device-wide backlog admits.
    uint64_t wake = self != nullptr ? OwnQueueWaitLocked(self, dev, now, start, max_backlog_ns)
                    : start - now > max_backlog_ns ? d.busy_until_ns - max_backlog_ns
                                                   : 0;
    if (wake > now) {
      Unlock();
      SleepUntilMono(wake);
      continue;
    }
    uint64_t end = start + dur_ns;
    d.busy_until_ns = end;
    d.busy_sched_ns += dur_ns;
    if (self != nullptr) {
      self->busy_sched_ns[dev] += dur_ns;
      QueueRunLocked(self, dev, start, end);
    }
    Interval* last = d.ring_count > 0 ? &d.ring[(d.ring_count - 1) % kRingSize] : nullptr;
    if (last != nullptr && last->pid == pid && last->end_ns == start) {
      last->end_ns = end;  // back-to-back kernels of one pid: one interval
    } else {
      d.ring[d.ring_count % kRingSize] = Interval{start, end, pid, 0};
      ++d.ring_count;
    }
    Unlock();
    return end;
  }
}

uint64_t SharedState::PendingLocked(int dev, int pid, uint64_t now) {
  const DeviceRec& d = r_->devs[dev];
  uint64_t pending = 0;
  uint64_t n = std::min<uint64_t>(d.ring_count, kRingSize);
  for (uint64_t k = 0; k < n; ++k) {
    const Interval& iv = d.ring[(d.ring_count - 1 - k) % kRingSize];
    if (iv.end_ns <= now) break;
    if (pid == 0 || iv.pid == pid) pending += iv.end_ns - std::max(iv.start_ns, now);
  }
  return pending;
}

uint64_t SharedState::BusyNs(int dev, int pid) {
  if (dev < 0 || dev >= num_devices()) return 0;
  Lock();
  uint64_t now = MonoNs();
  uint64_t sched = 0;
  if (pid == 0) {
    sched = r_->devs[dev].busy_sched_ns;
  } else {
    for (const ProcRec& p : r_->procs) {
      if (p.pid == pid) sched += p.busy_sched_ns[dev];
    }
  }
  uint64_t pending = PendingLocked(dev, pid, now);
  Unlock();
  return sched > pending ? sched - pending : 0;
}

std::vector<SharedState::PidBusy> SharedState::BusyInWindow(int dev, uint64_t from_ns,
                                                            uint64_t to_ns) {
  std::map<int, uint64_t> by_pid;
  uint64_t total = 0;
  Lock();
  const DeviceRec& d = r_->devs[dev];
  uint64_t n = std::min<uint64_t>(d.ring_count, kRingSize);
  for (uint64_t k = 0; k < n; ++k) {
    const Interval& iv = d.ring[(d.ring_count - 1 - k) % kRingSize];
    if (iv.end_ns <= from_ns) break;
    uint64_t s = std::max(iv.start_ns, from_ns), e = std::min(iv.end_ns, to_ns);
    if (e <= s) continue;
    by_pid[iv.pid] += e - s;
    total += e - s;
  }
  Unlock();
  std::vector<PidBusy> out;
  out.push_back({0, total});
  for (const auto& [pid, ns] : by_pid) out.push_back({pid, ns});
  return out;
}

MigRec SharedState::Mig(int dev) {
  Lock();
  MigRec m = r_->mig[dev];
  Unlock();
  return m;
}

int SharedState::UpdateMig(int dev, const std::function<int(MigRec*)>& fn) {
  Lock();
  int rc = fn(&r_->mig[dev]);
  Unlock();
  return rc;
}

void SharedState::InjectXid(int dev, uint64_t xid) {
  Lock();
  uint64_t seq = ++r_->xid_seq;
  r_->xids[seq % kMaxEvents] = XidRec{seq, dev, 0, xid, MonoNs()};
  Unlock();
}

uint64_t SharedState::XidSeq() {
  Lock();
  uint64_t s = r_->xid_seq;
  Unlock();
  return s;
}

bool SharedState::NextXid(uint64_t after_seq, XidRec* out) {
  Lock();
  uint64_t last = r_->xid_seq;
  uint64_t first = last > kMaxEvents ? last - kMaxEvents + 1 : 1;
  uint64_t want = std::max(after_seq + 1, first);
  bool found = false;
  if (want <= last) {
    *out = r_->xids[want % kMaxEvents];
    found = out->seq == want;
  }
  Unlock();
  return found;
}

}  // namespace fakegpu
