#include "monitor/region_reader.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/libc.h"
#include "vgpu/shared_region.h"

namespace hami::monitor {
namespace {

constexpr uint32_t kUpstreamMagic = 19920718;  // HAMi-core's region: another layout entirely

// --- SIGBUS guard ------------------------------------------------------------------------------
// Touching a page of a mapping beyond the end of a truncated file raises SIGBUS. While a guarded
// copy runs on this thread the handler jumps back into it; anywhere else the previous disposition
// applies.
thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous_bus;

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  if (t_guard != nullptr) siglongjmp(*t_guard, 1);
  // Not ours: restore the previous disposition; the faulting access repeats and gets it.
  sigaction(SIGBUS, &g_previous_bus, nullptr);
  (void)sig;
  (void)info;
  (void)ctx;
}

void InstallSigbusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = &OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

// Copies `n` bytes (a multiple of 8, both 8-aligned) from the mapping with 64-bit atomic loads, so
// every 32/64-bit field of the region is read untorn. Nothing with a destructor lives in this
// frame, which is what makes the siglongjmp out of a fault safe. Returns false on SIGBUS.
bool GuardedCopy(void* dst, const void* src, size_t n) {
  sigjmp_buf env;
  if (sigsetjmp(env, 0) != 0) {  // no mask to restore: the handler runs with SA_NODEFER
    t_guard = nullptr;
    return false;
  }
  t_guard = &env;
  auto* s = static_cast<const uint64_t*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < n / 8; ++i) {
    uint64_t w = __atomic_load_n(s + i, __ATOMIC_ACQUIRE);
    std::memcpy(d + i * 8, &w, 8);
  }
  t_guard = nullptr;
  return true;
}

// Stores `value` at `p` unless it already holds it. Returns false on SIGBUS.
bool GuardedStore32(int32_t* p, int32_t value) {
  sigjmp_buf env;
  if (sigsetjmp(env, 0) != 0) {  // no mask to restore: the handler runs with SA_NODEFER
    t_guard = nullptr;
    return false;
  }
  t_guard = &env;
  if (__atomic_load_n(p, __ATOMIC_RELAXED) != value) __atomic_store_n(p, value, __ATOMIC_RELEASE);
  t_guard = nullptr;
  return true;
}

std::string CString(const char* s, size_t max) {
  return std::string(s, strnlen(s, max));
}

// A device UUID as NVML writes it ("GPU-8f3a...", "MIG-..."): printable ASCII without quotes or
// backslashes. Anything else came from the container, and as a label value it could make the whole
// exposition unreadable (invalid UTF-8) for every tenant of the node.
bool PlausibleUuid(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c > ' ' && c < 0x7f && c != '"' && c != '\\'; });
}

}  // namespace

MappedRegion::MappedRegion(std::string path, int fd, void* map, uint64_t inode, uint64_t device)
    : path_(std::move(path)), fd_(fd), map_(map), inode_(inode), device_(device) {}

MappedRegion::~MappedRegion() {
  if (map_ != nullptr) munmap(map_, sizeof(vgpu_region));
  if (fd_ >= 0) close(fd_);
}

