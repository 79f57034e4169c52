// NodePrepareResources against the GPUs' health (docs/dra.md#health): the fake libnvidia-ml.so.1
// injects an Xid, NVML's event set reports it, the HealthBoard marks the GPU, and a claim allocated
// that GPU is refused with nothing written, while the other GPU's claims and a claim prepared
// before the Xid are served.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "dra/driver.h"
#include "dra/health.h"
#include "dra/testing/builders.h"
#include "dra/testing/fake_nvml.h"

namespace hami::dra {
namespace {

namespace fs = std::filesystem;
using testing::MakeClaim;

// The driver's files under `dir`, on node testing::kNode.
DriverOptions Options(const testing::TempDir& dir) {
  DriverOptions o;
  o.node_name = testing::kNode;
  o.plugin_dir = dir.path() + "/plugin";
  o.cdi_root = dir.path() + "/cdi";
  o.boot_id = "boot-1";
  o.vgpu.region_root = dir.path() + "/regions";
  return o;
}

TEST(DriverHealthTest, AClaimOnAGpuNvmlReportsFailedIsRefused) {
  testing::TempDir dir;
  auto fake = testing::OpenFakeNvml(HAMI_FAKE_NVML, dir.path() + "/fakegpu",
                                    "NVIDIA A16:16384:40;NVIDIA A16:16384:40");
  ASSERT_TRUE(fake.error.empty()) << fake.error;
  ASSERT_EQ(fake.gpus.size(), 2u);
  auto devices = DeviceCapacities(fake.gpus, 1.0);
  ASSERT_TRUE(devices.ok()) << devices.status();

  // The plugin's wiring (dra_plugin_main.cc): NVML health events feed the board the driver reads.
  std::vector<HealthBoard::Device> devs;
  for (const auto& d : *devices) devs.push_back({d.name, d.uuid});
  HealthBoard board(testing::kNode, devs);
  auto watch = fake.nvml->WatchHealth([&](const gpu::HealthEvent& ev) { board.Apply(ev); });
  ASSERT_TRUE(watch.ok()) << watch.status();
  testing::MapClaims claims;
  auto d = Driver::Create(Options(dir), *devices, &claims);
  ASSERT_TRUE(d.ok()) << d.status();
  Driver& driver = **d;
  driver.SetHealthBoard(&board);

  auto spec = [&](const std::string& uid) {
    return fs::exists(dir.path() + "/cdi/k8s.hami-core-gpu.project-hami.io-claim_" + uid + ".json");
  };
  auto put = [&](const std::string& name, const std::vector<std::string>& gpus_of_claim) {
    auto c = MakeClaim("ns", name, "uid-" + name);
    for (size_t i = 0; i < gpus_of_claim.size(); ++i)
      c.Result("gpu" + std::to_string(i), gpus_of_claim[i], "4Gi", "30");
    claims.Put(c.Json());
    return ClaimRef{"ns", name, "uid-" + name};
  };
  auto xid_on_gpu1 = [&] {
    ASSERT_EQ(fake.hooks.inject_xid(1, 48), 0);
    ASSERT_TRUE(testing::WaitUnhealthy(board, "gpu-1"));
  };

  struct Step {
    std::string name;
    std::function<void()> event;  // before the prepare
    std::string claim;
    std::vector<std::string> gpus;
    bool ok;
    std::string error;                     // a fragment of the refusal
    int64_t used_gpu0_mib, used_gpu1_mib;  // booked after the step
  };
  const std::vector<Step> steps = {
      {"before the Xid, gpu-1", [] {}, "early", {"gpu-1"}, true, "", 0, 4096},
      {"Xid 48 on gpu-1: a claim on it",
       xid_on_gpu1,
       "late",
       {"gpu-1"},
       false,
       "gpu-1 (" + (*devices)[1].uuid + "): ",
       0,
       4096},
      {"the refusal gives NVML's reason", [] {}, "late2", {"gpu-1"}, false, "Xid 48", 0, 4096},
      {"a claim on gpu-0 and gpu-1: nothing booked on gpu-0",
       [] {},
       "both",
       {"gpu-0", "gpu-1"},
       false,
       "gpu-1",
       0,
       4096},
      {"gpu-0 is served", [] {}, "other", {"gpu-0"}, true, "", 4096, 4096},
      {"prepared before the Xid: answered from the checkpoint",
       [] {},
       "early",
       {"gpu-1"},
       true,
       "",
       4096,
       4096},
      {"recovered: gpu-1 is served again",
       [&] {
         board.Apply({(*devices)[1].uuid, true, 0, "reset"});
       },
       "late",
       {"gpu-1"},
       true,
       "",
       4096,
       8192},
  };
  for (const auto& k : steps) {
    SCOPED_TRACE(k.name);
    k.event();
    const ClaimRef ref = put(k.claim, k.gpus);
    auto r = driver.Prepare({ref})[ref.uid];
    EXPECT_EQ(r.status.ok(), k.ok) << r.status;
    if (!k.ok) {
      EXPECT_TRUE(absl::IsFailedPrecondition(r.status)) << r.status;
      EXPECT_NE(r.status.message().find(k.error), std::string::npos) << r.status;
      EXPECT_NE(r.status.message().find("claim ns/" + k.claim), std::string::npos) << r.status;
    }
    EXPECT_EQ(spec(ref.uid), k.ok) << "a refused claim writes no CDI spec";
    EXPECT_EQ(driver.Used("gpu-0").memory_mib, k.used_gpu0_mib);
    EXPECT_EQ(driver.Used("gpu-1").memory_mib, k.used_gpu1_mib);
  }
  EXPECT_EQ(driver.Prepared(), 3u);
}

// A GPU that turns unhealthy after its claims were prepared: their status.devices Ready condition
// turns False (reason Unhealthy, NVML's reason in the message) at the next refresh, True again
// when the GPU recovers; claims on the other GPU and refreshes without a change write nothing.
TEST(DriverHealthTest, PreparedClaimsReadyFollowsTheirGpusHealth) {
  testing::TempDir dir;
  const std::vector<DeviceCapacity> gpus = testing::TwoGpus();
  std::vector<HealthBoard::Device> devs;
  for (const auto& d : gpus) devs.push_back({d.name, d.uuid});
  HealthBoard board(testing::kNode, devs);
  testing::MapClaims claims;
  auto d = Driver::Create(Options(dir), gpus, &claims);
  ASSERT_TRUE(d.ok()) << d.status();
  Driver& driver = **d;
  driver.SetHealthBoard(&board);
  auto prepare = [&](const std::string& name, const std::string& gpu) {
    auto c = MakeClaim("ns", name, "uid-" + name);
    c.Result("gpu", gpu, "4Gi", "30");
    claims.Put(c.Json());
    const ClaimRef ref{"ns", name, "uid-" + name};
    auto r = driver.Prepare({ref})[ref.uid];
    EXPECT_TRUE(r.status.ok()) << r.status;
  };
  auto ready = [&](const std::string& name) {
    const nlohmann::json st = claims.LastStatus("uid-" + name);
    return st.is_array() && !st.empty() ? st[0]["conditions"][0] : nlohmann::json();
  };
  prepare("a", "gpu-0");
  prepare("b", "gpu-1");
  EXPECT_EQ(claims.status_writes(), 2);
  EXPECT_EQ(ready("a")["status"], "True");
  EXPECT_EQ(driver.RefreshHealthStatus(), 0u);  // nothing changed

  ASSERT_TRUE(board.Apply({gpus[0].uuid, false, 79, "Xid 79: fallen off the bus"}));
  EXPECT_EQ(driver.RefreshHealthStatus(), 1u);
  EXPECT_EQ(ready("a")["status"], "False");
  EXPECT_EQ(ready("a")["reason"], "Unhealthy");
  EXPECT_NE(ready("a")["message"].get<std::string>().find("Xid 79"), std::string::npos)
      << ready("a");
  EXPECT_NE(ready("a")["message"].get<std::string>().find(gpus[0].uuid), std::string::npos);
  EXPECT_EQ(ready("b")["status"], "True");
  EXPECT_EQ(claims.status_writes(), 3);
  EXPECT_EQ(driver.RefreshHealthStatus(), 0u);  // written once per change

  ASSERT_TRUE(board.Apply({gpus[0].uuid, true, 0, "reset"}));
  EXPECT_EQ(driver.RefreshHealthStatus(), 1u);
  EXPECT_EQ(ready("a")["status"], "True");
  EXPECT_EQ(ready("a")["reason"], "Prepared");
  EXPECT_EQ(claims.status_writes(), 4);

  // Every GPU at once (an event without a uuid): both claims; an unprepared claim is not written.
  ASSERT_TRUE(driver.Unprepare({{"ns", "b", "uid-b"}})["uid-b"].ok());
  ASSERT_TRUE(board.Apply({"", false, 0, "driver gone"}));
  EXPECT_EQ(driver.RefreshHealthStatus(), 1u);
  EXPECT_EQ(ready("a")["status"], "False");
  EXPECT_EQ(ready("b")["status"], "True");  // its last write, before it was unprepared
}

}  // namespace
}  // namespace hami::dra
