// `hami device-plugin` as a process, end to end without a GPU or a cluster: the real binary finds
// the fake libnvidia-ml.so.1 through LD_LIBRARY_PATH, talks to the fake API server through a
// kubeconfig and to the fake kubelet through the plugin directory. Checks registration, node
// annotations + handshake, Allocate from a pod's decision annotation, an Xid injected into the
// shared fake GPU state reaching kubelet, kubelet restart, and a clean SIGTERM.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "core/annotations.h"
#include "deviceplugin/testing/fake_kubelet.h"
#include "gpu/nvml_discovery.h"
#include "gpu/testing/fake_nvml_hooks.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/kubeconfig.h"
#include "vendors/nvidia/annotations.h"

namespace hami::deviceplugin {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using std::chrono::seconds;

bool Eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

int Count(const std::vector<v1beta1::Device>& devs, const std::string& prefix,
          const std::string& health) {
  int n = 0;
  for (const auto& d : devs) n += d.id().rfind(prefix + "-", 0) == 0 && d.health() == health;
  return n;
}

constexpr char kDev0[] = "GPU-fa4e0000-0000-4000-8000-000000000000";
constexpr char kDev1[] = "GPU-fa4e0000-0000-4000-8000-000000000001";

// Runs `hami device-plugin <args>` for node1 against the fake NVML (`devices`, `state`, `mig` =
// FAKEGPU_MIG) in a child process.
pid_t SpawnPlugin(const std::string& state, const std::string& devices, const std::string& mig,
                  std::vector<std::string> args) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setenv("LD_LIBRARY_PATH", HAMI_FAKE_NVML_DIR, 1);
  setenv("FAKEGPU_STATE", state.c_str(), 1);
  setenv("FAKEGPU_DEVICES", devices.c_str(), 1);
  if (!mig.empty()) setenv("FAKEGPU_MIG", mig.c_str(), 1);
  args.insert(args.begin(), {HAMI_BINARY, "device-plugin", "--node-name", "node1"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(HAMI_BINARY, argv.data());
  _exit(127);
}

// A started API server holding node1, without annotations.
void ServeNode1(k8s::testing::FakeApiServer& api) {
  ASSERT_TRUE(api.Start().ok());
  ASSERT_TRUE(
      api.Upsert("nodes",
                 {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node1"}}}})
          .ok());
}

// FAKEGPU_DEVICES of the MIG tests: an A100 (GPU 0, MIG on with FAKEGPU_MIG=0) and a T4.
constexpr char kMigNode[] = "NVIDIA A100-SXM4-40GB:40960:108;Tesla T4:15360:40";

// SIGTERM: the plugin stops and exits 0.
void StopCleanly(pid_t pid) {
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// The pod of a scheduler decision bound to node1: one container "main" with `to_allocate`.
Json BoundPod(const std::string& name, const std::string& to_allocate) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "ml"},
            {"annotations",
             {{vendors::nvidia::kNvidiaDevicesToAllocate, to_allocate},
              {core::kVgpuNode, "node1"},
              {core::kBindPhase, "allocating"}}}}},
          {"spec",
           {{"nodeName", "node1"},
            {"schedulerName", "hami-scheduler"},
            {"containers", {{{"name", "main"}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

// A started API server holding node1 (ServeNode1) and a node config giving it operating mode
// `mode`, written to `dir`/config.json; returns that path.
std::string AddNode1WithMode(k8s::testing::FakeApiServer& api, const std::string& dir,
                             const std::string& mode) {
  ServeNode1(api);
  const std::string node_config = dir + "/config.json";
  std::ofstream(node_config) << R"({"nodeconfig":[{"name":"node1","operatingmode":")" << mode
                             << R"("}]})";
  return node_config;
}

// Each test: a temporary directory (the plugin directory, the fake GPU state and the libvgpu
// regions under it), the fake API server (each test starts it with its own node1) and the fake
// kubelet. At the end a plugin still running is killed, and the directory is removed.
class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hddXXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    plugin_dir_ = dir_ + "/dp";
    state_ = dir_ + "/fakegpu.state";
    kubelet_ = std::make_unique<testing::FakeKubelet>(plugin_dir_);
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (kubelet_) kubelet_->Stop();
    unsetenv("FAKEGPU_MIG");
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Starts the kubelet, then the plugin on the fake GPUs `devices` (`mig`: FAKEGPU_MIG) with the
  // flags every test gives (the API server's kubeconfig, the directories, a 1 s registration
  // interval, failing on init errors) and `flags`.
  void StartPlugin(const std::string& devices, const std::string& mig,
                   const std::vector<std::string>& flags) {
    ASSERT_TRUE(kubelet_->Start().ok());
    std::vector<std::string> args = {
        "--kubeconfig",
        k8s::testing::WriteTokenKubeconfig(dir_ + "/kubeconfig", api_.url()),
        "--plugin-dir",
        plugin_dir_,
        "--region-root",
        dir_ + "/regions",
        "--register-interval",
        "1",
        "--fail-on-init-error",
        "--log-level",
        "warn"};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = SpawnPlugin(state_, devices, mig, std::move(args));
    ASSERT_GE(pid_, 0);
  }
  // SIGTERM: the plugin stops and exits 0.
  void StopPlugin() {
    StopCleanly(pid_);
    pid_ = -1;
  }
  // Points this process's fake NVML at the plugin's GPU state, so that a test can look and inject.
  void ShareFakeGpus(const std::string& devices, const std::string& mig) {
    setenv("FAKEGPU_STATE", state_.c_str(), 1);
    setenv("FAKEGPU_DEVICES", devices.c_str(), 1);
    if (!mig.empty()) setenv("FAKEGPU_MIG", mig.c_str(), 1);
  }
  // An annotation of an object of the API server ("" when the object or the key is missing).
  std::string Annotation(const char* plural, const char* ns, const char* name, const char* key) {
    auto o = api_.Get(plural, ns, name);
    return o ? (*o)["metadata"]["annotations"].value(key, "") : std::string();
  }
  std::string NodeAnnotation(const char* key) { return Annotation("nodes", "", "node1", key); }

  std::string dir_, plugin_dir_, state_;
  k8s::testing::FakeApiServer api_;
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  pid_t pid_ = -1;
};

// Upstream v2.11 through the real binary: the node config entry chosen by the Node's labels
// (nodelabelselector, over the "*" entry) turns on reportnodecapacity; the Node's status then holds
// the healthy GPUs' summed gpumem and gpucores, and loses a GPU's share when it turns unhealthy.
TEST_F(DaemonTest, NodeLabelSelectorEntryReportsNodeCapacity) {
  const std::string devices = "Tesla T4:15360:40;Tesla T4:15360:40";
  ASSERT_TRUE(api_.Start().ok());
  ASSERT_TRUE(api_.Upsert("nodes", {{"apiVersion", "v1"},
                                    {"kind", "Node"},
                                    {"metadata", {{"name", "node1"}, {"labels", {{"pool", "a"}}}}}})
                  .ok());
  const std::string node_config = dir_ + "/config.json";
  std::ofstream(node_config) << R"({"nodeconfig":[{"name":"*","devicesplitcount":2},
    {"nodelabelselector":{"matchLabels":{"pool":"a"}},"devicesplitcount":4,
     "reportnodecapacity":true}]})";
  StartPlugin(devices, "", {"--config", node_config});
  ASSERT_TRUE(kubelet_->WaitForRegistrations(1, seconds(20)));
  // Split 4 (the selector's entry), not 2 (the "*" entry).
  ASSERT_TRUE(kubelet_->WaitForDevices([](const auto& d) { return d.size() == 8; }, seconds(20)));
  auto status = [&](const char* field, const char* name) {
    auto n = api_.Get("nodes", "", "node1");
    if (!n || !(*n)["status"][field].is_object()) return std::string();
    return (*n)["status"][field].value(name, std::string());
  };
  ASSERT_TRUE(
      Eventually([&] { return status("capacity", "nvidia.com/gpumem") == "30720"; }, seconds(20)))
      << status("capacity", "nvidia.com/gpumem");
  EXPECT_EQ(status("allocatable", "nvidia.com/gpumem"), "30720");
  EXPECT_EQ(status("capacity", "nvidia.com/gpucores"), "200");
  EXPECT_EQ(status("allocatable", "nvidia.com/gpucores"), "200");

  ShareFakeGpus(devices, "");
  auto hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  ASSERT_TRUE(hooks.ok()) << hooks.error;
  hooks.reset();
  ASSERT_EQ(hooks.inject_xid(1, 79), 0);
  EXPECT_TRUE(
      Eventually([&] { return status("capacity", "nvidia.com/gpumem") == "15360"; }, seconds(20)))
      << status("capacity", "nvidia.com/gpumem");
  EXPECT_EQ(status("allocatable", "nvidia.com/gpucores"), "100");
  StopPlugin();
}

