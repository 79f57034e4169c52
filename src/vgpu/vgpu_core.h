/* Internal building blocks of libvgpu, kept free of CUDA types so that they can be unit tested
 * alone: environment parsing, the shared region (attach, slots, reserve/release, reclaim), the
 * per-process allocation table, and the SM limiter algorithm. Plain C11; also included from C++
 * tests. */
#ifndef HAMI_VGPU_VGPU_CORE_H_
#define HAMI_VGPU_VGPU_CORE_H_

#include <stddef.h>
#include <stdint.h>

#include "vgpu/shared_region.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The structs are libvgpu's C types, named in C style: readability-identifier-naming (CamelCase for
 * C++ structs) does not apply. */
/* NOLINTBEGIN(readability-identifier-naming) */

/* ---- Environment parsing (vgpu_env.c). All return 0 on success, -1 on a malformed value.
 * ---------- */

/* Memory size: "<digits>[.<digits>]<unit>" with optional spaces around; units (binary,
 * case-insensitive): none or "b" = bytes, k/ki/kb/kib, m/mi/mb/mib, g/gi/gb/gib, t/ti/tb/tib.
 * Examples: "3000m", "1Gi", "1.5g", "1073741824". Overflow, empty, negative, hex and trailing
 * garbage are errors. */
int vgpu_parse_mem_size(const char* s, uint64_t* out);
/* Integer percent 0..100 (0 = not set). */
int vgpu_parse_percent(const char* s, uint32_t* out);
/* "default" | "force" | "disable" (case-insensitive) -> VGPU_POLICY_*. */
int vgpu_parse_policy(const char* s, uint32_t* out);
/* Decimal int32, optional sign. */
int vgpu_parse_int(const char* s, int32_t* out);

/* One entry of CUDA_VISIBLE_DEVICES: a non-negative index or a device identifier (GPU-/MIG- UUID).
 */
typedef struct vgpu_visible_entry {
  int32_t index;          /* >= 0 for a numeric entry, -1 for an identifier */
  char id[VGPU_UUID_LEN]; /* identifier text (trimmed) when index == -1 */
} vgpu_visible_entry;
/* Splits CUDA_VISIBLE_DEVICES into at most `max` entries; returns the count, or -1 on malformed
 * input. Like the driver, parsing stops at the first invalid entry (the devices before it stay
 * visible). */
int vgpu_parse_visible_devices(const char* s, vgpu_visible_entry* out, int max);

/* ---- The device plugin's limits file (vgpu_env.c)
 * --------------------------------------------------- A container armed by the device plugin has a
 * read-only file `vgpu.limits` next to libvgpu.so (the directory libvgpu was loaded from; else
 * /usr/local/vgpu) with KEY=VALUE lines for the variables below. When it exists its values are the
 * only ones used for these keys: the environment (which any process of the container can change)
 * cannot lift them. Lines: KEY=VALUE, blank, or starting with '#'. */
#define VGPU_LIMITS_FILE_NAME "vgpu.limits"
#define VGPU_LIMITS_DEFAULT_DIR "/usr/local/vgpu"
#define VGPU_CFG_MAX 48
#define VGPU_CFG_KEY_LEN 48
#define VGPU_CFG_VALUE_LEN 208
typedef struct vgpu_cfg_entry {
  char key[VGPU_CFG_KEY_LEN];
  char value[VGPU_CFG_VALUE_LEN];
} vgpu_cfg_entry;
typedef struct vgpu_cfg {
  int count;
  vgpu_cfg_entry e[VGPU_CFG_MAX];
} vgpu_cfg;
/* 1 for the variables a limits file governs: CUDA_DEVICE_MEMORY_LIMIT(_<i>),
 * CUDA_DEVICE_SM_LIMIT(_<i>), CUDA_DEVICE_MEMORY_SHARED_CACHE, GPU_CORE_UTILIZATION_POLICY,
 * CUDA_TASK_PRIORITY, CUDA_OVERSUBSCRIBE, CUDA_DEVICE_MEMORY_SCALING. */
