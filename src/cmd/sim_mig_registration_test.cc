// `hami sim`'s MIG GPUs register what a node registers: for every profile set of the simulator
// (one per GPU the fake driver models), the device plugin's own path (NvmlDiscovery over the fake
// libnvidia-ml.so.1 with the GPU in MIG mode, then BuildNodeDevices in operating mode mig) gives
// the same mode, memory and migProfiles as sim::ToNodeInfo of a trace node naming that set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "deviceplugin/node_devices.h"
#include "gpu/nvml_discovery.h"
#include "gpu/testing/fake_nvml_hooks.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::cmd {
namespace {

// "<name> <MiB> <core> <slices> <start>+<size>..." per profile, for readable failures.
std::string Text(const std::vector<core::MigProfile>& profiles) {
  std::string out;
  for (const core::MigProfile& p : profiles) {
    out += StrCat(p.name, " ", p.memory_mib, " ", p.core, " ", p.slice_count);
    for (const core::MigPlacement& at : p.placements) out += StrCat(" ", at.start, "+", at.size);
    out += "\n";
  }
  return out;
}

TEST(SimMigRegistrationTest, SimulatedMigGpusRegisterWhatTheDevicePluginDoes) {
  gpu::testing::FakeNvmlHooks hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  ASSERT_TRUE(hooks.ok()) << hooks.error;
  setenv("FAKEGPU_MIG", "0", 1);
  // The GPU of each set as FAKEGPU_DEVICES names it (NVML name, MiB, SMs): the fake picks its MIG
  // table by name and memory.
  const std::map<std::string, std::string> gpus = {
      {"A100-40GB", "NVIDIA A100-SXM4-40GB:40960:108"},
      {"A100-80GB", "NVIDIA A100-SXM4-80GB:81920:108"},
      {"H100-80GB", "NVIDIA H100 80GB HBM3:81920:132"},
  };
  std::map<std::string, std::string> sets;
  for (const sim::SimMigProfileSet& s : sim::SimMigProfileSets()) sets[s.name] = s.name;
  ASSERT_EQ(sets.size(), gpus.size()) << "a set without its GPU here, or one the sim lost";
  for (const auto& [set, gpu] : gpus) {
    SCOPED_TRACE(set);
    // A state file per GPU: the fake keeps the devices of the state it was created with.
    const std::string state = "/tmp/hami-sim-mig-" + std::to_string(getpid()) + "-" + set;
    setenv("FAKEGPU_STATE", state.c_str(), 1);
    setenv("FAKEGPU_DEVICES", gpu.c_str(), 1);
    hooks.reset();
    gpu::NvmlOptions o;
    o.library = HAMI_FAKE_NVML;
    auto discovery = gpu::NvmlDiscovery::Open(o);
    ASSERT_TRUE(discovery.ok()) << discovery.status();
    auto listed = (*discovery)->ListDevices();
    ASSERT_TRUE(listed.ok()) << listed.status();
    deviceplugin::PluginConfig config;
    config.mode = "mig";
    const std::vector<core::DeviceInfo> node = deviceplugin::BuildNodeDevices(*listed, {}, config);
    ASSERT_EQ(node.size(), 1u);

    sim::TraceNode trace{"m", 64000, 262144, 1, "A100"};
    trace.mig = set;
    trace.mig_gpus = 1;
    const core::NodeInfo simulated = sim::ToNodeInfo(trace, "0001-m");
    ASSERT_EQ(simulated.devices.size(), 1u);
    const core::DeviceInfo& d = simulated.devices[0];
    EXPECT_EQ(d.mode, node[0].mode);
    EXPECT_EQ(d.devmem_mib, node[0].devmem_mib);
    EXPECT_EQ(d.devcore, node[0].devcore);
    EXPECT_EQ(Text(d.mig_profiles), Text(node[0].mig_profiles));
    EXPECT_EQ(d.mig_profiles, node[0].mig_profiles);
    EXPECT_FALSE(d.mig_profiles.empty());
    unlink(state.c_str());
  }
}

}  // namespace
}  // namespace hami::cmd
