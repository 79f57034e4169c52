/* Checks libfakegpu_time.so from inside a process that preloads it: fake_time_probe <N> (the scale
 * the process runs at). Readings through libc (answered by the preload) are compared with the
 * kernel's clocks read by raw system calls, which it does not see; every check brackets a scaled
 * reading between two raw ones, so none depends on how fast the host runs. The sleeps last
 * N / 2 seconds of scaled time, half a second of wall time: unscaled they would take N / 2 s (the
 * ctest's timeout catches that at N = 20). Prints "probe ok scale=N", else what failed (exit 1). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000ull

static int failures;

static uint64_t raw_ns(clockid_t c) {
  struct timespec ts;
  syscall(SYS_clock_gettime, c, &ts);
  return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}
static uint64_t libc_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}
static struct timespec ts_of(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / NS), (long)(ns % NS)};
  return ts;
}

static void expect(int ok, const char* what, uint64_t a, uint64_t b) {
  if (ok) return;
  printf("FAILED %s (%llu, %llu)\n", what, (unsigned long long)a, (unsigned long long)b);
  failures++;
}

/* The scaled realtime at this instant lies between these two (raw realtime + (n - 1) * raw
 * monotonic, read before and after). */
static uint64_t scaled_rt_bound(uint64_t n) {
  uint64_t m = raw_ns(CLOCK_MONOTONIC);
  return raw_ns(CLOCK_REALTIME) + (n - 1) * m;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  uint64_t n = strtoull(argv[1], NULL, 10);
  if (n < 1) return 2;
  uint64_t (*scale)(void) = (uint64_t(*)(void))dlsym(RTLD_DEFAULT, "fakegpu_time_scale");
  expect(scale && scale() == n, "fakegpu_time_scale() is the scale", scale ? scale() : 0, n);

  uint64_t r1 = raw_ns(CLOCK_MONOTONIC), s = libc_ns(CLOCK_MONOTONIC), r2 = raw_ns(CLOCK_MONOTONIC);
  expect(s >= r1 * n && s <= r2 * n, "CLOCK_MONOTONIC is n x the kernel's", s, r1 * n);
  uint64_t lo = scaled_rt_bound(n);
  uint64_t rt = libc_ns(CLOCK_REALTIME);
  uint64_t hi = scaled_rt_bound(n) + n * 1000; /* + the rounding of one raw monotonic read */
  expect(rt + n * 1000 >= lo && rt <= hi, "CLOCK_REALTIME is realtime + (n - 1) x monotonic", rt,
         lo);
  struct timeval tv;
  uint64_t before = libc_ns(CLOCK_REALTIME);
  gettimeofday(&tv, NULL);
  time_t t = time(NULL);
  uint64_t after = libc_ns(CLOCK_REALTIME);
  uint64_t tv_ns = (uint64_t)tv.tv_sec * NS + (uint64_t)tv.tv_usec * 1000;
  expect(tv_ns + 1000 >= before && tv_ns <= after, "gettimeofday follows CLOCK_REALTIME", tv_ns,
         before);
  expect((uint64_t)t >= before / NS && (uint64_t)t <= after / NS, "time follows CLOCK_REALTIME",
         (uint64_t)t, before / NS);
  r1 = raw_ns(CLOCK_BOOTTIME);
  s = libc_ns(CLOCK_BOOTTIME);
  r2 = raw_ns(CLOCK_BOOTTIME);
  expect(s >= r1 && s <= r2, "CLOCK_BOOTTIME is not scaled", s, r1);

  /* Sleeps: at least what was asked on the scaled clock, at least 1/n of it on the kernel's. */
  const uint64_t d = n * NS / 8; /* four sleeps of n/8 s: n/2 s scaled, 0.5 s of wall time */
  struct timespec req = ts_of(d);
  uint64_t s0 = libc_ns(CLOCK_MONOTONIC), k0 = raw_ns(CLOCK_MONOTONIC);
  nanosleep(&req, NULL);
  uint64_t s1 = libc_ns(CLOCK_MONOTONIC), k1 = raw_ns(CLOCK_MONOTONIC);
  expect(s1 - s0 >= d, "nanosleep sleeps the scaled duration", s1 - s0, d);
  expect(k1 - k0 >= d / n, "nanosleep sleeps 1/n of it in wall time", k1 - k0, d / n);
  usleep((useconds_t)(d / 1000));
  uint64_t s2 = libc_ns(CLOCK_MONOTONIC);
  expect(s2 - s1 >= d - 1000, "usleep sleeps the scaled duration", s2 - s1, d);
  struct timespec until = ts_of(s2 + d);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) != 0) {
  }
  uint64_t s3 = libc_ns(CLOCK_MONOTONIC);
  expect(s3 >= s2 + d, "clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) wakes at the scaled time",
         s3, s2 + d);
  uint64_t rt0 = libc_ns(CLOCK_REALTIME);
  until = ts_of(rt0 + d);
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL) != 0) {
  }
  uint64_t rt1 = libc_ns(CLOCK_REALTIME);
  expect(rt1 >= rt0 + d, "clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME) wakes at the scaled time",
         rt1, rt0 + d);
  if (failures) return 1;
  printf("probe ok scale=%llu\n", (unsigned long long)n);
  return 0;
}
