#include "deviceplugin/allocate_env.h"

#include <gtest/gtest.h>

#include "deviceplugin/testing/builders.h"
#include "vendors/vendor_set.h"

namespace hami::deviceplugin {
namespace {

using testing::Dev;

PendingPod Pod(std::vector<core::ContainerDevice> devs, int priority = -1,
               bool disable_control = false) {
  PendingPod p = testing::MakePod("p1", {std::move(devs)});
  p.containers[0].priority = priority;
  p.containers[0].disable_control = disable_control;
  return p;
}

using Env = std::map<std::string, std::string>;

TEST(AllocateEnvTest, EnvironmentTable) {
  struct Case {
    const char* name;
    std::vector<core::ContainerDevice> devs;
    void (*cfg)(PluginConfig&);
    int priority;
    Env want;  // must be present with these values
    std::vector<std::string> absent;
  };
  const Case cases[] = {
      {"memory limit only",
       {Dev("GPU-a", 3000, 0)},
       [](PluginConfig&) {},
       -1,
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "3000m"},
        {"CUDA_DEVICE_SM_LIMIT", "0"},
        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", "/usr/local/vgpu/r.cache"}},
       {"CUDA_OVERSUBSCRIBE", "GPU_CORE_UTILIZATION_POLICY", "CUDA_TASK_PRIORITY",
        "LIBCUDA_LOG_LEVEL", "CUDA_DEVICE_MEMORY_LIMIT_1", "CUDA_DEVICE_SM_LIMIT_0"}},
      {"memory and cores",
       {Dev("GPU-a", 4000, 30)},
       [](PluginConfig&) {},
       -1,
       {{"CUDA_DEVICE_MEMORY_LIMIT_0", "4000m"}, {"CUDA_DEVICE_SM_LIMIT", "30"}},
       {}},
      {"two GPUs",
       {Dev("GPU-a", 5000, 50), Dev("GPU-b", 5000, 50)},
       [](PluginConfig&) {},
       -1,
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "5000m"},
        {"CUDA_DEVICE_MEMORY_LIMIT_1", "5000m"},
        {"CUDA_DEVICE_SM_LIMIT", "50"}},
       {"CUDA_DEVICE_SM_LIMIT_0"}},
      {"two GPUs, different cores",
       {Dev("GPU-a", 1000, 20), Dev("GPU-b", 2000, 40)},
       [](PluginConfig&) {},
       -1,
       {{"CUDA_DEVICE_SM_LIMIT", "20"},
        {"CUDA_DEVICE_SM_LIMIT_0", "20"},
        {"CUDA_DEVICE_SM_LIMIT_1", "40"},
        {"CUDA_DEVICE_MEMORY_LIMIT_1", "2000m"}},
       {}},
      {"oversubscription",
       {Dev("GPU-a", 40000, 0)},
       [](PluginConfig& c) { c.memory_scaling = 2; },
       -1,
       {{"CUDA_OVERSUBSCRIBE", "true"},
        {"CUDA_DEVICE_MEMORY_SCALING", "2"},
        {"CUDA_DEVICE_MEMORY_LIMIT_0", "40000m"}},
       {}},
      {"fractional scaling",
       {Dev("GPU-a", 1500, 0)},
       [](PluginConfig& c) { c.memory_scaling = 1.5; },
       -1,
       {{"CUDA_OVERSUBSCRIBE", "true"}, {"CUDA_DEVICE_MEMORY_SCALING", "1.5"}},
       {}},
      {"scaling of exactly 1 is not oversubscription",
       {Dev("GPU-a", 100, 0)},
       [](PluginConfig& c) { c.memory_scaling = 1; },
       -1,
       {},
       {"CUDA_OVERSUBSCRIBE", "CUDA_DEVICE_MEMORY_SCALING"}},
      {"log level, core policy, priority",
       {Dev("GPU-a", 100, 10)},
       [](PluginConfig& c) {
         c.libcuda_log_level = "3";
         c.core_policy = "force";
       },
       1,
       {{"LIBCUDA_LOG_LEVEL", "3"},
        {"GPU_CORE_UTILIZATION_POLICY", "force"},
        {"CUDA_TASK_PRIORITY", "1"}},
       {}},
      {"core limit disabled",
       {Dev("GPU-a", 100, 10)},
       [](PluginConfig& c) { c.core_policy = "disable"; },
       0,
       {{"GPU_CORE_UTILIZATION_POLICY", "disable"}, {"CUDA_TASK_PRIORITY", "0"}},
       {}},
  };
  for (const auto& tc : cases) {
    PluginConfig c;
    tc.cfg(c);
    PendingPod p = Pod(tc.devs, tc.priority);
    auto a = BuildContainerAllocation(p, p.containers[0], c, "r.cache");
    ASSERT_TRUE(a.ok()) << tc.name << ": " << a.status();
    for (const auto& [k, v] : tc.want) {
      auto it = a->envs.find(k);
      ASSERT_NE(it, a->envs.end()) << tc.name << ": missing " << k;
      EXPECT_EQ(it->second, v) << tc.name << ": " << k;
    }
    for (const auto& k : tc.absent)
      EXPECT_EQ(a->envs.count(k), 0u) << tc.name << ": unexpected " << k;
  }
}

