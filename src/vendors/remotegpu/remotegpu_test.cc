// Upstream HAMi's remote-GPU tests (pkg/scheduler/remotegpu_integration_test.go and
// pkg/device/remotegpu/device_test.go), case by case through our Vendor interface and the pod-level
// server choice; each test is named after the upstream test it comes from. Upstream's fleet is a
// copy on every client node plus a cluster-wide reservation set; ours is registered once, on its
// server node, so a card's usage is the usage the cache holds for it (see
// docs/vendors.md#remote-gpu).
#include "vendors/remotegpu/remotegpu.h"

#include <gtest/gtest.h>

#include "core/node_codec.h"
#include "nlohmann/json.hpp"
#include "scheduler/scheduler.h"
#include "vendors/vendor_set.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors::remotegpu {
namespace {

std::unique_ptr<Vendor> Make(const std::string& yaml = "libImage: projecthami/hami:test") {
  auto v = MakeRemoteGpu(YAML::Load(yaml));
  EXPECT_TRUE(v.ok()) << v.status();
  return std::move(v->front());
}

const Vendor& V() {
  static const auto* v = Make().release();
  return *v;
}

// upstream's fleetGPU: a card the lupine node's plugin registers in remote mode.
core::DeviceInfo FleetGpu(const std::string& uuid, int64_t mem) {
  core::DeviceInfo d;
  d.uuid = uuid;
  d.count = 10;
  d.devmem_mib = mem;
  d.devcore = 100;
  d.type = "NVIDIA-A100-SXM4-40GB";
  d.health = true;
  d.mode = kServerMode;
  return d;
}

// upstream's lupineServerNode: the label, the NVIDIA registration, the InternalIP.
NodeView LupineServerNode(const std::string& name, const std::string& ip,
                          const std::vector<core::DeviceInfo>& gpus) {
  NodeView n;
  n.name = name;
  n.internal_ip = ip;
  n.labels[kServerLabel] = "";
  n.annotations[kRegisterAnnotation] = core::EncodeNodeDevicesJson(gpus);
  return n;
}

// A lupine server as the scheduler's cache holds it: its decoded cards, and their usage.
struct Server {
  NodeView node;
  std::vector<core::DeviceInfo> devices;
  std::vector<core::DeviceUsage> usage;
};
Server Registered(const std::string& name, const std::string& ip,
                  const std::vector<core::DeviceInfo>& gpus) {
  Server s{LupineServerNode(name, ip, gpus), {}, {}};
  auto devs = V().DecodeNode(s.node);
  EXPECT_TRUE(devs.ok()) << devs.status();
  s.devices = *devs;
  s.usage.resize(s.devices.size());
  return s;
}
std::vector<ServerView> Views(const std::vector<Server>& servers) {
  std::vector<ServerView> out;
  for (const Server& s : servers) out.push_back({s.node.name, s.devices, s.usage});
  return out;
}

// upstream's remoteGPUContainer: the container's request as the vendor parses it.
std::optional<core::DeviceRequest> Request(int cards, int64_t mem) {
  nlohmann::json limits = {{"nvidia.com/remote-gpu", cards}};
  if (mem > 0) limits["nvidia.com/remote-gpu-memory"] = mem;
  auto r = V().ParseRequest({{"limits", limits}}, {});
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(RemoteGpuUpstream, TestRemoteGPU_GPUlessNodeFitsAndLupineNodeDoesNot) {
  const Server lupine =
      Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000), FleetGpu("GPU-bbb", 40000)});
  // The GPU-less node registers nothing of this vendor (no label); the lupine node's cards are
  // the fleet's, not its own: NVIDIA does not offer them.
  NodeView cpu1;
  cpu1.name = "cpu-1";
  EXPECT_TRUE(V().DecodeNode(cpu1)->empty());
  auto set = VendorSet::Load("remotegpu: {}");
  ASSERT_TRUE(set.ok()) << set.status();
  const auto on_lupine = (*set)->DecodeNode(lupine.node, 0);
  ASSERT_EQ(on_lupine.devices.size(), 2u);
  for (const auto& d : on_lupine.devices) EXPECT_EQ(d.vendor, kCommonWord) << d.uuid;

  const std::vector<std::optional<core::DeviceRequest>> pod = {Request(2, 2000)};
  ASSERT_TRUE(pod[0]);
  EXPECT_EQ(pod[0]->nums, 2);
  const std::vector<Server> fleet = {lupine};
  const ServerChoice c = ChooseServer(pod, Views(fleet));
  ASSERT_EQ(c.node, "gpu-a") << c.reason;
  ASSERT_EQ(c.containers.size(), 1u);
  ASSERT_EQ(c.containers[0].size(), 2u) << "two whole cards";
  EXPECT_EQ(c.containers[0][0].uuid, "gpu-a/GPU-aaa");
  EXPECT_EQ(c.containers[0][0].usedmem_mib, 40000) << "whole card, not the 2000 requested";

  core::PodAllocation a;
  a.containers = c.containers;
  auto ann = V().EncodeDecision(a, 0);
  ASSERT_TRUE(ann.ok()) << ann.status();
  EXPECT_EQ(ann->at(kAllocated),
            "gpu-a/GPU-aaa,RemoteGPU,40000,100:gpu-a/GPU-bbb,RemoteGPU,40000,100:;");
  EXPECT_EQ(ann->at(kToAllocate), ann->at(kAllocated));
  EXPECT_EQ(*Endpoint(lupine.node, ConfiguredPort(V())), "10.0.0.5:14833");
}

