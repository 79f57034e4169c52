// `hami dra-plugin` as a process: the fake API server (resource.k8s.io/v1), the fake NVML (one
// 16 GiB GPU) and the fake kubelet over the real sockets. Registration, publishing, two 4 GiB /
// 30-core claims on the GPU, a claim that does not fit, the kubelet's wipe of the slices, a
// restart, and Unprepare of a claim deleted meanwhile; the same for an Ascend NPU (--vendor
// ascend, a devices file), armed for HAMi's vNPU core library.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dra/slice.h"
#include "dra/testing/builders.h"
#include "dra/testing/fake_dra_kubelet.h"
#include "gpu/testing/fake_nvml_hooks.h"
#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"

namespace hami::dra {
namespace {

namespace fs = std::filesystem;
using testing::FakeDraKubelet;

template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class DraDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    ASSERT_TRUE(api_.Upsert("nodes", {{"apiVersion", "v1"},
                                      {"kind", "Node"},
                                      {"metadata", {{"name", testing::kNode}}}})
                    .ok());
    // JSON is YAML: the kubeconfig loader reads it.
    std::ofstream(D("/kubeconfig")) << nlohmann::json{
        {"apiVersion", "v1"},
        {"kind", "Config"},
        {"current-context", "t"},
        {"clusters", {{{"name", "c"}, {"cluster", {{"server", api_.url()}}}}}},
        {"users", {{{"name", "u"}, {"user", {{"token", "t"}}}}}},
        {"contexts", {{{"name", "t"}, {"context", {{"cluster", "c"}, {"user", "u"}}}}}}};
    std::ofstream(D("/boot_id")) << "boot-1\n";
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string D(const std::string& sub) const { return dir_.path() + sub; }
  std::string SpecPath(const std::string& uid,
                       const std::string& driver = kDefaultDriverName) const {
    return D("/cdi/k8s." + driver + "-claim_" + uid + ".json");
  }