int vgpu_cfg_key_governed(const char* key, size_t len);
/* Parses `len` bytes of a limits file into `cfg` (cleared first). Returns the number of lines that
 * were not understood (unknown key, no '=', too long, duplicate key, more than VGPU_CFG_MAX
 * entries) and sets *first_bad to the first one's 1-based number (0 when none); those lines are
 * skipped. */
int vgpu_parse_limits(const char* text, size_t len, vgpu_cfg* cfg, int* first_bad);
/* The value of `key` in cfg, NULL when absent. */
const char* vgpu_cfg_get(const vgpu_cfg* cfg, const char* key);
/* Parses "true"/"1"/"false"/"0" (case-insensitive; empty = false). */
int vgpu_parse_bool(const char* s, int* out);
/* CUDA_DEVICE_MEMORY_SCALING (the device plugin's deviceMemoryScaling): "<digits>[.<digits>]" in
 * thousandths (digits past the third are dropped), 0.001 .. VGPU_SCALING_MAX_PERMILLE / 1000. */
#define VGPU_SCALING_MAX_PERMILLE 1000000u
int vgpu_parse_scaling(const char* s, uint32_t* permille);

/* ---- Work-conserving shares: the node monitor's lines in the limits file (vgpu_env.c) ----------
 * The node monitor (hami monitor, trusted, on the host) appends to each armed container's limits
 * file, which the container sees read-only, one line per GPU of the container and rewrites it in
 * place every share interval (~100 ms):
 *   "#hami-share <uuid> <factor, 7 digits, 1/10000> <state 0|1|2> <CLOCK_MONOTONIC ms, 13 digits>
 *    <FNV-1a 32 of the text between the prefix and the last space, 8 hex digits>"
 * A comment for vgpu_parse_limits. The container's effective SM percent on that GPU is its own
 * (trusted) limit times the factor (>= 1: the idle time of others, in proportion to the shares of
 * the busy containers), at most 100 (= not limited); state 1 (blocked) = a container of higher
 * priority is busy on one of its GPUs; state 2 (VGPU_SHARE_LENT) = it is idle on this GPU and its
 * time is lent to busy neighbours (a factor above 1): it banks none of it (vgpu_limiter_lent).
 * Nothing a container can write is read: the factor is computed by the
 * monitor and the limit comes from the device plugin's limits file. */
#define VGPU_SHARE_PREFIX "#hami-share "
#define VGPU_SHARE_FACTOR_ONE 10000u
#define VGPU_SHARE_FACTOR_MAX 1000000u /* 100 x: a 1 % container alone */
#define VGPU_SHARE_BLOCKED 1
#define VGPU_SHARE_LENT 2
/* A line older than this (the monitor stopped) is ignored: the static limit applies. */
#define VGPU_SHARE_STALE_MS 1000u
/* Formats the line for `uuid` (with its newline) into buf; returns its length, or -1 when it does
 * not fit or a value is out of range. `state`: 0, VGPU_SHARE_BLOCKED or VGPU_SHARE_LENT. */
int vgpu_format_share(char* buf, size_t cap, const char* uuid, uint32_t factor, int state,
                      uint64_t mono_ms);
/* Finds the valid line for `uuid` in `len` bytes of a limits file: 1 with *factor and *state set
 * when it is there, intact (checksum), in range and fresh at `now_ms`; 0 otherwise. */
int vgpu_find_share(const char* text, size_t len, const char* uuid, uint64_t now_ms,
                    uint32_t* factor, int* state);
/* Effective percent of a `pct` limit at `factor`: rounded to the nearest percent, at most 100. */
uint32_t vgpu_share_pct(uint32_t pct, uint32_t factor);

/* ---- Logging (vgpu_log.c): one line to stderr, "[libvgpu pid] LEVEL message".
 * -------------------- */
