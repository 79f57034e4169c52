// The remote-GPU backend (remotegpu.h, docs/vendors.md#remote-gpu), after upstream's
// pkg/device/remotegpu: device.go (requests, webhook mutation, whole-server Fit) and pool.go
// (lupine nodes, device ids, endpoints).
#include "vendors/remotegpu/remotegpu.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>

#include "core/node_codec.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/generic.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {
namespace remotegpu {
namespace {

using scheduler::Reason;

constexpr char kSeparator = '/';
constexpr int64_t kMaxCount = 1024;
constexpr size_t kMaxNodeName = 253;

// A DNS-1123 subdomain, what Kubernetes allows as a node name: the server part of a device id and
// the endpoint are built from it, so nothing else gets that far.
bool IsNodeName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNodeName) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

// A card id must survive the decision codec (',' ':' ';' separate its fields and records) and
// the server prefix ('/').
bool IsCardId(std::string_view s) {
  return !s.empty() && s.find_first_of("/,:;") == std::string_view::npos &&
         core::text::IsValidUtf8(s);
}

}  // namespace

std::string DeviceId(std::string_view server, std::string_view uuid) {
  return StrCat(server, std::string(1, kSeparator), uuid);
}

std::string_view ServerOf(std::string_view id) {
  const size_t at = id.find(kSeparator);
  return at == std::string_view::npos ? std::string_view() : id.substr(0, at);
}

StatusOr<std::string> Endpoint(const NodeView& node, int default_port) {
  auto label = node.labels.find(kServerLabel);
  if (label == node.labels.end())
    return InvalidArgument(
        StrCat("node ", core::text::Quote(node.name), " is not labelled ", kServerLabel));
  unsigned char buf[16];
  const std::string& ip = node.internal_ip;
  const bool v4 = inet_pton(AF_INET, ip.c_str(), buf) == 1;
  const bool v6 = !v4 && inet_pton(AF_INET6, ip.c_str(), buf) == 1;
  if (!v4 && !v6)
    return InvalidArgument(StrCat("lupine server ", core::text::Quote(node.name),
                                  ": no InternalIP address (got ", core::text::Quote(ip), ")"));
  int port = default_port;
  if (auto p = core::text::ParseInt(label->second); p && *p >= 1 && *p <= 65535)
    port = static_cast<int>(*p);
  return v6 ? StrCat("[", ip, "]:", port) : StrCat(ip, ":", port);
}

ServerChoice ChooseServer(std::span<const std::optional<core::DeviceRequest>> requests,
                          std::span<const ServerView> servers) {
  ServerChoice out;
  out.containers.resize(requests.size());
  std::map<Reason, int> tally;
  int examined = 0;
  struct Candidate {
    const ServerView* server;
    std::vector<int> cards;  // healthy cards, positions in server->devices
  };
  std::vector<Candidate> candidates;
  for (const ServerView& s : servers) {
    Candidate c{&s, {}};
    bool taken = false;
    for (size_t i = 0; i < s.devices.size(); ++i) {
      const core::DeviceInfo& d = s.devices[i];
      if (d.vendor != kCommonWord) continue;
      ++examined;
      const core::DeviceUsage u = i < s.usage.size() ? s.usage[i] : core::DeviceUsage{};
      if (!d.health) {
        ++tally[Reason::kCardNotHealth];
      } else if (u.used > 0 || u.usedmem_mib > 0 || u.usedcores > 0) {
        ++tally[Reason::kExclusiveDeviceAllocateConflict];
        taken = true;
      } else {
        c.cards.push_back(static_cast<int>(i));
      }
    }
    if (!taken && !c.cards.empty()) candidates.push_back(std::move(c));
  }
  // Fewest cards first (the deeper servers stay whole for requests that need them), then name.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::make_pair(a.cards.size(), std::string_view(a.server->name)) <
           std::make_pair(b.cards.size(), std::string_view(b.server->name));
  });
  for (const Candidate& c : candidates) {
    bool serves = true;
    for (const auto& r : requests) {
      if (!r) continue;
      int usable = 0, small = 0;
      for (int i : c.cards) {
        if (r->memreq_mib <= 0 || c.server->devices[i].devmem_mib >= r->memreq_mib)
          ++usable;
        else
          ++small;
      }
      if (usable < r->nums) {
        if (small > 0) tally[Reason::kCardInsufficientMemory] += small;
        ++tally[Reason::kNodeInsufficientDevice];
        serves = false;
        break;
      }
    }
    if (!serves) continue;
    out.node = c.server->name;
    for (size_t k = 0; k < requests.size(); ++k) {
      if (!requests[k]) continue;
      for (int i : c.cards) {
        const core::DeviceInfo& d = c.server->devices[i];
        // The whole card: the request's memory chose the server, it does not split the card.
        core::ContainerDevice g;
        g.uuid = d.uuid;
        g.vendor = kCommonWord;
        g.usedmem_mib = d.devmem_mib;
        g.usedcores = d.devcore;
        g.index = d.index;
        out.containers[k].push_back(std::move(g));
      }
    }
    return out;
  }
  if (examined == 0) ++tally[Reason::kNodeInsufficientDevice];
  for (const auto& [reason, n] : tally)
    out.reason += StrCat(out.reason.empty() ? "" : ", ", n, "/", std::max(examined, 1), " ",
                         scheduler::ReasonName(reason));
  return out;
}