TEST(AllocateEnvTest, Mounts) {
  PluginConfig c;
  c.region_root = "/var/lib/hami/containers";
  c.libvgpu_host_path = "/opt/hami/libvgpu.so";
  PendingPod p = Pod({Dev("GPU-a", 1, 0)});
  auto a = BuildContainerAllocation(p, p.containers[0], c, "r.cache");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->region_host_dir, "/var/lib/hami/containers/uid-p1_c0");
  std::vector<MountSpec> want = {
      {"/usr/local/vgpu/libvgpu.so", "/opt/hami/libvgpu.so", true},
      {"/usr/local/vgpu", "/var/lib/hami/containers/uid-p1_c0", false},
      {"/tmp/vgpulock", "/tmp/vgpulock", false},
      {"/etc/ld.so.preload", "/usr/local/vgpu/ld.so.preload", true},
      {"/usr/local/vgpu/vgpu.limits", "/var/lib/hami/containers/uid-p1_c0.limits", true},
  };
  EXPECT_EQ(a->mounts, want);
  EXPECT_EQ(a->limits_host_path, "/var/lib/hami/containers/uid-p1_c0.limits");

  PendingPod opt_out = Pod({Dev("GPU-a", 1, 0)}, -1, /*disable_control=*/true);
  auto b = BuildContainerAllocation(opt_out, opt_out.containers[0], c, "r.cache");
  ASSERT_TRUE(b.ok());
  for (const auto& m : b->mounts) EXPECT_NE(m.container_path, "/etc/ld.so.preload");
  EXPECT_EQ(b->mounts.size(), 4u);
  EXPECT_EQ(b->mounts.back().container_path, "/usr/local/vgpu/vgpu.limits")
      << "opting out of the preload keeps the limits";
  EXPECT_EQ(b->region_uid, -1) << "no user named: the directory stays the plugin's";

  PendingPod owned = Pod({Dev("GPU-a", 1, 0)});
  owned.containers[0].uid = 1000;
  owned.containers[0].gid = 2000;
  auto o = BuildContainerAllocation(owned, owned.containers[0], c, "r.cache");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->region_uid, 1000);
  EXPECT_EQ(o->region_gid, 2000);
}

