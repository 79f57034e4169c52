/* Layout of the libvgpu shared region: the per-container file named by
 * CUDA_DEVICE_MEMORY_SHARED_CACHE (default /tmp/cudevshr.cache) that every process of a container
 * maps.
 *
 * Contract (read this before reading or writing the file from elsewhere, e.g. the node exporter):
 *  - Pure data: fixed-width integers and char arrays only, little-endian x86-64 / arm64, no
 * pointers, no sem_t / pthread types / size_t. Sizes and offsets are pinned by static asserts
 * below.
 *  - Versioned: `magic` == VGPU_REGION_MAGIC and VGPU_REGION_MIN_VERSION <= `version` <=
 * VGPU_REGION_VERSION mean this layout (same size): a version only gives a meaning to reserved
 * bytes whose zero means what the older versions did, and readers and writers of any of these
 * versions accept each other's files. Future versions only append fields inside the reserved tails
 * or after the slot array, and bump `version` (and VGPU_REGION_MIN_VERSION when zero in a new field
 * would not keep the old meaning); `size_bytes` is the size the writer used. Version 2:
 * vgpu_device_entry.grace_ticks (was reserved0). Version 3: vgpu_device_entry.busy_ms (was
 * reserved1). Version 4: vgpu_region_header.peak_mib (was the first 64 reserved bytes). Version 5:
 * vgpu_region_header.metered_mask (was the first 4 of the last 8 reserved bytes).
 *  - Every field that changes after initialisation is read and written with 32/64-bit atomic
 * operations
 *    (__atomic builtins / std::atomic_ref). A reader (the exporter) must use atomic loads and must
 * never write, except the two monitor-feedback fields documented on vgpu_region_header.
 *  - Crash safety: `used_bytes` of a device is a cache of the sum of `used[dev]` of all non-free
 * slots; it is changed only together with the caller's slot while holding `lock` (a spin lock word
 * holding the owner's slot index + 1 in bits 0..10 and the low 21 bits of its slot's generation
 * above them). A process SIGKILLed anywhere leaves at worst a held lock or a cache that is off by
 * its last in-flight change; whoever next takes the lock from a dead owner recomputes the cache
 * from the slots, which are each changed by single stores. Liveness of a slot's owner is an OFD
 * byte-range lock held by the owner on byte VGPU_REGION_LIVENESS_BASE + slot of the file: the
 * kernel drops it when the process dies (any PID namespace, no PID-reuse confusion). Dead slots are
 * reclaimed (their usage subtracted) by the next process that registers or hits the limit.
 * `generation` changes on every claim so a reader can tell that a slot index was reused by another
 * process.
 *  - Units: bytes for memory, percent for SM limits, nanoseconds of CLOCK_MONOTONIC for times.
 */
#ifndef HAMI_VGPU_SHARED_REGION_H_
#define HAMI_VGPU_SHARED_REGION_H_

#include <stdint.h>

#ifdef __cplusplus
#define VGPU_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#define VGPU_OFFSETOF(type, member) offsetof(type, member)
#include <cstddef>
#else
#include <stddef.h>
#define VGPU_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#define VGPU_OFFSETOF(type, member) offsetof(type, member)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_REGION_MAGIC 0x55504756u /* "VGPU" little-endian */
#define VGPU_REGION_VERSION 5u
#define VGPU_REGION_MIN_VERSION 1u
#define VGPU_MAX_DEVICES 16
#define VGPU_MAX_SLOTS 1024
#define VGPU_UUID_LEN 96
/* Byte offsets of the OFD locks (beyond the end of the file; locks there are fine on Linux). */
#define VGPU_REGION_INIT_LOCK_BYTE 0x3fffffffull
#define VGPU_REGION_LIVENESS_BASE 0x40000000ull

/* Region states (vgpu_region_header.init_state). */
#define VGPU_REGION_UNINITIALIZED 0u
#define VGPU_REGION_READY 2u

/* GPU_CORE_UTILIZATION_POLICY values (vgpu_region_header.policy). */
#define VGPU_POLICY_DEFAULT 0u
#define VGPU_POLICY_FORCE 1u
#define VGPU_POLICY_DISABLE 2u

