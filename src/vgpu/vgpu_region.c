/* Shared region: attach/create, per-process slots with OFD-lock liveness, crash-safe
 * reserve/release. See shared_region.h for the contract. System calls happen only in attach/sweep
 * and on lock contention paths; vgpu_region_reserve/release are a few atomic operations when
 * uncontended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/vgpu_core.h"

int vgpu_region_armed = 0;
int vgpu_region_crash_point = 0;
int vgpu_region_crash_after = 0;
void (*vgpu_region_takeover_hook)(void) = NULL;
static int crash_calls;

#define LOAD32(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD64(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE32(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void sleep_ns(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* OFD lock helpers on single bytes of the region file. */
static int ofd_lock(int fd, uint64_t byte, short type) {
  struct flock fl;
  memset(&fl, 0, sizeof(fl));
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)byte;
  fl.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &fl);
}

/* 1 when some open file description holds the liveness lock of `slot` (its owner is alive). */
static int slot_alive(const vgpu_region_ctx* c, int slot) {
  if (c->fd < 0) return slot == c->slot;
  struct flock fl;
  memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)(VGPU_REGION_LIVENESS_BASE + (uint64_t)slot);
  fl.l_len = 1;
  if (fcntl(c->fd, F_OFD_GETLK, &fl) != 0) return 1; /* unknown: assume alive (safe) */
  return fl.l_type != F_UNLCK;
}

/* Lock word of a holder: its slot + 1 in the low 11 bits and the slot's generation above them, so
 * that the word of a dead owner never equals the word of the process that claims its slot next (a
 * stale compare-and-swap from a process that saw the old owner dead then fails instead of sharing
 * the lock). Threads of one process share it: a lock word naming our own slot is always held by a
 * live thread of ours (claim_slot clears a dead predecessor's lock before using a slot). */
#define LOCK_SLOT_MASK 0x7ffu
#define LOCK_GEN_SHIFT 11
static inline uint32_t lock_word(const vgpu_region_ctx* c) {
  return c->lock_word;
}
static inline uint32_t make_lock_word(int slot, uint32_t generation) {
  uint32_t w = ((uint32_t)slot + 1) | (generation << LOCK_GEN_SHIFT);
  return w ? w : 1;
}

/* Rebuilds every device's used_bytes from the slots. Caller holds the region lock. */
static void recompute_usage(vgpu_region* r) {
  uint32_t hwm = LOAD32(&r->hdr.slot_hwm);
  if (hwm > VGPU_MAX_SLOTS) hwm = VGPU_MAX_SLOTS;
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < hwm; i++) {
      if (LOAD32(&r->slots[i].state) != VGPU_SLOT_FREE) sum += LOAD64(&r->slots[i].used[d]);
    }
    STORE64(&r->devices[d].used_bytes, sum);
  }
  __atomic_fetch_add(&r->hdr.recoveries, 1, __ATOMIC_RELAXED);
}

/* Takes the cross-process lock. Bounded: gives up after ~2 s while a live owner keeps it (e.g. a
 * stopped process). Returns 0 or -1. A holder found dead (its slot's liveness lock is free) is
 * replaced and the usage cache rebuilt; a holder from this process's own slot is always alive
 * (claim_slot clears a dead predecessor's lock before the slot is used). */
