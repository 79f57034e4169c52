// `hami dra-plugin` as a process: the fake API server (resource.k8s.io/v1), the fake NVML (one
// 16 GiB GPU) and the fake kubelet over the real sockets. Registration, publishing, two 4 GiB /
// 30-core claims on the GPU, a claim that does not fit, the kubelet's wipe of the slices, a
// restart, and Unprepare of a claim deleted meanwhile.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dra/slice.h"
#include "dra/testing/builders.h"
#include "dra/testing/fake_dra_kubelet.h"
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
  std::string SpecPath(const std::string& uid) const {
    return D("/cdi/k8s.hami-core-gpu.project-hami.io-claim_" + uid + ".json");
  }

  void Spawn() {
    pid_ = fork();
    if (pid_ != 0) return;
    setenv("LD_LIBRARY_PATH", HAMI_FAKE_NVML_DIR, 1);
    setenv("FAKEGPU_STATE", D("/fakegpu").c_str(), 1);
    setenv("FAKEGPU_DEVICES", "NVIDIA A16:16384:40", 1);
    std::vector<std::string> args = {HAMI_BINARY,      "dra-plugin",           "--node-name",
                                     testing::kNode,   "--kubeconfig",         D("/kubeconfig"),
                                     "--registry-dir", D("/plugins_registry"), "--plugin-dir",
                                     D("/plugin"),     "--cdi-root",           D("/cdi"),
                                     "--region-root",  D("/regions"),          "--boot-id-file",
                                     D("/boot_id"),    "--resync-interval",    "1"};
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
  void Register() {
    ASSERT_TRUE(Eventually([&] {
      return kubelet_.Register(D("/plugins_registry"), kDefaultDriverName).ok();
    })) << "the plugin did not register";
  }
  std::optional<nlohmann::json> Slice() {
    return api_.Get("resourceslices", "", SliceName(testing::kNode, kDefaultDriverName));
  }
  ClaimRef PutClaim(const std::string& name, const std::string& mem, const std::string& cores) {
    auto c = testing::MakeClaim("ns", name, "").Result("gpu", "gpu-0", mem, cores).Json();
    c["metadata"].erase("uid");
    auto stored = api_.Upsert("resourceclaims", c);
    EXPECT_TRUE(stored.ok());
    return {"ns", name, stored.ok() ? (*stored)["metadata"]["uid"].get<std::string>() : ""};
  }

  testing::TempDir dir_;
  k8s::testing::FakeApiServer api_;
  FakeDraKubelet kubelet_;
  pid_t pid_ = 0;
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

}  // namespace
}  // namespace hami::dra
