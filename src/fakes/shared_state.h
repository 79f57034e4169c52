// Shared state of the simulated GPUs: a versioned pure-data layout in an mmap'ed file, shared by
// every process (fake libcuda and fake libnvidia-ml alike) that uses the same FAKEGPU_STATE path.
//
// Synchronisation: one process-shared robust mutex (a holder killed by SIGKILL is recovered by the
// next locker via EOWNERDEAD); file creation and initialisation are serialised with flock().
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fakes/config.h"
#include "fakes/mig_model.h"

namespace fakegpu {

inline constexpr uint32_t kStateMagic = 0x55504746;  // "FGPU"
inline constexpr uint32_t kStateVersion = 5;
inline constexpr int kMaxProcs = 256;
inline constexpr int kRingSize = 16384;  // executed-interval history per device
inline constexpr int kMaxEvents = 256;
inline constexpr int kProcQueue = 256;  // a process's queued kernel runs, all devices together

// One executed (or scheduled) kernel interval on a device clock (CLOCK_MONOTONIC ns).
struct Interval {
  uint64_t start_ns;
  uint64_t end_ns;
  int32_t pid;
  uint32_t reserved;
};

struct DeviceRec {
  char name[kNameLen];
  char uuid[kUuidLen];
  uint64_t total_bytes;
  uint32_t sms;
  int32_t nvlink_peer[kNvLinkMaxLinks];  // NVML index of the peer per link, -1 = no link
  uint32_t reserved;
  uint64_t busy_until_ns;    // device clock: end of the last scheduled kernel
  uint64_t busy_sched_ns;    // all kernel time ever scheduled (completed + pending)
  uint64_t ring_count;       // intervals ever appended; slot = index % kRingSize
  Interval ring[kRingSize];  // non-overlapping, increasing in time
};

// A run of one process's back-to-back kernels on a device that has not ended yet (device clock).
struct QueuedRun {
  uint64_t start_ns;
  uint64_t end_ns;
  int32_t dev;
  uint32_t reserved;
};

struct ProcRec {
  int32_t pid;          // 0 = never used
  uint32_t live;        // 0 once released or reclaimed (busy counters stay readable)
  uint64_t start_time;  // /proc/<pid>/stat starttime (clock ticks since boot), 0 = unknown
  uint64_t mem_bytes[kMaxDevices];      // device memory the driver cannot move (NVML usedGpuMemory)
  uint64_t managed_bytes[kMaxDevices];  // device-resident pages of managed memory (not per process
                                        // in NVML)
  uint32_t contexts[kMaxDevices];
  uint64_t busy_sched_ns[kMaxDevices];
  // This process's own launch queue (kernels not ended yet, oldest first): what admits its launches
  // (SharedState::Launch); other processes' queues never hold it back.
  uint32_t queue_head;
  uint32_t queue_len;
  QueuedRun queue[kProcQueue];
};

struct XidRec {
  uint64_t seq;  // 1-based; 0 = empty
  int32_t dev;
  uint32_t reserved;
  uint64_t xid;
  uint64_t time_ns;
};

// MIG partitioning of one device (fakes/mig_model.h): GPU instances indexed by their id, compute
// instances by theirs within the GPU instance.
struct CiRec {
  uint32_t live;
  uint32_t profile;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  uint32_t start;    // compute slices within the GPU instance
  uint32_t size;
  uint32_t serial;  // MigRec::serial at creation: a recreated instance gets another MIG UUID
};

struct GiRec {
  uint32_t live;
  uint32_t profile;  // NVML_GPU_INSTANCE_PROFILE_*
  uint32_t start;    // memory slices
  uint32_t size;
  CiRec cis[kMaxComputeInstances];
};

struct MigRec {
  uint32_t capable;  // the model has a MIG table (fixed at initialisation)
  uint32_t enabled;  // current MIG mode
  uint32_t serial;   // compute instances ever created on the device
  uint32_t reserved;
  GiRec gis[kMaxGpuInstances];
};

struct Region {
  uint32_t magic;  // written last, after the rest is initialised
  uint32_t version;
  uint64_t size;
  uint32_t num_devices;
  uint32_t reserved;
  pthread_mutex_t mu;
  uint64_t xid_seq;
  XidRec xids[kMaxEvents];
  ProcRec procs[kMaxProcs];
  DeviceRec devs[kMaxDevices];
  MigRec mig[kMaxDevices];
};

static_assert(sizeof(Interval) == 24);
static_assert(offsetof(Region, mu) == 24);
static_assert(sizeof(pthread_mutex_t) == 40, "layout assumes x86_64/aarch64 glibc");

uint64_t MonoNs();
// Start time of `pid` (field 22 of /proc/<pid>/stat), 0 when unknown. Tells a reused pid apart.
uint64_t ProcStartTime(int pid);
uint64_t RealUs();
void SleepUntilMono(uint64_t t_ns);

// Per-process handle on the shared region. Not copyable; all methods are thread-safe.
class SharedState {
 public:
  // Maps (creating if needed) the state file for `cfg`. On failure returns nullptr and sets *err.
  static SharedState* Open(const Config& cfg, std::string* err);
  // A process-private region (used when the state file is unusable).
  static SharedState* OpenPrivate(const Config& cfg);
  ~SharedState();
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  int num_devices() const { return static_cast<int>(r_->num_devices); }
  const DeviceRec& dev(int i) const { return r_->devs[i]; }
  std::vector<std::string> Uuids() const;

