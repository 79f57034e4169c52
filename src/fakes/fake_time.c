/* libfakegpu_time.so: the simulated node's clock, for tests that need seconds of device time in
 * less wall time. Preloaded (LD_PRELOAD, before or after libvgpu.so) with FAKEGPU_TIME_SCALE=N, it
 * makes the process's clocks run N times faster than the wall clock and its sleeps N times shorter:
 *
 *   CLOCK_MONOTONIC (and _COARSE, _RAW)  t' = N * t
 *   CLOCK_REALTIME (and _COARSE), gettimeofday, time   t' = t + (N - 1) * monotonic
 *   nanosleep, clock_nanosleep, usleep, sleep          a request of d sleeps d / N of wall time
 *
 * The transformation depends on nothing but N and the kernel's clocks, so every process with the
 * same N reads the same scaled time at the same instant: the fake driver's device clock (it is
 * CLOCK_MONOTONIC, shared by all processes through the state file), its kernel durations and
 * backlog waits, NVML's utilisation windows and timestamps (CLOCK_REALTIME), and libvgpu's token
 * refill, its 100 ms controller windows and its waits all run on the one scaled clock, as they run
 * on the one real clock without it. libvgpu itself is unchanged: it calls clock_gettime and
 * nanosleep as always and this library answers them (nothing in libvgpu trusts a driver for time).
 *
 * Not scaled: CLOCK_BOOTTIME, CPU-time clocks, and the timeouts of pthread_cond_timedwait, poll,
 * select, futexes (nothing of the fakes or libvgpu waits on those with a timeout). Without
 * FAKEGPU_TIME_SCALE (or with 1) every call goes straight to libc. A value that is not an integer
 * in 1..1000 prints one line "fakegpu: FAKEGPU_TIME_SCALE: <reason>; using default" and runs
 * unscaled. C only (no C++ runtime): it is loaded into every test program.
 *
 * The scaled clock is exact in its rates, not in its delays: a thread that the host's scheduler
 * wakes 1 ms late wakes N ms late in scaled time, so keep N moderate (the libvgpu sweep uses 20).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fakes/time_scale.h"

#define EXPORT __attribute__((visibility("default")))
#define NS 1000000000ull

typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);
typedef int (*clock_nanosleep_fn)(clockid_t, int, const struct timespec*, struct timespec*);

static clock_gettime_fn real_clock_gettime;
static clock_nanosleep_fn real_clock_nanosleep;
static uint64_t scale; /* 0: not read yet */

static void resolve(void) {
  if (!real_clock_gettime) real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  if (!real_clock_nanosleep)
    real_clock_nanosleep = (clock_nanosleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
}

static uint64_t parse_scale(void) {
  const char* s = getenv("FAKEGPU_TIME_SCALE");
  uint64_t v = 1;
  if (s && *s && fakegpu_parse_time_scale(s, &v) != 0) {
    fprintf(stderr, "fakegpu: FAKEGPU_TIME_SCALE: not an integer in 1..1000; using default\n");
    v = 1;
  }
  return v;
}

/* Reads the environment once (racing first calls agree: same value, idempotent stores). */
static uint64_t get_scale(void) {
  uint64_t n = __atomic_load_n(&scale, __ATOMIC_ACQUIRE);
  if (n) return n;
  resolve();
  n = parse_scale();
  __atomic_store_n(&scale, n, __ATOMIC_RELEASE);
  return n;
}

__attribute__((constructor)) static void init(void) {
  get_scale();
}

static uint64_t to_ns(const struct timespec* ts) {
  return (uint64_t)ts->tv_sec * NS + (uint64_t)ts->tv_nsec;
}
static struct timespec from_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / NS), (long)(ns % NS)};
  return ts;
}

static int is_monotonic(clockid_t c) {
  return c == CLOCK_MONOTONIC || c == CLOCK_MONOTONIC_COARSE || c == CLOCK_MONOTONIC_RAW;
}
static int is_realtime(clockid_t c) {
  return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE;
}

static uint64_t real_mono_ns(void) {
  struct timespec ts;
  real_clock_gettime(CLOCK_MONOTONIC, &ts);
  return to_ns(&ts);
}

/* Scaled value of a real reading `t` of clock c (the scale n > 1). */
static uint64_t scaled(clockid_t c, uint64_t t, uint64_t n) {
  if (is_monotonic(c)) return t * n;
  return t + (n - 1) * real_mono_ns();
}

EXPORT uint64_t fakegpu_time_scale(void) {
  return get_scale();
}

EXPORT int clock_gettime(clockid_t c, struct timespec* ts) {
  uint64_t n = get_scale();
  int r = real_clock_gettime(c, ts);
  if (r != 0 || n == 1 || !(is_monotonic(c) || is_realtime(c))) return r;
  *ts = from_ns(scaled(c, to_ns(ts), n));
  return 0;
}

EXPORT int gettimeofday(struct timeval* tv, void* tz) {
  (void)tz; /* obsolete; Linux fills it with zeros, nobody reads it */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

EXPORT time_t time(time_t* out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}

/* Sleeps `d` scaled ns: d / n of real time, to an absolute real deadline (EINTR: *left set to the
 * scaled time still to sleep). Returns 0 or an error number, as clock_nanosleep. */
static int sleep_scaled(uint64_t d, uint64_t n, struct timespec* left) {
  uint64_t deadline = real_mono_ns() + d / n;
  struct timespec ts = from_ns(deadline);
  int r = real_clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
  if (r == EINTR && left) {
    uint64_t now = real_mono_ns();
    *left = from_ns(now < deadline ? (deadline - now) * n : 0);
  }
  return r;
}

static int valid(const struct timespec* ts) {
  return ts && ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < (long)NS;
}

EXPORT int clock_nanosleep(clockid_t c, int flags, const struct timespec* req,
                           struct timespec* left) {
  uint64_t n = get_scale();
  if (n == 1 || !(is_monotonic(c) || is_realtime(c)))
    return real_clock_nanosleep(c, flags, req, left);
  if (!valid(req)) return EINVAL;
  uint64_t d = to_ns(req);
  if (flags & TIMER_ABSTIME) {
    struct timespec now;
    clock_gettime(c, &now);
    uint64_t t = to_ns(&now);
    if (d <= t) return 0;
    d -= t;
    left = NULL; /* absolute sleeps report nothing left */
  }
  return sleep_scaled(d, n, left);
}

EXPORT int nanosleep(const struct timespec* req, struct timespec* left) {
  uint64_t n = get_scale();
  int r = n == 1 ? real_clock_nanosleep(CLOCK_MONOTONIC, 0, req, left)
                 : (valid(req) ? sleep_scaled(to_ns(req), n, left) : EINVAL);
  if (r == 0) return 0;
  errno = r;
  return -1;
}

EXPORT int usleep(useconds_t us) {
  struct timespec ts = from_ns((uint64_t)us * 1000);
  return nanosleep(&ts, NULL);
}

EXPORT unsigned int sleep(unsigned int s) {
  struct timespec ts = {(time_t)s, 0}, left = {0, 0};
  if (nanosleep(&ts, &left) == 0) return 0;
  return (unsigned int)left.tv_sec + (left.tv_nsec > 0);
}
