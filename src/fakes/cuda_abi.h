// Minimal CUDA driver API declarations (CUDA 13.0 ABI, x86_64 Linux) for the fake libcuda.so.1.
// Written from NVIDIA's published CUDA driver API so the build does not need the CUDA toolkit; only
// the types, values and layouts the fake implements. Layouts are checked with static_asserts below.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int CUresult;  // enum in cuda.h; int-sized on every ABI we target
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef uint64_t cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUkern_st* CUkernel;
typedef struct CUarray_st* CUarray;
typedef struct CUmipmappedArray_st* CUmipmappedArray;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgreenCtx_st* CUgreenCtx;
typedef struct CUdevResourceDesc_st* CUdevResourceDesc;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_UNKNOWN = 999,
};

// CUdevice_attribute values used by the fake (others return 0; >= CU_DEVICE_ATTRIBUTE_MAX is
// invalid).
enum : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_NUMA_ID = 131,
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,
  CU_DEVICE_ATTRIBUTE_MAX = 148,
};

enum : int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
typedef int CUdriverProcAddressQueryResult;
enum : unsigned long long {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1ULL << 0,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1ULL << 1,
};

#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

enum : int { CU_STREAM_CAPTURE_STATUS_NONE = 0, CU_STREAM_CAPTURE_STATUS_ACTIVE = 1 };
typedef int CUstreamCaptureStatus;
typedef int CUstreamCaptureMode;

enum : int { CU_EVENT_DISABLE_TIMING = 0x2 };

typedef struct CUexecAffinityParam_st {
  int type;
  union {
    struct {
      unsigned int val;
    } smCount;
  } param;
} CUexecAffinityParam;

typedef struct CUctxCreateParams_st {
  CUexecAffinityParam* execAffinityParams;
  int numExecAffinityParams;
  void* cigParams;
} CUctxCreateParams;

typedef struct CUmemLocation_st {
  int type;  // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int id;
} CUmemLocation;
enum : int { CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum : int { CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
// cuMemAllocManaged flags (CUmemAttach_flags).
enum : unsigned { CU_MEM_ATTACH_GLOBAL = 0x1, CU_MEM_ATTACH_HOST = 0x2 };

typedef struct CUmemAllocationProp_st {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags;
} CUmemAccessDesc;

typedef struct CUmemPoolProps_st {
  int allocType;
  int handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;

typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_st {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;  // out
} CUDA_MEM_ALLOC_NODE_PARAMS;

// cuGraphAddNode's generic parameters: only the memory allocation member is modelled.
enum : int { CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10 };
typedef struct CUgraphNodeParams_st {
  int type;
  int reserved0[3];
  union {
    long long reserved1[29];
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;
  };
  long long reserved2;
} CUgraphNodeParams;
typedef struct CUgraphEdgeData_st CUgraphEdgeData;

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
  size_t Width;
  size_t Height;
  int Format;  // CUarray_format
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
  unsigned int Width;
  unsigned int Height;
  int Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

// CUarray_format values -> bytes per channel.
enum : int {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
};

typedef struct CUlaunchAttribute_st {
  int id;
  char pad[8 - sizeof(int)];
  union {
    char pad[64];
  } value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

typedef struct CUDA_KERNEL_NODE_PARAMS_v1_st {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
} CUDA_KERNEL_NODE_PARAMS_v1;

typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;

}  // extern "C"

static_assert(sizeof(CUuuid) == 16);
static_assert(sizeof(CUlaunchAttribute) == 72);
static_assert(offsetof(CUlaunchConfig, hStream) == 32 && sizeof(CUlaunchConfig) == 56);
static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == 56 && sizeof(CUDA_KERNEL_NODE_PARAMS_v2) == 72);
static_assert(sizeof(CUmemAllocationProp) == 32);
static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24 && sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40);
static_assert(sizeof(CUctxCreateParams) == 24);
static_assert(sizeof(CUmemPoolProps) == 88 && sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120);
static_assert(sizeof(CUgraphNodeParams) == 256 && offsetof(CUgraphNodeParams, alloc) == 16);