TEST(RemoteGpuUpstream, TestRemoteGPU_AllocationNeverSpansTwoServers) {
  const std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000)}),
                                     Registered("gpu-b", "10.0.0.6", {FleetGpu("GPU-bbb", 40000)})};
  const std::vector<std::optional<core::DeviceRequest>> pod = {Request(2, 2000)};
  const ServerChoice c = ChooseServer(pod, Views(fleet));
  EXPECT_EQ(c.node, "") << "two cards on two servers must not be combined";
  EXPECT_EQ(c.reason, "2/2 NodeInsufficientDevice");
}

TEST(RemoteGpuUpstream, TestRemoteGPU_MultiContainerAllocationNeverSpansTwoServers) {
  const std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000)}),
                                     Registered("gpu-b", "10.0.0.6", {FleetGpu("GPU-bbb", 40000)})};
  const std::vector<std::optional<core::DeviceRequest>> pod = {Request(1, 0), Request(1, 0)};
  const ServerChoice c = ChooseServer(pod, Views(fleet));
  ASSERT_EQ(c.node, "gpu-a");
  ASSERT_EQ(c.containers.size(), 2u);
  EXPECT_EQ(c.containers[0].at(0).uuid, "gpu-a/GPU-aaa");
  EXPECT_EQ(c.containers[1].at(0).uuid, "gpu-a/GPU-aaa");
}

TEST(RemoteGpuUpstream, TestRemoteGPU_ServerSelectionIsContainerOrderIndependent) {
  struct Case {
    const char* name;
    std::vector<std::pair<int, int64_t>> containers;
  } cases[] = {
      {"unconstrained first", {{1, 0}, {1, 60000}}},
      {"memory constrained first", {{1, 60000}, {1, 0}}},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    // Listed in both orders too: the choice depends on neither.
    for (bool reversed : {false, true}) {
      std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000)}),
                                   Registered("gpu-b", "10.0.0.6", {FleetGpu("GPU-bbb", 80000)})};
      if (reversed) std::swap(fleet[0], fleet[1]);
      std::vector<std::optional<core::DeviceRequest>> pod;
      for (auto [cards, mem] : tc.containers) pod.push_back(Request(cards, mem));
      const ServerChoice c = ChooseServer(pod, Views(fleet));
      ASSERT_EQ(c.node, "gpu-b") << c.reason;
      for (const auto& ctr : c.containers) {
        ASSERT_FALSE(ctr.empty()) << "requesting container received no RemoteGPU allocation";
        EXPECT_EQ(ctr[0].uuid, "gpu-b/GPU-bbb");
      }
    }
  }
}