  // `vendor_args` replace the NVIDIA run's --region-root.
  void Spawn(std::vector<std::string> vendor_args = {}) {
    if (vendor_args.empty()) vendor_args = {"--region-root", D("/regions")};
    pid_ = fork();
    if (pid_ != 0) return;
    setenv("LD_LIBRARY_PATH", HAMI_FAKE_NVML_DIR, 1);
    setenv("FAKEGPU_STATE", D("/fakegpu").c_str(), 1);
    setenv("FAKEGPU_DEVICES", "NVIDIA A16:16384:40", 1);
    std::vector<std::string> args = {
        HAMI_BINARY,      "dra-plugin",     "--node-name",       testing::kNode,
        "--kubeconfig",   D("/kubeconfig"), "--registry-dir",    D("/plugins_registry"),
        "--plugin-dir",   D("/plugin"),     "--cdi-root",        D("/cdi"),
        "--boot-id-file", D("/boot_id"),    "--resync-interval", "1"};
    args.insert(args.end(), vendor_args.begin(), vendor_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(HAMI_BINARY, argv.data());
    _exit(127);
  }
  void StopPlugin() {
    ASSERT_EQ(kill(pid_, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
    pid_ = 0;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  void Register(const std::string& driver = kDefaultDriverName) {
    ASSERT_TRUE(Eventually([&] { return kubelet_.Register(D("/plugins_registry"), driver).ok(); }))
        << "the plugin did not register";
  }
  std::optional<nlohmann::json> Slice(const std::string& driver = kDefaultDriverName) {
    return api_.Get("resourceslices", "", SliceName(testing::kNode, driver));
  }
  ClaimRef PutClaim(const std::string& name, const std::string& mem, const std::string& cores,
                    const std::string& device = "gpu-0",
                    const std::string& driver = kDefaultDriverName) {
    auto c = testing::MakeClaim("ns", name, "")
                 .Result("gpu", device, mem, cores, testing::kNode, driver)
                 .Json();
    c["metadata"].erase("uid");
    // The request the result answers (the API server checks it when the plugin writes the status).
    c["spec"]["devices"]["requests"] = {
        {{"name", "gpu"},
         {"exactly",
          {{"deviceClassName", driver},
           {"count", 1},
           {"capacity", {{"requests", {{"memory", mem}, {"cores", cores}}}}}}}}};
    // As the allocator writes it: a fresh UUID per result.
    char share[40];
    std::snprintf(share, sizeof(share), "00000000-0000-4000-8000-%012d", ++shares_);
    c["status"]["allocation"]["devices"]["results"][0]["shareID"] = share;
    // The node the allocator pins a node-local claim to (what the 1.36 associated-node check
    // reads).
    c["status"]["allocation"]["nodeSelector"] = {
        {"nodeSelectorTerms",
         {{{"matchFields",
            {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {testing::kNode}}}}}}}}};
    auto stored = api_.Upsert("resourceclaims", c);
    EXPECT_TRUE(stored.ok());
    return {"ns", name, stored.ok() ? (*stored)["metadata"]["uid"].get<std::string>() : ""};
  }

  testing::TempDir dir_;
  k8s::testing::FakeApiServer api_;
  FakeDraKubelet kubelet_;
  pid_t pid_ = 0;
  int shares_ = 0;
};

TEST_F(DraDaemonTest, PublishPrepareRestartUnprepare) {
  Spawn();
  Register();
  ASSERT_TRUE(Eventually([&] { return Slice().has_value(); })) << "no ResourceSlice";
  const nlohmann::json dev = (*Slice())["spec"]["devices"][0];
  EXPECT_EQ(dev["capacity"]["memory"]["value"], std::to_string(int64_t{16384} * kMiB));
  EXPECT_EQ(dev["allowMultipleAllocations"], true);

  const ClaimRef a = PutClaim("a", "4Gi", "30");
  const ClaimRef b = PutClaim("b", "4Gi", "30");
  const ClaimRef big = PutClaim("big", "9Gi", "10");
  auto r = kubelet_.Prepare({a, b, big});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->claims().at(a.uid).error(), "");
  EXPECT_EQ(r->claims().at(b.uid).error(), "");
  EXPECT_NE(r->claims().at(big.uid).error(), "") << "4 + 4 + 9 GiB > 16 GiB";
  const std::string spec = ReadText(SpecPath(a.uid));
  EXPECT_NE(spec.find("CUDA_DEVICE_MEMORY_LIMIT_0=4096m"), std::string::npos) << spec;
  EXPECT_NE(spec.find("CUDA_DEVICE_SM_LIMIT=30"), std::string::npos) << spec;
  EXPECT_FALSE(fs::exists(SpecPath(big.uid)));

  // The kubelet wipes its node's slices when it starts: the plugin publishes again.
  ASSERT_TRUE(
      api_.Delete("resourceslices", "", SliceName(testing::kNode, kDefaultDriverName)).ok());
  EXPECT_TRUE(Eventually([&] { return Slice().has_value(); })) << "slice not re-created";

  // Restart; claim a is deleted meanwhile; Unprepare still cleans it up.
  StopPlugin();
  ASSERT_TRUE(api_.Delete("resourceclaims", "ns", "a").ok());
  Spawn();
  Register();
  auto u = kubelet_.Unprepare({a});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->claims().at(a.uid).error(), "");
  EXPECT_FALSE(fs::exists(SpecPath(a.uid)));
  EXPECT_FALSE(fs::exists(D("/regions/" + a.uid + "_dra")));
  EXPECT_TRUE(fs::exists(SpecPath(b.uid)));
  auto again = kubelet_.Prepare({big});  // fits now: 4 + 9 GiB
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->claims().at(big.uid).error(), "");
  StopPlugin();
}

