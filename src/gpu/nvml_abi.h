/* The NVML ABI (NVIDIA Management Library, x86_64 Linux, NVML_API_VERSION 13) as this project uses
 * it: return codes, handles, the structs and constants that cross the library boundary. The one
 * copy for every user: NVML discovery (src/gpu) and telemetry (src/monitor), which resolve the
 * functions with dlsym; the fake libnvidia-ml.so.1 (src/fakes), which implements them; libvgpu
 * (src/vgpu), which interposes on them. Plain C, so libvgpu and C test programs include it too.
 *
 * Written from NVIDIA's published API documentation, not copied from nvml.h: the CUDA toolkit in
 * this build does not ship nvml.h (Debian has it only in non-free packages), and one hand-checked
 * declaration keeps every build identical whether or not a toolkit is installed. The names are
 * NVML's, so code reads as it would against nvml.h; the static asserts at the end pin each layout
 * (docs/design.md, "The NVML ABI"). Functions are not declared: users resolve or define them with
 * the signatures they need. */
#ifndef HAMI_GPU_NVML_ABI_H_
#define HAMI_GPU_NVML_ABI_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;

enum {
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
  NVML_ERROR_UNKNOWN = 999
};

/* Buffer sizes (bytes, terminating NUL included). */
enum {
  NVML_DEVICE_UUID_BUFFER_SIZE = 80,
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_NAME_BUFFER_SIZE = 64,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16,
  NVML_NVLINK_MAX_LINKS = 36
};

typedef int nvmlGpuTopologyLevel_t;
enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50
};
typedef int nvmlEnableState_t;
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
typedef int nvmlTemperatureSensors_t;
enum { NVML_TEMPERATURE_GPU = 0 };
typedef int nvmlClockType_t;
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
typedef int nvmlComputeMode_t;
typedef int nvmlGpuP2PCapsIndex_t;
enum { NVML_P2P_CAPS_INDEX_NVLINK = 2 };
typedef int nvmlGpuP2PStatus_t;
enum { NVML_P2P_STATUS_OK = 0, NVML_P2P_STATUS_NOT_SUPPORTED = 5 };
typedef int nvmlIntNvLinkDeviceType_t;
enum { NVML_NVLINK_DEVICE_TYPE_GPU = 0 };
typedef unsigned int nvmlAffinityScope_t;
enum { NVML_AFFINITY_SCOPE_NODE = 0 };
enum { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };

/* MIG GPU instance profiles: the `profile` argument of nvmlDeviceGetGpuInstanceProfileInfo(V).
 * The profile's `id` it returns is what the other GPU instance calls take. REV1 are the "+me"
 * (media extension) variants, REV2 the double-memory 1g profiles (1g.20gb on 80 GB parts). */
enum {
  NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0,
  NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1,
  NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2,
  NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3,
  NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4,
  NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5,
  NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6,
  NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7,
  NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8,
  NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9
};
/* Compute instance profiles (nvmlGpuInstanceGetComputeInstanceProfileInfo(V)); their `id` equals
 * the enum value. One engine profile: shared. */
enum {
  NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0,
  NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1,
  NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2,
  NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3,
  NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4,
  NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5,
  NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6,
  NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7,
  NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x8
};
enum { NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0 };

/* Event types (a bit mask). */
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL

/* The struct tags are NVML's own: readability-identifier-naming does not apply to this ABI. */
/* NOLINTBEGIN(readability-identifier-naming) */
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16]; /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32]; /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version; /* nvmlMemory_v2 */
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
  unsigned long long timeStamp; /* CLOCK_REALTIME microseconds */
  unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlDeviceGetSamples: the driver's recent readings of one sampled quantity, oldest first. */