TEST(RemoteGpuUpstream, TestRemoteGPU_ServerSelectionIncludesInitSidecarAndAppContainers) {
  const std::vector<Server> fleet = {
      Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-a1", 80000), FleetGpu("GPU-a2", 40000)}),
      Registered("gpu-b", "10.0.0.6",
                 {FleetGpu("GPU-b1", 80000), FleetGpu("GPU-b2", 20000), FleetGpu("GPU-b3", 20000)}),
      Registered("gpu-c", "10.0.0.7",
                 {FleetGpu("GPU-c1", 50000), FleetGpu("GPU-c2", 40000), FleetGpu("GPU-c3", 20000)}),
      Registered("gpu-d", "10.0.0.8",
                 {FleetGpu("GPU-d1", 80000), FleetGpu("GPU-d2", 40000), FleetGpu("GPU-d3", 20000)}),
  };
  // first-init, later-init, sidecar (init, restartPolicy Always), app: each rules out a server.
  const std::vector<std::optional<core::DeviceRequest>> pod = {
      Request(1, 0), Request(3, 10000), Request(2, 30000), Request(1, 60000)};
  const ServerChoice c = ChooseServer(pod, Views(fleet));
  ASSERT_EQ(c.node, "gpu-d") << c.reason;
  ASSERT_EQ(c.containers.size(), 4u);
  for (const auto& ctr : c.containers) {
    ASSERT_EQ(ctr.size(), 3u);
    for (const auto& d : ctr) EXPECT_EQ(ServerOf(d.uuid), "gpu-d") << d.uuid;
  }
}

// Upstream reads a holder on another client node back from the pods' annotations; here the card
// is registered once, so the holder's usage is on the very card every client node would get.
TEST(RemoteGpuUpstream, TestRemoteGPU_ReservationBlocksSecondClientNode) {
  std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000)})};
  fleet[0].usage[0] = {1, 40000, 100, 0};  // "gpu-a/GPU-aaa,RemoteGPU,40000,100" of a running pod
  const ServerChoice c = ChooseServer({{Request(1, 2000)}}, Views(fleet));
  EXPECT_EQ(c.node, "");
  EXPECT_EQ(c.reason, "1/1 ExclusiveDeviceAllocateConflict");
}

TEST(RemoteGpuUpstream, TestRemoteGPU_FinishedPodReleasesCard) {
  // The finished holder's usage is gone from the card: it is on offer again.
  const std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000)})};
  EXPECT_EQ(ChooseServer({{Request(1, 2000)}}, Views(fleet)).node, "gpu-a");
}

TEST(RemoteGpuUpstream, TestRemoteGPU_RegisterPopulatesClientNodesOnly) {
  const NodeView lupine = LupineServerNode(
      "gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000), FleetGpu("GPU-bbb", 40000)});
  auto devs = V().DecodeNode(lupine);
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[0].uuid, "gpu-a/GPU-aaa");
  EXPECT_EQ((*devs)[0].vendor, kCommonWord);
  // The same registration without the label is a plain GPU node's: not the fleet's.
  NodeView plain = lupine;
  plain.labels.clear();
  EXPECT_TRUE(V().DecodeNode(plain)->empty());
}

TEST(RemoteGpuUpstream, TestRemoteGPU_MemoryRequestFiltersCards) {
  const std::vector<Server> fleet = {
      Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-small", 1000)})};
  const ServerChoice c = ChooseServer({{Request(1, 40000)}}, Views(fleet));
  EXPECT_EQ(c.node, "");
  EXPECT_EQ(c.reason, "1/1 CardInsufficientMemory, 1/1 NodeInsufficientDevice");
}

// ---- pkg/device/remotegpu/device_test.go ----

TEST(RemoteGpuUpstream, TestFit_ConfinesAllocationToOneServer) {
  const std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-1", 40000)}),
                                     Registered("gpu-b", "10.0.0.6", {FleetGpu("GPU-2", 40000)})};
  EXPECT_EQ(ChooseServer({{Request(2, 0)}}, Views(fleet)).node, "");
  const ServerChoice one = ChooseServer({{Request(1, 0)}}, Views(fleet));
  ASSERT_EQ(one.containers[0].size(), 1u);
  EXPECT_EQ(one.containers[0][0].uuid, "gpu-a/GPU-1") << "same size: the name breaks the tie";
}

TEST(RemoteGpuUpstream, TestFit_AllocatesWholeCard) {
  const std::vector<Server> fleet = {Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-1", 40000)})};
  const ServerChoice c = ChooseServer({{Request(1, 2000)}}, Views(fleet));
  ASSERT_EQ(c.containers[0].size(), 1u);
  EXPECT_EQ(c.containers[0][0].usedmem_mib, 40000);
  EXPECT_EQ(c.containers[0][0].usedcores, 100);
  // The per-card Fit (the Vendor interface) grants whole cards too.
  const FitResult fit = V().Fit(*Request(1, 2000), fleet[0].devices, fleet[0].usage, {}, {});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.devices[0].usedmem_mib, 40000);
}