enum { VGPU_LOG_ERROR = 1, VGPU_LOG_WARN = 2, VGPU_LOG_INFO = 3, VGPU_LOG_DEBUG = 4 };
extern int vgpu_log_level;
void vgpu_log(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#define VGPU_LOG(level, ...)                                                          \
  do {                                                                                \
    if (__builtin_expect((level) <= vgpu_log_level, 0)) vgpu_log(level, __VA_ARGS__); \
  } while (0)

/* ---- Shared region (vgpu_region.c) -------------------------------------------------------------
 */
typedef struct vgpu_region_params {
  uint32_t policy;
  int32_t priority;
  /* Socket of the device plugin's host PID broker (upstream HAMi's protocol version 1), asked for
   * this process's host PID when a slot is claimed; NULL = not used (the PID from /proc). */
  const char* host_pid_broker;
} vgpu_region_params;
/* Where the device plugin mounts its broker directory (LIBVGPU_HOSTPID_BROKER=1, upstream names).
 */
#define VGPU_HOSTPID_BROKER_SOCKET "/tmp/vgpulock/hostpid/broker.sock"
/* 1 when the device plugin's limits file armed this process's container (set before
 * vgpu_region_attach): then a region file that cannot be used at all (unusable path, mapping
 * failure) refuses allocations too, like one that cannot be trusted. */
extern int vgpu_region_armed;

typedef struct vgpu_region_ctx {
  vgpu_region*
      r;    /* mapping (file-backed, or private anonymous fallback); a private copy is moved onto it
             * when the file is found tampered with under this process (see vgpu_region_reserve) */
  int fd;   /* region file, -1 for the private fallback */
  int slot; /* own slot index, -1 if none */
  int shared; /* 1 when backed by the file */
  /* 1 when the shared region was refused for a reason that leaves this process's share of the
   * container's limit unknown (see vgpu_region_attach): its allocations are refused. */
  int refused;
  /* The region file, kept open only for this process's liveness lock after the file was found
   * overwritten under it (so that no newcomer rebuilds it while this process's usage is off its
   * books); -1 otherwise. */
  int liveness_fd;
  uint32_t
      lock_word; /* value of hdr.lock while this process holds it: slot + 1 | generation << 11 */
  vgpu_region_params params;
  /* Per device entry, private to this process (the file is writable by the whole container, so
   * nothing in it is trusted on its own): the limit this process enforces (the stricter of its own
   * and the region's), its SM limit, and a shadow of its own slot's usage that detects an
   * overwritten region. */
  uint64_t limit[VGPU_MAX_DEVICES];
  uint32_t sm_pct[VGPU_MAX_DEVICES];
  uint64_t mine[VGPU_MAX_DEVICES];
  char uuid[VGPU_MAX_DEVICES][VGPU_UUID_LEN];
} vgpu_region_ctx;

/* Maps (creating and initialising if needed) the region file at `path`, claims a slot, and reclaims
 * slots of dead processes; 0 when the shared file is in use. A file that cannot be trusted (no
 * valid header, another layout version, a body that breaks the layout's invariants) is rebuilt when
 * no live process uses it, with one ERROR line. Otherwise -1 after one ERROR line, on a private
 * anonymous region: refused (c->refused = 1, allocations refused, since this process cannot know
 * how much of the container's limit the others use) when the file cannot be trusted while live
 * processes use it, when its initialisation lock or every process slot is held, or, when
 * vgpu_region_armed, on any failure; else (unusable path without a limits file) its own limits hold
 * for it alone. */
int vgpu_region_attach(vgpu_region_ctx* c, const char* path, const vgpu_region_params* p);
/* Drops this process's usage and slot (normal exit), unmaps. */
void vgpu_region_detach(vgpu_region_ctx* c);
/* Finds the entry for `uuid`, creating it with the given limits if absent. A later process whose
 * limits differ enforces the stricter of its own and the region's (c->limit / c->sm_pct; a warning
 * says so). Returns the entry index or -1 when the table is full. */
int vgpu_region_device(vgpu_region_ctx* c, const char* uuid, uint64_t limit_bytes,
                       uint32_t sm_limit_pct, uint64_t total_bytes, int32_t container_index,
                       uint32_t sm_count);
/* Reserves `bytes` on entry `dev` for this process against c->limit[dev] (the region's limit for an
 * entry it never registered). force != 0 charges even past the limit. Returns 0 when reserved, 1
 * when it would exceed the limit (nothing charged), -1 when the region could not be locked in
 * bounded time (nothing charged). When the file no longer holds what this process wrote to it
 * (changed under it), one ERROR line is logged (reserve and release both check): if the rest of the
 * file is still a valid region holding this process's device entries, its own slot is restored and
 * the usage totals recomputed (it keeps sharing); otherwise it continues on a private region that
 * keeps its usage and limits, and keeps its liveness lock on the file (newcomers are then refused
 * instead of rebuilding the file without this process's usage). */
int vgpu_region_reserve(vgpu_region_ctx* c, int dev, uint64_t bytes, int force);
/* Returns bytes reserved earlier (clamped, never underflows). */
void vgpu_region_release(vgpu_region_ctx* c, int dev, uint64_t bytes);
/* Reclaims the slots of dead processes; returns how many. Makes system calls (not for hot paths).
 */
int vgpu_region_sweep(vgpu_region_ctx* c);
/* Container usage / limit of entry `dev` (atomic loads). */
uint64_t vgpu_region_used(const vgpu_region_ctx* c, int dev);
/* Test hook: when > 0, the vgpu_region_crash_after-th call (counting from 1; 0 = the next one) of
 * vgpu_region_reserve kills the process with SIGKILL at that sequence point (1: after the slot
 * store, before the device cache store; 2: right after taking the lock). Set from
 * VGPU_TEST_CRASH_POINT=point[:n]. */
extern int vgpu_region_crash_point;
extern int vgpu_region_crash_after;
/* Test hook: called in the dead-owner lock takeover between the liveness check and the
 * compare-and-swap (the window in which another process can claim the dead slot and lock). NULL in
 * production. */
extern void (*vgpu_region_takeover_hook)(void);
/* The cross-process region lock (bounded wait, dead owners taken over): 0 or -1. For tests and
 * callers that group several updates. */
int vgpu_region_lock(vgpu_region_ctx* c);
void vgpu_region_unlock(vgpu_region_ctx* c);

/* ---- Allocation table (vgpu_alloc_table.c): open addressing in a fixed mmap'ed arena.
 * -------------- */
enum {
  VGPU_KIND_DPTR = 1,
  VGPU_KIND_HANDLE = 2,
  VGPU_KIND_ARRAY = 3,
  VGPU_KIND_MIPMAP = 4,
  VGPU_KIND_CTX = 5
};
/* Size flag of a VGPU_KIND_DPTR entry: managed memory (the application's, or a spilled cuMemAlloc)
 * while CUDA_OVERSUBSCRIBE is on, pageable and outside the physical share. Sizes stay below it. */
#define VGPU_AT_MANAGED (1ull << 47)
typedef struct vgpu_at_entry {
  uint64_t key;
  uint64_t meta; /* size (low 48 bits) | dev (8 bits) | kind (8 bits); 0 = empty */
} vgpu_at_entry;
typedef struct vgpu_alloc_table {
  vgpu_at_entry* e;
  uint32_t mask;
  uint32_t count;
  volatile int lock;
} vgpu_alloc_table;
/* Reserves 2^log2_capacity entries (no allocation on later calls). Returns 0 or -1. */
int vgpu_at_init(vgpu_alloc_table* t, unsigned log2_capacity);
void vgpu_at_destroy(vgpu_alloc_table* t);
/* Returns 0, or -1 when the table is full (load above 7/8) or size/dev do not fit. */
int vgpu_at_insert(vgpu_alloc_table* t, uint64_t key, int kind, int dev, uint64_t size);
/* Removes (key, kind); returns 1 and fills dev/size when found, 0 otherwise. */
int vgpu_at_remove(vgpu_alloc_table* t, uint64_t key, int kind, int* dev, uint64_t* size);

/* ---- SM limiter (vgpu_limiter.c): token bucket in device nanoseconds, shared per device entry. */
/* Prior before the first calibration. */
#define VGPU_LIMITER_DEFAULT_NS_PER_WAVE 100000ull
/* Tokens held at most: 50 ms of device time (default) ... */
#define VGPU_LIMITER_BURST_NS 50000000ull
/* ... or up to this for containers running long kernels. */
#define VGPU_LIMITER_MAX_BURST_NS 4000000000ull
/* One wait step at most. */
#define VGPU_LIMITER_MAX_SLEEP_NS 20000000ull
/* What one launch can be charged up front. */
#define VGPU_LIMITER_MAX_COST_NS 10000000000ull
/* A launch waits at most this long, then starts anyway. */
#define VGPU_LIMITER_MAX_WAIT_NS 60000000000ull
/* The controller's corrections put the bucket at most this much refill time in debt (the debt at
 * pct is this x pct / 100 of device time: more than one 2 s kernel at 10 %). */
#define VGPU_LIMITER_MAX_DEBT_WAIT_NS 30000000000ull
/* Controller ticks after the limiter was last seen off in which measured time beyond the charges is
 * forgiven (kernels queued while it was off still run): 2 s at the 100 ms window. */
#define VGPU_LIMITER_GRACE_TICKS 20u
/* ... and after the rate drops or the limit comes back under work-conserving shares
 * (vgpu_limiter_lower): 200 ms, the queue the fake and the launch backlog hold. */
#define VGPU_LIMITER_SHARE_GRACE_TICKS 2u
/* A calibration segment ends after this many ticks. */
#define VGPU_LIMITER_SEGMENT_TICKS 20
/* Each calibration sample keeps 1 - 1/VGPU_LIMITER_CAL_DECAY of the weight of the earlier ones. */
#define VGPU_LIMITER_CAL_DECAY 8
/* Bound of the calibration weight (waves x 256). */
#define VGPU_LIMITER_CAL_MAX_WEIGHT (1ull << 48)
/* Fast path, no clock: charges a launch of `waves` waves and returns 1 while the bucket holds
 * tokens; returns 0 when it is empty (then call vgpu_limiter_try with the time). Refilling only
 * when empty grants over any interval at most the burst plus pct% of the interval, like a
 * continuously refilled bucket. */
static inline int vgpu_limiter_take(vgpu_device_entry* d, uint64_t waves) {
  if (__atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED) <= 0) return 0;
  uint64_t npw = __atomic_load_n(&d->ns_per_wave, __ATOMIC_RELAXED);
  uint64_t cost = waves * (npw ? npw : VGPU_LIMITER_DEFAULT_NS_PER_WAVE);
  if (cost > VGPU_LIMITER_MAX_COST_NS) cost = VGPU_LIMITER_MAX_COST_NS;
  __atomic_sub_fetch(&d->tokens_ns, (int64_t)cost, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->waves_launched, waves, __ATOMIC_RELAXED);
  return 1;
}
/* Test hook: called in a refill or a clamp after the new token count is computed and before it is
 * committed (the window in which a concurrent launch can charge the bucket). NULL in production. */
