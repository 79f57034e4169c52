// `hami device-plugin` as a process, end to end without a GPU or a cluster: the real binary finds
// the fake libnvidia-ml.so.1 through LD_LIBRARY_PATH, talks to the fake API server through a
// kubeconfig and to the fake kubelet through the plugin directory. Checks registration, node
// annotations + handshake, Allocate from a pod's decision annotation, an Xid injected into the
// shared fake GPU state reaching kubelet, kubelet restart, and a clean SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/annotations.h"
#include "deviceplugin/testing/fake_kubelet.h"
#include "gpu/testing/fake_nvml_hooks.h"
#include "k8s/testing/fake_apiserver.h"
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

TEST(DaemonTest, DevicePluginProcessEndToEnd) {
  char tmpl[] = "/tmp/hddXXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string plugin_dir = dir + "/dp";
  const std::string state = dir + "/fakegpu.state";
  const std::string devices = "Tesla T4:15360:40;Tesla T4:15360:40";

  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.Start().ok());
  Json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", "node1"},
        {"annotations", {{vendors::nvidia::kNodeHandshake, "Requesting_2023-11-14 22:13:00"}}}}}};
  ASSERT_TRUE(api.Upsert("nodes", node).ok());
  const std::string kubeconfig = dir + "/kubeconfig";
  std::ofstream(kubeconfig)
      << "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n"
         "    server: "
      << api.url()
      << "\nusers:\n- name: u\n  user:\n    token: t\n"
         "contexts:\n- name: t\n  context:\n    cluster: c\n    user: u\n";

  testing::FakeKubelet kubelet(plugin_dir);
  ASSERT_TRUE(kubelet.Start().ok());

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("LD_LIBRARY_PATH", HAMI_FAKE_NVML_DIR, 1);
    setenv("FAKEGPU_STATE", state.c_str(), 1);
    setenv("FAKEGPU_DEVICES", devices.c_str(), 1);
    const std::string region_root = dir + "/regions";
    execl(HAMI_BINARY, HAMI_BINARY, "device-plugin", "--kubeconfig", kubeconfig.c_str(),
          "--node-name", "node1", "--plugin-dir", plugin_dir.c_str(), "--region-root",
          region_root.c_str(), "--split-count", "3", "--register-interval", "1",
          "--fail-on-init-error", "--log-level", "warn", static_cast<char*>(nullptr));
    _exit(127);
  }

  ASSERT_TRUE(kubelet.WaitForRegistrations(1, seconds(20)));
  EXPECT_EQ(kubelet.Registrations()[0].resource_name(), "nvidia.com/gpu");
  ASSERT_TRUE(kubelet.WaitForDevices([](const auto& d) { return d.size() == 6; }, seconds(20)));

  // Node registration annotation (upstream JSON) and the handshake answer.
  auto node_annotation = [&](const char* key) -> std::string {
    auto n = api.Get("nodes", "", "node1");
    if (!n) return "";
    return (*n)["metadata"]["annotations"].value(key, "");
  };
  ASSERT_TRUE(Eventually(
      [&] { return !node_annotation(vendors::nvidia::kNodeNvidiaRegister).empty(); }, seconds(20)));
  EXPECT_NE(node_annotation(vendors::nvidia::kNodeNvidiaRegister)
                .find(std::string("\"id\":\"") + kDev1 + "\",\"index\":1,\"count\":3"),
            std::string::npos)
      << node_annotation(vendors::nvidia::kNodeNvidiaRegister);
  EXPECT_EQ(node_annotation(vendors::nvidia::kNodeHandshake).rfind("Reported_", 0), 0u)
      << node_annotation(vendors::nvidia::kNodeHandshake);

  // A pod bound by the scheduler: its decision annotation turns into the container environment.
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "train"},
        {"namespace", "ml"},
        {"annotations",
         {{vendors::nvidia::kNvidiaDevicesToAllocate, std::string(kDev1) + ",NVIDIA,3000,30:;"},
          {core::kVgpuNode, "node1"},
          {core::kBindPhase, "allocating"}}}}},
      {"spec",
       {{"nodeName", "node1"},
        {"schedulerName", "hami-scheduler"},
        {"containers", {{{"name", "main"}}}}}},
      {"status", {{"phase", "Pending"}}}};
  ASSERT_TRUE(api.Upsert("pods", pod).ok());
  auto r = kubelet.Allocate({{std::string(kDev0) + "-2"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& env = r->container_responses(0).envs();
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), kDev1);
  EXPECT_EQ(env.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ((*api.Get("pods", "ml", "train"))["metadata"]["annotations"][core::kBindPhase],
            "success");
  auto unknown = kubelet.Allocate({{std::string(kDev0) + "-1"}});
  EXPECT_FALSE(unknown.ok());  // nobody else is waiting: an error, never someone else's limits

  // An Xid on device 1, injected into the shared fake GPU state from this process.
  setenv("FAKEGPU_STATE", state.c_str(), 1);
  setenv("FAKEGPU_DEVICES", devices.c_str(), 1);
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

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(plugin_dir + "/nvidia-gpu.sock"));
  kubelet.Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace hami::deviceplugin
