/* nvml_probe: prints the per-process utilisation samples a real NVML hands out, so that libvgpu's
 * reading of them (and the fake libnvidia-ml's model of them) can be checked against the driver.
 *
 *   nvml_probe stream <seconds> [dev]   poll every 2 ms, lastSeenTimeStamp = newest sample seen;
 *                                        one line per new sample: ms since start, pid, smUtil, gap
 *                                        to that pid's previous sample (the sampling period)
 *   nvml_probe window <seconds> [dev]   as libvgpu's controller: every 100 ms, lastSeenTimeStamp =
 *                                        the window's start; one line per window and sample
 *   nvml_probe device [dev]             nvmlDeviceGetSamples(GPU_UTILIZATION): count and gaps
 *
 * Build: cc -O2 -Isrc -o nvml_probe bench/gpu/nvml_probe.c -ldl (the project's NVML ABI, no
 * nvml.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/nvml_abi.h"

static nvmlReturn_t (*p_init)(void);
static nvmlReturn_t (*p_handle)(unsigned int, nvmlDevice_t*);
static nvmlReturn_t (*p_proc)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                              unsigned long long);
static nvmlReturn_t (*p_samples)(nvmlDevice_t, int, unsigned long long, int*, unsigned int*,
                                 nvmlSample_t*);

static unsigned long long real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

#define MAXS 256
#define MAXP 64

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: nvml_probe stream|window <seconds> [dev] | device [dev]\n");
    return 2;
  }
  void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  p_init = (nvmlReturn_t(*)(void))dlsym(h, "nvmlInit_v2");
  p_handle =
      (nvmlReturn_t(*)(unsigned int, nvmlDevice_t*))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  p_proc = (nvmlReturn_t(*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                            unsigned long long))dlsym(h, "nvmlDeviceGetProcessUtilization");
  p_samples = (nvmlReturn_t(*)(nvmlDevice_t, int, unsigned long long, int*, unsigned int*,
                               nvmlSample_t*))dlsym(h, "nvmlDeviceGetSamples");
  if (!p_init || !p_handle || !p_proc || p_init() != 0) {
    fprintf(stderr, "NVML not usable\n");
    return 1;
  }
  int is_device = strcmp(argv[1], "device") == 0;
  unsigned dev_index =
      (unsigned)atoi(is_device ? (argc > 2 ? argv[2] : "0") : (argc > 3 ? argv[3] : "0"));
  nvmlDevice_t dev;
  if (p_handle(dev_index, &dev) != 0) {
    fprintf(stderr, "no device %u\n", dev_index);
    return 1;
  }
  if (is_device) {
    if (!p_samples) return 1;
    static nvmlSample_t s[4096];
    unsigned n = 4096;
    int type = 0;
    nvmlReturn_t r = p_samples(dev, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, s);
    printf("device samples: rc %d, %u samples, value type %d\n", r, n, type);
    for (unsigned i = 0; i < n && r == 0; i++)
      printf("dev ts %llu value %u gap_us %lld\n", s[i].timeStamp, s[i].sampleValue.uiVal,
             i ? (long long)(s[i].timeStamp - s[i - 1].timeStamp) : 0LL);
    return 0;
  }
  double secs = argc > 2 ? atof(argv[2]) : 10;
  int window = strcmp(argv[1], "window") == 0;
  unsigned long long t0 = real_us(), last_seen = t0, prev = t0;
  unsigned pids[MAXP] = {0};
  unsigned long long pid_ts[MAXP] = {0};
  nvmlProcessUtilizationSample_t s[MAXS];
  while (real_us() - t0 < (unsigned long long)(secs * 1e6)) {
    sleep_us(window ? 100000 : 2000);
    unsigned long long now = real_us();
    unsigned n = MAXS;
    nvmlReturn_t r = p_proc(dev, s, &n, window ? prev : last_seen);
    if (window)
      printf("window %.1f ms len %.1f ms rc %d n %u\n", (now - t0) / 1e3, (now - prev) / 1e3, r,
             r ? 0 : n);
    for (unsigned i = 0; r == 0 && i < n && i < MAXS; i++) {
      unsigned k = 0;
      while (k < MAXP && pids[k] && pids[k] != s[i].pid) k++;
      if (k == MAXP) continue;
      if (!pids[k]) pids[k] = s[i].pid;
      long long gap = pid_ts[k] ? (long long)(s[i].timeStamp - pid_ts[k]) : -1;
      if (s[i].timeStamp > pid_ts[k]) pid_ts[k] = s[i].timeStamp;
      if (s[i].timeStamp > last_seen) last_seen = s[i].timeStamp;
      printf("%s t %.1f ms pid %u sm %u mem %u ts_rel %.1f ms gap %.1f ms age %.1f ms\n",
             window ? "  win" : "sample", (now - t0) / 1e3, s[i].pid, s[i].smUtil, s[i].memUtil,
             ((long long)s[i].timeStamp - (long long)t0) / 1e3, gap / 1e3,
             ((long long)now - (long long)s[i].timeStamp) / 1e3);
    }
    prev = now;
    fflush(stdout);
  }
  return 0;
}
