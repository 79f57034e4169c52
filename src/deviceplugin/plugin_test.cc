// The device plugin over real gRPC unix sockets against the fake kubelet.
#include "deviceplugin/plugin.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "deviceplugin/pod_resources.h"
#include "deviceplugin/testing/builders.h"
#include "deviceplugin/testing/fake_kubelet.h"
#include "gpu/nvml_discovery.h"
#include "gpu/static_discovery.h"
#include "gpu/testing/fake_nvml_hooks.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::Dev;

PendingPod Pod(const std::string& name, std::vector<std::vector<core::ContainerDevice>> ctrs) {
  return testing::MakePod(name, std::move(ctrs));
}

int CountHealth(const std::vector<v1beta1::Device>& devs, const std::string& uuid_prefix,
                const std::string& health) {
  int n = 0;
  for (const auto& d : devs) {
    if (d.id().rfind(uuid_prefix + "-", 0) == 0 && d.health() == health) ++n;
  }
  return n;
}

// NvmlDiscovery over the fake libnvidia-ml.so.1 with `devices` (FAKEGPU_DEVICES) and a state file
// of its own; the fake re-reads its environment first.
StatusOr<std::unique_ptr<gpu::NvmlDiscovery>> OpenFakeNvml(const std::string& state,
                                                           const char* devices,
                                                           gpu::testing::FakeNvmlHooks* hooks) {
  setenv("FAKEGPU_STATE", state.c_str(), 1);
  setenv("FAKEGPU_DEVICES", devices, 1);
  *hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  if (!hooks->ok()) return FailedPrecondition(hooks->error);
  hooks->reset();
  gpu::NvmlOptions o;
  o.library = HAMI_FAKE_NVML;
  o.event_wait_ms = 50;
  return gpu::NvmlDiscovery::Open(o);
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hdpXXXXXX";  // short: unix socket paths are limited to 107 bytes
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_.plugin_dir = dir_ + "/dp/";
    config_.region_root = dir_ + "/regions";
    config_.split_count = 4;
    discovery_ = std::make_unique<gpu::StaticDiscovery>(
        std::vector<gpu::GpuInfo>{gpu::MakeGpu(0, "GPU-aaaa", "Tesla T4", 15360, 0),
                                  gpu::MakeGpu(1, "GPU-bbbb", "Tesla T4", 15360, 1)},
        std::vector<gpu::GpuLink>{{0, 1, 0, gpu::PcieLevel::kSingle}});
    kubelet_ = std::make_unique<testing::FakeKubelet>(config_.plugin_dir);
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void StartBoth() {
    ASSERT_TRUE(kubelet_->Start().ok());
    plugin_ = std::make_unique<DevicePlugin>(config_, discovery_.get(), &pending_, 42);
    if (refit_ != nullptr) plugin_->SetRefitClient(refit_, "node-1");
    ASSERT_TRUE(plugin_->Start().ok());
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(10)));
    ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 8; }, seconds(10)));
  }

  std::string dir_;
  PluginConfig config_;
  std::unique_ptr<gpu::StaticDiscovery> discovery_;
  MemoryPendingPodSource pending_;
  RefitClient* refit_ = nullptr;  // set before StartBoth
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::unique_ptr<DevicePlugin> plugin_;
};

TEST_F(PluginTest, RegistersAndAdvertisesSplitReplicas) {
  StartBoth();
  auto regs = kubelet_->Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].version(), "v1beta1");
  EXPECT_EQ(regs[0].endpoint(), "nvidia-gpu.sock");
  EXPECT_EQ(regs[0].resource_name(), "nvidia.com/gpu");
  EXPECT_TRUE(regs[0].options().get_preferred_allocation_available());
  EXPECT_FALSE(regs[0].options().pre_start_required());
  EXPECT_TRUE(kubelet_->Options().get_preferred_allocation_available());
  auto devs = kubelet_->Devices();
  EXPECT_EQ(CountHealth(devs, "GPU-aaaa", "Healthy"), 4);
  EXPECT_EQ(CountHealth(devs, "GPU-bbbb", "Healthy"), 4);
  EXPECT_EQ(devs[0].id(), "GPU-aaaa-0");
  EXPECT_FALSE(devs[0].has_topology());  // NUMA only with enable_numa_topology

  auto node = plugin_->NodeDevices();
  ASSERT_EQ(node.size(), 2u);
  EXPECT_EQ(node[1].count, 4);
  EXPECT_EQ(node[1].numa, 1);
  auto ann = plugin_->NodeAnnotations(/*with_link_scores=*/true);
  EXPECT_EQ(
      ann.at("hami.io/node-nvidia-register"),
      R"([{"id":"GPU-aaaa","count":4,"devmem":15360,"devcore":100,"type":"NVIDIA-Tesla T4","health":true,)"
      R"("mode":"hami-core"},{"id":"GPU-bbbb","index":1,"count":4,"devmem":15360,"devcore":100,)"
      R"("type":"NVIDIA-Tesla T4","numa":1,"health":true,"mode":"hami-core"}])");
  EXPECT_EQ(
      ann.at("hami.io/node-nvidia-score"),
      R"([{"uuid":"GPU-aaaa","score":{"GPU-bbbb":50}},{"uuid":"GPU-bbbb","score":{"GPU-aaaa":50}}])");
  EXPECT_EQ(plugin_->NodeAnnotations(false).count("hami.io/node-nvidia-score"), 0u);
}

TEST_F(PluginTest, NumaTopologyWhenEnabledAndExcludedDevicesHidden) {
  config_.enable_numa_topology = true;
  config_.exclude_uuids = {"GPU-aaaa"};
  ASSERT_TRUE(kubelet_->Start().ok());
  plugin_ = std::make_unique<DevicePlugin>(config_, discovery_.get(), &pending_, 1);
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 4; }, seconds(10)));
  for (const auto& d : kubelet_->Devices()) {
    EXPECT_EQ(d.id().rfind("GPU-bbbb-", 0), 0u) << d.id();
    ASSERT_EQ(d.topology().nodes_size(), 1);
    EXPECT_EQ(d.topology().nodes(0).id(), 1);
  }
}

TEST_F(PluginTest, UnhealthyDeviceReachesKubeletWithinFiveSeconds) {
  StartBoth();
  discovery_->SetHealth({"GPU-bbbb", false, 79, "Xid 79"});
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [](const auto& d) { return CountHealth(d, "GPU-bbbb", "Unhealthy") == 4; }, seconds(5)));
  EXPECT_EQ(CountHealth(kubelet_->Devices(), "GPU-aaaa", "Healthy"), 4);
  EXPECT_FALSE(plugin_->NodeDevices()[1].health);
  // An event for the whole node (no UUID) marks every device.
  discovery_->SetHealth({"", false, 48, "Xid 48"});
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [](const auto& d) { return CountHealth(d, "GPU-aaaa", "Unhealthy") == 4; }, seconds(5)));
}

TEST_F(PluginTest, KubeletRestartLeadsToReRegistration) {
  StartBoth();
  discovery_->SetHealth({"GPU-aaaa", false, 79, "Xid 79"});
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [](const auto& d) { return CountHealth(d, "GPU-aaaa", "Unhealthy") == 4; }, seconds(5)));
  for (int restart = 1; restart <= 2; ++restart) {
    ASSERT_TRUE(kubelet_->Restart().ok());
    ASSERT_TRUE(kubelet_->WaitForRegistrations(1 + restart, seconds(10))) << "restart " << restart;
    // The new stream re-advertises every replica with its current health.
    ASSERT_TRUE(kubelet_->WaitForDevices(
        [](const auto& d) { return d.size() == 8 && CountHealth(d, "GPU-aaaa", "Unhealthy") == 4; },
        seconds(10)));
  }
  // The plugin counts a registration once kubelet's reply is back, which can be after kubelet
  // counted it: wait for it (bounded).
  for (int i = 0; i < 1000 && plugin_->registrations() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(plugin_->registrations(), 3);
  EXPECT_TRUE(fs::exists(plugin_->SocketPath()));
}

