/* SM limiter: a container-wide token bucket per device, in nanoseconds of device time.
 *
 * Each launch costs waves * ns_per_wave, where waves = ceil(blocks / SMs) is the number of
 * full-device passes the grid needs: the cost scales with the work, not with the SM count, so the
 * same share holds on 20 and 132 SMs. Tokens accrue at pct/100 per wall nanosecond and are capped
 * at a small burst, so over any window the container starts at most pct% of the window's device
 * time (plus one burst). A controller tick per window (vgpu_limiter_tick) charges the bucket with
 * measured device time beyond the launch charges, so the share holds whatever the kernels' length;
 * ns_per_wave is calibrated from measured busy time so that the up-front charges are close to what
 * launches really cost. All state is in the shared device entry and updated with atomics: processes
 * of one container share the budget, and a killed process leaves nothing locked. */
#include "vgpu/vgpu_core.h"

void (*vgpu_limiter_refill_hook)(vgpu_device_entry* d) = NULL;

/* Adds `delta` to the bucket, keeping it within [-(what the longest wait repays), burst], in one
 * compare-and-swap: a launch charging the bucket meanwhile makes the exchange fail and is kept
 * (adding first and storing the clamp afterwards would overwrite its charge). */
static void adjust(vgpu_device_entry* d, uint32_t pct, int64_t delta) {
  const int64_t cap = vgpu_limiter_cap(d, pct);
  const int64_t floor = -(int64_t)(VGPU_LIMITER_MAX_DEBT_WAIT_NS / 100 * pct);
  int64_t cur = __atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED), next;
  do {
    next = cur + delta;
    if (delta > 0 && next > cap) next = cur > cap ? cur : cap;
    if (delta < 0 && next < floor) next = cur < floor ? cur : floor;
    if (__builtin_expect(vgpu_limiter_refill_hook != NULL, 0)) vgpu_limiter_refill_hook(d);
  } while (!__atomic_compare_exchange_n(&d->tokens_ns, &cur, next, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
}

void vgpu_limiter_clamp(vgpu_device_entry* d, uint32_t pct) {
  const int64_t cap = vgpu_limiter_cap(d, pct);
  int64_t cur = __atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED);
  /* A launch that charges the bucket between the load and the exchange makes the exchange fail;
   * the loop then sees its charge (a plain store of the cap would overwrite it). */
  while (cur > cap) {
    if (__builtin_expect(vgpu_limiter_refill_hook != NULL, 0)) vgpu_limiter_refill_hook(d);
    if (__atomic_compare_exchange_n(&d->tokens_ns, &cur, cap, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      break;
  }
}

void vgpu_limiter_unlimited(vgpu_device_entry* d, uint32_t pct) {
  /* Raise the bucket to the burst (a charge made meanwhile fails the exchange and is kept). */
  const int64_t cap = vgpu_limiter_cap(d, pct);
  int64_t cur = __atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED);
  while (cur < cap && !__atomic_compare_exchange_n(&d->tokens_ns, &cur, cap, 0, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {
  }
  __atomic_store_n(&d->outstanding_ns, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&d->grace_ticks, VGPU_LIMITER_GRACE_TICKS, __ATOMIC_RELAXED);
}

void vgpu_limiter_lower(vgpu_device_entry* d, uint32_t pct, uint64_t now_ns) {
  const int64_t cap = (int64_t)(VGPU_LIMITER_BURST_NS / 100 * pct);
  int64_t cur = __atomic_load_n(&d->tokens_ns, __ATOMIC_RELAXED);
  while (cur > cap && !__atomic_compare_exchange_n(&d->tokens_ns, &cur, cap, 0, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {
  }
  /* Kernels queued while the rate was higher (or off) are forgiven for a short grace only: under
   * shares the limit comes and goes every few ticks, and 2 s of forgiven time at the wave cost
   * calibrated before lets a container of long kernels run far above its share. */
  uint32_t grace = __atomic_load_n(&d->grace_ticks, __ATOMIC_RELAXED);
  if (grace > VGPU_LIMITER_SHARE_GRACE_TICKS)
    __atomic_store_n(&d->grace_ticks, VGPU_LIMITER_SHARE_GRACE_TICKS, __ATOMIC_RELAXED);
  /* The time since the last refill was spent at the old rate, or off: not credited at the new. */
  uint64_t last = __atomic_load_n(&d->refill_ns, __ATOMIC_RELAXED);
  while (last < now_ns && !__atomic_compare_exchange_n(&d->refill_ns, &last, now_ns, 0,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* Refill: whoever advances refill_ns adds the tokens for the elapsed interval. */
static inline void refill(vgpu_device_entry* d, uint32_t pct, uint64_t now_ns) {
  uint64_t last = __atomic_load_n(&d->refill_ns, __ATOMIC_RELAXED);
  if (now_ns > last && __atomic_compare_exchange_n(&d->refill_ns, &last, now_ns, 0,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    uint64_t dt = now_ns - last;
    /* First use: a full burst. A long gap is credited in full (the clamp keeps an idle bucket at
     * the burst, and a bucket in debt after a long kernel is owed all of it); 100 s is more than
     * any debt. */
    if (last == 0) dt = 1000000000ull;
    if (dt > 100000000000ull) dt = 100000000000ull;
    adjust(d, pct, (int64_t)(dt * pct / 100));
  }
}

void vgpu_limiter_lent(vgpu_device_entry* d, uint32_t pct, uint64_t now_ns) {
  /* The learnt burst goes first, so that neither the refill nor the clamp keeps more than the
   * default burst; the idle time still repays a debt at the container's rate. */
  __atomic_store_n(&d->burst_ns, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&d->full_run, 0, __ATOMIC_RELAXED);
  refill(d, pct, now_ns);
  vgpu_limiter_clamp(d, pct);
}

void vgpu_limiter_share_poll(vgpu_device_entry* d, uint32_t pct, int state, uint64_t now_ns) {
  /* Blocked (policed or a higher priority busy), the container launches nothing either, and its
   * neighbours fill the device, so the learnt burst grows: without this the first launch after the
   * block refilled the whole blocked time up to 4 s x pct, went over the share and was blocked
   * again. */
  if (state == VGPU_SHARE_LENT || state == VGPU_SHARE_BLOCKED) vgpu_limiter_lent(d, pct, now_ns);
}

uint64_t vgpu_limiter_try(vgpu_device_entry* d, uint32_t pct, uint64_t waves, uint64_t now_ns) {
  refill(d, pct, now_ns);
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
  /* Ratio of decayed sums, busy time over waves (weights x 256): every wave counts alike, so a
   * segment holding one long kernel moves the estimate by its share of the waves, not by half. The
   * sum of busy time is not stored: it is ns_per_wave x the weight. */
  uint64_t w = __atomic_load_n(&d->cal_weight, __ATOMIC_RELAXED);
  uint64_t old = __atomic_load_n(&d->ns_per_wave, __ATOMIC_RELAXED);
  if (!old || w > VGPU_LIMITER_CAL_MAX_WEIGHT) w = 0; /* no prior (or a tampered weight) */
  if (waves > VGPU_LIMITER_CAL_MAX_WEIGHT / 256) waves = VGPU_LIMITER_CAL_MAX_WEIGHT / 256;
  w -= w / VGPU_LIMITER_CAL_DECAY;
  unsigned __int128 sum = (unsigned __int128)old * w + (unsigned __int128)busy_ns * 256;
  w += waves * 256;
  uint64_t next = (uint64_t)(sum / w);
  if (!next) next = 1;
  if (w > VGPU_LIMITER_CAL_MAX_WEIGHT) w = VGPU_LIMITER_CAL_MAX_WEIGHT;
  __atomic_store_n(&d->cal_weight, w, __ATOMIC_RELAXED);
  __atomic_store_n(&d->ns_per_wave, next, __ATOMIC_RELAXED);
}

void vgpu_limiter_tick(vgpu_device_entry* d, uint32_t pct, uint64_t busy_ns, uint64_t others_ns,
                       uint64_t waves, uint64_t window_ns) {
  uint64_t npw = __atomic_load_n(&d->ns_per_wave, __ATOMIC_RELAXED);
  if (!npw) npw = VGPU_LIMITER_DEFAULT_NS_PER_WAVE;
  uint64_t charged =
      waves > VGPU_LIMITER_MAX_COST_NS / npw ? VGPU_LIMITER_MAX_COST_NS : waves * npw;
  int idle = waves == 0 && busy_ns == 0;
  /* Metering (the exporter's busy-seconds counter): rounded to the ms, wrapping. */
  if (busy_ns)
    __atomic_add_fetch(&d->busy_ms, (uint32_t)((busy_ns + 500000) / 1000000), __ATOMIC_RELAXED);
  int64_t o =
      __atomic_load_n(&d->outstanding_ns, __ATOMIC_RELAXED) + (int64_t)charged - (int64_t)busy_ns;
  if (!pct) pct = 100;
  if (!window_ns) window_ns = 1;
  /* Grace after the limiter was off: what ran uncharged is not a debt (vgpu_limiter_unlimited). */
  uint32_t grace = __atomic_load_n(&d->grace_ticks, __ATOMIC_RELAXED);
  if (grace) {
    if (grace > VGPU_LIMITER_GRACE_TICKS) grace = VGPU_LIMITER_GRACE_TICKS; /* tampered */
    __atomic_store_n(&d->grace_ticks, grace - 1, __ATOMIC_RELAXED);
    if (o < 0) o = 0;
  }
  /* Measured beyond the charges (o < 0): owed now. The device was not kept busy: what was charged
   * and did not run is given back. */
  if (o < 0 || (o > 0 && busy_ns < window_ns / 100 * 95)) {
    adjust(d, pct, o);
    o = 0;
  }
  /* Burst: four times the longest recent run of windows in which the device was fully busy (with
   * this container's work or others'; decaying slowly), at least the default: a container running
   * long kernels, or whose launches wait behind another container's long kernel, keeps the tokens
   * that accrue meanwhile and spends them in the gaps. */
  uint32_t run = busy_ns + others_ns >= window_ns / 100 * 95 ? d->full_run + 1 : 0;
  uint64_t want = 4 * (uint64_t)run * window_ns, burst = d->burst_ns;
  burst = want > burst ? want : burst - burst / 256;
  if (burst > VGPU_LIMITER_MAX_BURST_NS) burst = VGPU_LIMITER_MAX_BURST_NS;
  d->full_run = run;
  __atomic_store_n(&d->burst_ns, burst, __ATOMIC_RELAXED);
  __atomic_store_n(&d->outstanding_ns, o, __ATOMIC_RELAXED);
  /* Calibration over segments: everything launched in a segment that ends idle has been measured.
   */
  uint64_t sb = d->seg_busy_ns + busy_ns, sw = d->seg_waves + waves;
  uint32_t ticks = d->seg_ticks + 1, closed = d->seg_closed;
  uint32_t len =
      closed < 4 ? 1u << closed : VGPU_LIMITER_SEGMENT_TICKS; /* first samples come quickly */
  if (grace) { /* busy time of uncharged launches: no calibration sample */
    sb = sw = 0;
    ticks = 0;
  } else if (idle || ticks >= len) {
    vgpu_limiter_calibrate(d, sb, sw);
    if (sw && sb) closed++;
    sb = sw = 0;
    ticks = 0;
  }
  d->seg_busy_ns = sb;
  d->seg_waves = sw;
  d->seg_ticks = ticks;
  d->seg_closed = closed;
}