TEST_F(DaemonTest, DevicePluginProcessEndToEnd) {
  const std::string devices = "Tesla T4:15360:40;Tesla T4:15360:40";
  k8s::testing::FakeApiServer& api = api_;
  ASSERT_TRUE(api.Start().ok());
  Json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", "node1"},
        {"annotations", {{vendors::nvidia::kNodeHandshake, "Requesting_2023-11-14 22:13:00"}}}}}};
  ASSERT_TRUE(api.Upsert("nodes", node).ok());
  // IMEX channels: channel0 is a character device under the given root, channel4 is missing (left
  // out with a warning).
  fs::create_directories(dir_ + "/host/dev/nvidia-caps-imex-channels");
  fs::create_symlink("/dev/null", dir_ + "/host/dev/nvidia-caps-imex-channels/channel0");
  StartPlugin(devices, "",
              {"--split-count", "3", "--host-pid-broker-dir", dir_ + "/hostpid",
               "--imex-channel-ids", "0,4", "--imex-dev-root", dir_ + "/host"});
  testing::FakeKubelet& kubelet = *kubelet_;

  ASSERT_TRUE(kubelet.WaitForRegistrations(1, seconds(20)));
  EXPECT_EQ(kubelet.Registrations()[0].resource_name(), "nvidia.com/gpu");
  ASSERT_TRUE(kubelet.WaitForDevices([](const auto& d) { return d.size() == 6; }, seconds(20)));

  // Node registration annotation (upstream JSON) and the handshake answer.
  auto node_annotation = [&](const char* key) { return NodeAnnotation(key); };
  ASSERT_TRUE(Eventually(
      [&] { return !node_annotation(vendors::nvidia::kNodeNvidiaRegister).empty(); }, seconds(20)));
  EXPECT_NE(node_annotation(vendors::nvidia::kNodeNvidiaRegister)
                .find(std::string("\"id\":\"") + kDev1 + "\",\"index\":1,\"count\":3"),
            std::string::npos)
      << node_annotation(vendors::nvidia::kNodeNvidiaRegister);
  EXPECT_EQ(node_annotation(vendors::nvidia::kNodeHandshake).rfind("Reported_", 0), 0u)
      << node_annotation(vendors::nvidia::kNodeHandshake);

  // A pod bound by the scheduler: its decision annotation turns into the container environment.
  ASSERT_TRUE(api.Upsert("pods", BoundPod("train", std::string(kDev1) + ",NVIDIA,3000,30:;")).ok());
  auto r = kubelet.Allocate({{std::string(kDev0) + "-2"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& env = r->container_responses(0).envs();
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), kDev1);
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(env.at("NVIDIA_IMEX_CHANNELS"), "0");
  // Upstream's host PID broker: served before registration, gated and mounted read-only.
  EXPECT_EQ(env.at("LIBVGPU_HOSTPID_BROKER"), "1");
  EXPECT_TRUE(fs::is_socket(dir_ + "/hostpid/broker.sock"));
  bool broker_mounted = false;
  for (const auto& m : r->container_responses(0).mounts())
    broker_mounted |= m.container_path() == "/tmp/vgpulock/hostpid" &&
                      m.host_path() == dir_ + "/hostpid" && m.read_only();
  EXPECT_TRUE(broker_mounted);
  EXPECT_EQ((*api.Get("pods", "ml", "train"))["metadata"]["annotations"][core::kBindPhase],
            "success");
  auto unknown = kubelet.Allocate({{std::string(kDev0) + "-1"}});
  EXPECT_FALSE(unknown.ok());  // nobody else is waiting: an error, never someone else's limits

  // An Xid on device 1, injected into the shared fake GPU state from this process.
  ShareFakeGpus(devices, "");
  auto hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  ASSERT_TRUE(hooks.ok()) << hooks.error;
  hooks.reset();
  ASSERT_EQ(hooks.inject_xid(1, 79), 0);
  ASSERT_TRUE(kubelet.WaitForDevices(
      [](const auto& d) { return Count(d, kDev1, "Unhealthy") == 3; }, seconds(5)));
  EXPECT_EQ(Count(kubelet.Devices(), kDev0, "Healthy"), 3);
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string a = node_annotation(vendors::nvidia::kNodeNvidiaRegister);
        return a.find(std::string(kDev1) +
                      "\",\"index\":1,\"count\":3,\"devmem\":15360,\"devcore\":100,"
                      "\"type\":\"NVIDIA-Tesla T4\",\"numa\":1,\"mode\"") != std::string::npos;
      },
      seconds(20)))
      << node_annotation(
             vendors::nvidia::kNodeNvidiaRegister);  // health false is omitted (omitempty)

  // kubelet restart: re-registration and the devices re-advertised with their health.
  ASSERT_TRUE(kubelet.Restart().ok());
  ASSERT_TRUE(kubelet.WaitForRegistrations(2, seconds(20)));
  ASSERT_TRUE(kubelet.WaitForDevices(
      [](const auto& d) { return d.size() == 6 && Count(d, kDev1, "Unhealthy") == 3; },
      seconds(20)));

  StopPlugin();
  EXPECT_FALSE(fs::exists(plugin_dir_ + "/nvidia-gpu.sock"));
}

