/* The "container" of the end-to-end test: a plain CUDA driver API client (linked with -lcuda, the
 * fake libcuda.so.1 in CI) that the test starts with exactly the environment the device plugin's
 * Allocate returned, libvgpu.so preloaded as the container's /etc/ld.so.preload would.
 *
 * It sees only what its environment gives it: device 0 (the runtime exposes one GPU), the limit
 * that libvgpu reports, and what allocations return. It prints key=value lines: total=<bytes>
 * cuMemGetInfo total (libvgpu: the pod's limit) over_rc=<rc>            one allocation of limit + 1
 * MiB, first thing (must be OOM) chunk_rc_<i>=<rc>       allocations of <chunk MiB> each until the
 * next one would pass the limit fill_rc=<rc>            one allocation of exactly what cuMemGetInfo
 * reports free one_more_rc=<rc>        1 MiB more (must be OOM) held=<bytes>            what this
 * process holds now ready                   then it waits until stdin closes, frees and exits 0
 * Usage: container_prog <chunk MiB> */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(call)                                \
  do {                                             \
    CUresult rc_ = (call);                         \
    if (rc_ != CUDA_SUCCESS) {                     \
      printf("error=%d at=%s\n", (int)rc_, #call); \
      fflush(stdout);                              \
      exit(10);                                    \
    }                                              \
  } while (0)

int main(int argc, char** argv) {
  const size_t mib = (size_t)1 << 20;
  size_t chunk = (argc > 1 ? (size_t)atol(argv[1]) : 256) * mib;
  if (chunk == 0) chunk = 256 * mib;
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  size_t free_b = 0, total = 0;
  CHECK(cuMemGetInfo(&free_b, &total));
  printf("total=%zu\n", total);

  CUdeviceptr over = 0;
  printf("over_rc=%d\n", (int)cuMemAlloc(&over, total + mib));

  CUdeviceptr ptrs[4096];
  int n = 0;
  size_t held = 0;
  for (; n < 4096; ++n) {
    CHECK(cuMemGetInfo(&free_b, &total));
    if (free_b < chunk) break;
    CUresult rc = cuMemAlloc(&ptrs[n], chunk);
    printf("chunk_rc_%d=%d\n", n, (int)rc);
    if (rc != CUDA_SUCCESS) break;
    held += chunk;
  }
  CHECK(cuMemGetInfo(&free_b, &total));
  CUresult fill = CUDA_SUCCESS;
  if (free_b > 0) {
    fill = cuMemAlloc(&ptrs[n], free_b);
    if (fill == CUDA_SUCCESS) {
      held += free_b;
      ++n;
    }
  }
  printf("fill_rc=%d\n", (int)fill);
  CUdeviceptr more = 0;
  printf("one_more_rc=%d\n", (int)cuMemAlloc(&more, mib));
  printf("held=%zu\n", held);
  printf("ready\n");
  fflush(stdout);

  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  for (int i = 0; i < n; ++i) CHECK(cuMemFree(ptrs[i]));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  printf("done\n");
  return 0;
}
