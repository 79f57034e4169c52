// hami dra-plugin's gRPC side against a fake kubelet over the real sockets, on one 16 GiB GPU of
// the fake libnvidia-ml.so.1 (docs/dra.md).
#include "dra/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dra/gpu_extras.h"
#include "dra/testing/builders.h"
#include "dra/testing/fake_dra_kubelet.h"
#include "gpu/nvml_discovery.h"
#include "gpu/testing/fake_nvml_hooks.h"

namespace hami::dra {
namespace {

namespace fs = std::filesystem;
using testing::DraVersion;
using testing::FakeDraKubelet;
using testing::MakeClaim;

class DraServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKEGPU_STATE", (dir_.path() + "/fakegpu").c_str(), 1);
    setenv("FAKEGPU_DEVICES", "NVIDIA A16:16384:40", 1);
    hooks_ = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
    ASSERT_TRUE(hooks_.ok()) << hooks_.error;
    hooks_.reset();
    gpu::NvmlOptions o;
    o.library = HAMI_FAKE_NVML;
    auto nvml = gpu::NvmlDiscovery::Open(o);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    auto gpus = (*nvml)->ListDevices();
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    auto caps = DeviceCapacities(*gpus, 1.0);
    ASSERT_TRUE(caps.ok()) << caps.status();
    devices_ = *caps;
    ASSERT_EQ(devices_.size(), 1u);
    ASSERT_EQ(devices_[0].memory_mib, 16384);
    StartPlugin();
  }
  void TearDown() override {
    server_.reset();
    driver_.reset();
  }
  // A plugin process's life: driver over the checkpoint, then the sockets.
  void StartPlugin() {
    server_.reset();
    driver_.reset();
    DriverOptions o;
    o.node_name = testing::kNode;
    o.plugin_dir = dir_.path() + "/plugins/" + kDefaultDriverName;
    o.cdi_root = dir_.path() + "/cdi";
    o.boot_id = "boot-1";
    o.vgpu.region_root = dir_.path() + "/regions";
    auto d = Driver::Create(o, devices_, &claims_);
    ASSERT_TRUE(d.ok()) << d.status();
    driver_ = *std::move(d);
    server_ = std::make_unique<DraServer>(
        ServerOptions{kDefaultDriverName, dir_.path() + "/plugins_registry", o.plugin_dir},
        driver_.get());
    ASSERT_TRUE(server_->Start().ok());
  }
  ClaimRef Put(const std::string& name, const std::string& mem, const std::string& cores) {
    claims_.Put(MakeClaim("ns", name, "uid-" + name).Result("gpu", "gpu-0", mem, cores).Json());
    return {"ns", name, "uid-" + name};
  }
  std::string SpecText(const std::string& uid) {
    std::ifstream in(dir_.path() + "/cdi/k8s.hami-core-gpu.project-hami.io-claim_" + uid + ".json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  testing::TempDir dir_;
  gpu::testing::FakeNvmlHooks hooks_;
  std::vector<DeviceCapacity> devices_;
  testing::MapClaims claims_;
  std::unique_ptr<Driver> driver_;
  std::unique_ptr<DraServer> server_;
  FakeDraKubelet kubelet_;
};

TEST_F(DraServerTest, RegistersWithBothServices) {
  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  EXPECT_EQ(kubelet_.info().type(), "DRAPlugin");
  EXPECT_EQ(kubelet_.info().name(), kDefaultDriverName);
  EXPECT_EQ(kubelet_.info().endpoint(), server_->DraSocket());
  EXPECT_EQ(std::vector<std::string>(kubelet_.info().supported_versions().begin(),
                                     kubelet_.info().supported_versions().end()),
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin"}));
  EXPECT_EQ(kubelet_.chosen(), DraVersion::kV1);
  EXPECT_TRUE(server_->Registered());
  // An empty prepare is OK with an empty map (the health probe).
  auto r = kubelet_.Prepare({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->claims().empty());
}

TEST_F(DraServerTest, HealthStreamMarksAGpuNvmlReportsFailed) {
  // The plugin's wiring (dra_plugin_main.cc): NVML health events feed the board the stream reads.
  std::vector<HealthBoard::Device> devs;
  for (const auto& d : devices_) devs.push_back({d.name, d.uuid});
  HealthBoard board(testing::kNode, devs);
  server_ = std::make_unique<DraServer>(
      ServerOptions{kDefaultDriverName, dir_.path() + "/plugins_registry",
                    dir_.path() + "/plugins/" + kDefaultDriverName},
      driver_.get(), &board);
  ASSERT_TRUE(server_->Start().ok());
  gpu::NvmlOptions o;
  o.library = HAMI_FAKE_NVML;
  auto nvml = gpu::NvmlDiscovery::Open(o);
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  auto watch = (*nvml)->WatchHealth([&](const gpu::HealthEvent& ev) { board.Apply(ev); });
  ASSERT_TRUE(watch.ok()) << watch.status();

  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  const auto& v = kubelet_.info().supported_versions();
  EXPECT_EQ(std::vector<std::string>(v.begin(), v.end()),
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin",
                                      "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}));
  std::vector<int> seen;  // the health of gpu-0 in each message
  auto last = kubelet_.WatchHealth(
      [&](const FakeDraKubelet::HealthResponse& m) {
        if (m.devices_size() != 1) return true;  // fails below
        seen.push_back(m.devices(0).health());
        // Once the stream is up: Xid 48 (double-bit ECC) on GPU 0, through NVML's event set.
        if (seen.size() == 1) hooks_.inject_xid(0, 48);
        return m.devices(0).health() == ::v1alpha1::UNHEALTHY;
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->devices_size(), 1);
  const auto& d = last->devices(0);
  EXPECT_EQ(d.device().pool_name(), testing::kNode);
  EXPECT_EQ(d.device().device_name(), "gpu-0");
  EXPECT_NE(d.message().find("48"), std::string::npos) << d.message();
  EXPECT_EQ(d.health_check_timeout_seconds(), kHealthTimeoutSeconds);
  EXPECT_GT(d.last_updated_time(), 0);
  ASSERT_GE(seen.size(), 2u) << "the first message is the full list, healthy";
  EXPECT_EQ(seen[0], ::v1alpha1::HEALTHY);
  // A stream opened now starts with the device unhealthy, and a stopped server ends it.
  auto again = kubelet_.WatchHealth([](const auto&) { return true; }, std::chrono::seconds(5));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->devices(0).health(), ::v1alpha1::UNHEALTHY);
  server_->Stop();
}

TEST_F(DraServerTest, GpuExtrasFromTheFakeNvml) {
  // The fake A16: compute capability 8.0 as the fake reports it (Ampere), driver 580.65.06 (a
  // leading zero: not semver as is).
  gpu::NvmlOptions o;
  o.library = HAMI_FAKE_NVML;
  auto nvml = gpu::NvmlDiscovery::Open(o);
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  auto gpus = (*nvml)->ListDevices();
  ASSERT_TRUE(gpus.ok() && gpus->size() == 1u);
  const auto extras = ReadGpuExtras(HAMI_FAKE_NVML, *gpus, dir_.path() + "/no-sysfs");
  ASSERT_EQ(extras.count((*gpus)[0].uuid), 1u);
  const GpuExtras& x = extras.at((*gpus)[0].uuid);
  EXPECT_EQ(x.cuda_compute_capability, "8.0");
  EXPECT_EQ(x.architecture, "Ampere");
  EXPECT_EQ(x.driver_version, "580.65.6");
  EXPECT_EQ(x.pcie_root, "");
  SliceOptions so;
  so.node_name = testing::kNode;
  so.node_uid = "uid-node";
  auto slice = BuildResourceSlice(*gpus, extras, so);
  ASSERT_TRUE(slice.ok()) << slice.status();
  const auto& attrs = (*slice)["spec"]["devices"][0]["attributes"];
  EXPECT_EQ(attrs["cudaComputeCapability"]["version"], "8.0.0");
  EXPECT_EQ(attrs["driverVersion"]["version"], "580.65.6");
  EXPECT_EQ(attrs["architecture"]["string"], "Ampere");
  EXPECT_TRUE(ReadGpuExtras("/nonexistent/libnvidia-ml.so.1", *gpus)
                  .at((*gpus)[0].uuid)
                  .driver_version.empty())
      << "no NVML: nothing from it";
}

TEST_F(DraServerTest, TwoSharesOnOneGpuARefusalThenRestartAndUnprepare) {
  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  const ClaimRef a = Put("a", "4Gi", "30");
  const ClaimRef b = Put("b", "4Gi", "30");
  const ClaimRef big = Put("big", "9Gi", "10");  // 4 + 4 + 9 > 16 GiB
  auto r = kubelet_.Prepare({a});
  ASSERT_TRUE(r.ok()) << r.status();
  auto rb = kubelet_.Prepare({b, big}, DraVersion::kV1beta1);
  ASSERT_TRUE(rb.ok()) << rb.status();
  const auto& da = r->claims().at(a.uid);
  ASSERT_EQ(da.error(), "");
  ASSERT_EQ(da.devices_size(), 1);
  EXPECT_EQ(da.devices(0).pool_name(), testing::kNode);
  EXPECT_EQ(da.devices(0).device_name(), "gpu-0");
  EXPECT_EQ(da.devices(0).cdi_device_ids(0), "k8s.hami-core-gpu.project-hami.io/claim=uid-a");
  EXPECT_TRUE(da.devices(0).has_share_id()) << "v1 carries the share id";
  const auto& db = rb->claims().at(b.uid);
  ASSERT_EQ(db.error(), "");
  EXPECT_FALSE(db.devices(0).has_share_id()) << "v1beta1 has no share_id field";
  EXPECT_NE(db.devices(0).share_id(), da.devices(0).share_id());
  EXPECT_NE(rb->claims().at(big.uid).error().find("RESOURCE_EXHAUSTED"), std::string::npos)
      << rb->claims().at(big.uid).error();
  for (const auto* uid : {"uid-a", "uid-b"}) {
    const std::string spec = SpecText(uid);
    EXPECT_NE(spec.find("CUDA_DEVICE_MEMORY_LIMIT_0=4096m"), std::string::npos) << spec;
    EXPECT_NE(spec.find("CUDA_DEVICE_SM_LIMIT=30"), std::string::npos) << spec;
  }
  EXPECT_EQ(SpecText("uid-big"), "");

  // The plugin restarts; the claim object of "a" is deleted meanwhile; the kubelet re-registers.
  claims_.Delete("ns", "a");
  StartPlugin();
  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  auto again = kubelet_.Prepare({b});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->claims().at(b.uid).devices(0).share_id(), "share-1") << "from the checkpoint";
  auto u = kubelet_.Unprepare({a});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->claims().at(a.uid).error(), "");
  EXPECT_EQ(SpecText("uid-a"), "");
  EXPECT_FALSE(fs::exists(dir_.path() + "/regions/uid-a_dra"));
  EXPECT_EQ(driver_->Used("gpu-0"), (Usage{4096, 30}));
  // Now "big" fits next to "b".
  auto rbig = kubelet_.Prepare({big});
  ASSERT_TRUE(rbig.ok());
  EXPECT_EQ(rbig->claims().at(big.uid).error(), "");
}

TEST_F(DraServerTest, MalformedRequestIsACallError) {
  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  EXPECT_FALSE(kubelet_.Prepare({{"ns", "x", ""}}).ok());
  EXPECT_FALSE(kubelet_.Prepare({{"ns", "x", "u"}, {"ns", "y", "u"}}).ok());
}

TEST_F(DraServerTest, FiftyConcurrentCallsEndConsistent) {
  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  std::vector<ClaimRef> refs;
  for (int i = 0; i < 50; ++i) refs.push_back(Put(StrCat("c", i), "1Gi", "5"));
  std::vector<std::thread> threads;
  std::atomic<int> call_errors{0};
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&, i] {
      FakeDraKubelet k = kubelet_;
      const DraVersion v = i % 3 == 0 ? DraVersion::kV1beta1 : DraVersion::kV1;
      if (!k.Prepare({refs[i]}, v).ok()) ++call_errors;
      if (i % 2 == 1 && !k.Unprepare({refs[i]}, v).ok()) ++call_errors;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(call_errors.load(), 0);
  // 16 x 1 GiB fill the GPU's memory: never more than 16 prepared at the end, however the calls
  // interleaved; ledger, checkpoint and spec files agree.
  const size_t prepared = driver_->Prepared();
  EXPECT_LE(prepared, 16u);
  EXPECT_GE(prepared, 5u);
  EXPECT_EQ(driver_->Used("gpu-0"),
            (Usage{static_cast<int64_t>(prepared) * 1024, static_cast<int>(prepared) * 5}));
  size_t specs = 0;
  for (const auto& e : fs::directory_iterator(dir_.path() + "/cdi")) specs += e.is_regular_file();
  EXPECT_EQ(specs, prepared);
}

// Latency of NodePrepareResources over the socket, one 64 MiB / 1-core claim per call, each
// unprepared after (a steady state of one prepared claim), as the kubelet calls it per pod. Printed
// for docs/benchmarks.md; the bound only catches a pathology (the kubelet's timeout is 45 s).
TEST_F(DraServerTest, PrepareLatency) {
  ASSERT_TRUE(kubelet_.Register(dir_.path() + "/plugins_registry", kDefaultDriverName).ok());
  constexpr int kCalls = 300;
  std::vector<int64_t> prepare_us, unprepare_us;
  for (int i = 0; i < kCalls; ++i) {
    const ClaimRef ref = Put(StrCat("l", i), "64Mi", "1");
    auto t0 = std::chrono::steady_clock::now();
    auto r = kubelet_.Prepare({ref});
    auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(r.ok() && r->claims().at(ref.uid).error().empty());
    ASSERT_TRUE(kubelet_.Unprepare({ref}).ok());
    auto t2 = std::chrono::steady_clock::now();
    prepare_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
    unprepare_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t2 - t1).count());
  }
  std::sort(prepare_us.begin(), prepare_us.end());
  std::sort(unprepare_us.begin(), unprepare_us.end());
  auto pct = [](const std::vector<int64_t>& v, int p) { return v[v.size() * p / 100]; };
  std::printf(
      "NodePrepareResources over %d calls: p50 %lld us, p99 %lld us; "
      "NodeUnprepareResources: p50 %lld us, p99 %lld us\n",
      kCalls, static_cast<long long>(pct(prepare_us, 50)),
      static_cast<long long>(pct(prepare_us, 99)), static_cast<long long>(pct(unprepare_us, 50)),
      static_cast<long long>(pct(unprepare_us, 99)));
  EXPECT_LT(pct(prepare_us, 99), 5'000'000);
}

}  // namespace
}  // namespace hami::dra