// The second vendor through the same code path: `--vendor ascend` publishes the devices file's NPU
// under upstream HAMi-DRA's Ascend driver name and device type, two 4 GiB / 30-core claims share
// it with different share ids, a third does not fit, Prepare arms HAMi's vNPU core library with
// exactly the consumed capacity, and Unprepare (also after a restart, of a deleted claim) removes
// the spec and the claim's directory.
TEST_F(DraDaemonTest, AscendNpuPublishPrepareRestartUnprepare) {
  const std::string driver = "ascend.project-hami.io";
  std::ofstream(D("/npus.json"))
      << R"([{"id":"910B3-0","index":0,"devmem":16384,"devcore":100,"type":"Ascend910B3",)"
         R"("numa":0,"health":true}])";
  const std::vector<std::string> ascend = {
      "--vendor",        "ascend",   "--devices-file",           D("/npus.json"),
      "--vnpu-core-dir", D("/vnpu"), "--vnpu-shared-region-dir", D("/shared")};
  Spawn(ascend);
  Register(driver);
  EXPECT_EQ(kubelet_.info().name(), driver);
  ASSERT_TRUE(Eventually([&] { return Slice(driver).has_value(); })) << "no ResourceSlice";
  const nlohmann::json slice = *Slice(driver);
  EXPECT_EQ(slice["spec"]["driver"], driver);
  ASSERT_EQ(slice["spec"]["devices"].size(), 1u);
  const nlohmann::json dev = slice["spec"]["devices"][0];
  EXPECT_EQ(dev["name"], "npu-0-0");
  EXPECT_EQ(dev["attributes"]["type"]["string"], "HAMivNPUCore");
  EXPECT_EQ(dev["attributes"]["physicalID"]["int"], 0);
  EXPECT_EQ(dev["capacity"]["memory"]["value"], std::to_string(int64_t{16384} * kMiB));
  EXPECT_EQ(dev["capacity"]["cores"]["value"], "100");
  EXPECT_EQ(dev["allowMultipleAllocations"], true);
  EXPECT_FALSE(Slice().has_value()) << "no NVIDIA slice from an Ascend plugin";

  const ClaimRef a = PutClaim("a", "4Gi", "30", "npu-0-0", driver);
  const ClaimRef b = PutClaim("b", "4Gi", "30", "npu-0-0", driver);
  const ClaimRef big = PutClaim("big", "9Gi", "10", "npu-0-0", driver);
  auto r = kubelet_.Prepare({a, b, big});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->claims().at(a.uid).error(), "");
  ASSERT_EQ(r->claims().at(b.uid).error(), "");
  EXPECT_NE(r->claims().at(big.uid).error(), "") << "4 + 4 + 9 GiB > 16 GiB";
  const auto& da = r->claims().at(a.uid).devices(0);
  const auto& db = r->claims().at(b.uid).devices(0);
  EXPECT_EQ(da.device_name(), "npu-0-0");
  EXPECT_EQ(db.device_name(), "npu-0-0");
  EXPECT_NE(da.share_id(), db.share_id());
  EXPECT_EQ(da.cdi_device_ids(0), "k8s.ascend.project-hami.io/claim=" + a.uid);
  for (const ClaimRef& c : {a, b}) {
    const auto env = testing::SpecEnv(nlohmann::json::parse(ReadText(SpecPath(c.uid, driver))));
    const std::map<std::string, std::string> want = {
        {"ASCEND_VISIBLE_DEVICES", "0"},
        {"NPU_MEM_QUOTA", "4096"},
        {"NPU_PRIORITY", "30"},
        {"NPU_GLOBAL_SHM_PATH", "/hami-shared-region/0_global_registry"},
        {"NPU_LOCAL_SHM_PATH", "/hami-vnpu-shmem/vnpu_local_shmem"}};
    EXPECT_EQ(env, want) << c.name;
    // The claim's directory under the default region root, <vnpu core dir>/containers.
    EXPECT_TRUE(fs::is_directory(D("/vnpu/containers/" + c.uid + "_dra"))) << c.name;
  }
  EXPECT_FALSE(fs::exists(SpecPath(big.uid, driver)));

  auto u = kubelet_.Unprepare({a});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->claims().at(a.uid).error(), "");
  EXPECT_FALSE(fs::exists(SpecPath(a.uid, driver)));
  EXPECT_FALSE(fs::exists(D("/vnpu/containers/" + a.uid + "_dra")));

  // Restart; claim b is deleted meanwhile; the checkpoint still unprepares it.
  StopPlugin();
  ASSERT_TRUE(api_.Delete("resourceclaims", "ns", "b").ok());
  Spawn(ascend);
  Register(driver);
  auto again = kubelet_.Prepare({big});  // 4 GiB of b still booked: 4 + 9 fits in 16
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->claims().at(big.uid).error(), "");
  u = kubelet_.Unprepare({b, big});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->claims().at(b.uid).error(), "");
  EXPECT_FALSE(fs::exists(SpecPath(b.uid, driver)));
  EXPECT_FALSE(fs::exists(D("/vnpu/containers/" + b.uid + "_dra")));
  EXPECT_FALSE(fs::exists(SpecPath(big.uid, driver)));
  StopPlugin();
}