/* Slot states. */
#define VGPU_SLOT_FREE 0u
#define VGPU_SLOT_ACTIVE 1u

/* The structs are libvgpu's C types, named in C style: readability-identifier-naming (CamelCase for
 * C++ structs) does not apply. */
/* NOLINTBEGIN(readability-identifier-naming) */
/* One physical device (keyed by UUID), container-wide. 256 bytes. */
typedef struct vgpu_device_entry {
  char uuid[VGPU_UUID_LEN]; /* NUL-terminated, e.g. "GPU-8f3a..." or "MIG-..."; "" = unused entry */
  uint64_t limit_bytes;     /* memory limit, 0 = unlimited */
  uint64_t used_bytes;      /* atomic: container usage, cache of sum(slot.used[i]) (see contract) */
  uint64_t total_bytes;     /* physical total reported by the driver when the entry was made */
  uint32_t sm_limit_pct;    /* 1..100; 100 = no SM limit */
  int32_t
      container_index; /* i of CUDA_DEVICE_MEMORY_LIMIT_<i> this entry's limit came from, -1 none */
  /* SM limiter (container-wide token bucket in device nanoseconds), all atomic. */
  int64_t tokens_ns;       /* device time this container may still start */
  uint64_t refill_ns;      /* CLOCK_MONOTONIC time tokens were last refilled */
  uint64_t ns_per_wave;    /* calibrated device time of one wave (ceil(blocks/SMs)); 0 = not yet */
  uint64_t waves_launched; /* cumulative waves started through the limiter */
  uint64_t throttled_ns;   /* cumulative time launches waited */
  uint64_t last_launch_ns; /* CLOCK_MONOTONIC time of a recent limited launch (stamped on refill and
                            * every calibration tick with launches; not by every launch) */
  uint32_t sm_count;       /* multiprocessors of the device */
  /* v2: controller ticks left in which device time measured beyond the launch charges is not
   * charged: set while the limiter is off for the container (its launches are then not charged, and
   * work it queued meanwhile still runs after the limiter is back). 0 in v1 files: none. */
  uint32_t grace_ticks;
  /* SM limiter controller (written by the one calibration thread elected per window; zero in files
   * from before these fields existed, which means "no tick yet"). */
  int64_t outstanding_ns; /* charged at launch but not yet measured as busy time */
  uint64_t calib_us;      /* CLOCK_REALTIME us of the last controller tick (elects one ticker) */
  uint64_t calib_waves;   /* waves_launched at that tick */
  uint64_t seg_busy_ns; /* calibration segment (since the container last had nothing in flight): */
  uint64_t seg_waves;   /* busy time and waves */
  uint32_t seg_ticks;   /* ticks in the segment */
  uint32_t seg_closed;  /* segments closed so far */
  uint64_t burst_ns;    /* burst (before pct) learnt from runs of fully busy windows; 0 = default */
  uint32_t full_run;    /* consecutive ticks the container kept the device busy */
  /* v3, atomic: device time the container's processes were measured busy by the controller ticks
   * (NVML per-process samples, every window since metering began: see metered_mask; limiter on or
   * off), in ms, wrapping at 2^32 (49.7 days). 0 in older files. */
  uint32_t busy_ms;
  uint64_t cal_weight; /* decayed waves behind ns_per_wave, x 256 (VGPU_LIMITER_CAL_*); 0 = none */
} vgpu_device_entry;

/* One process. 256 bytes. Written only by its owner (and by a reclaimer once the owner is dead). */
typedef struct vgpu_proc_slot {
  uint32_t state;                  /* atomic: VGPU_SLOT_FREE / VGPU_SLOT_ACTIVE */
  uint32_t pid;                    /* pid in the owner's PID namespace */
  uint32_t host_pid;               /* outermost pid from /proc/self/status NStgid, 0 if unknown */
  uint32_t generation;             /* bumped on each claim of this slot */
  uint64_t start_ns;               /* CLOCK_BOOTTIME at claim: with pid, identifies the process */
  uint64_t used[VGPU_MAX_DEVICES]; /* atomic: bytes this process holds on device entry i */
  /* atomic: of used[i], what its CUDA contexts were charged, in KiB (rounded up; 0 in files from
   * before this field, which had zeros here). The exporter's context/buffer split. */
  uint32_t context_kib[VGPU_MAX_DEVICES];
  uint8_t reserved[40];
} vgpu_proc_slot;

