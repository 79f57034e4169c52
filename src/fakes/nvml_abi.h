// Minimal NVML declarations (nvml.h, NVML_API_VERSION 13, x86_64 Linux) for the fake
// libnvidia-ml.so.1, written from NVIDIA's published NVML API (the toolkit ships no nvml.h
// here). Layouts are checked with static_asserts below.
#pragma once

#include <cstddef>

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999,
};

enum : unsigned {
  NVML_DEVICE_UUID_BUFFER_SIZE = 80,
  NVML_DEVICE_NAME_BUFFER_SIZE = 64,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16,
  NVML_NVLINK_MAX_LINKS = 36,
};

enum : int {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};
typedef int nvmlGpuTopologyLevel_t;
typedef int nvmlEnableState_t;
typedef int nvmlTemperatureSensors_t;
typedef int nvmlClockType_t;
typedef int nvmlComputeMode_t;
typedef int nvmlGpuP2PCapsIndex_t;
typedef int nvmlGpuP2PStatus_t;
typedef int nvmlIntNvLinkDeviceType_t;
typedef unsigned int nvmlAffinityScope_t;

enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
enum : int { NVML_TEMPERATURE_GPU = 0 };
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
enum : int {
  NVML_P2P_CAPS_INDEX_NVLINK = 2,
  NVML_P2P_STATUS_OK = 0,
  NVML_P2P_STATUS_NOT_SUPPORTED = 5
};
enum : int { NVML_NVLINK_DEVICE_TYPE_GPU = 0 };
enum : unsigned { NVML_DEVICE_MIG_DISABLE = 0 };

constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct nvmlProcessUtilizationInfo_v1_st {
  unsigned long long timeStamp;
  unsigned int pid, smUtil, memUtil, encUtil, decUtil, jpgUtil, ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;

typedef struct nvmlProcessesUtilizationInfo_v1_st {
  unsigned int version;
  unsigned int processSamplesCount;
  unsigned long long lastSeenTimeStamp;
  nvmlProcessUtilizationInfo_v1_t* procUtilArray;
} nvmlProcessesUtilizationInfo_t;

typedef struct nvmlDeviceAttributes_st {
  unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlTemperature_v1_st {
  unsigned int version;
  nvmlTemperatureSensors_t sensorType;
  int temperature;
} nvmlTemperature_t;

typedef struct nvmlBAR1Memory_st {
  unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;

constexpr unsigned kNvmlMemoryV2 = (unsigned)(sizeof(nvmlMemory_v2_t) | (2u << 24));
constexpr unsigned kNvmlTemperatureV1 = (unsigned)(sizeof(nvmlTemperature_t) | (1u << 24));
constexpr unsigned kNvmlProcessesUtilizationInfoV1 =
    (unsigned)(sizeof(nvmlProcessesUtilizationInfo_t) | (1u << 24));

}  // extern "C"

static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlMemory_t) == 24 && sizeof(nvmlMemory_v2_t) == 40);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16 && sizeof(nvmlProcessInfo_t) == 24);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(sizeof(nvmlProcessUtilizationInfo_v1_t) == 40);
static_assert(sizeof(nvmlProcessesUtilizationInfo_t) == 24);
static_assert(sizeof(nvmlDeviceAttributes_t) == 40 && sizeof(nvmlEventData_t) == 32);
static_assert(sizeof(nvmlTemperature_t) == 12 && sizeof(nvmlBAR1Memory_t) == 24);
static_assert(kNvmlMemoryV2 == 0x02000028 && kNvmlTemperatureV1 == 0x0100000C);
static_assert(kNvmlProcessesUtilizationInfoV1 == 0x01000018);