  // Memory of the calling process (pid = getpid()). Charge (device memory the driver cannot move)
  // fails (false) when the device would exceed its physical total after reclaiming dead pids and,
  // on a GPU that pages managed memory (PagesManagedMemory), after paging the device-resident
  // managed memory of any process out to host memory.
  bool Charge(int dev, uint64_t bytes);
  void Uncharge(int dev, uint64_t bytes);
  // Managed memory that the GPU pages: as much of `bytes` as fits without evicting anything becomes
  // device-resident; the rest stays in host memory. Returns the resident bytes.
  uint64_t ChargeManaged(int dev, uint64_t bytes);
  // Gives back up to `bytes` of this process's resident managed memory (less when some of it was
  // evicted meanwhile: residency is kept per process and device, not per allocation).
  void UnchargeManaged(int dev, uint64_t bytes);
  void AddContext(int dev, int delta);
  // Releases everything the calling process holds (memory, contexts).
  void ReleaseSelf();

  // Device memory in use, resident managed pages included; pid 0 = all; reclaims dead pids first.
  uint64_t UsedBytes(int dev, int pid);
  struct ProcUsage {
    int pid;
    uint64_t bytes;
  };
  // Live pids with a context or memory on dev; bytes = mem_bytes (NVML does not attribute managed
  // memory to processes).
  std::vector<ProcUsage> Processes(int dev);

  // Schedules a kernel of `dur_ns` FIFO on the device. Blocks while the calling process's own
  // queued work on the device (its kernels not yet run, the running one's rest) exceeds
  // `max_backlog_ns`, or while it has kProcQueue runs queued; never on other processes' work, as a
  // real driver queues per context. Returns the kernel's end time (device clock).
  uint64_t Launch(int dev, uint64_t dur_ns, uint64_t max_backlog_ns);
  uint64_t BusyNs(int dev, int pid);  // completed busy ns up to now; pid 0 = all

  // Busy ns per pid (pid 0 key = device total) in the window [from_ns, to_ns).
  struct PidBusy {
    int pid;
    uint64_t ns;
  };
  std::vector<PidBusy> BusyInWindow(int dev, uint64_t from_ns, uint64_t to_ns);

  // MIG state of a device: a copy, and an update run under the state lock (`fn` returns an NVML
  // code, passed through).
  MigRec Mig(int dev);
  int UpdateMig(int dev, const std::function<int(MigRec*)>& fn);

  void InjectXid(int dev, uint64_t xid);
  uint64_t XidSeq();
  // Next event with seq > after_seq (oldest still held); false when none.
  bool NextXid(uint64_t after_seq, XidRec* out);

 private:
  SharedState(Region* r, size_t size) : r_(r), size_(size) {}
  static void Init(Region* r, const Config& cfg);
  void Lock();
  void Unlock() { pthread_mutex_unlock(&r_->mu); }
  ProcRec* SelfLocked();  // slot of getpid(), acquired on first use
  // Releases the charges of dead pids; `deep` also detects reused pids by their start time (reads
  // /proc).
  void ReclaimDeadLocked(bool deep = false);
  uint64_t RoomLocked(int dev) const;  // physical bytes not held by live processes
  uint64_t PendingLocked(int dev, int pid, uint64_t now);
  // When `self` may launch a kernel starting at `start` on dev: 0 = now, else the device time at
  // which its own queue is back within `max_backlog_ns` (or a run of its full queue has ended).
  static uint64_t OwnQueueWaitLocked(ProcRec* self, int dev, uint64_t now, uint64_t start,
                                     uint64_t max_backlog_ns);
  static void QueueRunLocked(ProcRec* self, int dev, uint64_t start, uint64_t end);

  Region* r_;
  size_t size_;
  int self_pid_ = 0;
  int self_slot_ = -1;
};

}  // namespace fakegpu
