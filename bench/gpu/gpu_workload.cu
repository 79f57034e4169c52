// Real-GPU workload for bench/gpu/run.sh (compiled with nvcc when PyTorch is absent).
//   gpu_workload mem         allocate 64 MiB blocks until failure; print allocated bytes and cudaMemGetInfo
//   gpu_workload sm <sec>    launch a fixed-work kernel (4 waves) for <sec> seconds; print kernels per second
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void spin(unsigned long long cycles, int* sink) {
  unsigned long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && cycles == 0) sink[blockIdx.x] = 1;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "mem") == 0) {
    std::vector<void*> blocks;
    size_t total = 0;
    void* p = nullptr;
    while (cudaMalloc(&p, 64ull << 20) == cudaSuccess) {
      blocks.push_back(p);
      total += 64ull << 20;
    }
    cudaGetLastError();
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);
    printf("allocated=%zu free=%zu total=%zu\n", total, f, t);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "sm") == 0) {
    double secs = atof(argv[2]);
    int dev = 0, sms = 0, clock_khz = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
    int* sink = nullptr;
    cudaMalloc(&sink, sizeof(int) * 4 * sms);
    unsigned long long cycles = (unsigned long long)clock_khz * 1000ull / 2000ull;  // ~0.5 ms per wave
    auto t0 = std::chrono::steady_clock::now();
    long n = 0;
    for (;;) {
      for (int i = 0; i < 10; i++) spin<<<4 * sms, 128>>>(cycles, sink);
      cudaDeviceSynchronize();
      n += 10;
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (el >= secs) {
        printf("kernels_per_s=%.3f\n", n / el);
        break;
      }
    }
    return 0;
  }
  fprintf(stderr, "usage: gpu_workload mem | sm <seconds>\n");
  return 2;
}