static __attribute__((noinline)) int region_lock_slow(vgpu_region_ctx* c, vgpu_region* r,
                                                      uint32_t me) {
  for (int round = 0; round < 42000; round++) { /* ~2000 spins, then 40000 * 50 us = 2 s */
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(&r->hdr.lock, &expected, me, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      return 0;
    }
    if (round < 2000) {
      cpu_relax();
      continue;
    }
    int owner = (int)(expected & LOCK_SLOT_MASK) - 1;
    /* A word naming no slot was not written by libvgpu (an overwritten file): nobody holds it. */
    int bogus = owner < 0 || owner >= VGPU_MAX_SLOTS;
    if ((round & 15) == 15 && (bogus || (owner != c->slot && !slot_alive(c, owner)))) {
      if (__builtin_expect(vgpu_region_takeover_hook != NULL, 0)) vgpu_region_takeover_hook();
      if (__atomic_compare_exchange_n(&r->hdr.lock, &expected, me, 0, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        VGPU_LOG(VGPU_LOG_WARN, "took over the region lock from %s slot %d",
                 bogus ? "an invalid" : "dead", owner);
        recompute_usage(r);
        return 0;
      }
    }
    sleep_ns(50000);
  }
  VGPU_LOG(VGPU_LOG_ERROR, "region lock held by a live process for 2 s; giving up this operation");
  return -1;
}

/* Locks region `r` (c->r, or the mapping a caller loaded from it). */
static inline int region_lock_on(vgpu_region_ctx* c, vgpu_region* r) {
  uint32_t me = lock_word(c);
  uint32_t expected = 0;
  if (__builtin_expect(__atomic_compare_exchange_n(&r->hdr.lock, &expected, me, 0, __ATOMIC_ACQUIRE,
                                                   __ATOMIC_RELAXED),
                       1)) {
    return 0;
  }
  return region_lock_slow(c, r, me);
}

static inline int region_lock(vgpu_region_ctx* c) {
  return region_lock_on(c, c->r);
}

static void region_unlock(vgpu_region_ctx* c) {
  STORE32(&c->r->hdr.lock, 0);
}

int vgpu_region_lock(vgpu_region_ctx* c) {
  return c->r ? region_lock(c) : -1;
}
void vgpu_region_unlock(vgpu_region_ctx* c) {
  if (c->r) region_unlock(c);
}

/* Subtracts a dead slot's usage and frees it. Caller holds the region lock and the slot's liveness
 * lock. */
static void reclaim_slot_locked(vgpu_region* r, int i) {
  vgpu_proc_slot* s = &r->slots[i];
  if (LOAD32(&s->state) == VGPU_SLOT_FREE) return;
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    uint64_t u = LOAD64(&s->used[d]);
    if (!u) continue;
    uint64_t cur = LOAD64(&r->devices[d].used_bytes);
    STORE64(&r->devices[d].used_bytes, cur > u ? cur - u : 0);
    STORE64(&s->used[d], 0);
  }
  STORE32(&s->state, VGPU_SLOT_FREE);
}

static void init_header(vgpu_region* r, const vgpu_region_params* p) {
  r->hdr.version = VGPU_REGION_VERSION;
  r->hdr.size_bytes = sizeof(vgpu_region);
  r->hdr.policy = p->policy;
  r->hdr.priority = p->priority;
  r->hdr.utilization_switch = 1;
  r->hdr.recent_kernel = 2;
  r->hdr.created_ns = clock_ns(CLOCK_REALTIME);
}

/* A private anonymous region holding this process's devices, limits and usage (from the ctx, never
 * from a file) in slot `slot`, with the lock word `lock`. Returns the mapping or NULL. */
static vgpu_region* private_region(const vgpu_region_ctx* c, uint32_t ndev, int slot,
                                   uint32_t lock) {
  void* m =
      mmap(NULL, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  vgpu_region* r = (vgpu_region*)m;
  init_header(r, &c->params);
  for (uint32_t i = 0; i < ndev && i < VGPU_MAX_DEVICES; i++) {
    vgpu_device_entry* d = &r->devices[i];
    memcpy(d->uuid, c->uuid[i], VGPU_UUID_LEN);
    d->uuid[VGPU_UUID_LEN - 1] = 0;
    d->limit_bytes = c->limit[i];
    d->sm_limit_pct = c->sm_pct[i] ? c->sm_pct[i] : 100;
    /* Refused: the others are counted as holding the whole limit (see vgpu_region_device). */
    d->used_bytes = c->mine[i] + (c->refused ? c->limit[i] : 0);
    d->container_index = -1;
    r->slots[slot].used[i] = c->mine[i];
  }
  r->hdr.device_count = ndev;
  r->hdr.slot_hwm = (uint32_t)slot + 1;
  r->hdr.lock = lock;
  r->slots[slot].state = VGPU_SLOT_ACTIVE;
  r->slots[slot].pid = (uint32_t)getpid();
  r->hdr.init_state = VGPU_REGION_READY;
  r->hdr.magic = VGPU_REGION_MAGIC;
  return r;
}

static int use_private(vgpu_region_ctx* c, const vgpu_region_params* p) {
  c->params = *p;
  c->liveness_fd = -1;
  c->r = private_region(c, 0, 0, 0);
  c->fd = -1;
  c->shared = 0;
  c->slot = c->r ? 0 : -1;
  c->lock_word = 1;
  return c->r ? 0 : -1;
}

/* Number of device entries this process knows (1 + highest entry index it has registered). */
static uint32_t known_devices(const vgpu_region_ctx* c) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < VGPU_MAX_DEVICES; i++) {
    if (c->uuid[i][0]) n = i + 1;
  }
  return n;
}