StatusOr<std::unique_ptr<MappedRegion>> MappedRegion::Open(const std::string& path) {
  InstallSigbusHandler();
  // The file lies in a directory its container can write: never follow a link it planted (ELOOP)
  // and never wait on a FIFO or device it put there (O_NONBLOCK; then only a regular file is used).
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return Unavailable(StrCat(path, ": cannot open: ", ErrnoText(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return InvalidArgument(StrCat(path, ": not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) < sizeof(vgpu_region_header)) {
    close(fd);
    return FailedPrecondition(StrCat(path, ": ", st.st_size, " bytes, not initialised yet"));
  }
  vgpu_region_header hdr;
  if (pread(fd, &hdr, sizeof(hdr), 0) != static_cast<ssize_t>(sizeof(hdr))) {
    close(fd);
    return Unavailable(StrCat(path, ": cannot read the header: ", ErrnoText(errno)));
  }
  Status bad;
  if (hdr.magic == kUpstreamMagic) {
    bad = InvalidArgument(
        StrCat(path, ": upstream HAMi-core region (magic 19920718), not libvgpu's layout"));
  } else if (hdr.magic != VGPU_REGION_MAGIC || hdr.init_state != VGPU_REGION_READY) {
    bad = FailedPrecondition(StrCat(path, ": not initialised yet (magic ", hdr.magic, ")"));
  } else if (hdr.version < VGPU_REGION_MIN_VERSION || hdr.version > VGPU_REGION_VERSION ||
             hdr.size_bytes != sizeof(vgpu_region)) {
    bad = InvalidArgument(StrCat(path, ": layout version ", hdr.version, " size ", hdr.size_bytes,
                                 "; this monitor reads versions ", VGPU_REGION_MIN_VERSION, " to ",
                                 VGPU_REGION_VERSION, " size ", sizeof(vgpu_region)));
  } else if (static_cast<uint64_t>(st.st_size) < sizeof(vgpu_region)) {
    bad = InvalidArgument(
        StrCat(path, ": file has ", st.st_size, " bytes, the region needs ", sizeof(vgpu_region)));
  }
  if (!bad.ok()) {
    close(fd);
    return bad;
  }
  void* map = mmap(nullptr, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    int err = errno;
    close(fd);
    return Unavailable(StrCat(path, ": mmap: ", ErrnoText(err)));
  }
  return std::unique_ptr<MappedRegion>(new MappedRegion(
      path, fd, map, static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_dev)));
}

bool MappedRegion::SlotAlive(int slot) const {
  struct flock fl;
  std::memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(VGPU_REGION_LIVENESS_BASE + static_cast<uint64_t>(slot));
  fl.l_len = 1;
  if (fcntl(fd_, F_OFD_GETLK, &fl) != 0) return true;  // unknown: count it (never hide usage)
  return fl.l_type != F_UNLCK;
}

StatusOr<RegionSnapshot> MappedRegion::Snapshot() const {
  const auto* r = static_cast<const vgpu_region*>(map_);
  struct Head {
    vgpu_region_header hdr;
    vgpu_device_entry devices[VGPU_MAX_DEVICES];
  };
  static_assert(sizeof(Head) == offsetof(vgpu_region, slots));
  auto head = std::make_unique<Head>();
  if (!GuardedCopy(head.get(), r, sizeof(Head))) {
    return absl::DataLossError(StrCat(path_, ": region file shrank under the reader (SIGBUS)"));
  }
  const vgpu_region_header& h = head->hdr;
  if (h.magic != VGPU_REGION_MAGIC || h.version < VGPU_REGION_MIN_VERSION ||
      h.version > VGPU_REGION_VERSION) {
    return absl::DataLossError(StrCat(path_, ": header no longer valid (magic ", h.magic, ")"));
  }
  uint32_t hwm = std::min<uint32_t>(h.slot_hwm, VGPU_MAX_SLOTS);
  std::vector<vgpu_proc_slot> slots(hwm);
  if (hwm > 0 && !GuardedCopy(slots.data(), r->slots, hwm * sizeof(vgpu_proc_slot))) {
    return absl::DataLossError(StrCat(path_, ": region file shrank under the reader (SIGBUS)"));
  }

  RegionSnapshot s;
  s.policy = h.policy;
  s.priority = h.priority;
  s.utilization_switch = h.utilization_switch;
  s.recent_kernel = h.recent_kernel;
  s.recoveries = h.recoveries;
  s.created_ns = h.created_ns;
  uint32_t ndev = std::min<uint32_t>(h.device_count, VGPU_MAX_DEVICES);
  std::vector<uint64_t> live_used(ndev, 0), live_ctx(ndev, 0);
  for (uint32_t i = 0; i < hwm; ++i) {
    const vgpu_proc_slot& slot = slots[i];
    if (slot.state == VGPU_SLOT_FREE) continue;
    if (!SlotAlive(static_cast<int>(i))) {
      ++s.dead_slots;
      continue;
    }
    s.processes.push_back({static_cast<int>(i), slot.pid, slot.host_pid, slot.generation});
    for (uint32_t d = 0; d < ndev; ++d) {
      live_used[d] += slot.used[d];
      // A slot's context charge is part of its usage (clamped: the file is the container's).
      live_ctx[d] +=
          std::min<uint64_t>(static_cast<uint64_t>(slot.context_kib[d]) << 10, slot.used[d]);
    }
  }
  for (uint32_t d = 0; d < ndev; ++d) {
    const vgpu_device_entry& e = head->devices[d];
    RegionDevice dev;
    dev.uuid = CString(e.uuid, sizeof(e.uuid));
    dev.entry = static_cast<int>(d);
    dev.container_index = e.container_index;
    dev.limit_bytes = e.limit_bytes;
    dev.used_bytes = live_used[d];
    dev.context_bytes = live_ctx[d];
    dev.cached_used_bytes = e.used_bytes;
    dev.total_bytes = e.total_bytes;
    dev.sm_limit_pct = e.sm_limit_pct;
    dev.last_launch_ns = e.last_launch_ns;
    dev.waves_launched = e.waves_launched;
    dev.throttled_ns = e.throttled_ns;
    dev.busy_ms = e.busy_ms;
    dev.peak_bytes = static_cast<uint64_t>(h.peak_mib[d]) << 20;
    dev.metered = ((h.metered_mask >> d) & 1u) != 0;
    dev.meter_us = e.calib_us;
    if (dev.uuid.empty()) continue;  // entry being written right now; next scrape sees it
    if (!PlausibleUuid(dev.uuid))
      return InvalidArgument(
          StrCat(path_, ": device entry ", d, " has a UUID that is not printable ASCII"));
    for (const RegionDevice& seen : s.devices)
      if (seen.uuid == dev.uuid)
        return InvalidArgument(StrCat(path_, ": device ", dev.uuid, " has two entries (",
                                      seen.entry, " and ", d, ")"));
    s.devices.push_back(std::move(dev));
  }
  return s;
}

Status MappedRegion::WriteFeedback(int32_t utilization_switch, int32_t recent_kernel) {
  auto* h = &static_cast<vgpu_region*>(map_)->hdr;
  if (!GuardedStore32(&h->utilization_switch, utilization_switch) ||
      !GuardedStore32(&h->recent_kernel, recent_kernel)) {
    return absl::DataLossError(StrCat(path_, ": region file shrank under the writer (SIGBUS)"));
  }
  return OkStatus();
}

}  // namespace hami::monitor