extern void (*vgpu_limiter_refill_hook)(vgpu_device_entry* d);
/* Lowers the bucket to the burst at `pct` when it holds more (a tampered file, or a burst that
 * decayed), keeping any charge made meanwhile. */
void vgpu_limiter_clamp(vgpu_device_entry* d, uint32_t pct);
/* Refills for the time elapsed until now, then tries vgpu_limiter_take. Returns 0 when the launch
 * may start (and charges it), else the number of nanoseconds to wait before trying again. */
uint64_t vgpu_limiter_try(vgpu_device_entry* d, uint32_t pct, uint64_t waves, uint64_t now_ns);
/* The limiter is off for the container (policy default, monitor switch 0): its launches are not
 * charged, so device time measured meanwhile is no debt. Called every watcher period while it is
 * off, before the tick: the bucket is held at a full burst, nothing is outstanding, and the next
 * VGPU_LIMITER_GRACE_TICKS ticks charge no measured time beyond the launch charges and feed no
 * calibration (kernels launched uncharged are still running when the limiter is back). */
void vgpu_limiter_unlimited(vgpu_device_entry* d, uint32_t pct);
/* The rate drops to `pct` (work-conserving shares: a neighbour came back), or the limit applies
 * again after it was off: the bucket is lowered to the default burst at `pct` (tokens gathered at
 * the higher rate or while off are not spent afterwards), the refill restarts at `now_ns` and the
 * grace is cut to VGPU_LIMITER_SHARE_GRACE_TICKS. */
