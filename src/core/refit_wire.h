#pragma once
// The NUMA refit's wire format (docs/upstream-contract.md, "NUMA refit"): the JSON the device
// plugin POSTs to the scheduler's /refit and the reply, field for field upstream's
// device.NumaRefitRequest / NumaRefitResponse. Both sides use these codecs: the scheduler parses
// requests from the network (hostile until checked: every field is validated here, before any
// lookup), the device plugin parses the replies.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/model.h"

namespace hami::core {

// Upstream's bound on the allowed set (maxAllowedDeviceUUIDs).
inline constexpr size_t kMaxRefitAllowedDevices = 512;
// A refit body is a few hundred bytes; 512 UUIDs of 64 characters fit well under this.
inline constexpr size_t kMaxRefitBodyBytes = 64u << 10;
// The longest device UUID accepted (NVIDIA's "GPU-<36>" is 40; MIG "MIG-<36>" as well).
inline constexpr size_t kMaxDeviceUuidLength = 128;

struct RefitRequest {
  std::string pod_uid;        // podUID: guards against a re-created pod of the same name
  std::string pod_namespace;  // podNamespace
  std::string pod_name;       // podName
  std::string node_name;      // nodeName: the caller's node
  // containerIndex: the container's position in the decision (init containers first), as the
  // to-allocate record orders them.
  int64_t container_index = 0;
  std::string container_name;  // containerName, optional: cross-checked against the pod
  std::string device_type;     // deviceType, e.g. "NVIDIA"
  std::vector<std::string> allowed_device_uuids;  // allowedDeviceUUIDs: physical UUIDs
  bool operator==(const RefitRequest&) const = default;
};

struct RefitResponse {
  bool succeeded = false;
  // containerDevices: the container's devices, upstream's EncodeContainerDevices format
  // ("UUID,Type,Mem,Cores:" per device, no container separator); only when succeeded.
  std::string container_devices;
  std::string failure_reason;  // failureReason, when refused
  bool operator==(const RefitResponse&) const = default;
};

// Parses and validates a request body: at most kMaxRefitBodyBytes, a JSON object (unknown members
// ignored, as upstream's decoder does), podUID a Kubernetes uid, podNamespace a DNS-1123 label,
// podName and nodeName DNS-1123 subdomains, containerIndex an integer 0..1023, containerName empty
// or a DNS-1123 label, deviceType non-empty printable ASCII up to 64 characters,
// allowedDeviceUUIDs 1..kMaxRefitAllowedDevices strings of 1..kMaxDeviceUuidLength characters of
// letters, digits, '-', '_', '.' and '/' (no ',', ':' or ';': they would break the annotation
// format). InvalidArgument naming the field otherwise.
StatusOr<RefitRequest> ParseRefitRequest(std::string_view body);
std::string EncodeRefitRequest(const RefitRequest& request);

StatusOr<RefitResponse> ParseRefitResponse(std::string_view body);
std::string EncodeRefitResponse(const RefitResponse& response);

// One container's devices in the response's format, and back (DecodePodDevices rules).
StatusOr<std::string> EncodeContainerDevices(const std::vector<ContainerDevice>& devices);
StatusOr<std::vector<ContainerDevice>> DecodeContainerDevices(std::string_view text);

}  // namespace hami::core