static const char* header_check(const vgpu_region* r);
static const char* region_check(const vgpu_region* r);

/* The file was changed under this process, but the rest of it is still a valid region that holds
 * this process's device entries at the indices it uses: restores its own slot (state, usage) and
 * recomputes the usage totals from the slots, so that it keeps sharing and the file counts its
 * usage again. Caller holds the region lock. Returns 1 when restored, 0 when the file cannot be
 * repaired.
 */
static int restore_own_records(vgpu_region_ctx* c) {
  vgpu_region* r = c->r;
  if (header_check(r) || region_check(r)) return 0;
  uint32_t n = LOAD32(&r->hdr.device_count);
  for (uint32_t i = 0; i < VGPU_MAX_DEVICES; i++) {
    if (c->uuid[i][0] && (i >= n || strncmp(r->devices[i].uuid, c->uuid[i], VGPU_UUID_LEN) != 0))
      return 0;
  }
  vgpu_proc_slot* s = &r->slots[c->slot];
  if (LOAD32(&r->hdr.slot_hwm) < (uint32_t)c->slot + 1)
    STORE32(&r->hdr.slot_hwm, (uint32_t)c->slot + 1);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) STORE64(&s->used[d], c->mine[d]);
  s->pid = (uint32_t)getpid();
  STORE32(&s->state, VGPU_SLOT_ACTIVE);
  recompute_usage(r);
  return 1;
}

/* Moves this process onto a private region holding its devices, limits and usage (see
 * region_tampered). Caller holds the region lock. Returns 0, or -1 (lock released, every limit 1 B)
 * when no private region could be made. */
static int go_private(vgpu_region_ctx* c) {
  vgpu_region* priv = private_region(c, known_devices(c), c->slot, c->lock_word);
  void* moved = MAP_FAILED;
  if (priv) {
    moved =
        mremap(priv, sizeof(vgpu_region), sizeof(vgpu_region), MREMAP_MAYMOVE | MREMAP_FIXED, c->r);
    if (moved == MAP_FAILED) munmap(priv, sizeof(vgpu_region));
  }
  if (moved == MAP_FAILED) {
    for (int i = 0; i < VGPU_MAX_DEVICES; i++) c->limit[i] = 1;
    STORE32(&c->r->hdr.lock, 0);
    return -1;
  }
  c->shared = 0;
  c->liveness_fd = c->fd;
  c->fd = -1;
  return 0;
}

/* The file no longer holds what this process wrote to it: continue on a private region that keeps
 * this process's usage and limits. The caller holds the region lock. The private region is moved
 * onto the mapping's address (so every thread keeps its pointers, slot index and lock word, and the
 * lock stays held by the caller). The descriptor stays open for its liveness lock only: while this
 * process lives, its usage is on no shared books, so a newcomer must find the (untrusted) file in
 * use and be refused rather than rebuild it and count from zero. When the rest of the file is still
 * valid, this process's own records are restored in it instead (restore_own_records). Returns 0, or
 * -1 (lock released) when no private region could be made: then nothing more can be reserved. */
static __attribute__((noinline, cold)) int region_tampered(vgpu_region_ctx* c, const char* why) {
  if (c->shared && restore_own_records(c)) {
    VGPU_LOG(VGPU_LOG_ERROR,
             "shared region was changed under this process (%s); the rest of it is valid: its own "
             "records were restored and the container's usage recomputed from the process slots",
             why);
    return 0;
  }
  int rc = go_private(c);
  VGPU_LOG(
      VGPU_LOG_ERROR,
      "shared region was overwritten under this process (%s); its limits are now enforced for this "
      "process alone, from its own records%s",
      why, rc == 0 ? "" : " (no private region: allocations are refused)");
  return rc;
}

/* NULL when the header is one this version can share (magic, initialised, a layout version from
 * VGPU_REGION_MIN_VERSION to this one, and the size), else what is wrong. */
static const char* header_check(const vgpu_region* r) {
  if (LOAD32(&r->hdr.magic) != VGPU_REGION_MAGIC || LOAD32(&r->hdr.init_state) != VGPU_REGION_READY)
    return "no valid header";
  if (r->hdr.version < VGPU_REGION_MIN_VERSION || r->hdr.version > VGPU_REGION_VERSION ||
      r->hdr.size_bytes != sizeof(vgpu_region))
    return "another layout version";
  return NULL;
}

