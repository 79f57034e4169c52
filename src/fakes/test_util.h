// Test helpers for the fake GPU libraries: a private environment per test and forked child
// processes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "fakes/cuda_abi.h"
#include "fakes/fake_gpu.h"
#include "gpu/nvml_abi.h"

// Prototypes of the entry points the tests call (the ABI headers declare types only).
extern "C" {
CUresult cuInit(unsigned);
CUresult cuDriverGetVersion(int*);
CUresult cuDeviceGetCount(int*);
CUresult cuDeviceGet(CUdevice*, int);
CUresult cuDeviceGetName(char*, int, CUdevice);
CUresult cuDeviceGetUuid_v2(CUuuid*, CUdevice);
CUresult cuDeviceTotalMem_v2(size_t*, CUdevice);
CUresult cuDeviceGetAttribute(int*, int, CUdevice);
CUresult cuDeviceGetPCIBusId(char*, int, CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxCreate_v4(CUcontext*, CUctxCreateParams*, unsigned, CUdevice);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext*);
CUresult cuCtxGetDevice(CUdevice*);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr*, size_t*, size_t, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr*, size_t, unsigned);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAddressReserve(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuArrayCreate_v2(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuModuleLoadData(CUmodule*, const void*);
CUresult cuModuleGetFunction(CUfunction*, CUmodule, const char*);
CUresult cuStreamCreate(CUstream*, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode);
CUresult cuStreamEndCapture(CUstream, CUgraph*);
CUresult cuEventCreate(CUevent*, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventQuery(CUevent);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuEventElapsedTime_v2(float*, CUevent, CUevent);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuGraphCreate(CUgraph*, unsigned);
CUresult cuGraphAddKernelNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                 const CUDA_KERNEL_NODE_PARAMS_v2*);
CUresult cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
CUresult cuGetErrorName(CUresult, const char**);
CUresult cuGetExportTable(const void**, const CUuuid*);

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned*);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char*, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char*, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char*, unsigned);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t, char*, unsigned);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t*);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t*);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t, nvmlPciInfo_t*);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t, unsigned*, nvmlProcessInfo_v1_t*);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t*);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                             unsigned*, unsigned long long);
nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t, int, unsigned long long, int*, unsigned*,
                                  nvmlSample_t*);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t, nvmlDevice_t,
                                                 nvmlGpuTopologyLevel_t*);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t, unsigned, nvmlEnableState_t*);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t, unsigned, nvmlPciInfo_t*);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t, unsigned*, unsigned*);
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t, unsigned, nvmlReturn_t*);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t, unsigned, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t, nvmlDevice_t*);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t, unsigned*);
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t, nvmlDeviceAttributes_t*);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t, unsigned,
                                                 nvmlGpuInstanceProfileInfo_t*);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t, unsigned,
                                                  nvmlGpuInstanceProfileInfo_v2_t*);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t, unsigned,
                                                           nvmlGpuInstancePlacement_t*, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t, unsigned, unsigned*);
nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t, unsigned,
                                                      const nvmlGpuInstancePlacement_t*,
                                                      nvmlGpuInstance_t*);
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t, unsigned, unsigned,
                                                          nvmlComputeInstanceProfileInfo_t*);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t, unsigned, unsigned,
                                                           nvmlComputeInstanceProfileInfo_v2_t*);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t, unsigned,
                                                                unsigned*);
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t, unsigned,
                                                  nvmlComputeInstance_t*);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*,
                                                unsigned*);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t, unsigned,
                                                   nvmlComputeInstance_t*);
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t*);
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned*);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int*);
nvmlReturn_t nvmlSystemGetDriverVersion(char*, unsigned);
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t*);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t*, unsigned);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t);
}

namespace fakegpu::testing {

// A private state file and environment for one test; both fake libraries are reset on entry and
// exit. `vars` are FAKEGPU_* (or CUDA_VISIBLE_DEVICES) settings; every other such variable is
// unset.
class FakeEnv {
 public:
  explicit FakeEnv(std::initializer_list<std::pair<std::string, std::string>> vars = {});
  ~FakeEnv();
  FakeEnv(const FakeEnv&) = delete;
  FakeEnv& operator=(const FakeEnv&) = delete;
  const std::string& state_path() const { return state_; }

 private:
  std::string dir_, state_;
};

// Resets both fake libraries so the next call re-reads the environment.
void ResetLibs();

// A forked child process: runs `body` (after resetting the libraries), sends its result to the
// parent, then stays alive until Release() (or the parent goes away), so the parent can observe it.
class Child {
 public:
  explicit Child(const std::function<long long()>& body);
  ~Child();
  long long Result();  // blocks until the child has run body
  void Release();      // lets the child exit
  int Join();          // waits; exit status, or 128+signal
  void Kill();         // SIGKILL and reap
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int up_ = -1, down_ = -1;
  bool reaped_ = false;
};

// Current context on CUDA device `ordinal` via the primary context (after cuInit).
CUcontext UsePrimary(int ordinal);
CUfunction AnyFunction();

}  // namespace fakegpu::testing
