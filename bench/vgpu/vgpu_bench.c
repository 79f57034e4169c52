/* Per-call cost of libvgpu on the fake driver, for callgrind (instruction counts) and strace
 * (system calls). Each measured loop is its own noinline function (bench_*), so that valgrind
 * --tool=callgrind --toggle-collect=bench_<name> vgpu_bench <name> <n> counts exactly that loop;
 * the script run_callgrind.sh runs it with and without LD_PRELOAD=libvgpu.so and divides by n.
 * Around each loop the program makes a marker system call (write(-1, "vgpu-bench begin|end")), so
 * that `strace -f` can count the system calls made inside the loop by this thread. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                        \
  do {                                                     \
    CUresult rc_ = (call);                                 \
    if (rc_ != CUDA_SUCCESS) {                             \
      fprintf(stderr, "%s failed: %d\n", #call, (int)rc_); \
      exit(1);                                             \
    }                                                      \
  } while (0)

static void marker(const char* what) {
  ssize_t r = write(-1, what, strlen(what));
  (void)r;
}

static CUfunction g_fn;
static CUstream g_stream;
static CUdeviceptr g_live[4096];

static void setup(void) {
  CUcontext c;
  CUmodule m;
  CHECK(cuDevicePrimaryCtxRetain(&c, 0));
  CHECK(cuCtxSetCurrent(c));
  CHECK(cuModuleLoadData(&m, "fake-image"));
  CHECK(cuModuleGetFunction(&g_fn, m, "k"));
  CHECK(cuStreamCreate(&g_stream, 0));
}

__attribute__((noinline)) void bench_startup(void) {
  CUdeviceptr p;
  CHECK(cuInit(0));
  setup();
  CHECK(cuMemAlloc(&p, 1 << 20));
  CHECK(cuMemFree(p));
}

__attribute__((noinline)) void bench_launch(int n) {
  for (int i = 0; i < n; i++)
    CHECK(cuLaunchKernel(g_fn, 1, 1, 1, 32, 1, 1, 0, g_stream, NULL, NULL));
}

__attribute__((noinline)) void bench_alloc_free(int n) {
  for (int i = 0; i < n; i++) {
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 4096));
    CHECK(cuMemFree(p));
  }
}

__attribute__((noinline)) void bench_meminfo(int n) {
  for (int i = 0; i < n; i++) {
    size_t f, t;
    CHECK(cuMemGetInfo(&f, &t));
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: vgpu_bench startup|launch|alloc_free|meminfo <n> [live allocations]\n");
    return 2;
  }
  const char* what = argv[1];
  int n = atoi(argv[2]);
  int live = argc > 3 ? atoi(argv[3]) : 0;
  if (live > 4096) live = 4096;
  if (strcmp(what, "startup") == 0) {
    marker("vgpu-bench begin");
    bench_startup();
    marker("vgpu-bench end");
    return 0;
  }
  CHECK(cuInit(0));
  setup();
  for (int i = 0; i < live; i++) CHECK(cuMemAlloc(&g_live[i], 4096));
  /* Warm-up: first-call lazy work is not part of the per-call cost. */
  bench_launch(1);
  bench_alloc_free(1);
  bench_meminfo(1);
  marker("vgpu-bench begin");
  if (strcmp(what, "launch") == 0) {
    bench_launch(n);
  } else if (strcmp(what, "alloc_free") == 0) {
    bench_alloc_free(n);
  } else if (strcmp(what, "meminfo") == 0) {
    bench_meminfo(n);
  } else {
    return 2;
  }
  marker("vgpu-bench end");
  CHECK(cuStreamSynchronize(g_stream));
  return 0;
}