TEST(RemoteGpuUpstream, TestFit_RejectsUnfitCards) {
  auto unhealthy = FleetGpu("GPU-1", 40000);
  unhealthy.health = false;
  std::vector<Server> fleet = {Registered(
      "gpu-a", "10.0.0.5", {unhealthy, FleetGpu("GPU-2", 40000), FleetGpu("GPU-3", 1000)})};
  fleet[0].usage[1].used = 1;
  const ServerChoice c = ChooseServer({{Request(1, 2000)}}, Views(fleet));
  EXPECT_EQ(c.node, "");
  EXPECT_EQ(c.reason, "1/3 CardNotHealth, 1/3 ExclusiveDeviceAllocateConflict");
  // Card by card, each is refused for its own reason.
  const FitResult fit = V().Fit(*Request(1, 2000), fleet[0].devices, fleet[0].usage, {}, {});
  EXPECT_FALSE(fit.ok());
  EXPECT_EQ(fit.Summary(3),
            "1/3 CardInsufficientMemory, 1/3 CardNotHealth, 1/3 ExclusiveDeviceAllocateConflict, "
            "1/3 NodeInsufficientDevice");
}

TEST(RemoteGpuUpstream, TestFit_TakesTheWholeServer) {
  const std::vector<Server> fleet = {Registered(
      "gpu-a", "10.0.0.5",
      {FleetGpu("GPU-A1", 40000), FleetGpu("GPU-A2", 40000), FleetGpu("GPU-A3", 40000)})};
  EXPECT_EQ(ChooseServer({{Request(1, 0)}}, Views(fleet)).containers[0].size(), 3u)
      << "one card was asked for, the server's three come with it";
}

TEST(RemoteGpuUpstream, TestFit_PrefersTheSmallestSufficientServer) {
  const std::vector<Server> fleet = {
      Registered("gpu-a", "10.0.0.5",
                 {FleetGpu("GPU-A1", 40000), FleetGpu("GPU-A2", 40000), FleetGpu("GPU-A3", 40000)}),
      Registered("gpu-b", "10.0.0.6", {FleetGpu("GPU-B1", 40000)})};
  EXPECT_EQ(ChooseServer({{Request(1, 0)}}, Views(fleet)).node, "gpu-b");
  const ServerChoice two = ChooseServer({{Request(2, 0)}}, Views(fleet));
  EXPECT_EQ(two.node, "gpu-a");
  EXPECT_EQ(two.containers[0].size(), 3u);
}

TEST(RemoteGpuUpstream, TestFit_OneBusyCardWithholdsItsServer) {
  std::vector<Server> fleet = {
      Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-A1", 40000), FleetGpu("GPU-A2", 40000)}),
      Registered("gpu-b", "10.0.0.6", {FleetGpu("GPU-B1", 40000)})};
  fleet[0].usage[0].used = 1;
  EXPECT_EQ(ChooseServer({{Request(1, 0)}}, Views(fleet)).node, "gpu-b")
      << "gpu-a still has a free card but is not on offer";
  fleet.pop_back();
  EXPECT_EQ(ChooseServer({{Request(1, 0)}}, Views(fleet)).node, "");
}

TEST(RemoteGpuUpstream, TestFit_CountsOnlyCardsThatMeetTheRequest) {
  const std::vector<Server> fleet = {
      Registered("gpu-a", "10.0.0.5", {FleetGpu("GPU-A1", 40000), FleetGpu("GPU-A2", 1000)})};
  EXPECT_EQ(ChooseServer({{Request(1, 2000)}}, Views(fleet)).containers[0].size(), 2u)
      << "the small card comes along";
  EXPECT_EQ(ChooseServer({{Request(2, 2000)}}, Views(fleet)).node, "")
      << "only one card is big enough";
}