typedef struct vgpu_region_header {
  uint32_t magic;        /* VGPU_REGION_MAGIC once initialised */
  uint32_t version;      /* VGPU_REGION_VERSION */
  uint32_t size_bytes;   /* sizeof(vgpu_region) of the writer */
  uint32_t init_state;   /* VGPU_REGION_READY once initialised */
  uint32_t device_count; /* atomic: entries in devices[] in use (append-only) */
  uint32_t slot_hwm;     /* atomic: 1 + highest slot index ever claimed */
  uint32_t lock;   /* atomic: 0 free, else owner's slot index + 1 (bits 0..10) | generation << 11 */
  uint32_t policy; /* VGPU_POLICY_*, from GPU_CORE_UTILIZATION_POLICY of the creator */
  int32_t priority; /* CUDA_TASK_PRIORITY of the creator (0 = high; default 1) */
  /* Monitor feedback (written by a node agent, read by libvgpu; same meaning as upstream HAMi):
   * utilization_switch 1 = apply the SM limit under the default policy, 0 = device not contended;
   * recent_kernel < 0 = a higher-priority container is active: launches wait (bounded). */
  int32_t utilization_switch;
  int32_t recent_kernel;
  uint32_t recoveries; /* atomic: times a lock was taken over from a dead owner */
  uint64_t created_ns; /* CLOCK_REALTIME of creation */
  /* v4, atomic: highest used_bytes of device entry i, in MiB rounded up (written with used_bytes,
   * under the lock). 0 in older files. */
  uint32_t peak_mib[VGPU_MAX_DEVICES];
  /* v5, atomic: bit i set once a process of the container meters device entry i, i.e. adds every
   * 100 ms window of its processes' device time to busy_ms (armed containers from their first CUDA
   * call whether or not they have an SM limit; others from their first limited launch). 0 in older
   * files: busy_ms then means something only for a device with an SM limit. */
  uint32_t metered_mask;
  uint8_t reserved[4];
} vgpu_region_header;

typedef struct vgpu_region {
  vgpu_region_header hdr;
  vgpu_device_entry devices[VGPU_MAX_DEVICES];
  vgpu_proc_slot slots[VGPU_MAX_SLOTS];
} vgpu_region;
/* NOLINTEND(readability-identifier-naming) */

VGPU_STATIC_ASSERT(sizeof(vgpu_device_entry) == 256, "device entry is 256 bytes");
VGPU_STATIC_ASSERT(sizeof(vgpu_proc_slot) == 256, "slot is 256 bytes");
VGPU_STATIC_ASSERT(sizeof(vgpu_region_header) == 128, "header is 128 bytes");
VGPU_STATIC_ASSERT(sizeof(vgpu_region) == 128 + 16 * 256 + 1024 * 256, "region size");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region_header, lock) == 24, "lock offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region_header, utilization_switch) == 36, "switch offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region_header, created_ns) == 48, "created offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region_header, peak_mib) == 56, "peak offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region_header, metered_mask) == 120, "metered offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, limit_bytes) == 96, "limit offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, used_bytes) == 104, "used offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, sm_limit_pct) == 120, "sm limit offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, tokens_ns) == 128, "tokens offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, sm_count) == 176, "sm count offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, grace_ticks) == 180, "grace offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, outstanding_ns) == 184, "controller offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_device_entry, busy_ms) == 244, "busy offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_proc_slot, used) == 24, "slot used offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_proc_slot, context_kib) == 152, "slot context offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region, devices) == 128, "devices offset");
VGPU_STATIC_ASSERT(VGPU_OFFSETOF(vgpu_region, slots) == 128 + 16 * 256, "slots offset");

#ifdef __cplusplus
}
#endif

#endif /* HAMI_VGPU_SHARED_REGION_H_ */