void vgpu_limiter_lower(vgpu_device_entry* d, uint32_t pct, uint64_t now_ns);
/* The container is idle and the node monitor lends its time to busy neighbours (share state
 * VGPU_SHARE_LENT): the same idle time must not also be banked. Credits the refill up to now (a
 * debt is still repaid at `pct`), forgets the learnt burst and keeps at most the default burst at
 * `pct`, so that a container coming back takes at most that much beyond its share before its
 * neighbours are lowered again. Called every share poll while lent. */
void vgpu_limiter_lent(vgpu_device_entry* d, uint32_t pct, uint64_t now_ns);
/* The monitor's share line of the device at a poll (every 25 ms, the watcher): in state
 * VGPU_SHARE_LENT or VGPU_SHARE_BLOCKED the container's time goes to its neighbours and the bucket
 * banks none of it (vgpu_limiter_lent: at most the default burst, a debt still repaid at `pct`);
 * state 0 keeps the learnt burst. */
void vgpu_limiter_share_poll(vgpu_device_entry* d, uint32_t pct, int state, uint64_t now_ns);
/* Feeds one calibration sample: `busy_ns` of device time the container used while `waves` waves
 * were launched. d->ns_per_wave becomes the ratio of the decayed sums of busy time and waves (the
 * first sample replaces the prior; d->cal_weight holds the decayed waves). */
