// The real `hami consolidate` binary against the fake API server: --once --dry-run prints the plan
// and changes nothing; the daemon takes its Lease, evicts the planned pod, posts its Event and
// publishes the freed GPU; a second candidate waits for the Lease and moves nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "consolidator/testing.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"

namespace hami::consolidator {
namespace {

using testing::Node;
using testing::Pdb;
using testing::Pod;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    char tmpl[] = "/tmp/hami_consolidate_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // JSON is YAML: the kubeconfig loader reads it.
    std::ofstream(dir_ + "/kubeconfig") << nlohmann::json{
        {"apiVersion", "v1"},
        {"kind", "Config"},
        {"current-context", "t"},
        {"clusters", {{{"name", "c"}, {"cluster", {{"server", api_.url()}}}}}},
        {"users", {{{"name", "u"}, {"user", {{"token", "t"}}}}}},
        {"contexts", {{{"name", "t"}, {"context", {{"cluster", "c"}, {"user", "u"}}}}}}};
    ASSERT_TRUE(api_.Upsert("nodes", Node("n1", {"GPU-a", "GPU-b"})).ok());
    ASSERT_TRUE(api_.Upsert("pods", Pod("ns", "a", "n1", "GPU-a", 20000, "web")).ok());
    ASSERT_TRUE(api_.Upsert("pods", Pod("ns", "b", "n1", "GPU-b", 30000, "api")).ok());
    ASSERT_TRUE(api_.Upsert("poddisruptionbudgets", Pdb("ns", "web", "web", 1)).ok());
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    std::system(("rm -rf " + dir_).c_str());
  }
  std::vector<std::string> Args(std::vector<std::string> extra) {
    std::vector<std::string> a = {
        HAMI_BINARY,          "consolidate", "--kubeconfig",   dir_ + "/kubeconfig",
        "--usage-namespaces", "ns",          "--metrics-bind", ""};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Runs to the end; {exit code, stdout}.
  std::pair<int, std::string> Run(const std::vector<std::string>& args) {
    std::string cmd;
    for (const std::string& a : args) cmd += "'" + a + "' ";
    FILE* f = popen((cmd + "2>/dev/null").c_str(), "r");
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
    const int rc = pclose(f);
    return {WEXITSTATUS(rc), out};
  }
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(HAMI_BINARY, argv.data());
      _exit(127);
    }
    pids_.push_back(pid);
    return pid;
  }

  k8s::testing::FakeApiServer api_;
  std::string dir_;
  std::vector<pid_t> pids_;
};

TEST_F(DaemonTest, DryRunOncePrintsThePlan) {
  auto [rc, out] = Run(Args({"--once", "--dry-run"}));
  EXPECT_EQ(rc, 0) << out;
  // The plan, then the log's summary line.
  EXPECT_EQ(
      out.rfind("move ns/a GPU-a -> GPU-b (empty-gpu)\nsaving 1 GPU(s): 1 freed, 0 opened\n", 0),
      0u)
      << out;
  EXPECT_NE(out.find("dry run: 1 moves planned (saving 1 GPUs)"), std::string::npos) << out;
  EXPECT_TRUE(api_.Get("pods", "ns", "a").has_value());
  EXPECT_EQ(api_.CountRequests("POST", "eviction"), 0);
}

TEST_F(DaemonTest, TheLeaderMovesAndTheOtherCandidateWaits) {
  const std::vector<std::string> le = {"--interval", "3600", "--leader-elect-resource-namespace",
                                       "kube-system"};
  Spawn(Args(le), dir_ + "/leader.log");
  ASSERT_TRUE(k8s::testing::Eventually([&] { return !api_.Get("pods", "ns", "a").has_value(); }))
      << "the leader did not evict";
  auto lease = api_.Get("leases", "kube-system", "hami-consolidate");
  ASSERT_TRUE(lease.has_value());
  const std::string holder = (*lease)["spec"].value("holderIdentity", "");
  EXPECT_FALSE(holder.empty());
  EXPECT_TRUE(k8s::testing::Eventually([&] {
    auto n = api_.Get("nodes", "", "n1");
    return n &&
           (*n)["metadata"]["annotations"].value("hami.io/consolidate-free-gpus", "") == "GPU-a";
  }));
  bool event = false;
  for (const auto& e : api_.List("events"))
    event |= e.value("reason", "") == "ConsolidationMove" &&
             e["involvedObject"].value("name", "") == "a";
  EXPECT_TRUE(event);
  // A second candidate: the Lease is held, so it plans nothing and evicts nothing, even with a
  // pod it would move.
  ASSERT_TRUE(api_.Upsert("pods", Pod("ns", "c", "n1", "GPU-a", 10000, "cache")).ok());
  const int64_t evictions = api_.CountRequests("POST", "eviction");
  Spawn(Args(le), dir_ + "/follower.log");
  sleep(2);
  EXPECT_EQ(api_.CountRequests("POST", "eviction"), evictions);
  EXPECT_EQ(
      (*api_.Get("leases", "kube-system", "hami-consolidate"))["spec"].value("holderIdentity", ""),
      holder);
}

}  // namespace
}  // namespace hami::consolidator
