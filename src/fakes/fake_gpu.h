/* Contract of the fake GPU stack: fake libcuda.so.1 + fake libnvidia-ml.so.1 (src/fakes).
 *
 * Both libraries are configured only through the environment variables below, read when the
 * library is first used in a process (cuInit / nvmlInit or the first call). All processes that use
 * the same FAKEGPU_STATE file share one set of simulated devices (memory per pid, kernel clock,
 * process lists, utilisation). See src/fakes/README.md for the full behaviour.
 *
 * Plain C header (usable from C and C++, no dependencies). Names here are a stable contract:
 * libvgpu tests/benchmarks, the node agent and the exporter tests depend on them.
 */
#ifndef HAMI_FAKES_FAKE_GPU_H_
#define HAMI_FAKES_FAKE_GPU_H_

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Environment variables ------------------------------------------------------------------ */

/* ';'-separated devices, each "name:memMiB:SMs[:uuid]".
 * Default: one "NVIDIA A100-SXM4-80GB:81920:108". UUIDs default to "GPU-fa4e0000-0000-4000-8000-<12
 * hex of index>". */
#define FAKEGPU_ENV_DEVICES "FAKEGPU_DEVICES"
#define FAKEGPU_DEFAULT_DEVICES "NVIDIA A100-SXM4-80GB:81920:108"

/* Path of the shared state file (mmap'ed). Default: /dev/shm/fakegpu-<uid>-<hash of
 * FAKEGPU_DEVICES>. */
#define FAKEGPU_ENV_STATE "FAKEGPU_STATE"

/* Device memory charged per context (primary or created), MiB. Default 300. */
#define FAKEGPU_ENV_CTX_OVERHEAD_MIB "FAKEGPU_CTX_OVERHEAD_MIB"
#define FAKEGPU_DEFAULT_CTX_OVERHEAD_MIB 300

/* Duration of one wave of a kernel, microseconds; a kernel runs ceil(gridX*gridY*gridZ / SMs)
 * waves. Default 100. */
#define FAKEGPU_ENV_WAVE_US "FAKEGPU_WAVE_US"
#define FAKEGPU_DEFAULT_WAVE_US 100

/* Launches block while the device backlog (busy_until - now) exceeds this, microseconds. Default
 * 20000. */
#define FAKEGPU_ENV_MAX_BACKLOG_US "FAKEGPU_MAX_BACKLOG_US"
#define FAKEGPU_DEFAULT_MAX_BACKLOG_US 20000

/* NVML's per-process utilisation sampler, milliseconds. 0 (default): each
 * nvmlDeviceGetProcessUtilization call averages over the interval asked about. P > 0: as a real
 * driver does (an H200 with driver 580 samples every 200 ms), a sample closes every P ms of
 * CLOCK_REALTIME, stamped with its end, and a call returns the newest closed sample of each pid
 * newer than lastSeenTimeStamp (none until the next period closes). */
#define FAKEGPU_ENV_NVML_SAMPLE_MS "FAKEGPU_NVML_SAMPLE_MS"

/* NVLink topology: comma list "a-b:links", e.g. "0-1:12,2-3:12" (NVML indices). Default: none. */
#define FAKEGPU_ENV_NVLINK "FAKEGPU_NVLINK"

/* MIG: comma list of NVML indices whose MIG mode is enabled when the state is created, e.g. "0,1".
 * Only A100 and H100 (80 GB) devices can run MIG (their real GPU instance profiles and
 * placements); the others report NVML_ERROR_NOT_SUPPORTED for MIG calls. Default: none. */
#define FAKEGPU_ENV_MIG "FAKEGPU_MIG"

/* Scheduled XID events: comma list "dev:xid:after_ms"; each is injected into the shared state by
 * the process that set it, after_ms after its nvmlInit (checked in nvmlEventSetWait and other NVML
 * calls). */
#define FAKEGPU_ENV_XID "FAKEGPU_XID"

/* Fault injection: comma list "symbol=code[@n]": the n-th call (1-based, per process) of the
 * exported symbol returns code (a CUresult or nvmlReturn_t); without @n every call fails. */
#define FAKEGPU_ENV_FAULTS "FAKEGPU_FAULTS"

/* "1": cuInit returns CUDA_ERROR_NO_DEVICE (100) and nvmlInit* return NVML_ERROR_DRIVER_NOT_LOADED
 * (9). */
#define FAKEGPU_ENV_INIT_FAIL "FAKEGPU_INIT_FAIL"

/* CUDA driver version reported by cuDriverGetVersion / nvmlSystemGetCudaDriverVersion. Default
 * 13000. */
#define FAKEGPU_ENV_CUDA_VERSION "FAKEGPU_CUDA_VERSION"
#define FAKEGPU_DEFAULT_CUDA_VERSION 13000

/* Driver version string reported by nvmlSystemGetDriverVersion. Default "580.65.06". */
#define FAKEGPU_ENV_DRIVER_VERSION "FAKEGPU_DRIVER_VERSION"
#define FAKEGPU_DEFAULT_DRIVER_VERSION "580.65.06"

/* Honoured by the fake libcuda only (NVML always shows all devices), like the real driver. */
#define FAKEGPU_ENV_CUDA_VISIBLE_DEVICES "CUDA_VISIBLE_DEVICES"

/* ---- Extra exported functions (from both libnvidia-ml.so.1 and libcuda.so.1) ---------------- */

/* Cumulative device busy nanoseconds of completed kernel work on NVML device `dev` for `pid`
 * (all pids when pid == 0). Returns 0 for an unknown device. */
unsigned long long fakegpu_busy_ns(int dev, int pid);

/* Injects an XID critical-error event on NVML device `dev` into the shared state: every NVML event
 * set (any process) registered for nvmlEventTypeXidCriticalError on that device receives it.
 * Returns 0 on success, -1 on a bad device or unusable state. */
int fakegpu_inject_xid(int dev, unsigned long long xid);

/* Device memory (bytes) currently charged to `pid` on NVML device `dev` (all pids when pid == 0),
 * including context overhead. */
unsigned long long fakegpu_mem_used(int dev, int pid);

/* Test hooks: drop this process's library state (contexts, allocations, streams, NVML init count),
 * release what it holds in the shared state and re-read the environment on next use.
 * fakegpu_cuda_reset is exported by libcuda.so.1 only, fakegpu_nvml_reset by libnvidia-ml.so.1
 * only. */
void fakegpu_cuda_reset(void);
void fakegpu_nvml_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* HAMI_FAKES_FAKE_GPU_H_ */
