/* One replica of the usage chain test's serving workload (tests/usage_chain/README.md): a plain
 * CUDA driver API client (linked with -lcuda: the fake libcuda.so.1) run under libvgpu.so, so that
 * what it holds and how busy it is reach `hami monitor` through its region, as a container's would.
 *
 *   usage_workload <resident MiB> <busy ms> <idle ms>
 *
 * Holds <resident MiB> on device 0 (besides the context), then repeats: kernels for <busy ms>,
 * drain, idle for <idle ms> (a known duty). Commands on stdin, one a line, each answered on stdout:
 *   load <MiB>   allocate <MiB> more (a model being loaded): "loaded <MiB>"
 *   unload       free it again: "unloaded"
 * Prints "ready" once the resident memory is held; frees everything and exits 0 when stdin closes.
 */
#include <cuda.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A driver call that fails ends the replica with exit code 10, naming the call. */
static void need(CUresult rc, const char* call) {
  if (rc == CUDA_SUCCESS) return;
  printf("error=%d at=%s\n", (int)rc, call);
  fflush(stdout);
  exit(10);
}
#define CHECK(call) need((call), #call)

static unsigned long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: usage_workload <resident MiB> <busy ms> <idle ms>\n");
    return 2;
  }
  const size_t mib = (size_t)1 << 20;
  const size_t resident = (size_t)atol(argv[1]) * mib;
  const int busy_ms = atoi(argv[2]), idle_ms = atoi(argv[3]);
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  int sms = 1;
  CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CUmodule mod;
  CUfunction fn;
  CUstream s;
  CHECK(cuModuleLoadData(&mod, "fake-image"));
  CHECK(cuModuleGetFunction(&fn, mod, "spin"));
  CHECK(cuStreamCreate(&s, 0));
  CUdeviceptr held = 0, loaded = 0;
  if (resident > 0) CHECK(cuMemAlloc(&held, resident));
  printf("ready\n");
  fflush(stdout);

  char line[128];
  size_t have = 0;
  for (;;) {
    const unsigned long long end = now_ms() + (unsigned long long)busy_ms;
    while (busy_ms > 0 && now_ms() < end) {
      CHECK(cuLaunchKernel(fn, (unsigned)sms, 1, 1, 1, 1, 1, 0, s, NULL, NULL));  // one wave
    }
    CHECK(cuStreamSynchronize(s));
    /* Idle: wait for a command at most idle_ms. */
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, idle_ms) <= 0) continue;
    ssize_t n = read(0, line + have, sizeof line - 1 - have);
    if (n <= 0) break;  // stdin closed: the pod is deleted
    have += (size_t)n;
    line[have] = '\0';
    char* nl;
    while ((nl = strchr(line, '\n')) != NULL) {
      *nl = '\0';
      long load = 0;
      if (sscanf(line, "load %ld", &load) == 1 && load > 0 && loaded == 0) {
        CHECK(cuMemAlloc(&loaded, (size_t)load * mib));
        printf("loaded %ld\n", load);
      } else if (strcmp(line, "unload") == 0 && loaded != 0) {
        CHECK(cuMemFree(loaded));
        loaded = 0;
        printf("unloaded\n");
      } else {
        printf("error=unknown command '%s'\n", line);
      }
      fflush(stdout);
      have -= (size_t)(nl + 1 - line);
      memmove(line, nl + 1, have + 1);
    }
    if (have == sizeof line - 1) have = 0;  // a line too long: dropped
  }
  if (loaded != 0) CHECK(cuMemFree(loaded));
  if (held != 0) CHECK(cuMemFree(held));
  CHECK(cuStreamDestroy(s));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
