#pragma once
// The few NVML declarations we use, written from NVIDIA's published nvml.h facts.
// We never link libnvidia-ml: symbols are resolved with dlsym,
// so only types and function-pointer types are declared here.
#include <cstdint>

namespace hami::gpu::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorUnknown = 999;

struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t
struct EventSetSt;
using EventSet = EventSetSt*;  // nvmlEventSet_t

inline constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kNvLinkMaxLinks = 36;
inline constexpr unsigned kMigEnable = 1;
inline constexpr int kAffinityScopeNode = 0;

struct PciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t layout");

struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
static_assert(sizeof(Memory) == 24, "nvmlMemory_t layout");

struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
static_assert(sizeof(MemoryV2) == 40, "nvmlMemory_v2_t layout");
inline constexpr unsigned kMemoryV2Version = 0x02000028;  // NVML_STRUCT_VERSION(Memory, 2)

struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid for Xid events
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(EventData) == 32, "nvmlEventData_t layout");
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8;

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
}

}  // namespace hami::gpu::nvml