void vgpu_limiter_calibrate(vgpu_device_entry* d, uint64_t busy_ns, uint64_t waves);
/* One controller tick (once per window of `window_ns`, by one calibration thread per container):
 * `busy_ns` is the device time the container was measured busy in the window, `others_ns` that of
 * every other process on the device, `waves` the waves launched by the container. Device time
 * measured beyond what launches were charged is taken from the bucket at once (the bucket then
 * tracks measured time, whatever the kernels' length or shape); charges not yet measured stay
 * outstanding while the container keeps the device busy, and are given back after a window it did
 * not fill (work still queued then is charged again when it runs). ns_per_wave is calibrated over
 * segments between such idle windows (or of VGPU_LIMITER_SEGMENT_TICKS ticks), so that a kernel
 * longer than a window is measured against the launch that started it. */
void vgpu_limiter_tick(vgpu_device_entry* d, uint32_t pct, uint64_t busy_ns, uint64_t others_ns,
                       uint64_t waves, uint64_t window_ns);
/* The bucket's burst at `pct`: the default burst, or four times the longest run of windows seen
 * lately in which the device was fully busy, with the container's work or others' (so that a
 * container running long kernels, or blocked behind another's, keeps its share). */
static inline int64_t vgpu_limiter_cap(const vgpu_device_entry* d, uint32_t pct) {
  uint64_t b = __atomic_load_n(&d->burst_ns, __ATOMIC_RELAXED);
  if (b < VGPU_LIMITER_BURST_NS) b = VGPU_LIMITER_BURST_NS;
  return (int64_t)(b / 100 * pct);
}

/* NOLINTEND(readability-identifier-naming) */

#ifdef __cplusplus
}
#endif

#endif /* HAMI_VGPU_VGPU_CORE_H_ */
