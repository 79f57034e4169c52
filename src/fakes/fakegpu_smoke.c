/* Example client of the fake libcuda.so.1, linked with -lcuda like a real CUDA driver API program.
 * Prints the devices, allocates memory, runs a few kernels and reports the device busy time.
 * Usage: FAKEGPU_STATE=/tmp/x FAKEGPU_DEVICES='Tesla T4:15360:40' fakegpu_smoke [kernels]
 * Exit status 0 when every call succeeded. Prototypes are declared here (CUDA 13 ABI) so the
 * example builds without the CUDA toolkit. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fakes/fake_gpu.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;

CUresult cuInit(unsigned int flags);
CUresult cuDriverGetVersion(int* version);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGet(CUdevice* dev, int ordinal);
CUresult cuDeviceGetName(char* name, int len, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev);
CUresult cuDeviceGetAttribute(int* value, int attrib, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes);
CUresult cuModuleLoadData(CUmodule* mod, const void* image);
CUresult cuModuleGetFunction(CUfunction* fn, CUmodule mod, const char* name);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared_mem, CUstream stream,
                        void** params, void** extra);
CUresult cuGetErrorName(CUresult error, const char** name);

static int check(CUresult rc, const char* what) {
  if (rc != 0) {
    const char* name = "?";
    cuGetErrorName(rc, &name);
    fprintf(stderr, "fakegpu_smoke: %s failed: %d %s\n", what, rc, name);
    exit(1);
  }
  return 0;
}

int main(int argc, char** argv) {
  int kernels = argc > 1 ? atoi(argv[1]) : 10;
  int version = 0, count = 0;
  check(cuInit(0), "cuInit");
  check(cuDriverGetVersion(&version), "cuDriverGetVersion");
  check(cuDeviceGetCount(&count), "cuDeviceGetCount");
  printf("driver %d, %d device(s)\n", version, count);
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    char name[96];
    size_t total = 0;
    int sms = 0;
    check(cuDeviceGet(&dev, i), "cuDeviceGet");
    check(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    check(cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem");
    check(cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, dev), "cuDeviceGetAttribute");
    printf("  %d: %s, %zu MiB, %d SMs\n", i, name, total >> 20, sms);
  }
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUdeviceptr p;
  size_t free_bytes = 0, total_bytes = 0;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  check(cuMemAlloc_v2(&p, 256u << 20), "cuMemAlloc");
  check(cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo");
  printf("after 256 MiB alloc: free %zu MiB of %zu MiB\n", free_bytes >> 20, total_bytes >> 20);
  check(cuModuleLoadData(&mod, "fake"), "cuModuleLoadData");
  check(cuModuleGetFunction(&fn, mod, "vector_add"), "cuModuleGetFunction");
  for (int k = 0; k < kernels; ++k) {
    check(cuLaunchKernel(fn, 216, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
  }
  check(cuCtxSynchronize(), "cuCtxSynchronize");
  check(cuMemFree_v2(p), "cuMemFree");
  check(cuDevicePrimaryCtxRelease_v2(dev), "cuDevicePrimaryCtxRelease");
  printf("%d kernels, device busy %llu us for pid %d\n", kernels,
         fakegpu_busy_ns(0, getpid()) / 1000, (int)getpid());
  return 0;
}