namespace {

struct Config {
  int default_port = kDefaultPort;
  std::string lib_image;  // "" = no library delivery (the memory request is not enforced)
  std::string lib_source = kDefaultLibSource;
};

}  // namespace

// Both go into the init container's `sh -c` command line: only characters no shell gives a meaning
// to, besides the glob's '*' (an absolute path; an image reference).
static bool IsShellSafe(std::string_view s, bool path) {
  if (s.empty() || (path && s.front() != '/')) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '/' || (path ? c == '*' : c == ':' || c == '@');
  });
}

namespace {

class RemoteGpuVendor : public GenericVendor {
 public:
  RemoteGpuVendor(Spec spec, Config config)
      : GenericVendor(std::move(spec)), config_(std::move(config)) {}

  // Upstream's GenerateResourceRequests: only the count asks (memory alone asks for nothing), every
  // card whole (cores 100); the memory is a per-card minimum.
  StatusOr<std::optional<core::DeviceRequest>> ParseRequest(
      const nlohmann::json& resources, const std::map<std::string, std::string>&) const override {
    const ResourceNames& n = spec_.resources;
    HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
    HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
    if (!count || *count == 0) return std::optional<core::DeviceRequest>();
    if (*count > kMaxCount)
      return InvalidArgument(StrCat(n.count, ": ", *count, " exceeds ", kMaxCount));
    core::DeviceRequest r;
    r.vendor = spec_.common_word;
    r.nums = static_cast<int>(*count);
    if (mem && *mem > 0)
      r.memreq_mib = *mem;
    else
      r.mem_percentage = 100;
    r.coresreq = 100;
    return std::optional<core::DeviceRequest>(r);
  }

  // Upstream's MutateAdmission: LUPINE_SERVER from the endpoint annotation the scheduler writes,
  // LUPINE_WORKLOAD_ID from the pod uid; with a memory request and a library image, libvgpu.so
  // copied in by an init container that runs before every other one, preloaded, and held to the
  // request (CUDA_DEVICE_MEMORY_LIMIT) with a cache of the pod's own.
  StatusOr<Mutation> Mutate(const nlohmann::json& resources,
                            const std::map<std::string, std::string>& annotations) const override {
    Mutation m;
    HAMI_ASSIGN_OR_RETURN(auto req, ParseRequest(resources, annotations));
    if (!req) return m;
    m.env_field_refs["LUPINE_SERVER"] = StrCat("metadata.annotations['", kEndpointAnnotation, "']");
    m.env_field_refs["LUPINE_WORKLOAD_ID"] = "metadata.uid";
    if (config_.lib_image.empty() || req->memreq_mib <= 0) return m;
    m.env_prepend["LD_PRELOAD"] = StrCat(kLibMountPath, "/libvgpu.so");
    m.set_env["CUDA_DEVICE_MEMORY_LIMIT"] = StrCat(req->memreq_mib, "m");
    m.set_env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = StrCat(kLibMountPath, "/vgpu.cache");
    m.volume_mounts[kLibVolume] = kLibMountPath;
    m.init_containers.push_back(
        {kLibVolume,
         config_.lib_image,
         {"sh", "-c", StrCat("cp ", config_.lib_source, " ", kLibMountPath, "/libvgpu.so")},
         kLibMountPath});
    return m;
  }

  // Only a lupine server registers cards, and only those its plugin put in remote mode (a card in
  // any other mode still belongs to the node's own kubelet). Ids get the server's name in front.
  StatusOr<std::vector<core::DeviceInfo>> DecodeNode(const NodeView& node) const override {
    if (!node.labels.count(kServerLabel)) return std::vector<core::DeviceInfo>();
    auto it = node.annotations.find(kRegisterAnnotation);
    if (it == node.annotations.end()) return std::vector<core::DeviceInfo>();
    if (!node.name.empty() && !IsNodeName(node.name))
      return InvalidArgument(
          StrCat("lupine server ", core::text::Quote(node.name), ": not a DNS-1123 node name"));
    auto devs = core::DecodeNodeDevices(it->second, spec_.common_word);
    if (!devs.ok())
      return InvalidArgument(
          StrCat(kRegisterAnnotation, ": ", std::string(devs.status().message())));
    std::vector<core::DeviceInfo> out;
    for (core::DeviceInfo& d : *devs) {
      if (d.mode != kServerMode) continue;
      if (!IsCardId(d.uuid))
        return InvalidArgument(StrCat(kRegisterAnnotation, ": remote card ",
                                      core::text::Quote(d.uuid),
                                      ": an id must be non-empty and hold none of / , : ;"));
      if (!node.name.empty()) d.uuid = DeviceId(node.name, d.uuid);
      out.push_back(std::move(d));
    }
    return out;
  }