TEST(RemoteGpuUpstream, TestGenerateResourceRequests) {
  const auto r = Request(2, 2000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->nums, 2);
  EXPECT_EQ(r->memreq_mib, 2000);
  EXPECT_EQ(r->coresreq, 100);
  EXPECT_EQ(r->vendor, kCommonWord);
  EXPECT_FALSE(*V().ParseRequest({{"limits", nlohmann::json::object()}}, {}));
  // Memory alone asks for nothing (upstream reads the count first); a count of 0 neither.
  EXPECT_FALSE(*V().ParseRequest({{"limits", {{"nvidia.com/remote-gpu-memory", 2000}}}}, {}));
  EXPECT_FALSE(*V().ParseRequest({{"limits", {{"nvidia.com/remote-gpu", 0}}}}, {}));
  EXPECT_FALSE(V().ParseRequest({{"limits", {{"nvidia.com/remote-gpu", 5000}}}}, {}).ok());
}

TEST(RemoteGpuUpstream, TestMutateAdmission_ReplacesLiteralServerEnv) {
  auto m = V().Mutate({{"limits", {{"nvidia.com/remote-gpu", 2}}}}, {});
  ASSERT_TRUE(m.ok());
  // Field references replace whatever the container says (the webhook test checks the patch).
  EXPECT_EQ(m->env_field_refs.at("LUPINE_SERVER"),
            "metadata.annotations['hami.io/lupine-endpoint']");
  EXPECT_EQ(m->env_field_refs.at("LUPINE_WORKLOAD_ID"), "metadata.uid");
  EXPECT_TRUE(m->env.empty());
}

TEST(RemoteGpuUpstream, TestMutateAdmission_IgnoresContainerWithoutRequest) {
  auto m = V().Mutate({{"limits", {{"cpu", "1"}}}}, {});
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->empty());
}

