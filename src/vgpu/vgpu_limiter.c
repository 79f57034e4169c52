/* SM limiter: a container-wide token bucket per device, in nanoseconds of device time.
 *
 * Each launch costs waves * ns_per_wave, where waves = ceil(blocks / SMs) is the number of full-device
 * passes the grid needs: the cost scales with the work, not with the SM count, so the same share holds on
 * 20 and 132 SMs. Tokens accrue at pct/100 per wall nanosecond and are capped at a small burst, so over
 * any window the container starts at most pct% of the window's device time (plus one burst). ns_per_wave
 * is calibrated from measured device busy time (see vgpu_limiter_calibrate), so the bucket converges to
 * the real cost of this workload's kernels. All state is in the shared device entry and updated with
 * atomics: processes of one container share the budget, and a killed process leaves nothing locked. */
#include "vgpu/vgpu_core.h"

void (*vgpu_limiter_refill_hook)(vgpu_device_entry* d) = NULL;

uint64_t vgpu_limiter_try(vgpu_device_entry* d, uint32_t pct, uint64_t waves, uint64_t now_ns) {
  /* Refill: whoever advances refill_ns adds the tokens for the elapsed interval. */
  uint64_t last = __atomic_load_n(&d->refill_ns, __ATOMIC_RELAXED);
  const int64_t cap = (int64_t)(VGPU_LIMITER_BURST_NS * pct / 100);
  if (now_ns > last &&
      __atomic_compare_exchange_n(&d->refill_ns, &last, now_ns, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    uint64_t dt = now_ns - last;
    if (last == 0 || dt > 1000000000ull) dt = 1000000000ull; /* first use or long idle: full burst */
    int64_t add = (int64_t)(dt * pct / 100);
    /* Add and clamp in one step: a launch charging the bucket meanwhile makes the exchange fail and is
     * kept (adding first and storing the clamp afterwards would overwrite its charge). */
    int64_t cur = __atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED), next;
    do {
      next = cur + add > cap ? (cur > cap ? cur : cap) : cur + add;
      if (__builtin_expect(vgpu_limiter_refill_hook != NULL, 0)) vgpu_limiter_refill_hook(d);
    } while (!__atomic_compare_exchange_n(&d->tokens_ns, &cur, next, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  }
  __atomic_store_n(&d->last_launch_ns, now_ns, __ATOMIC_RELAXED); /* activity heartbeat (coarse) */
  if (vgpu_limiter_take(d, waves)) return 0;
  int64_t tokens = __atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED);
  /* Time until the bucket is positive again at the refill rate. */
  uint64_t wait = (uint64_t)(-tokens) * 100 / (pct ? pct : 1) + 1000;
  if (wait > VGPU_LIMITER_MAX_SLEEP_NS) wait = VGPU_LIMITER_MAX_SLEEP_NS;
  return wait;
}

void vgpu_limiter_calibrate(vgpu_device_entry* d, uint64_t busy_ns, uint64_t waves) {
  if (!waves || !busy_ns) return;
  uint64_t sample = busy_ns / waves;
  if (!sample) sample = 1;
  uint64_t old = __atomic_load_n(&d->ns_per_wave, __ATOMIC_RELAXED);
  /* First sample replaces the prior; later ones average with weight 1/2 (fast but smooths noise). */
  uint64_t next = old ? (old + sample) / 2 : sample;
  __atomic_store_n(&d->ns_per_wave, next, __ATOMIC_RELAXED);
}
