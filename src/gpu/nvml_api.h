#pragma once
// The NVML types and function-pointer types src/gpu and src/monitor use, under C++ names. The ABI
// itself (layouts, codes) is declared once, in gpu/nvml_abi.h (shared with the fake driver and
// libvgpu). We never link libnvidia-ml: symbols are resolved with dlsym, so only types and
// function-pointer types are declared here.
#include <cstdint>

#include "gpu/nvml_abi.h"

namespace hami::gpu::nvml {

using Return = nvmlReturn_t;
inline constexpr Return kSuccess = NVML_SUCCESS;
inline constexpr Return kErrorUninitialized = NVML_ERROR_UNINITIALIZED;
inline constexpr Return kErrorInvalidArgument = NVML_ERROR_INVALID_ARGUMENT;
inline constexpr Return kErrorNotSupported = NVML_ERROR_NOT_SUPPORTED;
inline constexpr Return kErrorNotFound = NVML_ERROR_NOT_FOUND;
inline constexpr Return kErrorInsufficientSize = NVML_ERROR_INSUFFICIENT_SIZE;
inline constexpr Return kErrorTimeout = NVML_ERROR_TIMEOUT;
inline constexpr Return kErrorInsufficientResources = NVML_ERROR_INSUFFICIENT_RESOURCES;
inline constexpr Return kErrorFunctionNotFound = NVML_ERROR_FUNCTION_NOT_FOUND;
inline constexpr Return kErrorGpuIsLost = NVML_ERROR_GPU_IS_LOST;
inline constexpr Return kErrorArgumentVersionMismatch = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
inline constexpr Return kErrorUnknown = NVML_ERROR_UNKNOWN;

using Device = nvmlDevice_t;
using EventSet = nvmlEventSet_t;
using GpuInstance = nvmlGpuInstance_t;
using ComputeInstance = nvmlComputeInstance_t;
using GpuInstancePlacement = nvmlGpuInstancePlacement_t;
using GpuInstanceProfileInfo = nvmlGpuInstanceProfileInfo_t;
using GpuInstanceProfileInfoV2 = nvmlGpuInstanceProfileInfo_v2_t;
inline constexpr unsigned kGpuInstanceProfileInfoV2Version = nvmlGpuInstanceProfileInfo_v2;
using GpuInstanceInfo = nvmlGpuInstanceInfo_t;
using ComputeInstanceProfileInfo = nvmlComputeInstanceProfileInfo_t;
using ComputeInstanceInfo = nvmlComputeInstanceInfo_t;

inline constexpr unsigned kUuidBufferSize = NVML_DEVICE_UUID_V2_BUFFER_SIZE;
inline constexpr unsigned kNameBufferSize = NVML_DEVICE_NAME_V2_BUFFER_SIZE;
inline constexpr unsigned kNvLinkMaxLinks = NVML_NVLINK_MAX_LINKS;
inline constexpr unsigned kMigEnable = NVML_DEVICE_MIG_ENABLE;
inline constexpr int kAffinityScopeNode = NVML_AFFINITY_SCOPE_NODE;

using PciInfo = nvmlPciInfo_t;
using Memory = nvmlMemory_t;
using MemoryV2 = nvmlMemory_v2_t;
inline constexpr unsigned kMemoryV2Version = nvmlMemory_v2;
using Utilization = nvmlUtilization_t;
using ProcessUtilizationSample = nvmlProcessUtilizationSample_t;
using EventData = nvmlEventData_t;
inline constexpr unsigned long long kEventTypeXidCriticalError = nvmlEventTypeXidCriticalError;

// Function-pointer types (C linkage; DECLDIR is empty on Linux).
extern "C" {
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using DeviceGetCountFn = Return (*)(unsigned int*);
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);
using DeviceGetIndexFn = Return (*)(Device, unsigned int*);
using DeviceGetStringFn = Return (*)(Device, char*, unsigned int);  // UUID, Name
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
using DeviceGetMemoryInfoV2Fn = Return (*)(Device, MemoryV2*);
using DeviceGetPciInfoFn = Return (*)(Device, PciInfo*);
using DeviceGetMemoryAffinityFn = Return (*)(Device, unsigned int, unsigned long*, int);
using DeviceGetNumaNodeIdFn = Return (*)(Device, unsigned int*);
using DeviceGetMigModeFn = Return (*)(Device, unsigned int*, unsigned int*);
using DeviceGetTopologyCommonAncestorFn = Return (*)(Device, Device, int*);
using DeviceGetNvLinkStateFn = Return (*)(Device, unsigned int, int*);
using DeviceGetNvLinkRemotePciInfoFn = Return (*)(Device, unsigned int, PciInfo*);
using EventSetCreateFn = Return (*)(EventSet*);
using EventSetFreeFn = Return (*)(EventSet);
using DeviceGetSupportedEventTypesFn = Return (*)(Device, unsigned long long*);
using DeviceRegisterEventsFn = Return (*)(Device, unsigned long long, EventSet);
using EventSetWaitFn = Return (*)(EventSet, EventData*, unsigned int);
using DeviceGetHandleByUuidFn = Return (*)(const char*, Device*);
using DeviceGetGiProfileInfoFn = Return (*)(Device, unsigned int, GpuInstanceProfileInfo*);
using DeviceGetGiProfileInfoVFn = Return (*)(Device, unsigned int, GpuInstanceProfileInfoV2*);
using DeviceGetGiPlacementsFn = Return (*)(Device, unsigned int, GpuInstancePlacement*,
                                           unsigned int*);
using DeviceCreateGiWithPlacementFn = Return (*)(Device, unsigned int, const GpuInstancePlacement*,
                                                 GpuInstance*);
using DeviceGetGisFn = Return (*)(Device, unsigned int, GpuInstance*, unsigned int*);
using DeviceGetGiByIdFn = Return (*)(Device, unsigned int, GpuInstance*);
using GiGetInfoFn = Return (*)(GpuInstance, GpuInstanceInfo*);
using GiDestroyFn = Return (*)(GpuInstance);
using GiGetCiProfileInfoFn = Return (*)(GpuInstance, unsigned int, unsigned int,
                                        ComputeInstanceProfileInfo*);
using GiCreateCiFn = Return (*)(GpuInstance, unsigned int, ComputeInstance*);
using GiGetCisFn = Return (*)(GpuInstance, unsigned int, ComputeInstance*, unsigned int*);
using CiGetInfoFn = Return (*)(ComputeInstance, ComputeInstanceInfo*);
using CiDestroyFn = Return (*)(ComputeInstance);
using DeviceGetCountOfFn = Return (*)(Device, unsigned int*);  // MaxMigDeviceCount, GI/CI id
using DeviceGetMigHandleFn = Return (*)(Device, unsigned int, Device*);
}

}  // namespace hami::gpu::nvml