TEST(RemoteGpuUpstream, TestMutateAdmission_ArmsTheMemoryLimit) {
  auto m = V().Mutate(
      {{"limits", {{"nvidia.com/remote-gpu", 1}, {"nvidia.com/remote-gpu-memory", 2000}}}}, {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->set_env.at("CUDA_DEVICE_MEMORY_LIMIT"), "2000m");
  EXPECT_EQ(m->set_env.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"), "/hami-remote-gpu/vgpu.cache");
  EXPECT_EQ(m->env_prepend.at("LD_PRELOAD"), "/hami-remote-gpu/libvgpu.so");
  EXPECT_EQ(m->volume_mounts.at("hami-remote-gpu-lib"), "/hami-remote-gpu");
  ASSERT_EQ(m->init_containers.size(), 1u);
  const InitContainer& ic = m->init_containers[0];
  EXPECT_EQ(ic.name, "hami-remote-gpu-lib");
  EXPECT_EQ(ic.image, "projecthami/hami:test");
  EXPECT_EQ(ic.command,
            (std::vector<std::string>{
                "sh", "-c", "cp /usr/local/vgpu/libvgpu.so /hami-remote-gpu/libvgpu.so"}));
  // Upstream's image keeps a versioned file: its path is one option away.
  auto upstream =
      Make("libImage: projecthami/hami:v2.6.0\nlibSourcePath: /k8s-vgpu/lib/nvidia/libvgpu.so.*")
          ->Mutate(
              {{"limits", {{"nvidia.com/remote-gpu", 1}, {"nvidia.com/remote-gpu-memory", 1}}}},
              {});
  ASSERT_TRUE(upstream.ok());
  EXPECT_EQ(upstream->init_containers.at(0).command.at(2),
            "cp /k8s-vgpu/lib/nvidia/libvgpu.so.* /hami-remote-gpu/libvgpu.so");
  EXPECT_EQ(ic.mount_path, "/hami-remote-gpu");
}

TEST(RemoteGpuUpstream, TestMutateAdmission_SkipsEnforcementWhenNotAsked) {
  auto count_only = V().Mutate({{"limits", {{"nvidia.com/remote-gpu", 1}}}}, {});
  ASSERT_TRUE(count_only.ok());
  EXPECT_TRUE(count_only->init_containers.empty());
  EXPECT_TRUE(count_only->set_env.empty());
  auto no_image =
      Make("resourceCountName: nvidia.com/remote-gpu")
          ->Mutate(
              {{"limits", {{"nvidia.com/remote-gpu", 1}, {"nvidia.com/remote-gpu-memory", 2000}}}},
              {});
  ASSERT_TRUE(no_image.ok());
  EXPECT_TRUE(no_image->init_containers.empty());
  EXPECT_TRUE(no_image->env_prepend.empty());
  EXPECT_FALSE(no_image->env_field_refs.empty());
}

TEST(RemoteGpuUpstream, TestPatchAnnotations_WritesResolvedEndpoint) {
  struct Case {
    const char* label;
    const char* ip;
    const char* want;  // "" = an error
  } cases[] = {
      {"", "10.0.0.5", "10.0.0.5:14833"},
      {"15000", "10.0.0.5", "10.0.0.5:15000"},
      // upstream: an unreadable or out-of-range port falls back to the default
      {"http", "10.0.0.5", "10.0.0.5:14833"},
      {"70000", "10.0.0.5", "10.0.0.5:14833"},
      {"", "fd00::5", "[fd00::5]:14833"},
      // hostile or missing addresses never become an endpoint
      {"", "", ""},
      {"", "10.0.0.5/evil", ""},
      {"", "example.com", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(StrCat(c.label, " ", c.ip));
    NodeView n = LupineServerNode("gpu-a", c.ip, {});
    n.labels[kServerLabel] = c.label;
    auto ep = Endpoint(n, kDefaultPort);
    if (*c.want == '\0') {
      EXPECT_FALSE(ep.ok());
    } else {
      ASSERT_TRUE(ep.ok()) << ep.status();
      EXPECT_EQ(*ep, c.want);
    }
  }
  NodeView unlabelled;
  unlabelled.internal_ip = "10.0.0.5";
  EXPECT_FALSE(Endpoint(unlabelled).ok());
}

// ---- ours: what the annotations are trusted for ----

TEST(RemoteGpu, HostileRegistrationsAreErrorsOrIgnored) {
  // A card id that would break the decision codec, or a node name that is no DNS-1123 name.
  for (const char* uuid : {"GPU/1", "GPU,1", "GPU:1", "GPU;1"}) {
    SCOPED_TRACE(uuid);
    EXPECT_FALSE(V().DecodeNode(LupineServerNode("gpu-a", "10.0.0.5", {FleetGpu(uuid, 1)})).ok());
  }
  EXPECT_FALSE(V().DecodeNode(LupineServerNode("../etc", "10.0.0.5", {FleetGpu("GPU-1", 1)})).ok());
  NodeView garbage = LupineServerNode("gpu-a", "10.0.0.5", {});
  garbage.annotations[kRegisterAnnotation] = "[{";
  auto bad = V().DecodeNode(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find(kRegisterAnnotation), std::string::npos);
  // A card in another mode stays the node's own: neither an error nor the fleet's.
  core::DeviceInfo local = FleetGpu("GPU/odd", 1);
  local.mode = "";
  EXPECT_TRUE(V().DecodeNode(LupineServerNode("gpu-a", "10.0.0.5", {local}))->empty());
}

TEST(RemoteGpu, ConfigIsValidated) {
  EXPECT_FALSE(MakeRemoteGpu(YAML::Load("defaultPort: 0")).ok());
  EXPECT_FALSE(MakeRemoteGpu(YAML::Load("defaultPort: 65536")).ok());
  // Image and path go into `sh -c`: nothing a shell reads as more than a word.
  for (const char* bad :
       {"libImage: \"a b\"", "libImage: \"x;reboot\"", "libImage: \"$(id)\"",
        "libSourcePath: relative/lib.so", "libSourcePath: \"/a;b\"", "libSourcePath: \"/a b\""}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(MakeRemoteGpu(YAML::Load(bad)).ok());
  }
  EXPECT_FALSE(MakeRemoteGpu(YAML::Load("unknownKey: 1")).ok());
  auto v = MakeRemoteGpu(YAML::Load("defaultPort: 15000\nresourceCountName: example.com/rgpu"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(ConfiguredPort(*v->front()), 15000);
  EXPECT_EQ(v->front()->resources().count, "example.com/rgpu");
}

TEST(RemoteGpu, NvidiaDoesNotOfferRemoteModeCards) {
  auto set = VendorSet::Load("");
  ASSERT_TRUE(set.ok());
  core::DeviceInfo local = FleetGpu("GPU-local", 40000);
  local.mode = "";
  const NodeView n = LupineServerNode("gpu-a", "10.0.0.5", {FleetGpu("GPU-aaa", 40000), local});
  const auto devs = (*set)->DecodeNode(n, 0);
  ASSERT_EQ(devs.devices.size(), 1u);
  EXPECT_EQ(devs.devices[0].uuid, "GPU-local");
  EXPECT_EQ(devs.devices[0].vendor, core::kNvidiaVendor);
}

// ---- Placement through the production scheduler (scheduler::Scheduler with the vendor set as
// its VendorRules, as `hami scheduler` and `hami sim` build it): the server is chosen for the whole
// pod, the pod runs on a node that serves no fleet, and the cards are charged on their server ----

class RemoteGpuPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    auto set = VendorSet::Load("remotegpu:\n  libImage: projecthami/hami:test\n");
    ASSERT_TRUE(set.ok()) << set.status();
    set_ = std::move(*set);
    scheduler::SchedulerOptions so;
    so.vendor_rules = set_.get();
    auto sched = scheduler::Scheduler::Create(so);
    ASSERT_TRUE(sched.ok()) << sched.status();
    sched_ = std::move(*sched);
    // Two lupine servers (registered through the vendor set, as the informer does) and a node
    // with CPU but no devices.
    for (const auto& [name, cards] :
         std::vector<std::pair<std::string, int>>{{"lupine-a", 2}, {"lupine-b", 1}}) {
      std::vector<core::DeviceInfo> gpus;
      for (int i = 0; i < cards; ++i) gpus.push_back(FleetGpu(StrCat("GPU-", name, "-", i), 40960));
      core::NodeInfo info;
      info.name = name;
      info.cpu_milli = 64000;
      info.devices = set_->DecodeNode(LupineServerNode(name, "10.0.0.5", gpus), 0).devices;
      ASSERT_EQ(info.devices.size(), static_cast<size_t>(cards));
      sched_->UpsertNode(std::move(info));
    }
    core::NodeInfo cpu;
    cpu.name = "cpu-node";
    cpu.cpu_milli = 32000;
    sched_->UpsertNode(std::move(cpu));
  }
  core::PodRequest Pod(const std::string& uid, int cards, int containers = 1) {
    nlohmann::json ctrs = nlohmann::json::array();
    for (int i = 0; i < containers; ++i)
      ctrs.push_back({{"name", StrCat("c", i)},
                      {"resources", {{"limits", {{"nvidia.com/remote-gpu", cards}}}}}});
    auto p = set_->ParsePod({{"metadata", {{"name", uid}, {"namespace", "ns"}, {"uid", uid}}},
                             {"spec", {{"containers", ctrs}}}});
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : core::PodRequest{};
  }
  core::DeviceUsage UsageOf(const std::string& node, const std::string& uuid) const {
    auto snap = sched_->cache().Snapshot(node);
    for (size_t i = 0; snap && i < snap->info.devices.size(); ++i)
      if (snap->info.devices[i].uuid == uuid) return snap->usage[i];
    ADD_FAILURE() << uuid << " not on " << node;
    return {};
  }
  std::unique_ptr<VendorSet> set_;
  std::unique_ptr<scheduler::Scheduler> sched_;
};

TEST_F(RemoteGpuPlacement, ServerForThePodClientNodeForItsContainers) {
  const core::PodRequest pod = Pod("p1", 1, 2);
  auto d = sched_->Schedule(pod, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->node, "cpu-node");  // never a lupine server
  EXPECT_FALSE(d->node_untracked);
  EXPECT_EQ(d->pool_node, "lupine-b");  // the smallest server that serves the pod
  ASSERT_EQ(d->allocation.containers.size(), 2u);
  for (const auto& c : d->allocation.containers) {
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].uuid, "lupine-b/GPU-lupine-b-0");
    EXPECT_EQ(c[0].usedmem_mib, 40960);
  }
  ASSERT_TRUE(sched_->Reserve(pod, *d).ok());
  // Charged once on its server, however many containers see it.
  EXPECT_EQ(UsageOf("lupine-b", "lupine-b/GPU-lupine-b-0"), (core::DeviceUsage{1, 40960, 100}));

  // The next pod gets the other server, whole; then nothing is left.
  const core::PodRequest second = Pod("p2", 1);
  auto d2 = sched_->ScheduleAndReserve(second, nullptr);
  ASSERT_TRUE(d2.ok()) << d2.status();
  EXPECT_EQ(d2->pool_node, "lupine-a");
  ASSERT_EQ(d2->allocation.containers[0].size(), 2u);
  EXPECT_EQ(UsageOf("lupine-a", "lupine-a/GPU-lupine-a-1"), (core::DeviceUsage{1, 40960, 100}));
  scheduler::ScheduleOptions explain;
  explain.explain = true;
  auto none = sched_->Schedule(Pod("p3", 1), nullptr, explain);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->node.empty());
  ASSERT_FALSE(none->failures.empty());
  EXPECT_EQ(none->failures[0].reason, "3/3 ExclusiveDeviceAllocateConflict");

  // Giving the first pod back frees its server; a pod recorded from its annotations takes it again.
  ASSERT_TRUE(sched_->Unreserve("p1").ok());
  EXPECT_EQ(UsageOf("lupine-b", "lupine-b/GPU-lupine-b-0"), core::DeviceUsage{});
  ASSERT_TRUE(sched_->AddPod("p1", d->allocation).ok());
  EXPECT_EQ(UsageOf("lupine-b", "lupine-b/GPU-lupine-b-0"), (core::DeviceUsage{1, 40960, 100}));
  ASSERT_TRUE(sched_->RemovePod("p1").ok());
  EXPECT_EQ(UsageOf("lupine-b", "lupine-b/GPU-lupine-b-0"), core::DeviceUsage{});
  EXPECT_FALSE(sched_->RemovePod("p1").ok());
}