// Upstream's host PID broker: its directory read-only right after the lock directory it is nested
// in, and the gate in the environment (not in the limits file: it arms nothing).
TEST(AllocateEnvTest, HostPidBrokerMountAndGate) {
  PluginConfig c;
  PendingPod p = Pod({Dev("GPU-a", 1, 0)});
  auto off = BuildContainerAllocation(p, p.containers[0], c, "r.cache");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->envs.count("LIBVGPU_HOSTPID_BROKER"), 0u);
  for (const auto& m : off->mounts) EXPECT_NE(m.container_path, "/tmp/vgpulock/hostpid");

  c.host_pid_broker_dir = "/var/run/hami/hostpid";
  auto on = BuildContainerAllocation(p, p.containers[0], c, "r.cache");
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(on->envs.at("LIBVGPU_HOSTPID_BROKER"), "1");
  ASSERT_EQ(on->mounts.size(), 6u);
  EXPECT_EQ(on->mounts[2], (MountSpec{"/tmp/vgpulock", "/tmp/vgpulock", false}));
  EXPECT_EQ(on->mounts[3], (MountSpec{"/tmp/vgpulock/hostpid", "/var/run/hami/hostpid", true}));
  EXPECT_EQ(on->limits_file, off->limits_file);

  // MIG devices run without libvgpu: no broker either.
  auto mig = BuildMigDeviceListAllocation({"MIG-a"}, c, "id");
  ASSERT_TRUE(mig.ok());
  EXPECT_TRUE(mig->mounts.empty());
  EXPECT_EQ(mig->envs.count("LIBVGPU_HOSTPID_BROKER"), 0u);
}

// The limits file holds every libvgpu setting of the environment except the device list and log
// level, and the core policy even when it is the default.
TEST(AllocateEnvTest, LimitsFileMirrorsTheArmedEnvironment) {
  PluginConfig c;
  c.libcuda_log_level = "3";
  c.memory_scaling = 2.0;
  PendingPod p = Pod({Dev("GPU-a", 1000, 30), Dev("GPU-b", 2000, 30)}, 0);
  auto a = BuildContainerAllocation(p, p.containers[0], c, "r.cache");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->limits_file,
            "# libvgpu limits for this container, written by the hami device plugin\n"
            "CUDA_DEVICE_MEMORY_LIMIT_0=1000m\n"
            "CUDA_DEVICE_MEMORY_LIMIT_1=2000m\n"
            "CUDA_DEVICE_MEMORY_SCALING=2\n"
            "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/r.cache\n"
            "CUDA_DEVICE_SM_LIMIT=30\n"
            "CUDA_OVERSUBSCRIBE=true\n"
            "CUDA_TASK_PRIORITY=0\n"
            "GPU_CORE_UTILIZATION_POLICY=default\n");
}

// One source: the decision's part of the environment is the NVIDIA vendor's AllocateEnv, the
// plugin only adds its own settings around it.
TEST(AllocateEnvTest, DecisionPartIsTheNvidiaVendors) {
  const vendors::Vendor* nvidia =
      vendors::VendorSet::NvidiaOnly().ByCommonWord(core::kNvidiaVendor);
  ASSERT_NE(nvidia, nullptr);
  for (const auto& devs : std::vector<std::vector<core::ContainerDevice>>{
           {Dev("GPU-a", 3000, 30)},
           {Dev("GPU-a", 3000, 30), Dev("GPU-b", 5000, 30)},
           {Dev("GPU-a", 3000, 30), Dev("GPU-b", 5000, 60)}}) {
    PendingPod p = Pod(devs);
    auto a = BuildContainerAllocation(p, p.containers[0], PluginConfig{}, "r.cache");
    ASSERT_TRUE(a.ok()) << a.status();
    const Env want = nvidia->AllocateEnv(devs);
    ASSERT_FALSE(want.empty());
    for (const auto& [k, v] : want) {
      ASSERT_TRUE(a->envs.count(k)) << k;
      EXPECT_EQ(a->envs.at(k), v) << k;
    }
  }
}