TEST_F(PluginTest, PluginStartedBeforeKubeletRegistersWhenItAppears) {
  plugin_ = std::make_unique<DevicePlugin>(config_, discovery_.get(), &pending_, 1);
  ASSERT_TRUE(plugin_->Start().ok());
  EXPECT_EQ(plugin_->registrations(), 0);
  ASSERT_TRUE(kubelet_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(10)));
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 8; }, seconds(10)));
}

TEST_F(PluginTest, AllocateReturnsTheDecisionsEnvironment) {
  config_.libcuda_log_level = "1";
  config_.memory_scaling = 1.5;
  StartBoth();
  PendingPod p1 = Pod(
      "p1", {{Dev("GPU-bbbb", 3000, 30)}, {Dev("GPU-aaaa", 2000, 0), Dev("GPU-bbbb", 2000, 0)}});
  // The first container names its user and the pod's group: other ids when the test may give files
  // away (root), else our own.
  const uid_t want_uid = ::geteuid() == 0 ? 4321 : ::getuid();
  const gid_t want_gid = ::geteuid() == 0 ? 4322 : ::getgid();
  p1.containers[0].uid = want_uid;
  p1.containers[0].gid = want_gid;
  pending_.AddPod(p1);

  auto r1 = kubelet_->Allocate({{"GPU-aaaa-2"}});  // kubelet's replica choice carries no identity
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_EQ(r1->container_responses_size(), 1);
  const auto& e1 = r1->container_responses(0).envs();
  EXPECT_EQ(e1.at("NVIDIA_VISIBLE_DEVICES"), "GPU-bbbb");
  EXPECT_EQ(e1.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(e1.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(e1.at("CUDA_OVERSUBSCRIBE"), "true");
  EXPECT_EQ(e1.at("LIBCUDA_LOG_LEVEL"), "1");
  const std::string cache = e1.at("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  EXPECT_EQ(cache.rfind("/usr/local/vgpu/", 0), 0u) << cache;
  const auto& mounts = r1->container_responses(0).mounts();
  ASSERT_EQ(mounts.size(), 5);
  EXPECT_EQ(mounts[1].container_path(), "/usr/local/vgpu");
  EXPECT_EQ(mounts[1].host_path(), config_.region_root + "/uid-p1_c0");
  struct stat st {};
  ASSERT_EQ(::stat(mounts[1].host_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0770u) << "never world-writable";
  EXPECT_EQ(st.st_uid, want_uid);
  EXPECT_EQ(st.st_gid, want_gid);
  // libvgpu's limits file: written before the container starts, read-only, mounted read-only.
  EXPECT_EQ(mounts[4].container_path(), "/usr/local/vgpu/vgpu.limits");
  EXPECT_TRUE(mounts[4].read_only());
  ASSERT_EQ(::stat(mounts[4].host_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  std::ifstream limits(mounts[4].host_path());
  std::string text((std::istreambuf_iterator<char>(limits)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("CUDA_DEVICE_MEMORY_LIMIT_0=3000m\n"), std::string::npos) << text;

  auto r2 = kubelet_->Allocate({{"GPU-aaaa-0", "GPU-bbbb-0"}});
  ASSERT_TRUE(r2.ok()) << r2.status();
  const auto& e2 = r2->container_responses(0).envs();
  EXPECT_EQ(e2.at("NVIDIA_VISIBLE_DEVICES"), "GPU-aaaa,GPU-bbbb");
  EXPECT_EQ(e2.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  EXPECT_EQ(e2.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "2000m");
  EXPECT_NE(e2.at("CUDA_DEVICE_MEMORY_SHARED_CACHE"), cache);  // one region file per container

  // Everything consumed: the next Allocate has no pod.
  auto r3 = kubelet_->Allocate({{"GPU-aaaa-1"}});
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), absl::StatusCode::kNotFound);
}

// The CDI device-list strategies on the wire: kubelet receives the CDI names in
// ContainerAllocateResponse.annotations (cdi-annotations) and .cdi_devices (cdi-cri), no
// NVIDIA_VISIBLE_DEVICES, and the libvgpu environment and mounts as with the env strategy.
TEST_F(PluginTest, AllocateNamesTheGpusAsCdiDevices) {
  config_.device_list_strategy = "cdi-annotations,cdi-cri";
  config_.device_id_strategy = "index";
  StartBoth();
  pending_.AddPod(Pod("p1", {{Dev("GPU-bbbb", 3000, 30), Dev("GPU-aaaa", 2000, 30)}}));
  auto r = kubelet_->Allocate({{"GPU-aaaa-1", "GPU-bbbb-2"}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->container_responses_size(), 1);
  const auto& c = r->container_responses(0);
  EXPECT_EQ(c.envs().count("NVIDIA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(c.envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(c.envs().at("CUDA_DEVICE_MEMORY_LIMIT_1"), "2000m");
  EXPECT_EQ(c.envs().at("CUDA_DEVICE_SM_LIMIT"), "30");
  ASSERT_EQ(c.cdi_devices_size(), 2);
  EXPECT_EQ(c.cdi_devices(0).name(), "nvidia.com/gpu=1");  // GPU-bbbb is NVML index 1
  EXPECT_EQ(c.cdi_devices(1).name(), "nvidia.com/gpu=0");
  ASSERT_EQ(c.annotations_size(), 1);
  const auto& [key, value] = *c.annotations().begin();
  EXPECT_EQ(key.rfind("cdi.k8s.io/nvidia-device-plugin_", 0), 0u) << key;
  EXPECT_EQ(value, "nvidia.com/gpu=1,nvidia.com/gpu=0");
  // The annotation is keyed by the allocation's ID, the region file's name.
  const std::string cache = c.envs().at("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  EXPECT_EQ(cache, "/usr/local/vgpu/" +
                       key.substr(std::string("cdi.k8s.io/nvidia-device-plugin_").size()) +
                       ".cache");
  ASSERT_EQ(c.mounts_size(), 5);
  EXPECT_EQ(c.mounts(0).container_path(), "/usr/local/vgpu/libvgpu.so");
  EXPECT_EQ(c.mounts(4).container_path(), "/usr/local/vgpu/vgpu.limits");
}

TEST_F(PluginTest, AllocateErrors) {
  StartBoth();
  struct Case {
    const char* name;
    std::vector<PendingPod> pods;
    std::vector<std::string> ids;
    absl::StatusCode code;
    const char* msg;
  };
  const std::vector<Case> cases = {
      {"unknown pod", {}, {"GPU-aaaa-0"}, absl::StatusCode::kNotFound, "no pod bound to this node"},
      {"unknown device ID",
       {Pod("p", {{Dev("GPU-aaaa", 1, 0)}})},
       {"GPU-zzzz-0"},
       absl::StatusCode::kInvalidArgument,
       "unknown device ID"},
      {"count mismatch",
       {Pod("p", {{Dev("GPU-aaaa", 1, 0)}})},
       {"GPU-aaaa-0", "GPU-bbbb-0"},
       absl::StatusCode::kNotFound,
       "wants that many"},
      {"ambiguous",
       {Pod("p", {{Dev("GPU-aaaa", 1000, 0)}}), Pod("q", {{Dev("GPU-bbbb", 2000, 0)}})},
       {"GPU-aaaa-0"},
       absl::StatusCode::kFailedPrecondition,
       "refusing to guess"},
      {"decided GPU not on node",
       {Pod("p", {{Dev("GPU-elsewhere", 1, 0)}})},
       {"GPU-aaaa-0"},
       absl::StatusCode::kFailedPrecondition,
       "not on this node"},
  };
  int n = 0;
  for (const auto& tc : cases) {
    std::vector<PendingPod> pods = tc.pods;
    for (auto& p : pods) p.uid += "-" + std::to_string(n);  // fresh pods per case
    ++n;
    for (const auto& p : pods) pending_.AddPod(p);
    auto r = kubelet_->Allocate({tc.ids});
    ASSERT_FALSE(r.ok()) << tc.name;
    EXPECT_EQ(r.status().code(), tc.code) << tc.name << ": " << r.status();
    EXPECT_NE(std::string(r.status().message()).find(tc.msg), std::string::npos)
        << tc.name << ": " << r.status();
    // Reset the served source for the next case.
    for (const auto& p : pods) ASSERT_TRUE(pending_.MarkFailed(p, "test reset").ok());
  }
}

TEST_F(PluginTest, PreferredAllocationSteersKubeletToTheDecidedGpu) {
  StartBoth();
  pending_.AddPod(Pod("p", {{Dev("GPU-bbbb", 1000, 0)}}));
  std::vector<std::string> all;
  for (const auto& d : kubelet_->Devices()) all.push_back(d.id());
  auto pref = kubelet_->GetPreferredAllocation(all, {}, 1);
  ASSERT_TRUE(pref.ok()) << pref.status();
  ASSERT_EQ(pref->container_responses(0).deviceids_size(), 1);
  EXPECT_EQ(pref->container_responses(0).deviceids(0).rfind("GPU-bbbb-", 0), 0u);

  // Without a unique pending pod the answer is still a valid choice of the requested size.
  pending_.AddPod(Pod("q", {{Dev("GPU-aaaa", 1000, 0)}, {Dev("GPU-aaaa", 1, 0)}}));
  auto two = kubelet_->GetPreferredAllocation(all, {all[5]}, 3);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->container_responses(0).deviceids_size(), 3);
  EXPECT_EQ(two->container_responses(0).deviceids(0), all[5]);  // must_include kept
}

// The scheduler's /refit as the plugin sees it: records each request, answers `reply`; a move also
// rewrites the pod's grant in the pending source, as the scheduler's patch does on the API server.
class FakeRefit final : public RefitClient {
 public:
  FakeRefit(MemoryPendingPodSource* pending, PendingPod pod) : pending_(pending), pod_(pod) {}
  StatusOr<std::vector<core::ContainerDevice>> Refit(const core::RefitRequest& r) override {
    requests.push_back(r);
    if (!reply.ok()) return reply.status();
    PendingPod moved = pod_;
    moved.containers.front().devices = *reply;
    pending_->RemovePod(pod_.uid);
    pending_->AddPod(moved);
    return *reply;
  }
  StatusOr<std::vector<core::ContainerDevice>> reply =
      std::vector<core::ContainerDevice>{Dev("GPU-bbbb", 1000, 10)};
  std::vector<core::RefitRequest> requests;

 private:
  MemoryPendingPodSource* pending_;
  PendingPod pod_;
};

PendingPod Aligned(core::NumaAlignment mode) {
  PendingPod p = Pod("numa", {{Dev("GPU-aaaa", 1000, 10)}});
  p.numa_alignment = mode;
  return p;
}

// kubelet's Topology Manager offers only GPU-bbbb (NUMA 1); the scheduler granted GPU-aaaa.
class NumaRefitTest : public PluginTest {
 protected:
  // A pod asking `mode`, the scheduler answering `reply`: the preference kubelet gets.
  v1beta1::PreferredAllocationResponse Prefer(core::NumaAlignment mode,
                                              StatusOr<std::vector<core::ContainerDevice>> reply) {
    const PendingPod pod = Aligned(mode);
    pending_.AddPod(pod);
    fake_ = std::make_unique<FakeRefit>(&pending_, pod);
    fake_->reply = std::move(reply);
    refit_ = fake_.get();
    StartBoth();
    auto pref = kubelet_->GetPreferredAllocation({"GPU-bbbb-1", "GPU-bbbb-2"}, {}, 1);
    EXPECT_TRUE(pref.ok()) << pref.status();
    EXPECT_EQ(fake_->requests.size(), 1u);
    if (!pref.ok() || pref->container_responses_size() != 1 ||
        pref->container_responses(0).deviceids_size() != 1) {
      ADD_FAILURE() << "no single preferred device";
      return {};
    }
    return *pref;
  }
  const Status kRefused = FailedPrecondition("scheduler refused refit: no allowed device fits");
  std::unique_ptr<FakeRefit> fake_;
};

TEST_F(NumaRefitTest, MovesTheGrantOntoTheOfferedGpu) {
  auto pref = Prefer(core::NumaAlignment::kBestEffort,
                     std::vector<core::ContainerDevice>{Dev("GPU-bbbb", 1000, 10)});
  ASSERT_EQ(pref.container_responses_size(), 1);
  const core::RefitRequest& r = fake_->requests.at(0);
  EXPECT_EQ(r.pod_uid, "uid-numa");
  EXPECT_EQ(r.pod_namespace, "default");
  EXPECT_EQ(r.pod_name, "numa");
  EXPECT_EQ(r.node_name, "node-1");
  EXPECT_EQ(r.container_index, 0);
  EXPECT_EQ(r.container_name, "c0");
  EXPECT_EQ(r.device_type, "NVIDIA");
  EXPECT_EQ(r.allowed_device_uuids, std::vector<std::string>{"GPU-bbbb"});  // physical, once
  const std::string id = pref.container_responses(0).deviceids(0);
  EXPECT_EQ(id.rfind("GPU-bbbb-", 0), 0u);
  // The container is armed with the GPU the scheduler moved it to: runtime, annotations and
  // accounting agree, and the GPU is NUMA-local to the CPUs kubelet pinned.
  auto a = kubelet_->Allocate({{id}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-bbbb");
}

TEST_F(NumaRefitTest, RefusedBestEffortKeepsKubeletsChoice) {
  auto pref = Prefer(core::NumaAlignment::kBestEffort, kRefused);
  ASSERT_EQ(pref.container_responses_size(), 1);
  // Armed with its grant, as without the refit.
  auto a = kubelet_->Allocate({{pref.container_responses(0).deviceids(0)}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-aaaa");
  EXPECT_TRUE(pending_.Failed().empty());
}

TEST_F(NumaRefitTest, RefusedStrictFailsTheAllocation) {
  auto pref = Prefer(core::NumaAlignment::kStrict, kRefused);
  ASSERT_EQ(pref.container_responses_size(), 1);
  ASSERT_EQ(pending_.Failed().count("uid-numa"), 1u);
  EXPECT_NE(pending_.Failed().at("uid-numa").find("numa-alignment strict"), std::string::npos);
  EXPECT_FALSE(kubelet_->Allocate({{pref.container_responses(0).deviceids(0)}}).ok());
}

TEST_F(NumaRefitTest, MovedGrantKubeletCannotTakeFailsThePod) {
  // The scheduler moved the grant to a GPU kubelet does not offer: arming kubelet's choice would
  // run the container on a GPU nobody charges, so the pod fails even under best-effort.
  auto pref = Prefer(core::NumaAlignment::kBestEffort,
                     std::vector<core::ContainerDevice>{Dev("GPU-cccc", 1000, 10)});
  ASSERT_EQ(pref.container_responses_size(), 1);
  EXPECT_EQ(pending_.Failed().count("uid-numa"), 1u);
}

TEST_F(PluginTest, NumaRefitOnlyWhenAskedAndNeeded) {
  PendingPod plain = Pod("plain", {{Dev("GPU-aaaa", 1000, 10)}});
  pending_.AddPod(plain);
  FakeRefit fake(&pending_, plain);
  refit_ = &fake;
  StartBoth();
  // No hami.io/numa-alignment: nothing is asked.
  ASSERT_TRUE(kubelet_->GetPreferredAllocation({"GPU-bbbb-1"}, {}, 1).ok());
  EXPECT_TRUE(fake.requests.empty());
  // The grant is offered: nothing to refit.
  pending_.RemovePod(plain.uid);
  pending_.AddPod(Aligned(core::NumaAlignment::kStrict));
  ASSERT_TRUE(kubelet_->GetPreferredAllocation({"GPU-aaaa-1", "GPU-bbbb-1"}, {}, 1).ok());
  EXPECT_TRUE(fake.requests.empty());
}

TEST_F(PluginTest, SteeredChoiceResolvesOtherwiseAmbiguousPods) {
  StartBoth();
  // Both pods want one device; only GPU-bbbb replicas are still available to kubelet, so the
  // preference is unique (pod b) and the Allocate carrying it is attributed to b.
  pending_.AddPod(Pod("a", {{Dev("GPU-aaaa", 1000, 10)}}));
  pending_.AddPod(Pod("b", {{Dev("GPU-bbbb", 2000, 20)}}));
  auto pref = kubelet_->GetPreferredAllocation({"GPU-bbbb-1", "GPU-bbbb-2"}, {}, 1);
  ASSERT_TRUE(pref.ok());
  std::string id = pref->container_responses(0).deviceids(0);
  auto r = kubelet_->Allocate({{id}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  // Now only a is left: unambiguous.
  auto ra = kubelet_->Allocate({{"GPU-bbbb-3"}});
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ(ra->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-aaaa");
}

TEST_F(PluginTest, SameShapePodsAreToldApartByKubeletPodResources) {
  // Two pods bound at the same time, both wanting one device: kubelet's replica IDs cannot tell
  // them apart, but kubelet's PodResources lists only the pod it is admitting.
  ASSERT_TRUE(kubelet_->ServePodResources(dir_ + "/pod-resources/kubelet.sock").ok());
  PodResourcesView view(dir_ + "/pod-resources/kubelet.sock", config_.resource_name);
  ASSERT_TRUE(kubelet_->Start().ok());
  plugin_ = std::make_unique<DevicePlugin>(config_, discovery_.get(), &pending_, 42);
  plugin_->SetKubeletPodView(&view);
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(10)));
  pending_.AddPod(Pod("a", {{Dev("GPU-aaaa", 1000, 10)}}));
  pending_.AddPod(Pod("b", {{Dev("GPU-bbbb", 2000, 20)}, {Dev("GPU-aaaa", 500, 5)}}));
  // kubelet reaches b first (its order is not ours to know), with arbitrary replica IDs.
  auto b0 = kubelet_->AdmitAndAllocate("default", "b", "c0", {"GPU-aaaa-0"});
  ASSERT_TRUE(b0.ok()) << b0.status();
  EXPECT_EQ(b0->container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  EXPECT_EQ(b0->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-bbbb");
  // b's second container: b is listed, its c1 has no devices yet; a is not listed yet.
  auto b1 = kubelet_->AdmitAndAllocate("default", "b", "c1", {"GPU-bbbb-1"});
  ASSERT_TRUE(b1.ok()) << b1.status();
  EXPECT_EQ(b1->container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "500m");
  auto a0 = kubelet_->AdmitAndAllocate("default", "a", "c0", {"GPU-bbbb-2"});
  ASSERT_TRUE(a0.ok()) << a0.status();
  EXPECT_EQ(a0->container_responses(0).envs().at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ(a0->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-aaaa");

  // Same shapes and kubelet lists both as waiting (e.g. an earlier admission failed): still
  // refused.
  pending_.AddPod(Pod("x", {{Dev("GPU-aaaa", 1, 0)}}));
  pending_.AddPod(Pod("y", {{Dev("GPU-bbbb", 2, 0)}}));
  // Failed admissions (wrong count) leave both listed without devices.
  ASSERT_FALSE(kubelet_->AdmitAndAllocate("default", "x", "c0", {"GPU-aaaa-1", "GPU-bbbb-1"}).ok());
  ASSERT_FALSE(kubelet_->AdmitAndAllocate("default", "y", "c0", {"GPU-aaaa-1", "GPU-bbbb-1"}).ok());
  auto ambiguous = kubelet_->AdmitAndAllocate("default", "y", "c0", {"GPU-aaaa-1"});
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_NE(std::string(ambiguous.status().message()).find("refusing to guess"), std::string::npos);
}

TEST_F(PluginTest, TwoPodsAllocatedConcurrentlyGetTheirOwnLimits) {
  StartBoth();
  // Distinguishable by what kubelet asks for (1 vs 2 devices): concurrent Allocates must each get
  // their own pod's limits, never the other's.
  for (int round = 0; round < 20; ++round) {
    pending_.AddPod(Pod("one-" + std::to_string(round), {{Dev("GPU-aaaa", 3000, 25)}}));
    pending_.AddPod(Pod("two-" + std::to_string(round),
                        {{Dev("GPU-aaaa", 5000, 50), Dev("GPU-bbbb", 5000, 50)}}));
    StatusOr<v1beta1::AllocateResponse> r1 = Unavailable("not run"), r2 = Unavailable("not run");
    std::thread t1([&] { r1 = kubelet_->Allocate({{"GPU-bbbb-1"}}); });
    std::thread t2([&] { r2 = kubelet_->Allocate({{"GPU-aaaa-3", "GPU-bbbb-3"}}); });
    t1.join();
    t2.join();
    ASSERT_TRUE(r1.ok()) << r1.status();
    ASSERT_TRUE(r2.ok()) << r2.status();
    const auto& e1 = r1->container_responses(0).envs();
    const auto& e2 = r2->container_responses(0).envs();
    EXPECT_EQ(e1.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
    EXPECT_EQ(e1.at("CUDA_DEVICE_SM_LIMIT"), "25");
    EXPECT_EQ(e1.count("CUDA_DEVICE_MEMORY_LIMIT_1"), 0u);
    EXPECT_EQ(e2.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "5000m");
    EXPECT_EQ(e2.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "5000m");
    EXPECT_EQ(e2.at("CUDA_DEVICE_SM_LIMIT"), "50");
    EXPECT_EQ(r1->container_responses(0).mounts(1).host_path(),
              config_.region_root + "/uid-one-" + std::to_string(round) + "_c0");
    EXPECT_EQ(r2->container_responses(0).mounts(1).host_path(),
              config_.region_root + "/uid-two-" + std::to_string(round) + "_c0");
  }
  EXPECT_TRUE(pending_.ListPending()->empty());
}

TEST_F(PluginTest, UnhealthyDecidedGpuFailsThePod) {
  StartBoth();
  discovery_->SetHealth({"GPU-aaaa", false, 79, "Xid 79"});
  pending_.AddPod(Pod("p", {{Dev("GPU-aaaa", 1000, 0)}}));
  auto r = kubelet_->Allocate({{"GPU-bbbb-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("unhealthy"), std::string::npos) << r.status();
  EXPECT_EQ(pending_.Failed().count("uid-p"), 1u);
}

TEST_F(PluginTest, StartFailsClearlyOnBadConfigOrDiscovery) {
  PluginConfig bad = config_;
  bad.split_count = 0;
  DevicePlugin p1(bad, discovery_.get(), &pending_, 1);
  EXPECT_FALSE(p1.Start().ok());
  discovery_->SetListError(Unavailable("NVML gone"));
  DevicePlugin p2(config_, discovery_.get(), &pending_, 1);
  Status s = p2.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("NVML gone"), std::string::npos);
}

TEST_F(PluginTest, XidInjectedInFakeNvmlReachesKubelet) {
  // The whole chain: fake libnvidia-ml.so.1 -> NvmlDiscovery health watch -> ListAndWatch ->
  // kubelet.
  const std::string state = dir_ + "/fakegpu.state";
  gpu::testing::FakeNvmlHooks hooks;
  auto nvml = OpenFakeNvml(state, "Tesla T4:15360:40;Tesla T4:15360:40", &hooks);
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  ASSERT_TRUE(kubelet_->Start().ok());
  plugin_ = std::make_unique<DevicePlugin>(config_, nvml->get(), &pending_, 3);
  ASSERT_TRUE(plugin_->Start().ok());
  const std::string dev1 = "GPU-fa4e0000-0000-4000-8000-000000000001";
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [&](const auto& d) { return CountHealth(d, dev1, "Healthy") == 4; }, seconds(10)));
  ASSERT_EQ(hooks.inject_xid(1, 79), 0);
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [&](const auto& d) { return CountHealth(d, dev1, "Unhealthy") == 4; }, seconds(5)));
  EXPECT_EQ(CountHealth(kubelet_->Devices(), "GPU-fa4e0000-0000-4000-8000-000000000000", "Healthy"),
            4);
  plugin_.reset();  // before the discovery it uses
  nvml->reset();
  unlink(state.c_str());
}

// ---- Operating mode mps: containers are clients of the node's MPS control daemon ----

class MpsPluginTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    config_.mode = "mps";
    config_.mps_pipe_dir = dir_ + "/mps-pipe";
    config_.mps_shm_dir = dir_ + "/mps-shm";
    fs::create_directories(config_.mps_pipe_dir);
  }
  // The control daemon "runs": its PID file names a live process (this test).
  void StartDaemon() {
    std::ofstream(config_.mps_pipe_dir + "/nvidia-cuda-mps-control.pid") << ::getpid() << "\n";
  }
  void StopDaemon() { fs::remove(config_.mps_pipe_dir + "/nvidia-cuda-mps-control.pid"); }
};

// Upstream's getAPIDevices with operatingmode mps: the node registers its GPUs in mode mps, which
// pods asking nvidia.com/vgpu-mode: mps need (scheduler/mps_test.cc).
TEST_F(MpsPluginTest, RegistersItsGpusInModeMps) {
  StartBoth();
  auto ann = plugin_->NodeAnnotations(/*with_link_scores=*/false);
  EXPECT_EQ(
      ann.at("hami.io/node-nvidia-register"),
      R"([{"id":"GPU-aaaa","count":4,"devmem":15360,"devcore":100,"type":"NVIDIA-Tesla T4","health":true,)"
      R"("mode":"mps"},{"id":"GPU-bbbb","index":1,"count":4,"devmem":15360,"devcore":100,)"
      R"("type":"NVIDIA-Tesla T4","numa":1,"health":true,"mode":"mps"}])");
}

// Allocate over gRPC: the MPS client environment and the daemon's directories, nothing of libvgpu
// (no CUDA_DEVICE_* limit, no region directory or limits file on the host, no ld.so.preload).
TEST_F(MpsPluginTest, AllocateMakesTheContainerAnMpsClient) {
  StartDaemon();
  StartBoth();
  pending_.AddPod(Pod("p1", {{Dev("GPU-bbbb", 3000, 30), Dev("GPU-aaaa", 6000, 30)}}));
  auto r = kubelet_->Allocate({{"GPU-aaaa-1", "GPU-bbbb-2"}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->container_responses_size(), 1);
  const auto& c = r->container_responses(0);
  const std::map<std::string, std::string> envs(c.envs().begin(), c.envs().end());
  const std::map<std::string, std::string> want = {
      {"NVIDIA_VISIBLE_DEVICES", "GPU-bbbb,GPU-aaaa"},
      {"CUDA_VISIBLE_DEVICES", "GPU-bbbb,GPU-aaaa"},
      {"CUDA_MPS_PIPE_DIRECTORY", config_.mps_pipe_dir},
      {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=3000M,1=6000M"},
      {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"}};
  EXPECT_EQ(envs, want);
  ASSERT_EQ(c.mounts_size(), 2);
  EXPECT_EQ(c.mounts(0).container_path(), config_.mps_pipe_dir);
  EXPECT_EQ(c.mounts(0).host_path(), config_.mps_pipe_dir);
  EXPECT_FALSE(c.mounts(0).read_only());
  EXPECT_EQ(c.mounts(1).container_path(), "/dev/shm");
  EXPECT_EQ(c.mounts(1).host_path(), config_.mps_shm_dir);
  EXPECT_FALSE(fs::exists(config_.region_root)) << "no libvgpu region for an MPS client";
  EXPECT_TRUE(pending_.Failed().empty());
}

// Without the control daemon a client would run outside MPS with no limit at all: Allocate refuses
// (FAILED_PRECONDITION naming the PID file, which kubelet reports on the pod) and records the
// failure, and serves the next pod once the daemon runs.
TEST_F(MpsPluginTest, AllocateRefusesContainersWhileTheDaemonIsDown) {
  StartBoth();
  PendingPod p1 = Pod("p1", {{Dev("GPU-aaaa", 3000, 30)}});
  pending_.AddPod(p1);
  auto r = kubelet_->Allocate({{"GPU-aaaa-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(
      std::string(r.status().message()).find(config_.mps_pipe_dir + "/nvidia-cuda-mps-control.pid"),
      std::string::npos)
      << r.status();
  ASSERT_EQ(pending_.Failed().count(p1.uid), 1u);
  EXPECT_NE(pending_.Failed().at(p1.uid).find("MPS control daemon not running"), std::string::npos);

  StartDaemon();
  pending_.AddPod(Pod("p2", {{Dev("GPU-aaaa", 2000, 0)}}));
  auto r2 = kubelet_->Allocate({{"GPU-aaaa-1"}});
  ASSERT_TRUE(r2.ok()) << r2.status();
  const auto& e = r2->container_responses(0).envs();
  EXPECT_EQ(e.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=2000M");
  EXPECT_EQ(e.count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), 0u) << "no cores granted: no limit";

  StopDaemon();
  pending_.AddPod(Pod("p3", {{Dev("GPU-bbbb", 2000, 0)}}));
  EXPECT_FALSE(kubelet_->Allocate({{"GPU-bbbb-0"}}).ok());
}

// A decision granting MIG instances cannot be armed on an MPS node (EnsureMigInstances' rule).
TEST_F(MpsPluginTest, AllocateRefusesMigGrants) {
  StartDaemon();
  StartBoth();
  core::ContainerDevice d = Dev("GPU-aaaa", 4864, 14);
  d.mig_profile = "1g.5gb";
  d.mig_placement = {0, 1};
  PendingPod p = Pod("p", {{d}});
  p.containers[0].mig.push_back(
      core::MigAllocation{0, 0, d.uuid, d.mig_profile, d.mig_placement, "", {}, {}});
  pending_.AddPod(p);
  auto r = kubelet_->Allocate({{"GPU-aaaa-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("this node's operating mode is mps"),
            std::string::npos)
      << r.status();
}

// ---- Operating mode mig over the fake NVML: an A100-SXM4-40GB in MIG mode and a T4 ----

constexpr char kA100[] = "GPU-fa4e0000-0000-4000-8000-000000000000";
constexpr char kT4[] = "GPU-fa4e0000-0000-4000-8000-000000000001";

core::ContainerDevice MigDev(const std::string& uuid, const std::string& profile, int64_t mem,
                             int cores, int start, int size) {
  core::ContainerDevice d = Dev(uuid, mem, cores);
  d.mig_profile = profile;
  d.mig_placement = {start, size};
  return d;
}

// A pod whose container 0 gets `dev`, with the matching hami.io/vgpu-mig-allocations entry when it
// is a MIG grant.
PendingPod MigPod(const std::string& name, const core::ContainerDevice& dev) {
  PendingPod p = Pod(name, {{dev}});
  if (!dev.mig_profile.empty())
    p.containers[0].mig.push_back(
        core::MigAllocation{0, 0, dev.uuid, dev.mig_profile, dev.mig_placement, "", {}, {}});
  return p;
}

class MigPluginTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    state_ = dir_ + "/fakegpu.state";
    setenv("FAKEGPU_MIG", "0", 1);
    auto nvml = OpenFakeNvml(state_, Devices(), &hooks_);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = std::move(*nvml);
    config_.mode = "mig";
  }
  // FAKEGPU_DEVICES of the node; GPU 0 has MIG on.
  virtual const char* Devices() const {
    return "NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40";
  }
  void TearDown() override {
    plugin_.reset();  // before the discovery it uses
    nvml_.reset();
    unsetenv("FAKEGPU_MIG");
    unlink(state_.c_str());
    PluginTest::TearDown();
  }
  void StartMig() {
    ASSERT_TRUE(kubelet_->Start().ok());
    plugin_ = std::make_unique<DevicePlugin>(config_, nvml_.get(), &pending_, 5);
    plugin_->SetMigControl(nvml_.get());
    ASSERT_TRUE(plugin_->Start().ok());
    ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 8; }, seconds(10)));
  }
  std::vector<gpu::MigInstance> Instances() {
    auto l = nvml_->ListMigInstances(kA100);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *l : std::vector<gpu::MigInstance>{};
  }

  std::string state_;
  gpu::testing::FakeNvmlHooks hooks_;
  std::unique_ptr<gpu::NvmlDiscovery> nvml_;
};

TEST_F(MigPluginTest, RegistersTheMigGpuWithItsProfiles) {
  StartMig();
  auto node = plugin_->NodeDevices();
  ASSERT_EQ(node.size(), 2u);
  EXPECT_EQ(node[0].mode, "mig");
  ASSERT_EQ(node[0].mig_profiles.size(), 5u);
  EXPECT_EQ(node[0].mig_profiles[0],
            (core::MigProfile{
                "1g.5gb", 4864, 14, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}}));
  EXPECT_EQ(node[1].mode, "hami-core");  // a T4 runs no MIG
  const std::string ann = plugin_->NodeAnnotations(false).at("hami.io/node-nvidia-register");
  EXPECT_NE(ann.find(R"("mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":14,)"
                     R"("sliceCount":1,"placements":[{"start":0,"size":1})"),
            std::string::npos)
      << ann;
}

TEST_F(MigPluginTest, AllocateCreatesTheDecidedInstanceAndHandsOverItsMigDevice) {
  StartMig();
  pending_.AddPod(MigPod("m1", MigDev(kA100, "1g.5gb", 4864, 14, 6, 1)));
  auto r = kubelet_->Allocate({{std::string(kA100) + "-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto insts = Instances();
  ASSERT_EQ(insts.size(), 1u);
  EXPECT_EQ(insts[0].profile, "1g.5gb");
  EXPECT_EQ(insts[0].placement, (gpu::MigPlacement{6, 1}));
  EXPECT_EQ(insts[0].gpu_instance_id, 13u);
  const auto& resp = r->container_responses(0);
  // The MIG device instead of the GPU, and nothing of libvgpu: the instance isolates itself.
  ASSERT_EQ(resp.envs().size(), 1u);
  EXPECT_EQ(resp.envs().at("NVIDIA_VISIBLE_DEVICES"), insts[0].uuid);
  EXPECT_EQ(resp.mounts_size(), 0);
  EXPECT_FALSE(fs::exists(config_.region_root + "/uid-m1_c0"));
  EXPECT_TRUE(pending_.Failed().empty());

  // A second pod on the next placement the scheduler chose; CDI names carry the MIG UUID.
  plugin_.reset();
  kubelet_ = std::make_unique<testing::FakeKubelet>(config_.plugin_dir);
  config_.device_list_strategy = "cdi-cri";
  StartMig();
  pending_.AddPod(MigPod("m2", MigDev(kA100, "3g.20gb", 20096, 42, 0, 4)));
  auto r2 = kubelet_->Allocate({{std::string(kA100) + "-2"}});
  ASSERT_TRUE(r2.ok()) << r2.status();
  const auto after = Instances();
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].placement, (gpu::MigPlacement{0, 4}));
  ASSERT_EQ(r2->container_responses(0).cdi_devices_size(), 1);
  EXPECT_EQ(r2->container_responses(0).cdi_devices(0).name(), "nvidia.com/gpu=" + after[0].uuid);
  EXPECT_EQ(r2->container_responses(0).envs().count("NVIDIA_VISIBLE_DEVICES"), 0u);
}

// One container asking two GPUs where only the one A100 fits: the scheduler grants two instances
// of it (the same GPU twice, each its own placement and deviceIndex); Allocate makes both and hands
// over both MIG devices.
TEST_F(MigPluginTest, OneContainerWithTwoInstancesOfOneGpuGetsBoth) {
  StartMig();
  const core::ContainerDevice a = MigDev(kA100, "1g.5gb", 4864, 14, 0, 1);
  const core::ContainerDevice b = MigDev(kA100, "1g.5gb", 4864, 14, 1, 1);
  PendingPod p = Pod("two", {{a, b}});
  p.containers[0].mig = {
      core::MigAllocation{0, 0, a.uuid, a.mig_profile, a.mig_placement, "", {}, {}},
      core::MigAllocation{0, 1, b.uuid, b.mig_profile, b.mig_placement, "", {}, {}}};
  pending_.AddPod(p);
  auto r = kubelet_->Allocate({{std::string(kA100) + "-0", std::string(kA100) + "-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto insts = Instances();
  ASSERT_EQ(insts.size(), 2u);
  EXPECT_EQ(insts[0].placement, (gpu::MigPlacement{0, 1}));
  EXPECT_EQ(insts[1].placement, (gpu::MigPlacement{1, 1}));
  const std::string want = insts[0].uuid + "," + insts[1].uuid;
  const std::string got = r->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES");
  EXPECT_TRUE(got == want || got == insts[1].uuid + "," + insts[0].uuid) << got;
  EXPECT_TRUE(pending_.Failed().empty());
}

TEST_F(MigPluginTest, RetriedAllocateReusesTheInstanceItMade) {
  StartMig();
  pending_.AddPod(MigPod("m1", MigDev(kA100, "2g.10gb", 9984, 28, 2, 2)));
  pending_.SetMarkError(Unavailable("API server down"));
  auto first = kubelet_->Allocate({{std::string(kA100) + "-0"}});
  ASSERT_FALSE(first.ok());
  ASSERT_EQ(Instances().size(), 1u);
  const std::string uuid = Instances()[0].uuid;
  pending_.SetMarkError(OkStatus());
  auto again = kubelet_->Allocate({{std::string(kA100) + "-3"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), uuid);
  EXPECT_EQ(Instances().size(), 1u);
}

TEST_F(MigPluginTest, AnInstanceRecordedOnThePodSurvivesAPluginRestart) {
  auto made = nvml_->CreateMigInstance(kA100, "1g.5gb", {5, 1});
  ASSERT_TRUE(made.ok()) << made.status();
  StartMig();
  PendingPod p = MigPod("m1", MigDev(kA100, "1g.5gb", 4864, 14, 5, 1));
  p.containers[0].mig[0].mig_uuid = made->uuid;
  p.containers[0].mig[0].gpu_instance_id = made->gpu_instance_id;
  p.containers[0].mig[0].compute_instance_id = made->compute_instance_id;
  pending_.AddPod(p);
  auto r = kubelet_->Allocate({{std::string(kA100) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), made->uuid);
  EXPECT_EQ(Instances().size(), 1u);
}

TEST_F(MigPluginTest, GrantsTheNodeCannotHonourFailThePodAndTouchNothing) {
  auto foreign = nvml_->CreateMigInstance(kA100, "1g.5gb", {0, 1});  // another pod's
  ASSERT_TRUE(foreign.ok()) << foreign.status();
  struct Case {
    const char* name;
    std::vector<core::ContainerDevice> devs;
    const char* want;
  };
  const Case cases[] = {
      {"placement held by an instance that is not the pod's",
       {MigDev(kA100, "1g.5gb", 4864, 14, 0, 1)},
       "that is not this container's"},
      {"placement the profile does not have",
       {MigDev(kA100, "2g.10gb", 9984, 28, 6, 2)},
       "as this node registered it"},
      {"memory other than the profile's",
       {MigDev(kA100, "1g.5gb", 9000, 14, 3, 1)},
       "as this node registered it"},
      {"a GPU not in MIG mode", {MigDev(kT4, "1g.5gb", 4864, 14, 3, 1)}, "as this node registered"},
      {"a plain grant on the MIG GPU", {Dev(kA100, 4000, 10)}, "is in MIG mode but the decision"},
      {"MIG and shared GPUs in one container",
       {MigDev(kA100, "1g.5gb", 4864, 14, 3, 1), Dev(kT4, 1000, 0)},
       "one container gets either"},
  };
  StartMig();
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PendingPod p = Pod(StrCat("bad", n++), {c.devs});
    for (size_t i = 0; i < c.devs.size(); ++i) {
      if (!c.devs[i].mig_profile.empty())
        p.containers[0].mig.push_back(core::MigAllocation{0,
                                                          static_cast<int>(i),
                                                          c.devs[i].uuid,
                                                          c.devs[i].mig_profile,
                                                          c.devs[i].mig_placement,
                                                          "",
                                                          {},
                                                          {}});
    }
    pending_.AddPod(p);
    std::vector<std::string> ids;
    for (const auto& d : c.devs) ids.push_back(d.uuid + "-" + std::to_string(ids.size()));
    auto r = kubelet_->Allocate({ids});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find(c.want), std::string::npos) << r.status();
    EXPECT_EQ(pending_.Failed().count(p.uid), 1u);
    ASSERT_EQ(Instances().size(), 1u);
    EXPECT_EQ(Instances()[0], *foreign);
  }
}

TEST_F(MigPluginTest, MigGrantsFailOnANodeInHamiCoreMode) {
  config_.mode = "hami-core";
  StartMig();
  pending_.AddPod(MigPod("m1", MigDev(kA100, "1g.5gb", 4864, 14, 6, 1)));
  auto r = kubelet_->Allocate({{std::string(kA100) + "-0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("operating mode is hami-core"),
            std::string::npos)
      << r.status();
  EXPECT_TRUE(Instances().empty());
}

TEST_F(MigPluginTest, InstancesNoPodHoldsAreReclaimedOnTheSecondPass) {
  StartMig();
  pending_.AddPod(MigPod("m1", MigDev(kA100, "1g.5gb", 4864, 14, 6, 1)));
  ASSERT_TRUE(kubelet_->Allocate({{std::string(kA100) + "-0"}}).ok());
  const gpu::MigInstance held = Instances().at(0);
  auto orphan = nvml_->CreateMigInstance(kA100, "2g.10gb", {0, 2});  // no pod names it
  ASSERT_TRUE(orphan.ok()) << orphan.status();

  auto pass = [&] {
    auto n = plugin_->ReclaimMigInstances();
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  };
  EXPECT_EQ(pass(), 0);  // first sighting: a pod may be on its way
  EXPECT_EQ(Instances().size(), 2u);
  EXPECT_EQ(pass(), 1);
  ASSERT_EQ(Instances().size(), 1u);
  EXPECT_EQ(Instances()[0], held);  // the running pod's instance stays

  // Unknown grants (the API server is down): nothing goes, whatever was seen before.
  pending_.RemovePod("uid-m1");
  EXPECT_EQ(pass(), 0);
  pending_.SetListError(Unavailable("API server down"));
  EXPECT_FALSE(plugin_->ReclaimMigInstances().ok());
  EXPECT_EQ(Instances().size(), 1u);
  pending_.SetListError(OkStatus());
  EXPECT_EQ(pass(), 1);
  EXPECT_TRUE(Instances().empty());
  // The placement is free for the next pod.
  pending_.AddPod(MigPod("m2", MigDev(kA100, "1g.5gb", 4864, 14, 6, 1)));
  auto r = kubelet_->Allocate({{std::string(kA100) + "-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), held.uuid);
}

TEST_F(MigPluginTest, AnInstanceAPodDoesNotHoldIsReclaimedEvenAtItsPlacement) {
  StartMig();
  // m1 waits for 1g.5gb at slice 4; a "+me" instance sits there (not what it was granted), and a
  // recorded grant names MIG-gone while another instance took its placement.
  pending_.AddPod(MigPod("m1", MigDev(kA100, "1g.5gb", 4864, 14, 4, 1)));
  PendingPod m2 = MigPod("m2", MigDev(kA100, "1g.5gb", 4864, 14, 2, 1));
  m2.containers[0].mig[0].mig_uuid = "MIG-gone";
  m2.containers[0].mig[0].gpu_instance_id = 9;
  m2.containers[0].mig[0].compute_instance_id = 0;
  pending_.AddPod(m2);
  ASSERT_TRUE(nvml_->CreateMigInstance(kA100, "1g.5gb+me", {4, 1}).ok());
  ASSERT_TRUE(nvml_->CreateMigInstance(kA100, "1g.5gb", {2, 1}).ok());
  EXPECT_EQ(*plugin_->ReclaimMigInstances(), 0);
  EXPECT_EQ(*plugin_->ReclaimMigInstances(), 2);
  EXPECT_TRUE(Instances().empty());
}

TEST_F(MigPluginTest, NoReclaimOutsideMigMode) {
  config_.mode = "hami-core";
  StartMig();
  ASSERT_TRUE(nvml_->CreateMigInstance(kA100, "1g.5gb", {0, 1}).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*plugin_->ReclaimMigInstances(), 0);
  EXPECT_EQ(Instances().size(), 1u);
}

// ---- Static MIG strategies over the fake NVML: MIG devices an administrator made beforehand ----

class StaticMigPluginTest : public MigPluginTest {
 protected:
  void SetUp() override {
    MigPluginTest::SetUp();
    config_.mode = "hami-core";
  }
  void TearDown() override {
    mig_plugin_.reset();
    mig_kubelet_.reset();
    MigPluginTest::TearDown();
  }
  // The admin's layout on the A100: 3g.20gb at slices 4+4, 1g.5gb at 0+1 and 1+1.
  std::vector<gpu::MigInstance> MakeLayout() {
    std::vector<gpu::MigInstance> made;
    for (auto [profile, at] : std::vector<std::pair<const char*, gpu::MigPlacement>>{
             {"3g.20gb", {4, 4}}, {"1g.5gb", {0, 1}}, {"1g.5gb", {1, 1}}}) {
      auto m = nvml_->CreateMigInstance(kA100, profile, at);
      EXPECT_TRUE(m.ok()) << m.status();
      if (m.ok()) made.push_back(*m);
    }
    return made;
  }
  StatusOr<std::vector<StaticMigResource>> Resources() {
    auto gpus = nvml_->ListDevices();
    if (!gpus.ok()) return gpus.status();
    return BuildStaticMigResources(*gpus, *nvml_, config_);
  }
  // Serves `r` the way the daemon does for a mixed strategy: its own plugin, resource and socket
  // (here in a directory of its own, with a kubelet of its own).
  void StartMigResource(const StaticMigResource& r) {
    PluginConfig c = config_;
    c.plugin_dir = dir_ + "/mig/";
    c.resource_name = r.resource_name;
    c.socket_name = r.socket_name;
    c.enable_preferred_allocation = false;
    mig_kubelet_ = std::make_unique<testing::FakeKubelet>(c.plugin_dir);
    ASSERT_TRUE(mig_kubelet_->Start().ok());
    mig_plugin_ = std::make_unique<DevicePlugin>(c, nvml_.get(), &pending_, 9);
    mig_plugin_->ServeStaticMig(r.devices, /*with_shared_gpus=*/false);
    ASSERT_TRUE(mig_plugin_->Start().ok());
    const size_t n = r.devices.size();
    ASSERT_TRUE(
        mig_kubelet_->WaitForDevices([n](const auto& d) { return d.size() == n; }, seconds(10)));
  }

  std::unique_ptr<testing::FakeKubelet> mig_kubelet_;
  std::unique_ptr<DevicePlugin> mig_plugin_;
};

TEST_F(StaticMigPluginTest, MixedServesEachProfileAsItsOwnResourceAndSharesTheRest) {
  config_.mig_strategy = "mixed";
  const auto made = MakeLayout();
  ASSERT_EQ(made.size(), 3u);
  auto res = Resources();
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->size(), 2u);
  EXPECT_EQ((*res)[0].resource_name, "nvidia.com/mig-1g.5gb");
  EXPECT_EQ((*res)[1].resource_name, "nvidia.com/mig-3g.20gb");

  // nvidia.com/gpu: only the T4 (MIG off) is shared; the A100 is neither advertised nor registered.
  ASSERT_TRUE(kubelet_->Start().ok());
  plugin_ = std::make_unique<DevicePlugin>(config_, nvml_.get(), &pending_, 5);
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 4; }, seconds(10)));
  EXPECT_EQ(CountHealth(kubelet_->Devices(), kT4, "Healthy"), 4);
  auto node = plugin_->NodeDevices();
  ASSERT_EQ(node.size(), 1u);
  EXPECT_EQ(node[0].uuid, kT4);

  // nvidia.com/mig-1g.5gb: its two MIG devices, by MIG UUID, handed out whole.
  StartMigResource((*res)[0]);
  auto regs = mig_kubelet_->Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].resource_name(), "nvidia.com/mig-1g.5gb");
  EXPECT_EQ(regs[0].endpoint(), "nvidia-mig-1g.5gb.sock");
  EXPECT_FALSE(regs[0].options().get_preferred_allocation_available());
  auto devs = mig_kubelet_->Devices();
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].id(), made[1].uuid);
  EXPECT_EQ(devs[1].id(), made[2].uuid);
  EXPECT_EQ(devs[0].health(), "Healthy");
  EXPECT_TRUE(mig_plugin_->NodeDevices().empty());  // nothing for HAMi's scheduler

  // kubelet picks; no pod decision is needed and nothing of libvgpu is given.
  auto r = mig_kubelet_->Allocate({{made[2].uuid}, {made[1].uuid}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->container_responses_size(), 2);
  const auto& c0 = r->container_responses(0);
  ASSERT_EQ(c0.envs().size(), 1u);
  EXPECT_EQ(c0.envs().at("NVIDIA_VISIBLE_DEVICES"), made[2].uuid);
  EXPECT_EQ(c0.mounts_size(), 0);
  EXPECT_EQ(r->container_responses(1).envs().at("NVIDIA_VISIBLE_DEVICES"), made[1].uuid);
  EXPECT_TRUE(pending_.Failed().empty());
  EXPECT_EQ(Instances().size(), 3u);  // the admin's instances stay as they are

  // IDs this resource does not advertise: another profile's MIG device, a GPU replica.
  for (const std::string& id : {made[0].uuid, std::string(kT4) + "-0"}) {
    auto bad = mig_kubelet_->Allocate({{id}});
    ASSERT_FALSE(bad.ok()) << id;
    EXPECT_NE(std::string(bad.status().message()).find("unknown device ID '" + id + "'"),
              std::string::npos)
        << bad.status();
  }
}

TEST_F(StaticMigPluginTest, MixedUnderCdiNamesTheMigDevice) {
  config_.mig_strategy = "mixed";
  config_.device_list_strategy = "cdi-cri";
  const auto made = MakeLayout();
  auto res = Resources();
  ASSERT_TRUE(res.ok()) << res.status();
  StartMigResource((*res)[1]);
  auto r = mig_kubelet_->Allocate({{made[0].uuid}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& c0 = r->container_responses(0);
  ASSERT_EQ(c0.cdi_devices_size(), 1);
  EXPECT_EQ(c0.cdi_devices(0).name(), "nvidia.com/gpu=" + made[0].uuid);
  EXPECT_EQ(c0.envs().count("NVIDIA_VISIBLE_DEVICES"), 0u);
}

TEST_F(StaticMigPluginTest, SingleRefusesAGpuWithMigOffBesideMigGpus) {
  config_.mig_strategy = "single";
  MakeLayout();
  auto res = Resources();
  ASSERT_FALSE(res.ok());
  EXPECT_NE(std::string(res.status().message())
                .find(StrCat("MIG strategy single: GPU ", kT4, " has MIG off")),
            std::string::npos)
      << res.status();
}

TEST_F(StaticMigPluginTest, MigGpuWithoutMigDevicesIsAnErrorAtStart) {
  config_.mig_strategy = "mixed";
  auto res = Resources();  // MIG on, nothing created
  ASSERT_FALSE(res.ok());
  EXPECT_NE(std::string(res.status().message()).find("has MIG on but no MIG device"),
            std::string::npos)
      << res.status();
}

// A node whose only GPU is an A100 in MIG mode, for the single strategy.
class SingleMigPluginTest : public MigPluginTest {
 protected:
  void SetUp() override {
    MigPluginTest::SetUp();
    config_.mode = "hami-core";
    config_.mig_strategy = "single";
  }
  const char* Devices() const override { return "NVIDIA A100-SXM4-40GB:40960:108"; }
};

TEST_F(SingleMigPluginTest, EveryMigDeviceIsOneNvidiaGpu) {
  std::vector<std::string> uuids;
  for (int start : {0, 1, 2}) {
    auto m = nvml_->CreateMigInstance(kA100, "1g.5gb", {start, 1});
    ASSERT_TRUE(m.ok()) << m.status();
    uuids.push_back(m->uuid);
  }
  auto gpus = nvml_->ListDevices();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  auto res = BuildStaticMigResources(*gpus, *nvml_, config_);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->size(), 1u);
  ASSERT_EQ((*res)[0].resource_name, "nvidia.com/gpu");

  ASSERT_TRUE(kubelet_->Start().ok());
  plugin_ = std::make_unique<DevicePlugin>(config_, nvml_.get(), &pending_, 5);
  plugin_->ServeStaticMig((*res)[0].devices, /*with_shared_gpus=*/true);
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 3; }, seconds(10)));
  auto regs = kubelet_->Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].resource_name(), "nvidia.com/gpu");
  std::vector<std::string> ids;
  for (const auto& d : kubelet_->Devices()) ids.push_back(d.id());
  EXPECT_EQ(ids, uuids);
  // No GPU is shared: HAMi's scheduler is told of none.
  EXPECT_EQ(plugin_->NodeAnnotations(false).at("hami.io/node-nvidia-register"), "[]");

  auto r = kubelet_->Allocate({{uuids[0], uuids[2]}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"),
            uuids[0] + "," + uuids[2]);
  EXPECT_EQ(r->container_responses(0).mounts_size(), 0);
}

// Health of static MIG devices follows their GPU; a replica and a MIG device in one request fail.
TEST_F(PluginTest, StaticMigDevicesFollowTheirGpusHealth) {
  ASSERT_TRUE(kubelet_->Start().ok());
  plugin_ = std::make_unique<DevicePlugin>(config_, discovery_.get(), &pending_, 3);
  plugin_->ServeStaticMig({{"MIG-aaaa-1", "GPU-aaaa", "1g.5gb", 1}}, /*with_shared_gpus=*/true);
  ASSERT_TRUE(plugin_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 9; }, seconds(10)));
  EXPECT_EQ(kubelet_->Devices().back().id(), "MIG-aaaa-1");

  auto mixed = kubelet_->Allocate({{"MIG-aaaa-1", "GPU-bbbb-0"}});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(std::string(mixed.status().message()).find("a container gets either"),
            std::string::npos)
      << mixed.status();

  discovery_->SetHealth({"GPU-aaaa", false, 79, "Xid 79"});
  ASSERT_TRUE(kubelet_->WaitForDevices(
      [](const auto& d) { return !d.empty() && d.back().health() == "Unhealthy"; }, seconds(10)));
  auto r = kubelet_->Allocate({{"MIG-aaaa-1"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message())
                .find("MIG device MIG-aaaa-1 (1g.5gb) is on GPU GPU-aaaa, which is unhealthy"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace hami::deviceplugin
