// Environment configuration of the fake GPU libraries (contract: fakes/fake_gpu.h, README.md).
// Pure parsing, no globals: each parser returns false and a one-line reason on malformed input.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fakegpu {

inline constexpr int kMaxDevices = 16;
inline constexpr int kNvLinkMaxLinks = 36;  // NVML_NVLINK_MAX_LINKS
inline constexpr size_t kNameLen = 96;
inline constexpr size_t kUuidLen = 80;

struct DeviceSpec {
  std::string name;
  uint64_t mem_mib = 0;
  uint32_t sms = 0;
  std::string uuid;  // "GPU-..."
};

struct NvLinkSpec {
  int a = 0, b = 0, links = 0;
};

struct FaultSpec {
  std::string symbol;
  int code = 0;
  uint64_t nth = 0;  // 1-based call number; 0 = every call
};

struct XidSpec {
  int dev = 0;
  uint64_t xid = 0;
  uint64_t after_ms = 0;
};

struct Config {
  std::vector<DeviceSpec> devices;
  std::string state_path;
  uint64_t ctx_overhead_mib = 300;
  uint64_t wave_us = 100;
  uint64_t max_backlog_us = 20000;
  uint64_t nvml_sample_ms = 0;  // FAKEGPU_NVML_SAMPLE_MS: 0 = average over the interval asked about
  std::vector<NvLinkSpec> nvlinks;
  std::vector<XidSpec> xids;
  std::vector<FaultSpec> faults;
  std::vector<int> mig_devices;  // FAKEGPU_MIG: devices whose MIG mode starts enabled
  bool init_fail = false;
  int cuda_version = 13000;
  std::string driver_version = "580.65.06";
};

using GetEnv = std::function<const char*(const char*)>;

// Loads the whole configuration; each malformed variable adds one line to *warnings
// ("fakegpu: VAR: reason; using default") and its default is used.
Config LoadConfig(const GetEnv& getenv_fn, std::vector<std::string>* warnings);

bool ParseDevices(const std::string& text, std::vector<DeviceSpec>* out, std::string* err);
bool ParseNvLinks(const std::string& text, int num_devices, std::vector<NvLinkSpec>* out,
                  std::string* err);
bool ParseFaults(const std::string& text, std::vector<FaultSpec>* out, std::string* err);
bool ParseXids(const std::string& text, int num_devices, std::vector<XidSpec>* out,
               std::string* err);
bool ParseUint(const std::string& text, uint64_t max, uint64_t* out);
// FAKEGPU_MIG: comma list of device indices, each of a model that can run MIG (mig_model.h).
bool ParseMigDevices(const std::string& text, const std::vector<DeviceSpec>& devices,
                     std::vector<int>* out, std::string* err);

std::string DefaultUuid(int index);
uint64_t Fnv1a64(const std::string& s);
// 16 UUID bytes from "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex digits after the prefix);
// UUIDs that are not 32 hex digits get bytes derived from a hash of the string.
void UuidBytes(const std::string& uuid, unsigned char out[16]);

// CUDA_VISIBLE_DEVICES semantics of the real driver. `env` NULL = all devices. Returns the NVML
// indices visible to CUDA, in CUDA order. Entries are indices, UUIDs ("GPU-...") or unique UUID
// prefixes; parsing stops at the first invalid, unknown, ambiguous or duplicate entry.
std::vector<int> VisibleDevices(const char* env, const std::vector<std::string>& uuids);

// Compute capability derived from the product name.
void ComputeCapability(const std::string& name, int* major, int* minor);
// Whether the GPU pages managed memory on demand (compute capability 6.0+, Pascal and later): its
// managed memory can exceed device memory and be evicted to host memory; older GPUs keep all of it
// on the device.
bool PagesManagedMemory(const std::string& name);

}  // namespace fakegpu
