/* Test program that reaches the driver only through dlopen + dlsym (not linked with -lcuda), as
 * Python bindings and plugin loaders do, and checks that its own dlsym(RTLD_NEXT, ...) keeps
 * working under libvgpu. Prints key=value lines for vgpu_e2e_test.cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* RTLD_NEXT from the application: repeated lookups succeed and name the next definition (libc).
   */
  void* open1 = dlsym(RTLD_NEXT, "open");
  void* open2 = dlsym(RTLD_NEXT, "open");
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  printf("rtld_next_ok=%d\n", open1 != NULL && open1 == open2 && open1 == dlsym(libc, "open"));
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("error=dlopen\n");
    return 10;
  }
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
  CUresult (*retain)(CUcontext*, CUdevice) =
      (CUresult(*)(CUcontext*, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
  CUresult (*setcur)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
  CUresult (*alloc)(CUdeviceptr*, size_t) =
      (CUresult(*)(CUdeviceptr*, size_t))dlsym(h, "cuMemAlloc_v2");
  CUresult (*info)(size_t*, size_t*) = (CUresult(*)(size_t*, size_t*))dlsym(h, "cuMemGetInfo_v2");
  Dl_info di;
  printf("alloc_from_libvgpu=%d\n", alloc && dladdr((void*)alloc, &di) && di.dli_fname &&
                                        strstr(di.dli_fname, "libvgpu") != NULL);
  /* A name we do not hook comes from the driver itself. */
  void* stream = dlsym(h, "cuStreamCreate");
  printf("unhooked_from_driver=%d\n",
         stream && dladdr(stream, &di) && di.dli_fname && strstr(di.dli_fname, "libvgpu") == NULL);
  CUcontext c;
  if (!init || init(0) != 0 || retain(&c, 0) != 0 || setcur(c) != 0) {
    printf("error=init\n");
    return 11;
  }
  size_t f = 0, t = 0;
  info(&f, &t);
  unsigned long long total = 0;
  CUdeviceptr p;
  int rc = 0;
  while ((rc = alloc(&p, 16u << 20)) == 0) total += 16u << 20;
  printf("total=%zu allocated=%llu last_rc=%d\n", t, total, rc);
  return 0;
}