  // What a lupine node's plugin writes: the cards in remote mode (ids without the server part),
  // and the label (an existing port value is kept).
  Status EncodeNode(const std::vector<core::DeviceInfo>& devices, NodeView* node) const override {
    std::vector<core::DeviceInfo> cards = devices;
    for (core::DeviceInfo& d : cards) {
      const std::string_view server = ServerOf(d.uuid);
      if (!server.empty()) {
        if (server != node->name)
          return InvalidArgument(StrCat("remote card ", d.uuid, " is not served by node ",
                                        core::text::Quote(node->name)));
        d.uuid = d.uuid.substr(server.size() + 1);
      }
      d.mode = kServerMode;
    }
    node->labels.emplace(kServerLabel, "");
    node->annotations[kRegisterAnnotation] = core::EncodeNodeDevicesJson(cards);
    return OkStatus();
  }

  // A card is whole (GenericVendor's whole_device_only) and at least the memory asked for.
  std::optional<Refusal> CheckDevice(const core::DeviceRequest& r, const core::DeviceInfo& d,
                                     const core::DeviceUsage& u,
                                     const core::DeviceSelectors& s) const override {
    if (auto refusal = GenericVendor::CheckDevice(r, d, u, s)) return refusal;
    if (r.memreq_mib > d.devmem_mib)
      return Refusal{Reason::kCardInsufficientMemory,
                     StrCat(d.uuid, ": card has ", d.devmem_mib, " MiB, ", r.memreq_mib, " asked"),
                     true};
    return std::nullopt;
  }

  // The memory resource filters cards, it is not granted: nothing to charge a quota with.
  std::vector<QuotaKey> QuotaKeys() const override { return {}; }

  // The fleet is pooled: a pod's remote-GPU requests are fitted on a lupine server (ChooseServer)
  // while the pod runs on a node that serves none.
  bool pooled() const override { return true; }
  scheduler::VendorRules::PoolChoice ChoosePool(
      std::span<const std::optional<core::DeviceRequest>> requests,
      std::span<const scheduler::VendorRules::PoolNode> nodes) const override {
    return ChooseServer(requests, nodes);
  }
  std::string PoolNodeOf(const core::ContainerDevice& device) const override {
    return std::string(ServerOf(device.uuid));
  }
  // The server's endpoint, which the webhook wired into LUPINE_SERVER.
  StatusOr<std::map<std::string, std::string>> PoolAnnotations(
      const NodeView& node) const override {
    HAMI_ASSIGN_OR_RETURN(std::string endpoint, Endpoint(node, config_.default_port));
    return std::map<std::string, std::string>{{kEndpointAnnotation, std::move(endpoint)}};
  }

  int default_port() const { return config_.default_port; }

 private:
  Config config_;
};

}  // namespace

int ConfiguredPort(const Vendor& vendor) {
  const auto* v = dynamic_cast<const RemoteGpuVendor*>(&vendor);
  return v == nullptr ? kDefaultPort : v->default_port();
}

}  // namespace remotegpu

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeRemoteGpu(const YAML::Node& section) {
  Spec s;
  s.name = "remotegpu";
  s.common_word = remotegpu::kCommonWord;
  s.resources = {"nvidia.com/remote-gpu", "nvidia.com/remote-gpu-memory", "", "", ""};
  // No registration key of its own (the cards are in NVIDIA's, on lupine nodes only) and no
  // handshake: no device plugin runs on a client node to answer one (upstream's CheckHealth).
  s.keys = {"", "", remotegpu::kToAllocate, remotegpu::kAllocated, "", "", "", ""};
  s.rules.whole_device_only = true;
  s.registration = Registration::kJson;
  remotegpu::Config config;
  SectionReader r(section, "remotegpu");
  HAMI_RETURN_IF_ERROR(r.String("resourceCountName", &s.resources.count));
  HAMI_RETURN_IF_ERROR(r.String("resourceMemoryName", &s.resources.memory));
  int64_t port = config.default_port;
  HAMI_RETURN_IF_ERROR(r.Int("defaultPort", &port));
  if (port < 1 || port > 65535)
    return InvalidArgument(StrCat("remotegpu.defaultPort: ", port, " is not a port (1..65535)"));
  config.default_port = static_cast<int>(port);
  HAMI_RETURN_IF_ERROR(r.String("libImage", &config.lib_image));
  if (!config.lib_image.empty() && !remotegpu::IsShellSafe(config.lib_image, false))
    return InvalidArgument(StrCat("remotegpu.libImage: ", core::text::Quote(config.lib_image),
                                  " is not an image reference (letters, digits, . _ - / : @)"));
  HAMI_RETURN_IF_ERROR(r.String("libSourcePath", &config.lib_source));
  if (!remotegpu::IsShellSafe(config.lib_source, true))
    return InvalidArgument(StrCat("remotegpu.libSourcePath: ", core::text::Quote(config.lib_source),
                                  " is not an absolute path (letters, digits, . _ - / *)"));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  return One<remotegpu::RemoteGpuVendor>(std::move(s), std::move(config));
}

}  // namespace hami::vendors