/* Checks the structure of a region whose header is valid: counts, lock word, device entries, slot
 * states. Returns NULL when it is a plausible libvgpu region, else what is wrong. Runs without the
 * lock while others may register devices: data beyond the device count is judged against a count
 * loaded after the data (a device's usage or identifier is written only once the count covers it,
 * except the entry being created). */
static const char* region_check(const vgpu_region* r) {
  uint32_t n = LOAD32(&r->hdr.device_count), hwm = LOAD32(&r->hdr.slot_hwm),
           lock = LOAD32(&r->hdr.lock);
  if (n > VGPU_MAX_DEVICES) return "device count out of range";
  if (hwm > VGPU_MAX_SLOTS) return "slot count out of range";
  if (r->hdr.policy > VGPU_POLICY_DISABLE) return "policy out of range";
  if (lock && ((lock & LOCK_SLOT_MASK) == 0 || (lock & LOCK_SLOT_MASK) > VGPU_MAX_SLOTS))
    return "invalid lock word";
  for (uint32_t i = 0; i < VGPU_MAX_DEVICES; i++) {
    const vgpu_device_entry* d = &r->devices[i];
    if (i >= n) {
      int data = d->uuid[0] != 0 || LOAD64(&d->used_bytes) != 0;
      if (data && i > LOAD32(&r->hdr.device_count)) return "data in an unused device entry";
      continue;
    }
    if (!memchr(d->uuid, 0, VGPU_UUID_LEN) ||
        (strncmp(d->uuid, "GPU-", 4) != 0 && strncmp(d->uuid, "MIG-", 4) != 0)) {
      return "device entry without a GPU-/MIG- identifier";
    }
    if (d->sm_limit_pct < 1 || d->sm_limit_pct > 100) return "SM limit out of range";
    if (d->container_index < -1) return "device index out of range";
  }
  for (uint32_t i = 0; i < VGPU_MAX_SLOTS; i++) {
    uint32_t st = LOAD32(&r->slots[i].state);
    if (st != VGPU_SLOT_FREE && st != VGPU_SLOT_ACTIVE) return "invalid process slot state";
    if (st == VGPU_SLOT_FREE) continue;
    if (i >= LOAD32(&r->hdr.slot_hwm)) return "process slot beyond the high-water mark";
    for (uint32_t d = n; d < VGPU_MAX_DEVICES; d++) {
      if (LOAD64(&r->slots[i].used[d]) && d >= LOAD32(&r->hdr.device_count))
        return "usage on an unused device entry";
    }
  }
  return NULL;
}

/* 1 when some other open file description holds a liveness lock of the file (a live process uses
 * it). */
static int any_live_user(int fd) {
  struct flock fl;
  memset(&fl, 0, sizeof(fl));
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = (off_t)VGPU_REGION_LIVENESS_BASE;
  fl.l_len = VGPU_MAX_SLOTS;
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return 1; /* unknown: assume in use (safe) */
  return fl.l_type != F_UNLCK;
}

/* This process's PID as /proc shows it outermost: the host PID only when /proc is the host's.
 * NStgid lists the pid in every namespace from the one of this /proc inward; the first entry is the
 * outermost one visible here. */
static uint32_t proc_host_pid(void) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[2048];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char* p = strstr(buf, "NStgid:");
  if (!p) return 0;
  return (uint32_t)strtoul(p + 7, NULL, 10);
}

/* Upstream HAMi's host PID broker, protocol version 1 (docs/upstream-contract.md, "Host PID
 * broker"): request "HPID", version 1, command 1; answer "HPID", version 1, status 0 and the PID
 * the kernel gives the broker, which runs in the host PID namespace, for this connection
 * (SO_PEERCRED). Integers are big-endian. 0 on any failure; never waits more than about a second.
 */