// The device list strategies (NVIDIA's --device-list-strategy): what names the GPUs to the runtime.
// Upstream's cases: NVIDIA's plugin answers envvar with NVIDIA_VISIBLE_DEVICES, volume-mounts with
// /dev/null mounts under /var/run/nvidia-container-devices, cdi-annotations with
// cdi.k8s.io/nvidia-device-plugin_<response ID>, cdi-cri with cdi_devices, and sets no
// NVIDIA_VISIBLE_DEVICES when only CDI strategies are on.
TEST(AllocateEnvTest, DeviceListStrategyTable) {
  struct Case {
    const char* name;
    void (*cfg)(PluginConfig&);
    const char* visible;  // NVIDIA_VISIBLE_DEVICES; nullptr = absent
    std::vector<MountSpec> list_mounts;
    std::map<std::string, std::string> annotations;
    std::vector<std::string> cdi;
  };
  const std::string uuid_a = "GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002";
  const std::string uuid_b = "GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002";
  const Case cases[] = {
      {"envvar (default)",
       [](PluginConfig&) {},
       "GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002,"
       "GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002",
       {},
       {},
       {}},
      {"envvar by index",
       [](PluginConfig& c) { c.device_id_strategy = "index"; },
       "3,1",
       {},
       {},
       {}},
      {"volume-mounts",
       [](PluginConfig& c) {
         c.device_list_strategy = "volume-mounts";
         c.device_id_strategy = "index";
       },
       "/var/run/nvidia-container-devices",
       {{"/var/run/nvidia-container-devices/3", "/dev/null", false},
        {"/var/run/nvidia-container-devices/1", "/dev/null", false}},
       {},
       {}},
      {"volume-mounts wins over envvar",
       [](PluginConfig& c) { c.device_list_strategy = "envvar,volume-mounts"; },
       "/var/run/nvidia-container-devices",
       {{"/var/run/nvidia-container-devices/GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002", "/dev/null",
         false},
        {"/var/run/nvidia-container-devices/GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002", "/dev/null",
         false}},
       {},
       {}},
      {"cdi-annotations",
       [](PluginConfig& c) { c.device_list_strategy = "cdi-annotations"; },
       nullptr,
       {},
       {{"cdi.k8s.io/nvidia-device-plugin_0f3c8e2a-7d41-4b6e-9a15-c2e4b7d90a13",
         "nvidia.com/gpu=GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002,"
         "nvidia.com/gpu=GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002"}},
       {}},
      {"cdi-annotations by index, own prefix and kind",
       [](PluginConfig& c) {
         c.device_list_strategy = "cdi-annotations";
         c.device_id_strategy = "index";
         c.cdi_annotation_prefix = "cdi.example.com/";
         c.cdi_kind = "k8s.device-plugin.nvidia.com/gpu";
       },
       nullptr,
       {},
       {{"cdi.example.com/nvidia-device-plugin_0f3c8e2a-7d41-4b6e-9a15-c2e4b7d90a13",
         "k8s.device-plugin.nvidia.com/gpu=3,k8s.device-plugin.nvidia.com/gpu=1"}},
       {}},
      {"cdi-cri",
       [](PluginConfig& c) { c.device_list_strategy = "cdi-cri"; },
       nullptr,
       {},
       {},
       {"nvidia.com/gpu=GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002",
        "nvidia.com/gpu=GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002"}},
      {"both CDI strategies",
       [](PluginConfig& c) {
         c.device_list_strategy = "cdi-annotations,cdi-cri";
         c.device_id_strategy = "index";
       },
       nullptr,
       {},
       {{"cdi.k8s.io/nvidia-device-plugin_0f3c8e2a-7d41-4b6e-9a15-c2e4b7d90a13",
         "nvidia.com/gpu=3,nvidia.com/gpu=1"}},
       {"nvidia.com/gpu=3", "nvidia.com/gpu=1"}},
      {"envvar beside CDI keeps the variable",
       [](PluginConfig& c) { c.device_list_strategy = "envvar,cdi-cri"; },
       "GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002,GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002",
       {},
       {},
       {"nvidia.com/gpu=GPU-3c2d7a3e-54f1-11ee-8c99-0242ac120002",
        "nvidia.com/gpu=GPU-9f1e0b52-54f1-11ee-8c99-0242ac120002"}},
  };
  // NVML indices deliberately out of the decision's order: the list keeps the decision's order.
  PendingPod p = Pod({Dev(uuid_a, 3000, 30), Dev(uuid_b, 5000, 30)}, 0);
  const std::map<std::string, int> by_index = {{uuid_a, 3}, {uuid_b, 1}};
  const std::string cache = "0f3c8e2a-7d41-4b6e-9a15-c2e4b7d90a13.cache";
  auto base = BuildContainerAllocation(p, p.containers[0], PluginConfig{}, cache, by_index);
  ASSERT_TRUE(base.ok()) << base.status();
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    PluginConfig c;
    tc.cfg(c);
    ASSERT_TRUE(Validate(c).ok()) << Validate(c);
    auto a = BuildContainerAllocation(p, p.containers[0], c, cache, by_index);
    ASSERT_TRUE(a.ok()) << a.status();
    if (tc.visible == nullptr) {
      EXPECT_EQ(a->envs.count("NVIDIA_VISIBLE_DEVICES"), 0u) << a->envs["NVIDIA_VISIBLE_DEVICES"];
    } else {
      EXPECT_EQ(a->envs["NVIDIA_VISIBLE_DEVICES"], tc.visible);
    }
    EXPECT_EQ(a->annotations, tc.annotations);
    EXPECT_EQ(a->cdi_devices, tc.cdi);
    // The device list mounts come first; the libvgpu mounts follow unchanged.
    ASSERT_EQ(a->mounts.size(), base->mounts.size() + tc.list_mounts.size());
    EXPECT_EQ(std::vector<MountSpec>(a->mounts.begin(), a->mounts.begin() + tc.list_mounts.size()),
              tc.list_mounts);
    EXPECT_EQ(std::vector<MountSpec>(a->mounts.begin() + tc.list_mounts.size(), a->mounts.end()),
              base->mounts);
    // libvgpu is armed exactly as with the env strategy: every other variable and the limits file.
    auto other = [](std::map<std::string, std::string> e) {
      e.erase("NVIDIA_VISIBLE_DEVICES");
      return e;
    };
    EXPECT_EQ(other(a->envs), other(base->envs));
    EXPECT_EQ(a->envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
    EXPECT_EQ(a->envs.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "5000m");
    EXPECT_EQ(a->envs.at("CUDA_DEVICE_SM_LIMIT"), "30");
    EXPECT_EQ(a->limits_file, base->limits_file);
  }
}

