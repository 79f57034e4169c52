#pragma once
// How the device plugin names a container's GPUs to the container runtime: NVIDIA's device-list
// strategies (docs/upstream-contract.md#device-list-strategies). One parser and one set of CDI name
// rules, used by the device-config.yaml reader (vendors/config_file.h) to refuse a bad value at
// start and by the device plugin's Allocate to build the names.
//
//   envvar           NVIDIA_VISIBLE_DEVICES=<id>,<id>          (nvidia-container-runtime, legacy)
//   volume-mounts    NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices and one mount of
//                    /dev/null at /var/run/nvidia-container-devices/<id> per device
//   cdi-annotations  container annotation <prefix>nvidia-device-plugin_<allocation id> =
//                    "<kind>=<id>,<kind>=<id>"                 (runtime resolves CDI annotations)
//   cdi-cri          ContainerAllocateResponse.cdi_devices = [{name: "<kind>=<id>"}, ...]
//                    (kubelet passes them in the CRI's CDIDevices field)
//
// <id> is the GPU's UUID, or its NVML index with device ID strategy "index"; <kind> is
// "<vendor>/<class>" of a CDI spec on the node (default nvidia.com/gpu: the spec that
// `nvidia-ctk cdi generate` writes names every GPU by index and by UUID).
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::vendors::nvidia {

inline constexpr char kDefaultDeviceListStrategy[] = "envvar";
inline constexpr char kDefaultDeviceIdStrategy[] = "uuid";
inline constexpr char kDefaultCdiAnnotationPrefix[] = "cdi.k8s.io/";
inline constexpr char kDefaultCdiKind[] = "nvidia.com/gpu";
// The plugin name part of the CDI annotation key (NVIDIA's plugin uses the same).
inline constexpr char kCdiAnnotationPlugin[] = "nvidia-device-plugin";
// volume-mounts: where the device list appears in the container.
inline constexpr char kVolumeMountsRoot[] = "/var/run/nvidia-container-devices";
inline constexpr char kVolumeMountsHostPath[] = "/dev/null";

// The strategies in effect; several may be combined (NVIDIA's plugin allows any set).
struct DeviceListStrategies {
  bool envvar = false;
  bool volume_mounts = false;
  bool cdi_annotations = false;
  bool cdi_cri = false;

  bool AnyCdi() const { return cdi_annotations || cdi_cri; }
  // Only CDI strategies: the runtime gets the devices from CDI alone and the container no
  // NVIDIA_VISIBLE_DEVICES from the plugin (as NVIDIA's plugin; the toolkit's CDI spec sets
  // NVIDIA_VISIBLE_DEVICES=void itself).
  bool OnlyCdi() const { return AnyCdi() && !envvar && !volume_mounts; }
  // The canonical spelling: the set strategies, comma separated, in the order above.
  std::string ToString() const;
  bool operator==(const DeviceListStrategies&) const = default;
};

// "envvar", "cdi-annotations,cdi-cri", ...: comma separated, blanks around names ignored, at least
// one, each one of envvar, volume-mounts, cdi-annotations, cdi-cri. The error names the bad word
// and the accepted ones.
StatusOr<DeviceListStrategies> ParseDeviceListStrategies(std::string_view text);

// uuid | index.
Status CheckDeviceIdStrategy(std::string_view strategy);

// A CDI kind "<vendor>/<class>": vendor = letter, then letters, digits, '_', '-', '.', ending in a
// letter or digit; class = letter, then letters, digits, '_', '-', ending in a letter or digit.
Status CheckCdiKind(std::string_view kind);

// The prefix of CDI annotation keys: a DNS subdomain followed by '/' (a Kubernetes annotation
// key's prefix), e.g. cdi.k8s.io/.
Status CheckCdiAnnotationPrefix(std::string_view prefix);

// "<kind>=<name>" after checking name by CDI's rules (letters, digits, '_', '-', '.', ':',
// starting and ending with a letter or digit).
StatusOr<std::string> CdiDeviceName(std::string_view kind, std::string_view name);

// <prefix>nvidia-device-plugin_<allocation id>, '/' in the id replaced by '_'; the part after the
// prefix must be at most 63 characters of letters, digits, '_', '-', '.', starting and ending with
// a letter or digit (CDI's rule for annotation keys).
StatusOr<std::string> CdiAnnotationKey(std::string_view prefix, std::string_view allocation_id);

}  // namespace hami::vendors::nvidia