TEST_F(RemoteGpuPlacement, ServersHostNoClientAndNodesWithoutDevicesAreTakenFirst) {
  const core::PodRequest pod = Pod("uid-7", 1);
  // Only servers offered: no node for the pod itself, and the servers say why.
  const std::vector<std::string> servers = {"lupine-a", "lupine-b"};
  scheduler::ScheduleOptions explain;
  explain.explain = true;
  auto d = sched_->Schedule(pod, &servers, explain);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->node.empty());
  ASSERT_EQ(d->failures.size(), 2u);
  EXPECT_NE(d->failures[0].reason.find("hosts no pod asking for them"), std::string::npos);
  EXPECT_FALSE(d->failures[0].retryable);
  // Candidates the cache does not hold (nodes without devices) come before the ones it does; the
  // choice among them depends on the uid only, not on the order they are listed in.
  const std::vector<std::string> cands = {"plain-2", "lupine-a", "cpu-node", "plain-1"};
  const std::vector<std::string> reversed(cands.rbegin(), cands.rend());
  auto a = sched_->Schedule(pod, &cands);
  auto b = sched_->Schedule(pod, &reversed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->node == "plain-1" || a->node == "plain-2") << a->node;
  EXPECT_EQ(a->node, b->node);
  EXPECT_TRUE(a->node_untracked);
  EXPECT_EQ(a->pool_node, "lupine-b");
  ASSERT_TRUE(sched_->Reserve(pod, *a).ok());
  EXPECT_EQ(UsageOf("lupine-b", "lupine-b/GPU-lupine-b-0").used, 1);
  ASSERT_TRUE(sched_->Unreserve("uid-7").ok());
  EXPECT_EQ(UsageOf("lupine-b", "lupine-b/GPU-lupine-b-0").used, 0);
}

TEST_F(RemoteGpuPlacement, ARecordNamingTwoServersOrNoneIsRefused) {
  core::PodAllocation a;
  a.node = "cpu-node";
  a.containers = {{core::ContainerDevice{"lupine-a/GPU-lupine-a-0", kCommonWord, 40960, 100, 0},
                   core::ContainerDevice{"lupine-b/GPU-lupine-b-0", kCommonWord, 40960, 100, 0}}};
  EXPECT_FALSE(sched_->AddPod("two", a).ok());
  a.containers = {{core::ContainerDevice{"GPU-no-server", kCommonWord, 40960, 100, 0}}};
  EXPECT_FALSE(sched_->AddPod("none", a).ok());
  EXPECT_EQ(UsageOf("lupine-a", "lupine-a/GPU-lupine-a-0"), core::DeviceUsage{});
}

}  // namespace
}  // namespace hami::vendors::remotegpu