TEST(AllocateEnvTest, MigContainersGetTheirMigDevicesAndNothingOfLibvgpu) {
  PendingPod p = testing::MakePod("p1", {{Dev("GPU-a", 4864, 14), Dev("GPU-b", 9984, 28)}});
  const std::vector<std::string> mig = {"MIG-11111111-2222-4333-8444-555555555555",
                                        "MIG-66666666-7777-4888-8999-000000000000"};
  struct Case {
    const char* strategy;
    Env envs;
    size_t mounts;
    size_t cdi;
  };
  const Case cases[] = {
      {"envvar", {{"NVIDIA_VISIBLE_DEVICES", mig[0] + "," + mig[1]}}, 0, 0},
      {"volume-mounts", {{"NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices"}}, 2, 0},
      {"cdi-cri", {}, 0, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.strategy);
    PluginConfig cfg;
    cfg.mode = "mig";
    cfg.device_list_strategy = c.strategy;
    cfg.libcuda_log_level = "3";  // a libvgpu setting: not for MIG containers
    cfg.memory_scaling = 2;
    auto a = BuildMigContainerAllocation(p, p.containers[0], cfg, mig, "alloc-1");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->envs, c.envs);
    EXPECT_EQ(a->mounts.size(), c.mounts);
    EXPECT_EQ(a->cdi_devices.size(), c.cdi);
    if (c.cdi > 0) {
      EXPECT_EQ(a->cdi_devices[1], "nvidia.com/gpu=" + mig[1]);
    }
    EXPECT_TRUE(a->region_host_dir.empty());
    EXPECT_TRUE(a->limits_host_path.empty());
  }
  PluginConfig cfg;
  EXPECT_FALSE(BuildMigContainerAllocation(p, p.containers[0], cfg, {mig[0]}, "x").ok());
  EXPECT_FALSE(BuildMigContainerAllocation(p, p.containers[0], cfg, {mig[0], "GPU-b"}, "x").ok());
}

