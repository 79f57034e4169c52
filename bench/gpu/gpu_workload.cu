// Real-GPU workload for bench/gpu/run.sh (compiled with nvcc when PyTorch is absent).
//   gpu_workload mem         allocate 64 MiB blocks until failure; print allocated bytes and cudaMemGetInfo
//   gpu_workload sm <sec>    launch a fixed-work kernel (4 waves) for <sec> seconds; print kernels per second
//   gpu_workload duty <sec> <busy_ms> <idle_ms>   a varying load for the metering check (issue 33): bursts of
//            about busy_ms of one-wave kernels of mixed lengths (~0.05, 0.5 and 5 ms), each burst queued at once
//            and timed with CUDA events (the ground truth: the GPU is busy from the first to the last kernel of
//            a burst), then idle_ms idle; prints gpu_busy_ms (the events' sum) and the run's wall seconds
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
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
  if (argc >= 5 && strcmp(argv[1], "duty") == 0) {
    double secs = atof(argv[2]), busy_ms = atof(argv[3]), idle_ms = atof(argv[4]);
    int dev = 0, sms = 0, clock_khz = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev);
    int* sink = nullptr;
    cudaMalloc(&sink, sizeof(int) * sms);
    const double lengths_ms[] = {0.05, 0.5, 5.0};
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    double gpu_ms = 0;
    unsigned seed = 1;
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    while (elapsed() < secs) {
      cudaEventRecord(a);
      for (double queued = 0; queued < busy_ms;) {
        seed = seed * 1103515245u + 12345u;
        double ms = lengths_ms[(seed >> 16) % 3];
        spin<<<sms, 128>>>((unsigned long long)(clock_khz * ms), sink);
        queued += ms;
      }
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      gpu_ms += ms;
      std::this_thread::sleep_for(std::chrono::microseconds((long)(idle_ms * 1000)));
    }
    printf("gpu_busy_ms=%.1f wall_s=%.3f\n", gpu_ms, elapsed());
    return 0;
  }
  fprintf(stderr, "usage: gpu_workload mem | sm <seconds> | duty <seconds> <busy_ms> <idle_ms>\n");
  return 2;
}
