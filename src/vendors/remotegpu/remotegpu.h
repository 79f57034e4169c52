#pragma once
// The remote-GPU backend (docs/vendors.md#remote-gpu, upstream pkg/device/remotegpu): GPUs of
// lupine server nodes, offered over the network to pods on nodes that own no GPU.
//
// A lupine server is a node labelled hami.io/lupine-server (value: the lupine port, empty = the
// configured default) whose NVIDIA device plugin registers its cards in mode "remote" in the usual
// hami.io/node-nvidia-register annotation. Those cards belong to the fleet, not to the node: the
// NVIDIA backend skips them, this one registers them on the server node with the id
// "<server node>/<GPU uuid>". A client container asks nvidia.com/remote-gpu: n (and optionally
// nvidia.com/remote-gpu-memory: MiB, a filter on the cards, never a split).
//
// Placement takes one whole server for the whole pod (ChooseServer): a client sees every GPU of
// the server it connects to, so the server is the smallest unit that can be given to one pod
// without being given to another. The decision is written in upstream's keys
// (hami.io/remote-gpu-devices-to-allocate / -allocated, every container listing every card of the
// server) plus hami.io/lupine-endpoint ("<InternalIP>:<port>"), which the webhook wires into
// LUPINE_SERVER through the downward API.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "core/annotations.h"
#include "core/model.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeRemoteGpu(const YAML::Node& section);
}  // namespace hami::vendors

namespace hami::vendors::remotegpu {

inline constexpr char kCommonWord[] = "RemoteGPU";
inline constexpr char kServerLabel[] = "hami.io/lupine-server";
inline constexpr char kEndpointAnnotation[] = "hami.io/lupine-endpoint";
inline constexpr char kRegisterAnnotation[] = "hami.io/node-nvidia-register";
inline constexpr char kToAllocate[] = "hami.io/remote-gpu-devices-to-allocate";
inline constexpr char kAllocated[] = "hami.io/remote-gpu-devices-allocated";
// The device mode a lupine node's NVIDIA device plugin registers its cards in.
inline constexpr const char* kServerMode = core::kModeRemote;
inline constexpr int kDefaultPort = 14833;
// The init container and volume that bring libvgpu.so into a client pod, and where it is mounted.
inline constexpr char kLibVolume[] = "hami-remote-gpu-lib";
inline constexpr char kLibMountPath[] = "/hami-remote-gpu";
// Where the library image holds libvgpu.so (config libSourcePath): our node image's file.
// Upstream's image keeps it under /k8s-vgpu/lib/nvidia/libvgpu.so.<version> (its glob,
// libvgpu.so.*).
inline constexpr char kDefaultLibSource[] = "/usr/local/vgpu/libvgpu.so";

// "<server>/<uuid>", and back: the server of an id ("" when it has no server part).
std::string DeviceId(std::string_view server, std::string_view uuid);
std::string_view ServerOf(std::string_view id);

// "<InternalIP>:<port>" ("[ip]:port" for IPv6) of a lupine server node. The port is the label's
// value when it is an integer in 1..65535, else `default_port` (as upstream, which logs and falls
// back). Errors: the node is not labelled, or has no InternalIP that is an IP address.
StatusOr<std::string> Endpoint(const NodeView& node, int default_port = kDefaultPort);
// The defaultPort configured for `vendor` when it is this backend; kDefaultPort otherwise.
int ConfiguredPort(const Vendor& vendor);

// One lupine server as the scheduler's cache holds it: its cards and their usage (parallel). The
// scheduler's own view of a serving node, so that ChoosePool hands its nodes over as they are.
using ServerView = scheduler::VendorRules::PoolNode;
// The chosen server (`node`, "" = none fits); `containers` parallel to the requests: every healthy
// card of the server for a container with a request, nothing for the others; `reason` when none
// fits: upstream-style tally over the cards examined ("1/2 ExclusiveDeviceAllocateConflict, 1/2
// NodeInsufficientDevice").
using ServerChoice = scheduler::VendorRules::PoolChoice;

// Upstream's server choice for a whole pod. `requests` holds each container's remote-GPU request
// in pod order (init containers first), nullopt for a container without one. A server with a card
// in use (any usage at all: a card of a server is never shared) is not on offer; unhealthy cards
// neither count nor come along. Among the servers where every request finds enough cards of at
// least its memory (each request on its own: a container's cards are the whole server), the one
// with the fewest healthy cards wins, ties to the name that sorts first, so the same pod lands on
// the same server whatever the order of its containers or of `servers`.
ServerChoice ChooseServer(std::span<const std::optional<core::DeviceRequest>> requests,
                          std::span<const ServerView> servers);

}  // namespace hami::vendors::remotegpu