// Operating mode mps: the MPS client environment and the daemon's directories, exactly; nothing of
// libvgpu (no CUDA_DEVICE_* limits, region directory, limits file, ld.so.preload, log level,
// priority).
TEST(AllocateEnvTest, MpsContainersAreClientsOfTheDaemon) {
  struct Case {
    const char* name;
    std::vector<core::ContainerDevice> devs;
    void (*cfg)(PluginConfig&);
    Env want;
    std::vector<MountSpec> mounts;
    size_t cdi = 0;
  };
  const MountSpec pipe{"/tmp/nvidia-mps", "/tmp/nvidia-mps", false};
  const MountSpec shm{"/dev/shm", "/dev/shm", false};
  const Case cases[] = {
      {"one GPU, memory and cores",
       {Dev("GPU-a", 3000, 30)},
       [](PluginConfig&) {},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=3000M"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"}},
       {pipe, shm}},
      {"no cores granted: no thread limit (libvgpu's SM limit 0 is none too)",
       {Dev("GPU-a", 3000, 0)},
       [](PluginConfig&) {},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=3000M"}},
       {pipe, shm}},
      {"two GPUs, limits per ordinal in decision order, the smaller thread share",
       {Dev("GPU-b", 8000, 40), Dev("GPU-a", 16000, 20)},
       [](PluginConfig&) {},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-b,GPU-a"},
        {"CUDA_VISIBLE_DEVICES", "GPU-b,GPU-a"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8000M,1=16000M"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "20"}},
       {pipe, shm}},
      {"core policy disable: no thread limit; libvgpu settings ignored",
       {Dev("GPU-a", 3000, 30)},
       [](PluginConfig& c) {
         c.core_policy = "disable";
         c.libcuda_log_level = "3";
       },
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=3000M"}},
       {pipe, shm}},
      {"the daemon's own directories, no shm mount",
       {Dev("GPU-a", 1024, 100)},
       [](PluginConfig& c) {
         c.mps_pipe_dir = "/run/nvidia/mps/nvidia.com/gpu/pipe";
         c.mps_shm_dir = "";
       },
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_VISIBLE_DEVICES", "GPU-a"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/run/nvidia/mps/nvidia.com/gpu/pipe"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1024M"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"}},
       {{"/run/nvidia/mps/nvidia.com/gpu/pipe", "/run/nvidia/mps/nvidia.com/gpu/pipe", false}}},
      {"device ID strategy index and CDI: CUDA_VISIBLE_DEVICES still by UUID",
       {Dev("GPU-b", 2000, 10)},
       [](PluginConfig& c) {
         c.device_id_strategy = "index";
         c.device_list_strategy = "envvar,cdi-cri";
       },
       {{"NVIDIA_VISIBLE_DEVICES", "1"},
        {"CUDA_VISIBLE_DEVICES", "GPU-b"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=2000M"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "10"}},
       {pipe, shm},
       1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PluginConfig cfg;
    cfg.mode = "mps";
    c.cfg(cfg);
    ASSERT_TRUE(Validate(cfg).ok());
    PendingPod p = Pod(c.devs, /*priority=*/1);
    auto a = BuildMpsContainerAllocation(p, p.containers[0], cfg, "alloc-1",
                                         {{"GPU-a", 0}, {"GPU-b", 1}});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->envs, c.want);
    EXPECT_EQ(a->mounts, c.mounts);
    EXPECT_EQ(a->cdi_devices.size(), c.cdi);
    EXPECT_TRUE(a->region_host_dir.empty());
    EXPECT_TRUE(a->limits_host_path.empty());
    EXPECT_TRUE(a->limits_file.empty());
  }
}

