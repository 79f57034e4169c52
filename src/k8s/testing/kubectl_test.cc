// Runs the real kubectl against the fake API server (skipped when kubectl is not installed):
// the fake must speak Kubernetes well enough for get (JSON and table output) and annotate.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::k8s::testing {
namespace {

std::string FindKubectl() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    size_t colon = p.find(':', start);
    std::string dir =
        p.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::filesystem::path cand = std::filesystem::path(dir.empty() ? "." : dir) / "kubectl";
    std::error_code ec;
    if (std::filesystem::exists(cand, ec)) return cand.string();
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

// Runs a command, returns {exit code, stdout+stderr}.
std::pair<int, std::string> RunCommand(const std::string& cmd) {
  std::string out;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return {-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  int rc = pclose(f);
  return {WEXITSTATUS(rc), out};
}

// A fresh HOME (no kubeconfig, own cache) for one test.
std::filesystem::path TempHome(const std::string& prefix) {
  std::filesystem::path home =
      std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  std::filesystem::create_directories(home);
  return home;
}

// "kubectl --server <fake> ..." with the environment of `home`, ready for the arguments.
std::string KubectlCommand(const std::string& kubectl, const FakeApiServer& fake,
                           const std::filesystem::path& home) {
  return "env HOME=" + home.string() + " KUBECONFIG=" + (home / "none").string() + " " + kubectl +
         " --server " + fake.url() + " --cache-dir " + (home / "cache").string() +
         " --request-timeout 20s ";
}

TEST(KubectlTest, GetAndAnnotateAgainstFake) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) GTEST_SKIP() << "kubectl not installed";
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  ASSERT_TRUE(fake.Upsert("nodes", MakeNode("gpu-node-1")).ok());
  ASSERT_TRUE(fake.Upsert("pods", MakePod("team-a", "trainer", "gpu-node-1")).ok());
  ASSERT_TRUE(fake.Upsert("pods", MakePod("default", "web")).ok());

  const std::filesystem::path home = TempHome("hami_kubectl_");
  const std::string base = KubectlCommand(kubectl, fake, home);

  auto [rc, out] = RunCommand(base + "get pods -A -o json");
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_EQ(j["items"].size(), 2u) << out;
  std::set<std::string> names;
  for (const auto& p : j["items"]) names.insert(p["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"trainer", "web"}));

  std::tie(rc, out) = RunCommand(base + "get nodes");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("gpu-node-1"), std::string::npos) << out;

  std::tie(rc, out) =
      RunCommand(base + "get pods -n team-a --field-selector spec.nodeName=gpu-node-1 -o name");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("pod/trainer"), std::string::npos) << out;

  std::tie(rc, out) =
      RunCommand(base + "annotate pod trainer -n team-a hami.io/vgpu-node=gpu-node-1");
  ASSERT_EQ(rc, 0) << out;
  auto pod = fake.Get("pods", "team-a", "trainer");
  ASSERT_TRUE(pod);
  EXPECT_EQ((*pod)["metadata"]["annotations"]["hami.io/vgpu-node"], "gpu-node-1");

  std::tie(rc, out) = RunCommand(base + "get pod missing -n team-a");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("not found"), std::string::npos) << out;
  std::filesystem::remove_all(home);
}