// --imex-required: a listed channel without its device node stops the plugin at start, with the
// channel named, before it registers with kubelet; garbage in the list is refused the same way.
TEST_F(DaemonTest, ImexRequiredChannelMissingFailsStart) {
  ServeNode1(api_);
  auto exit_status = [&]() {
    int status = 0;
    EXPECT_TRUE(Eventually([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, seconds(20)));
    pid_ = -1;
    EXPECT_TRUE(WIFEXITED(status)) << status;
    return WEXITSTATUS(status);
  };
  StartPlugin("Tesla T4:15360:40", "",
              {"--imex-channel-ids", "4", "--imex-required", "--imex-dev-root", dir_ + "/host"});
  EXPECT_EQ(exit_status(), 1);
  EXPECT_TRUE(kubelet_->Registrations().empty());
  pid_ = SpawnPlugin(state_, "Tesla T4:15360:40", "", {"--imex-channel-ids", "0,zero"});
  EXPECT_EQ(exit_status(), 1);
}

// Operating mode mig from the node config: the MIG GPU registers its profiles, Allocate creates the
// decided instance and names it, the pod records it, and once the pod is gone the instance is
// reclaimed (the fake driver's MIG state is shared with this process, which checks it).
TEST_F(DaemonTest, MigNodeEndToEnd) {
  const std::string node_config = AddNode1WithMode(api_, dir_, "mig");
  StartPlugin(kMigNode, "0", {"--config", node_config, "--split-count", "2"});
  k8s::testing::FakeApiServer& api = api_;
  testing::FakeKubelet& kubelet = *kubelet_;
  ASSERT_TRUE(kubelet.WaitForDevices([](const auto& d) { return d.size() == 4; }, seconds(20)));
  auto annotation = [&](const char* plural, const char* ns, const char* name, const char* key) {
    return Annotation(plural, ns, name, key);
  };
  ASSERT_TRUE(Eventually(
      [&] {
        return annotation("nodes", "", "node1", vendors::nvidia::kNodeNvidiaRegister)
                   .find(R"("mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":4864)") !=
               std::string::npos;
      },
      seconds(20)))
      << annotation("nodes", "", "node1", vendors::nvidia::kNodeNvidiaRegister);

  Json pod = BoundPod("infer", std::string(kDev0) + ",NVIDIA,4864,14:;");
  pod["metadata"]["annotations"][core::kMigAllocations] =
      std::string(R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":")") + kDev0 +
      R"(","profile":"1g.5gb","placement":{"start":6,"size":1}}])";
  ASSERT_TRUE(api.Upsert("pods", pod).ok());
  auto r = kubelet.Allocate({{std::string(kDev0) + "-1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string mig = r->container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(mig.rfind("MIG-", 0), 0u) << mig;
  EXPECT_EQ(r->container_responses(0).envs().size(), 1u);
  EXPECT_NE(annotation("pods", "ml", "infer", core::kMigAllocations).find(R"("migUUID":")" + mig),
            std::string::npos)
      << annotation("pods", "ml", "infer", core::kMigAllocations);

  // The fake driver's view from here: the instance exists while the pod does, and goes after.
  ShareFakeGpus(kMigNode, "0");
  auto hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  ASSERT_TRUE(hooks.ok()) << hooks.error;
  hooks.reset();
  void* lib = dlopen(HAMI_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  using InitFn = int (*)();
  using HandleFn = int (*)(unsigned, void**);
  using MigHandleFn = int (*)(void*, unsigned, void**);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto by_index = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto mig_by_index =
      reinterpret_cast<MigHandleFn>(dlsym(lib, "nvmlDeviceGetMigDeviceHandleByIndex"));
  ASSERT_TRUE(init && by_index && mig_by_index);
  ASSERT_EQ(init(), 0);
  void* gpu = nullptr;
  ASSERT_EQ(by_index(0, &gpu), 0);
  void* handle = nullptr;
  EXPECT_EQ(mig_by_index(gpu, 0, &handle), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // reclaim passes while it runs
  EXPECT_EQ(mig_by_index(gpu, 0, &handle), 0) << "a running pod's instance is never reclaimed";
  ASSERT_TRUE(api.Delete("pods", "ml", "infer").ok());
  EXPECT_TRUE(Eventually([&] { return mig_by_index(gpu, 0, &handle) == 6; }, seconds(20)))
      << "NVML_ERROR_NOT_FOUND: no MIG device left";
  StopPlugin();
}

// Static MIG, strategy mixed: MIG devices made beforehand on the A100 are served as
// nvidia.com/mig-1g.5gb on a socket of their own; the T4 stays the shared nvidia.com/gpu and is the
// only GPU HAMi's scheduler is told of.
TEST_F(DaemonTest, StaticMigMixedNode) {
  ShareFakeGpus(kMigNode, "0");
  auto hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  ASSERT_TRUE(hooks.ok()) << hooks.error;
  hooks.reset();
  std::vector<std::string> made;
  {
    gpu::NvmlOptions o;
    o.library = HAMI_FAKE_NVML;
    auto nvml = gpu::NvmlDiscovery::Open(o);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    for (int start : {0, 1}) {  // the administrator's instances
      auto m = (*nvml)->CreateMigInstance(kDev0, "1g.5gb", {start, 1});
      ASSERT_TRUE(m.ok()) << m.status();
      made.push_back(m->uuid);
    }
  }
  ServeNode1(api_);
  StartPlugin(kMigNode, "0", {"--mig-strategy", "mixed", "--split-count", "2"});
  testing::FakeKubelet& kubelet = *kubelet_;
  ASSERT_TRUE(kubelet.WaitForRegistrations(2, seconds(20)));
  std::map<std::string, std::string> endpoints;
  for (const auto& r : kubelet.Registrations()) endpoints[r.resource_name()] = r.endpoint();
  EXPECT_EQ(endpoints, (std::map<std::string, std::string>{
                           {"nvidia.com/gpu", "nvidia-gpu.sock"},
                           {"nvidia.com/mig-1g.5gb", "nvidia-mig-1g.5gb.sock"}}));
  auto register_annotation = [&] { return NodeAnnotation(vendors::nvidia::kNodeNvidiaRegister); };
  ASSERT_TRUE(Eventually([&] { return !register_annotation().empty(); }, seconds(20)));
  EXPECT_NE(register_annotation().find(kDev1), std::string::npos) << register_annotation();
  EXPECT_EQ(register_annotation().find(kDev0), std::string::npos) << register_annotation();
  StopPlugin();
}

// Operating mode mps from the node config, the daemon's directories from the flags: the GPUs
// register mode mps and Allocate makes the container a client of the (here pretended) MPS control
// daemon.
TEST_F(DaemonTest, MpsNodeEndToEnd) {
  const std::string pipe = dir_ + "/mps-pipe";
  fs::create_directories(pipe);
  // The daemon's PID file names a live process: this test.
  std::ofstream(pipe + "/nvidia-cuda-mps-control.pid") << ::getpid() << "\n";
  const std::string node_config = AddNode1WithMode(api_, dir_, "mps");
  StartPlugin(
      "Tesla T4:15360:40;Tesla T4:15360:40", "",
      {"--config", node_config, "--split-count", "2", "--mps-pipe-dir", pipe, "--mps-shm-dir", ""});
  testing::FakeKubelet& kubelet = *kubelet_;
  ASSERT_TRUE(kubelet.WaitForDevices([](const auto& d) { return d.size() == 4; }, seconds(20)));
  auto registered = [&] { return NodeAnnotation(vendors::nvidia::kNodeNvidiaRegister); };
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string r = registered();
        return r.find(R"("mode":"mps")") != std::string::npos &&
               r.find("hami-core") == std::string::npos;
      },
      seconds(20)))
      << registered();

  ASSERT_TRUE(
      api_.Upsert("pods", BoundPod("infer", std::string(kDev1) + ",NVIDIA,4000,25:;")).ok());
  auto r = kubelet.Allocate({{std::string(kDev1) + "-0"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& c = r->container_responses(0);
  const std::map<std::string, std::string> envs(c.envs().begin(), c.envs().end());
  const std::map<std::string, std::string> want = {{"NVIDIA_VISIBLE_DEVICES", kDev1},
                                                   {"CUDA_VISIBLE_DEVICES", kDev1},
                                                   {"CUDA_MPS_PIPE_DIRECTORY", pipe},
                                                   {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4000M"},
                                                   {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"}};
  EXPECT_EQ(envs, want);
  ASSERT_EQ(c.mounts_size(), 1);  // the pipe directory; --mps-shm-dir "" mounts no shm
  EXPECT_EQ(c.mounts(0).host_path(), pipe);
  EXPECT_FALSE(fs::exists(dir_ + "/regions")) << "no libvgpu region for an MPS client";
  StopPlugin();
}

}  // namespace
}  // namespace hami::deviceplugin