// The plugin's wiring of health into publishing: an Xid the fake NVML delivers (injected from
// here, through its shared state) takes the GPU out of the node's slice within seconds, with the
// pool generation bumped, and the claim prepared on it before gets Ready False in its
// status.devices.
TEST_F(DraDaemonTest, XidTakesTheGpuOutOfTheSlice) {
  Spawn();
  Register();
  ASSERT_TRUE(Eventually([&] { return Slice().has_value(); })) << "no ResourceSlice";
  const ClaimRef a = PutClaim("a", "4Gi", "30");
  auto r = kubelet_.Prepare({a});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->claims().at(a.uid).error(), "");
  auto ready = [&]() -> nlohmann::json {  // {} until written
    auto c = api_.Get("resourceclaims", "ns", "a");
    if (!c) return nlohmann::json::object();
    const nlohmann::json devices =
        c->value(nlohmann::json::json_pointer("/status/devices"), nlohmann::json());
    if (!devices.is_array() || devices.empty()) return nlohmann::json::object();
    return devices[0]["conditions"][0];
  };
  ASSERT_TRUE(Eventually([&] { return ready().value("status", "") == "True"; })) << ready();
  EXPECT_EQ((*Slice())["spec"]["devices"].size(), 1u);
  const int64_t generation = (*Slice())["spec"]["pool"]["generation"];
  setenv("FAKEGPU_STATE", D("/fakegpu").c_str(), 1);
  setenv("FAKEGPU_DEVICES", "NVIDIA A16:16384:40", 1);
  auto hooks = gpu::testing::LoadFakeNvmlHooks(HAMI_FAKE_NVML);
  ASSERT_TRUE(hooks.ok()) << hooks.error;
  hooks.reset();
  // The plugin registers for events once its health watch is up; until then an Xid is not
  // delivered, so inject until the slice changes.
  EXPECT_TRUE(Eventually([&] {
    hooks.inject_xid(0, 48);
    auto s = Slice();
    return s && (*s)["spec"]["devices"].empty();
  })) << "the GPU stayed in the slice";
  EXPECT_EQ((*Slice())["spec"]["pool"]["generation"], generation + 1);
  EXPECT_TRUE(Eventually([&] { return ready().value("status", "") == "False"; })) << ready();
  EXPECT_EQ(ready().value("reason", ""), "Unhealthy");
  EXPECT_NE(ready().value("message", "").find("Xid 48"), std::string::npos) << ready();
  StopPlugin();
}

// Held to the chart's RBAC (run by tests/deploy/dra_rbac_e2e.py, which renders the chart with
// dra.enabled and passes its RBAC objects and the plugin's service account in HAMI_DRA_RBAC_FILE;
// skipped otherwise): the fake API server authenticates the plugin's token as that service account,
// bound to its node as projected tokens are, and refuses what the rendered roles do not grant. The
// plugin still reads its node, publishes its slice and writes a prepared claim's status (the 1.36
// per-driver check included); a request the roles do not grant is refused, so the policy is on.
TEST_F(DraDaemonTest, ChartRbacSuffices) {
  const char* file = std::getenv("HAMI_DRA_RBAC_FILE");
  if (file == nullptr) GTEST_SKIP() << "run by tests/deploy/dra_rbac_e2e.py with the chart's RBAC";
  const nlohmann::json in = nlohmann::json::parse(ReadText(file), nullptr, false);
  ASSERT_TRUE(in.is_object() && in.contains("rbac") && in.contains("user")) << file;
  nlohmann::json user = in["user"];
  user["extra"] = {{"authentication.kubernetes.io/node-name", {testing::kNode}}};
  api_.AddToken("t", user);
  api_.Authorize(in["rbac"]);

  k8s::ClientConfig cfg;
  cfg.server = api_.url();
  cfg.bearer_token = "t";
  cfg.max_retries = 0;
  auto as_plugin = k8s::Client::Create(cfg);
  ASSERT_TRUE(as_plugin.ok()) << as_plugin.status();
  auto denied = (*as_plugin)->Delete(k8s::kNodes, "", testing::kNode);
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied << " (is the policy on?)";

  Spawn();
  Register();
  ASSERT_TRUE(Eventually([&] { return Slice().has_value(); })) << "no ResourceSlice";
  EXPECT_EQ((*Slice())["metadata"]["ownerReferences"][0]["name"], testing::kNode);
  const ClaimRef a = PutClaim("a", "4Gi", "30");
  auto r = kubelet_.Prepare({a});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->claims().at(a.uid).error(), "");
  EXPECT_TRUE(Eventually([&] {
    auto c = api_.Get("resourceclaims", "ns", "a");
    return c && c->value(nlohmann::json::json_pointer("/status/devices/0/conditions/0/status"),
                         std::string()) == "True";
  })) << "the claim's status was not written under the chart's RBAC";
  auto u = kubelet_.Unprepare({a});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->claims().at(a.uid).error(), "");
  StopPlugin();
}

}  // namespace
}  // namespace hami::dra