TEST(AllocateEnvTest, MpsRefusesWhatCannotBeALimit) {
  PluginConfig cfg;
  cfg.mode = "mps";
  struct Case {
    const char* name;
    std::vector<core::ContainerDevice> devs;
    const char* want;
  };
  const Case cases[] = {
      {"no devices", {}, "decision has no devices"},
      {"0 MiB: MPS would read it as no limit", {Dev("GPU-a", 0, 10)}, "grants 0 MiB on GPU-a"},
      {"negative cores", {Dev("GPU-a", 100, -1)}, "negative limit for GPU-a"},
  };
  for (const Case& c : cases) {
    PendingPod p = Pod(c.devs);
    auto a = BuildMpsContainerAllocation(p, p.containers[0], cfg, "alloc-1");
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_NE(std::string(a.status().message()).find(c.want), std::string::npos)
        << c.name << ": " << a.status();
  }
}

TEST(AllocateEnvTest, DeviceListErrors) {
  struct Case {
    const char* name;
    std::string uuid;
    void (*cfg)(PluginConfig&);
    std::map<std::string, int> indices;
    const char* want;
  };
  const Case cases[] = {
      {"index strategy, GPU not on this node",
       "GPU-a",
       [](PluginConfig& c) { c.device_id_strategy = "index"; },
       {{"GPU-b", 0}},
       "GPU-a has no NVML index on this node"},
      {"a comma would split the list",
       "GPU-a,GPU-b",
       [](PluginConfig&) {},
       {},
       "cannot be a CDI device name"},
      {"a slash would climb the mount root",
       "../a",
       [](PluginConfig& c) { c.device_list_strategy = "volume-mounts"; },
       {},
       "cannot be a CDI device name"},
      {"unknown strategy reaching Allocate",
       "GPU-a",
       [](PluginConfig& c) { c.device_list_strategy = "cdi"; },
       {},
       "\"cdi\" is not one of"},
      {"allocation ID too long for the annotation key",
       "GPU-a",
       [](PluginConfig& c) { c.device_list_strategy = "cdi-annotations"; },
       {},
       "at most 63"},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    PluginConfig c;
    tc.cfg(c);
    PendingPod p = Pod({Dev(tc.uuid, 1000, 0)});
    const std::string cache = std::string(tc.name).find("too long") != std::string::npos
                                  ? std::string(50, 'x') + ".cache"
                                  : "r.cache";
    auto a = BuildContainerAllocation(p, p.containers[0], c, cache, tc.indices);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(std::string(a.status().message()).find(tc.want), std::string::npos) << a.status();
  }
}

TEST(AllocateEnvTest, RejectsWhatCannotBeAPathOrALimit) {
  PluginConfig c;
  struct Case {
    const char* name;
    std::string uid, ctr, cache;
    std::vector<core::ContainerDevice> devs;
  };
  const Case cases[] = {
      {"no devices", "u", "c", "r.cache", {}},
      {"uid climbs", "../etc", "c", "r.cache", {Dev("GPU-a", 1, 0)}},
      {"uid with slash", "a/b", "c", "r.cache", {Dev("GPU-a", 1, 0)}},
      {"container dotdot", "u", "..", "r.cache", {Dev("GPU-a", 1, 0)}},
      {"empty container", "u", "", "r.cache", {Dev("GPU-a", 1, 0)}},
      {"cache with slash", "u", "c", "x/r.cache", {Dev("GPU-a", 1, 0)}},
      {"negative memory", "u", "c", "r.cache", {Dev("GPU-a", -1, 0)}},
      {"0 memory would be no limit", "u", "c", "r.cache", {Dev("GPU-a", 0, 100)}},
      {"0 memory on the second device",
       "u",
       "c",
       "r.cache",
       {Dev("GPU-a", 1000, 0), Dev("GPU-b", 0, 0)}},
  };
  for (const auto& tc : cases) {
    PendingPod p = Pod(tc.devs);
    p.uid = tc.uid;
    p.containers[0].name = tc.ctr;
    EXPECT_FALSE(BuildContainerAllocation(p, p.containers[0], c, tc.cache).ok()) << tc.name;
  }
}

}  // namespace
}  // namespace hami::deviceplugin
