#include "dra/gpu_extras.h"

#include <dlfcn.h>

#include <cctype>
#include <filesystem>

#include "common/status.h"

namespace hami::dra {

namespace {

// The few NVML entry points used here, by their C signatures (nvml.h).
using NvmlDevice = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using DriverVersionFn = int (*)(char*, unsigned);
using HandleByUuidFn = int (*)(const char*, NvmlDevice*);
using ComputeCapabilityFn = int (*)(NvmlDevice, int*, int*);

}  // namespace

std::string ArchitectureOf(int major, int minor) {
  switch (major) {
    case 6:
      return "Pascal";
    case 7:
      return minor >= 5 ? "Turing" : "Volta";
    case 8:
      return minor == 9 ? "Ada Lovelace" : "Ampere";
    case 9:
      return "Hopper";
    case 10:
    case 12:
      return "Blackwell";
    default:
      return "";
  }
}

std::string DriverSemver(const std::string& version) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : version + ".") {
    if (c == '.') {
      if (cur.empty() || cur.size() > 9) return "";
      size_t nz = cur.find_first_not_of('0');
      parts.push_back(nz == std::string::npos ? "0" : cur.substr(nz));
      cur.clear();
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      cur += c;
    } else {
      return "";
    }
  }
  if (parts.empty() || parts.size() > 3) return "";
  while (parts.size() < 3) parts.push_back("0");
  return StrCat(parts[0], ".", parts[1], ".", parts[2]);
}

std::string PcieRoot(const std::string& sysfs_root, const std::string& pci_bus_id) {
  const std::string bus = NormalizePciBusId(pci_bus_id);
  if (bus.empty()) return "";
  std::error_code ec;
  const std::filesystem::path real =
      std::filesystem::canonical(sysfs_root + "/bus/pci/devices/" + bus, ec);
  if (ec) return "";
  const std::filesystem::path devices = std::filesystem::canonical(sysfs_root + "/devices", ec);
  if (ec) return "";
  auto rel = real.lexically_relative(devices);
  if (rel.empty() || rel.begin() == rel.end()) return "";
  const std::string first = rel.begin()->string();
  return first.rfind("pci", 0) == 0 && first != ".." ? first : "";
}

std::map<std::string, GpuExtras> ReadGpuExtras(const std::string& nvml_library,
                                               const std::vector<gpu::GpuInfo>& gpus,
                                               const std::string& sysfs_root) {
  std::map<std::string, GpuExtras> out;
  for (const auto& g : gpus) out[g.uuid].pcie_root = PcieRoot(sysfs_root, g.pci_bus_id);
  void* lib = ::dlopen(nvml_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return out;
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(::dlsym(lib, "nvmlShutdown"));
  auto driver = reinterpret_cast<DriverVersionFn>(::dlsym(lib, "nvmlSystemGetDriverVersion"));
  auto by_uuid = reinterpret_cast<HandleByUuidFn>(::dlsym(lib, "nvmlDeviceGetHandleByUUID"));
  auto cc =
      reinterpret_cast<ComputeCapabilityFn>(::dlsym(lib, "nvmlDeviceGetCudaComputeCapability"));
  if (init != nullptr && shutdown != nullptr && init() == 0) {
    std::string version;
    if (char buf[96] = {}; driver != nullptr && driver(buf, sizeof(buf) - 1) == 0)
      version = DriverSemver(buf);
    for (const auto& g : gpus) {
      GpuExtras& x = out[g.uuid];
      x.driver_version = version;
      NvmlDevice dev = nullptr;
      int major = 0, minor = 0;
      if (by_uuid == nullptr || cc == nullptr || by_uuid(g.uuid.c_str(), &dev) != 0 ||
          cc(dev, &major, &minor) != 0 || major <= 0 || minor < 0)
        continue;
      x.cuda_compute_capability = StrCat(major, ".", minor);
      x.architecture = ArchitectureOf(major, minor);
    }
    shutdown();
  }
  ::dlclose(lib);
  return out;
}

}  // namespace hami::dra