#define NVML_GPU_UTILIZATION_SAMPLES 1 /* nvmlSamplingType_t */
#define NVML_VALUE_TYPE_UNSIGNED_INT 1 /* nvmlValueType_t */
typedef union nvmlValue_st {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;
typedef struct nvmlSample_st {
  unsigned long long timeStamp; /* CLOCK_REALTIME microseconds */
  nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct nvmlProcessUtilizationInfo_v1_st {
  unsigned long long timeStamp;
  unsigned int pid, smUtil, memUtil, encUtil, decUtil, jpgUtil, ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;

typedef struct nvmlProcessesUtilizationInfo_v1_st {
  unsigned int version; /* nvmlProcessesUtilizationInfo_v1 */
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
  unsigned long long eventData; /* the Xid, for Xid events */
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlTemperature_v1_st {
  unsigned int version; /* nvmlTemperature_v1 */
  nvmlTemperatureSensors_t sensorType;
  int temperature;
} nvmlTemperature_t;

typedef struct nvmlBAR1Memory_st {
  unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;

/* MIG: a placement is a run of memory slices (start, size). */
typedef struct nvmlGpuInstancePlacement_st {
  unsigned int start, size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
      decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB; /* MiB */
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
  unsigned int version; /* nvmlGpuInstanceProfileInfo_v2 */
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
      decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
  char name[96]; /* NVML_DEVICE_NAME_V2_BUFFER_SIZE, e.g. "MIG 1g.10gb" */
} nvmlGpuInstanceProfileInfo_v2_t;

typedef struct nvmlGpuInstanceInfo_st {
  nvmlDevice_t device; /* the parent GPU */
  unsigned int id, profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
  unsigned int start, size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
      sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
  unsigned int version; /* nvmlComputeInstanceProfileInfo_v2 */
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
      sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
  char name[96];
} nvmlComputeInstanceProfileInfo_v2_t;

typedef struct nvmlComputeInstanceInfo_st {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id, profileId;
  nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;
/* NOLINTEND(readability-identifier-naming) */

/* Versioned structs carry sizeof(struct) | version << 24 in their first field. */
#define HAMI_NVML_STRUCT_VERSION(type, ver) \
  ((unsigned int)(sizeof(type) | ((unsigned int)(ver) << 24U)))
#define nvmlMemory_v2 HAMI_NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2)
#define nvmlTemperature_v1 HAMI_NVML_STRUCT_VERSION(nvmlTemperature_t, 1)
#define nvmlProcessesUtilizationInfo_v1 HAMI_NVML_STRUCT_VERSION(nvmlProcessesUtilizationInfo_t, 1)
#define nvmlGpuInstanceProfileInfo_v2 HAMI_NVML_STRUCT_VERSION(nvmlGpuInstanceProfileInfo_v2_t, 2)
#define nvmlComputeInstanceProfileInfo_v2 \
  HAMI_NVML_STRUCT_VERSION(nvmlComputeInstanceProfileInfo_v2_t, 2)

#ifdef __cplusplus
}  // extern "C"
#define HAMI_NVML_STATIC_ASSERT(cond, what) static_assert(cond, what)
#else
#define HAMI_NVML_STATIC_ASSERT(cond, what) _Static_assert(cond, what)
#endif

HAMI_NVML_STATIC_ASSERT(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlProcessUtilizationSample_t) == 32,
                        "nvmlProcessUtilizationSample_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlSample_t) == 16, "nvmlSample_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlProcessUtilizationInfo_v1_t) == 40,
                        "nvmlProcessUtilizationInfo_v1_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlProcessesUtilizationInfo_t) == 24,
                        "nvmlProcessesUtilizationInfo_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlTemperature_t) == 12, "nvmlTemperature_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlBAR1Memory_t) == 24, "nvmlBAR1Memory_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlGpuInstancePlacement_t) == 8, "nvmlGpuInstancePlacement_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "nvmlGpuInstanceProfileInfo_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152,
                        "nvmlGpuInstanceProfileInfo_v2_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlComputeInstanceProfileInfo_t) == 36,
                        "nvmlComputeInstanceProfileInfo_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlComputeInstanceProfileInfo_v2_t) == 136,
                        "nvmlComputeInstanceProfileInfo_v2_t");
HAMI_NVML_STATIC_ASSERT(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t");
HAMI_NVML_STATIC_ASSERT(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2");
HAMI_NVML_STATIC_ASSERT(nvmlTemperature_v1 == 0x0100000Cu, "nvmlTemperature_v1");
HAMI_NVML_STATIC_ASSERT(nvmlProcessesUtilizationInfo_v1 == 0x01000018u,
                        "nvmlProcessesUtilizationInfo_v1");
HAMI_NVML_STATIC_ASSERT(nvmlGpuInstanceProfileInfo_v2 == 0x02000098u,
                        "nvmlGpuInstanceProfileInfo_v2");
HAMI_NVML_STATIC_ASSERT(nvmlComputeInstanceProfileInfo_v2 == 0x02000088u,
                        "nvmlComputeInstanceProfileInfo_v2");

#endif /* HAMI_GPU_NVML_ABI_H_ */
