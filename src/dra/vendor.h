#pragma once
// What the DRA plugin asks of a device vendor (docs/dra.md#vendors): how the node's devices are
// found, how each is named and described in the ResourceSlice, and the container edits that arm
// the vendor's limiter with exactly what a claim consumed. Everything else (claims, ledger,
// checkpoint, CDI files, publishing, the kubelet services) is one code path for every vendor.
// Rows: "nvidia" (NVML, libvgpu) and "ascend" (a devices file, HAMi's vNPU core library).
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "deviceplugin/allocate_env.h"
#include "deviceplugin/config.h"
#include "dra/claim.h"
#include "dra/slice.h"
#include "gpu/discovery.h"
#include "nlohmann/json.hpp"

namespace hami::dra {

// Where a vendor finds its devices and its limiter on the host (flags of `hami dra-plugin`).
struct VendorOptions {
  std::string nvml_library = "libnvidia-ml.so.1";  // nvidia
  // ascend: the node's NPUs in the registration format of HAMi's Ascend device plugin (the value
  // of hami.io/node-register-<chip>: [{"id","index","devmem","devcore","type","numa","health"}]);
  // `index` is the NPU's physical id, the number ASCEND_VISIBLE_DEVICES takes.
  std::string devices_file;
  // ascend: HAMi's vNPU core library directory (libvnpu and its ld.so.preload), mounted read-only
  // at /hami-vnpu-core, and the directory of the per-device registries the claims on one NPU share.
  std::string vnpu_core_dir = "/usr/local/hami-vnpu-core";
  std::string vnpu_shared_region_dir = "/usr/local/hami-shared-region";
};

// A claim's devices as a vendor arms them: each allocated device with the claim's usage of it
// (its results on that device summed), in index order (the order the vendor's runtime numbers them
// in the container).
struct ClaimDevice {
  DeviceCapacity device;
  Usage usage;
};

// The container edits of one claim, and the host files and directories Prepare makes for it (each
// removed at Unprepare, from the checkpoint).
struct VendorEdits {
  std::map<std::string, std::string> env;
  std::vector<deviceplugin::MountSpec> mounts;
  std::vector<std::string> dirs;                           // created empty, mode 0770
  std::vector<std::pair<std::string, std::string>> files;  // path, contents; mode 0444
};

// The node's devices and the attributes their management library adds.
struct Discovered {
  std::unique_ptr<gpu::DeviceDiscovery> discovery;  // listing and health events
  std::vector<gpu::GpuInfo> devices;                // in index order
  std::map<std::string, GpuExtras> extras;          // by uuid
};

class DraVendor {
 public:
  virtual ~DraVendor() = default;
  virtual std::string_view name() const = 0;            // --vendor
  virtual std::string_view default_driver() const = 0;  // upstream's driver name
  virtual std::string_view device_type() const = 0;     // the `type` attribute DeviceClasses select
  // The ResourceSlice device name: a DNS label, stable across restarts.
  virtual std::string DeviceName(const gpu::GpuInfo& d) const = 0;
  // The device's attributes (BuildResourceSlice adds `type`). `extras` may be null.
  virtual nlohmann::json Attributes(const gpu::GpuInfo& d, const GpuExtras* extras) const = 0;
  // Opens the vendor's discovery and lists the devices.
  virtual StatusOr<Discovered> Discover(const VendorOptions& options) const = 0;
  // The edits of claim `ref` holding `devices` (at least one). `config` holds the libvgpu paths and
  // settings and the region root (the host directory of per-claim directories). Errors name the
  // claim and what the vendor's limiter cannot express.
  virtual StatusOr<VendorEdits> Edits(const ClaimRef& ref, const std::vector<ClaimDevice>& devices,
                                      const deviceplugin::PluginConfig& config) const = 0;
  // The Ready condition's message of a claim's status entry: what the limiter was armed with on
  // the device of `uuid` (docs/dra.md#claim-status).
  virtual std::string ArmedMessage(const Usage& armed, const std::string& uuid) const = 0;
};

// The vendor of `name` ("nvidia", "ascend"); InvalidArgument listing the names otherwise.
StatusOr<std::unique_ptr<DraVendor>> MakeDraVendor(std::string_view name,
                                                   const VendorOptions& options = {});
// NVIDIA's, which every function taking an optional vendor uses when given none.
const DraVendor& NvidiaDraVendor();

// The devices of a devices file's text (VendorOptions::devices_file), in index order; its `health`
// fields are not read. Errors: not the registration format, no devices, a device without memory,
// a negative index or one used twice.
StatusOr<std::vector<gpu::GpuInfo>> ParseDevicesFile(std::string_view text);

}  // namespace hami::dra