static uint32_t broker_host_pid(const char* path) {
  struct sockaddr_un a;
  if (!path || strlen(path) >= sizeof(a.sun_path)) return 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  struct timeval tv = {0, 500000};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, path, strlen(path));
  static const unsigned char req[8] = {'H', 'P', 'I', 'D', 0, 1, 0, 1};
  unsigned char resp[12];
  size_t got = 0;
  uint32_t pid = 0;
  if (connect(fd, (struct sockaddr*)&a, sizeof(a)) == 0 &&
      send(fd, req, sizeof(req), MSG_NOSIGNAL) == (ssize_t)sizeof(req)) {
    while (got < sizeof(resp)) {
      ssize_t n = recv(fd, resp + got, sizeof(resp) - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
  }
  close(fd);
  if (got == sizeof(resp) && memcmp(resp, "HPID", 4) == 0 && resp[4] == 0 && resp[5] == 1 &&
      resp[6] == 0 && resp[7] == 0) {
    pid = (uint32_t)resp[8] << 24 | (uint32_t)resp[9] << 16 | (uint32_t)resp[10] << 8 |
          (uint32_t)resp[11];
  }
  return pid;
}

static uint32_t host_pid(const vgpu_region_params* p) {
  if (p->host_pid_broker) {
    uint32_t pid = broker_host_pid(p->host_pid_broker);
    if (pid) return pid;
    VGPU_LOG(VGPU_LOG_WARN,
             "host PID broker %s did not answer; taking the PID from /proc (in a container with "
             "its own PID namespace, context memory and SM calibration then miss this process)",
             p->host_pid_broker);
  }
  return proc_host_pid();
}

static int claim_slot(vgpu_region_ctx* c) {
  vgpu_region* r = c->r;
  const uint32_t my_host_pid = host_pid(&c->params); /* before any lock: the broker may be slow */
  for (int i = 0; i < VGPU_MAX_SLOTS; i++) {
    if (ofd_lock(c->fd, VGPU_REGION_LIVENESS_BASE + (uint64_t)i, F_WRLCK) != 0) continue;
    c->slot = i;
    /* A new generation first: our lock word must differ from the one a dead predecessor may have
     * left. */
    vgpu_proc_slot* s = &r->slots[i];
    uint32_t gen = __atomic_add_fetch(&s->generation, 1, __ATOMIC_ACQ_REL);
    c->lock_word = make_lock_word(i, gen);
    /* A dead previous owner of this slot may hold the region lock: we hold its liveness lock now,
     * so take the lock over (nobody else will, seeing the slot alive) and rebuild the cache. */
    uint32_t held = LOAD32(&r->hdr.lock);
    if (held && (int)(held & LOCK_SLOT_MASK) - 1 == i &&
        __atomic_compare_exchange_n(&r->hdr.lock, &held, lock_word(c), 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      recompute_usage(r);
      region_unlock(c);
    }
    /* Raise the high-water mark first so that recovery scans include this slot. */
    uint32_t hwm = LOAD32(&r->hdr.slot_hwm);
    while (hwm < (uint32_t)i + 1 &&
           !__atomic_compare_exchange_n(&r->hdr.slot_hwm, &hwm, (uint32_t)i + 1, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
    if (region_lock(c) != 0) {
      ofd_lock(c->fd, VGPU_REGION_LIVENESS_BASE + (uint64_t)i, F_UNLCK);
      c->slot = -1;
      return -1;
    }
    reclaim_slot_locked(r, i); /* a dead previous owner's leftovers */
    s->pid = (uint32_t)getpid();
    s->host_pid = my_host_pid;
    s->start_ns = clock_ns(CLOCK_BOOTTIME);
    STORE32(&s->state, VGPU_SLOT_ACTIVE);
    region_unlock(c);
    return 0;
  }
  return -1;
}

int vgpu_region_sweep(vgpu_region_ctx* c) {
  if (!c->r || c->fd < 0 || c->slot < 0) return 0;
  vgpu_region* r = c->r;
  int reclaimed = 0;
  uint32_t hwm = LOAD32(&r->hdr.slot_hwm);
  if (hwm > VGPU_MAX_SLOTS) hwm = VGPU_MAX_SLOTS;
  for (uint32_t i = 0; i < hwm; i++) {
    if ((int)i == c->slot || LOAD32(&r->slots[i].state) == VGPU_SLOT_FREE) continue;
    /* Holding the dead slot's liveness lock keeps a new claimer out while we reclaim. */
    if (ofd_lock(c->fd, VGPU_REGION_LIVENESS_BASE + i, F_WRLCK) != 0) continue;
    if (region_lock(c) == 0) {
      if (LOAD32(&r->slots[i].state) != VGPU_SLOT_FREE) {
        reclaim_slot_locked(r, (int)i);
        reclaimed++;
      }
      region_unlock(c);
    }
    ofd_lock(c->fd, VGPU_REGION_LIVENESS_BASE + i, F_UNLCK);
  }
  if (reclaimed) VGPU_LOG(VGPU_LOG_INFO, "reclaimed %d slot(s) of dead processes", reclaimed);
  return reclaimed;
}

/* 1 when this process's user owns the region file or its directory (so it could have made it
 * unusable itself by changing their modes). An EACCES on a directory and file it does not own is
 * the deployment's doing (docs/security.md: an image USER the pod spec does not name, no region
 * group), not the container's. */
static int owned_by_me(const char* path) {
  struct stat st;
  if (lstat(path, &st) == 0 && st.st_uid == geteuid()) return 1;
  char dir[4096] = ".";
  const char* slash = strrchr(path, '/');
  if (slash == path) {
    dir[0] = '/';
  } else if (slash) {
    size_t n = (size_t)(slash - path);
    if (n >= sizeof(dir)) return 1;
    memcpy(dir, path, n);
    dir[n] = 0;
  }
  return stat(dir, &st) != 0 || st.st_uid == geteuid();
}

int vgpu_region_attach(vgpu_region_ctx* c, const char* path, const vgpu_region_params* p) {
  memset(c, 0, sizeof(*c));
  c->fd = -1;
  c->liveness_fd = -1;
  c->slot = -1;
  c->params = *p;
  const char* why = NULL;
  /* Failures that something inside the container can cause on purpose (a file it cannot trust in
   * use, locks held) refuse allocations: a private region would give this process the container's
   * whole limit again, beside the others. */
  int refuse = vgpu_region_armed;
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0660);
  if (fd >= 0) {
    /* Other uids of the container share it through the group (the device plugin gives the directory
     * the pod's fsGroup); never world-writable. fchmod, not a process-wide umask change. */
    (void)fchmod(fd, 0660);
  } else if (errno == EEXIST) {
    fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) {
    int err = errno;
    if (refuse && err == EACCES && !owned_by_me(path)) refuse = 0;
    use_private(c, p);
    c->refused = refuse;
    char eb[128];
    VGPU_LOG(VGPU_LOG_ERROR, "cannot open shared region %s: %s; %s", path,
             strerror_r(err, eb, sizeof eb),
             refuse ? "the device plugin armed this container, so device memory allocations in "
                      "this process are refused"
                    : "limits apply per process only");
    return -1;
  }
  /* Initialisation is serialised by an OFD lock (bounded wait: 5 s). */
  int locked = 0;
  for (int i = 0; i < 5000; i++) {
    if (ofd_lock(fd, VGPU_REGION_INIT_LOCK_BYTE, F_WRLCK) == 0) {
      locked = 1;
      break;
    }
    sleep_ns(1000000);
  }
  struct stat st;
  if (!locked) {
    why = "initialisation lock held by another process for 5 s";
    refuse = 1;
  } else if (fstat(fd, &st) != 0) {
    why = "fstat failed";
  } else if ((uint64_t)st.st_size < sizeof(vgpu_region) &&
             ftruncate(fd, sizeof(vgpu_region)) != 0) {
    why = "cannot size the file";
  }
  int fresh = locked && !why && st.st_size == 0; /* zero-filled by ftruncate: no need to clear it */
  void* m = MAP_FAILED;
  if (!why) {
    m = mmap(NULL, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) why = "mmap failed";
  }
  if (!why) {
    /* Anything that is not a region this version wrote is rebuilt while nobody uses it, else
     * refused. */
    vgpu_region* r = (vgpu_region*)m;
    const char* untrusted = header_check(r);
    if (untrusted && fresh && LOAD32(&r->hdr.magic) != VGPU_REGION_MAGIC) {
      untrusted = NULL; /* a new, zero-filled file */
    } else if (!untrusted) {
      untrusted = region_check(r);
      if (!untrusted) fresh = -1; /* a valid region: keep it */
    }
    if (untrusted && any_live_user(fd)) {
      why = untrusted; /* refused below, with the reason */
      refuse = 1;
      munmap(m, sizeof(vgpu_region));
      m = MAP_FAILED;
    } else if (fresh != -1) {
      if (untrusted) {
        VGPU_LOG(VGPU_LOG_ERROR,
                 "shared region %s could not be trusted (%s) and no process uses it: rebuilt", path,
                 untrusted);
      }
      if (!fresh) memset(r, 0, sizeof(*r));
      init_header(r, p);
      STORE32(&r->hdr.init_state, VGPU_REGION_READY);
      STORE32(&r->hdr.magic, VGPU_REGION_MAGIC);
    }
  }
  if (!why) {
    c->r = (vgpu_region*)m;
    c->fd = fd;
    c->shared = 1;
    if (claim_slot(c) != 0) {
      why = "no free process slot";
      refuse = 1;
      munmap(m, sizeof(vgpu_region));
      c->r = NULL;
    }
  }
  if (locked) ofd_lock(fd, VGPU_REGION_INIT_LOCK_BYTE, F_UNLCK);
  if (why) {
    close(fd);
    c->fd = -1;
    use_private(c, p);
    c->refused = refuse;
    VGPU_LOG(VGPU_LOG_ERROR, "shared region %s cannot be used: %s; %s", path, why,
             refuse ? "device memory allocations in this process are refused (it cannot know how "
                      "much of the container's limit the others use; the file is rebuilt once no "
                      "process uses it)"
                    : "this process enforces its own limits alone");
    return -1;
  }
  vgpu_region_sweep(c);
  return 0;
}

void vgpu_region_detach(vgpu_region_ctx* c) {
  if (!c->r) return;
  if (c->shared && c->slot >= 0) {
    if (region_lock(c) == 0) {
      reclaim_slot_locked(c->r, c->slot);
      region_unlock(c);
    }
  }
  munmap(c->r, sizeof(vgpu_region));
  if (c->fd >= 0) close(c->fd); /* drops the liveness lock */
  if (c->liveness_fd >= 0) close(c->liveness_fd);
  c->r = NULL;
  c->fd = -1;
  c->liveness_fd = -1;
  c->slot = -1;
  memset(c->mine, 0, sizeof(c->mine));
}

/* Stricter of two memory limits (0 = unlimited). */
static uint64_t stricter_bytes(uint64_t a, uint64_t b) {
  if (!a) return b;
  if (!b) return a;
  return a < b ? a : b;
}

int vgpu_region_device(vgpu_region_ctx* c, const char* uuid, uint64_t limit_bytes,
                       uint32_t sm_limit_pct, uint64_t total_bytes, int32_t container_index,
                       uint32_t sm_count) {
  vgpu_region* r = c->r;
  if (!r || !uuid || !uuid[0]) return -1;
  if (sm_limit_pct < 1 || sm_limit_pct > 100) sm_limit_pct = 100;
  if (region_lock(c) != 0) {
    return -1;
  }
  int found = -1;
  uint32_t n = LOAD32(&r->hdr.device_count);
  for (uint32_t i = 0; i < n && i < VGPU_MAX_DEVICES; i++) {
    if (strncmp(r->devices[i].uuid, uuid, VGPU_UUID_LEN) == 0) {
      found = (int)i;
      break;
    }
  }
  uint64_t limit = limit_bytes;
  uint32_t sm = sm_limit_pct;
  if (found < 0 && n >= VGPU_MAX_DEVICES && c->shared && known_devices(c) < VGPU_MAX_DEVICES) {
    /* Every entry is taken, none by this device, and not by this process: entries forged to leave
     * this device unlimited, or more devices in the container than libvgpu supports. Fail closed:
     * refused, on a private region with room for it. */
    VGPU_LOG(VGPU_LOG_ERROR,
             "shared region has no free device entry for %s (all %d are taken by other devices); "
             "device memory allocations in this process are refused",
             uuid, VGPU_MAX_DEVICES);
    c->refused = 1;
    if (go_private(c) != 0) return -1;
    n = LOAD32(&r->hdr.device_count);
  }
  if (found < 0 && n < VGPU_MAX_DEVICES) {
    vgpu_device_entry* d = &r->devices[n];
    memset(d, 0, sizeof(*d));
    strncpy(d->uuid, uuid, VGPU_UUID_LEN - 1);
    d->limit_bytes = limit_bytes;
    d->sm_limit_pct = sm_limit_pct;
    d->total_bytes = total_bytes;
    d->container_index = container_index;
    d->sm_count = sm_count;
    /* Refused (see vgpu_region_attach): the others' usage is unknown, so the private entry counts
     * them as holding the whole limit. Every allocation is refused, forced charges (contexts) still
     * count, and reports show the limit with nothing free. */
    if (c->refused) d->used_bytes = limit_bytes;
    STORE32(&r->hdr.device_count, n + 1);
    found = (int)n;
  } else if (found >= 0) {
    vgpu_device_entry* d = &r->devices[found];
    /* The region's values came from another process (or were edited): the stricter one holds here.
     */
    limit = stricter_bytes(limit_bytes, d->limit_bytes);
    sm = d->sm_limit_pct >= 1 && d->sm_limit_pct < sm_limit_pct ? d->sm_limit_pct : sm_limit_pct;
    if (d->limit_bytes != limit_bytes || d->sm_limit_pct != sm_limit_pct) {
      VGPU_LOG(VGPU_LOG_WARN,
               "%s: region has limit %llu B / %u%%, this process %llu B / %u%% (0 B = none); "
               "enforcing %llu B / %u%%",
               uuid, (unsigned long long)d->limit_bytes, d->sm_limit_pct,
               (unsigned long long)limit_bytes, sm_limit_pct, (unsigned long long)limit, sm);
    }
    if (!d->sm_count) d->sm_count = sm_count;
  }
  if (found >= 0) {
    c->limit[found] = limit;
    c->sm_pct[found] = sm;
    strncpy(c->uuid[found], uuid, VGPU_UUID_LEN - 1);
  }
  region_unlock(c);
  return found;
}

/* 1 when this process's own records disagree with its slot in the file (the file was overwritten).
 */
static inline int slot_tampered(const vgpu_region_ctx* c, const vgpu_proc_slot* s,
                                uint64_t slot_used, uint64_t dev_used, int dev) {
  return slot_used != c->mine[dev] || dev_used < slot_used || LOAD32(&s->state) != VGPU_SLOT_ACTIVE;
}

int vgpu_region_reserve(vgpu_region_ctx* c, int dev, uint64_t bytes, int force) {
  vgpu_region* r = c->r;
  vgpu_device_entry* d = &r->devices[dev];
  vgpu_proc_slot* s = &r->slots[c->slot];
  int arm = 0;
  if (__builtin_expect(vgpu_region_crash_point != 0, 0))
    arm = ++crash_calls >= vgpu_region_crash_after;
  if (__builtin_expect(region_lock(c) != 0, 0)) return -1;
  if (__builtin_expect(arm && vgpu_region_crash_point == 2, 0)) raise(SIGKILL);
  uint64_t used = LOAD64(&d->used_bytes);
  uint64_t mine = LOAD64(&s->used[dev]);
  if (__builtin_expect(slot_tampered(c, s, mine, used, dev), 0)) {
    if (region_tampered(c, "its usage records changed") != 0) return -1;
    used = LOAD64(&d->used_bytes);
    mine = LOAD64(&s->used[dev]);
  }
  uint64_t limit = c->limit[dev];
  /* An entry this process never registered (another process made it): the region's limit holds. */
  if (__builtin_expect(!limit, 0) && !c->uuid[dev][0]) limit = d->limit_bytes;
  int rc = 0;
  if (limit && !force && (bytes > limit || used > limit - bytes)) {
    rc = 1;
  } else {
    STORE64(&s->used[dev], mine + bytes);
    c->mine[dev] = mine + bytes;
    if (__builtin_expect(arm && vgpu_region_crash_point == 1, 0)) raise(SIGKILL);
    STORE64(&d->used_bytes, used + bytes);
    /* Metering: the container's peak on this device, in MiB rounded up (capped at 2^32 - 1). */
    uint64_t mib = (used + bytes + (1ull << 20) - 1) >> 20;
    if (mib > 0xffffffffull) mib = 0xffffffffull;
    if (mib > LOAD32(&r->hdr.peak_mib[dev])) STORE32(&r->hdr.peak_mib[dev], (uint32_t)mib);
  }
  region_unlock(c);
  return rc;
}

void vgpu_region_release(vgpu_region_ctx* c, int dev, uint64_t bytes) {
  vgpu_region* r = c->r;
  vgpu_device_entry* d = &r->devices[dev];
  vgpu_proc_slot* s = &r->slots[c->slot];
  int locked = region_lock(c) == 0;
  /* Without the lock (a live owner stuck for 2 s) still return the bytes: a decrement never breaks
   * the limit, and recovery recomputes the cache from the slots anyway. */
  uint64_t mine = LOAD64(&s->used[dev]);
  uint64_t used = LOAD64(&d->used_bytes);
  /* (A release cannot raise usage: the slot's state is checked by reserve only.) */
  if (locked && __builtin_expect(mine != c->mine[dev] || used < mine, 0)) {
    if (region_tampered(c, "its usage records changed") != 0) return;
    mine = LOAD64(&s->used[dev]);
    used = LOAD64(&d->used_bytes);
  }
  if (bytes > mine) bytes = mine;
  STORE64(&s->used[dev], mine - bytes);
  c->mine[dev] = mine - bytes;
  if (locked) {
    STORE64(&d->used_bytes, used > bytes ? used - bytes : 0);
    region_unlock(c);
  } else {
    while (!__atomic_compare_exchange_n(&d->used_bytes, &used, used > bytes ? used - bytes : 0, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
  }
}

uint64_t vgpu_region_used(const vgpu_region_ctx* c, int dev) {
  return LOAD64(&c->r->devices[dev].used_bytes);
}