// DRA objects (resource.k8s.io/v1) as kubectl discovers and lists them: slices are cluster-scoped,
// claims namespaced, and both print in the default table and as JSON.
TEST(KubectlTest, ListsResourceSlicesAndClaims) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) GTEST_SKIP() << "kubectl not installed";
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  for (const char* node : {"gpu-node-1", "gpu-node-2"}) {
    nlohmann::json slice = {
        {"metadata", {{"name", std::string(node) + "-hami-core-gpu"}}},
        {"spec",
         {{"driver", "hami-core-gpu.project-hami.io"},
          {"nodeName", node},
          {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
          {"devices",
           {{{"name", "gpu-0"},
             {"allowMultipleAllocations", true},
             {"capacity", {{"memory", {{"value", "16Gi"}}}, {"cores", {{"value", "100"}}}}}}}}}}};
    ASSERT_TRUE(fake.Upsert("resourceslices", slice).ok());
  }
  nlohmann::json claim = {{"metadata", {{"name", "trainer-gpu"}, {"namespace", "team-a"}}},
                          {"spec",
                           {{"devices",
                             {{"requests",
                               {{{"name", "gpu"},
                                 {"exactly",
                                  {{"deviceClassName", "hami-core-gpu.project-hami.io"},
                                   {"capacity", {{"requests", {{"memory", "4Gi"}}}}}}}}}}}}}}};
  ASSERT_TRUE(fake.Upsert("resourceclaims", claim).ok());

  const std::filesystem::path home = TempHome("hami_kubectl_dra_");
  const std::string base = KubectlCommand(kubectl, fake, home);
  struct Case {
    std::string args;
    std::vector<std::string> want;  // substrings of the output
  };
  const std::vector<Case> cases = {
      {"get resourceslices", {"gpu-node-1-hami-core-gpu", "gpu-node-2-hami-core-gpu"}},
      {"get resourceslices --field-selector spec.nodeName=gpu-node-2 -o name",
       {"resourceslice.resource.k8s.io/gpu-node-2-hami-core-gpu"}},
      {"get resourceclaims -A", {"team-a", "trainer-gpu"}},
      {"get resourceclaims.v1.resource.k8s.io -n team-a -o json", {"\"deviceClassName\""}},
      {"api-resources --api-group=resource.k8s.io",
       {"resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    auto [rc, out] = RunCommand(base + c.args);
    ASSERT_EQ(rc, 0) << out;
    for (const auto& w : c.want) EXPECT_NE(out.find(w), std::string::npos) << w << "\n" << out;
  }
  auto [rc, out] = RunCommand(base + "get resourceslices -o json");
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_EQ(j["items"].size(), 2u) << out;
  EXPECT_EQ(j["items"][0]["spec"]["devices"][0]["capacity"]["memory"]["value"], "16Gi");
  // A claim without the namespace is not found in "default": the kind is namespaced.
  std::tie(rc, out) = RunCommand(base + "get resourceclaim trainer-gpu");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("not found"), std::string::npos) << out;
  std::filesystem::remove_all(home);
}

// kubectl drain evicts through pods/eviction (found by discovery, policy/v1): a pod without a PDB
// goes, a pod whose PDB allows no disruption stays and kubectl prints the API server's 429
// message. The wire facts docs/consolidation.md relies on for `hami consolidate`.
TEST(KubectlTest, DrainEvictsThroughTheEvictionApi) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) GTEST_SKIP() << "kubectl not installed";
  FakeApiServer fake;
  ASSERT_TRUE(fake.Start().ok());
  ASSERT_TRUE(fake.Upsert("nodes", MakeNode("gpu-node-1")).ok());
  auto owned = [](const std::string& name, const std::string& app) {
    nlohmann::json p = MakePod("team-a", name, "gpu-node-1", {{"app", app}});
    p["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                         {"kind", "ReplicaSet"},
                                         {"name", app + "-5d8f"},
                                         {"uid", "rs-" + app},
                                         {"controller", true}}};
    p["status"]["phase"] = "Running";
    return p;
  };
  ASSERT_TRUE(fake.Upsert("pods", owned("free", "web")).ok());
  ASSERT_TRUE(fake.Upsert("pods", owned("guarded", "db")).ok());
  ASSERT_TRUE(fake.Upsert("poddisruptionbudgets",
                          {{"apiVersion", "policy/v1"},
                           {"kind", "PodDisruptionBudget"},
                           {"metadata", {{"name", "db"}, {"namespace", "team-a"}}},
                           {"spec", {{"selector", {{"matchLabels", {{"app", "db"}}}}}}},
                           {"status",
                            {{"disruptionsAllowed", 0},
                             {"currentHealthy", 1},
                             {"desiredHealthy", 1},
                             {"expectedPods", 1}}}})
                  .ok());
  const std::filesystem::path home = TempHome("hami_kubectl_drain_");
  const std::string base = KubectlCommand(kubectl, fake, home);
  auto [rc, out] = RunCommand(base + "drain gpu-node-1 --timeout=3s --ignore-daemonsets");
  EXPECT_NE(rc, 0) << out;  // the guarded pod never goes
  EXPECT_NE(out.find("Cannot evict pod as it would violate the pod's disruption budget."),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("evicting pod team-a/free"), std::string::npos) << out;
  EXPECT_FALSE(fake.Get("pods", "team-a", "free").has_value()) << out;
  EXPECT_TRUE(fake.Get("pods", "team-a", "guarded").has_value()) << out;
  EXPECT_GE(fake.CountRequests("POST", "^/api/v1/namespaces/team-a/pods/free/eviction$"), 1) << out;
  std::filesystem::remove_all(home);
}

}  // namespace
}  // namespace hami::k8s::testing
