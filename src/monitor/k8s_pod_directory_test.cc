#include "monitor/k8s_pod_directory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "k8s/testing/fake_apiserver.h"
#include "monitor/region_store.h"
#include "monitor/testing/region_writer.h"

namespace hami::monitor {
namespace {

nlohmann::json Pod(const std::string& ns, const std::string& name, const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", ns}, {"name", name}}},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "main"}, {"image", "x"}}}}}}};
}

// Polls `pred` for up to ~10 s (the informer works on its own thread).
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    usleep(10'000);
  }
  return pred();
}

TEST(K8sPodDirectory, FollowsThisNodesPodsAndDrivesCleanup) {
  k8s::testing::FakeApiServer api;
  ASSERT_TRUE(api.Start().ok());
  auto here = api.Upsert("pods", Pod("team-a", "train-0", "node-1"));
  auto there = api.Upsert("pods", Pod("team-b", "serve-0", "node-2"));
  ASSERT_TRUE(here.ok() && there.ok());
  const std::string uid_here = (*here)["metadata"]["uid"];
  const std::string uid_there = (*there)["metadata"]["uid"];

  k8s::ClientConfig cfg;
  cfg.server = api.url();
  cfg.qps = 0;
  auto client = k8s::Client::Create(cfg);
  ASSERT_TRUE(client.ok()) << client.status();
  K8sPodDirectory pods(**client, "node-1");
  EXPECT_FALSE(pods.Synced());
  pods.Start();
  ASSERT_TRUE(Eventually([&] { return pods.Synced(); }));
  EXPECT_EQ(pods.Find(uid_here), (PodName{"team-a", "train-0"}));
  EXPECT_EQ(pods.Find(uid_there), std::nullopt);  // another node's pod

  // A region directory of the pod; the pod is deleted; cleanup removes the directory once stale.
  testing::TempDir root;
  {
    auto p = testing::FakeContainerProcess::Attach(root.path(), uid_here, "main");
    ASSERT_TRUE(p.ok());
  }
  const std::string dir = root.path() + "/" + uid_here + "_main";
  struct timespec old[2] = {{1'000, 0}, {1'000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, dir.c_str(), old, 0), 0);
  RegionStore store({root.path(), 300, 16}, RealClock::Get());
  EXPECT_TRUE(store.CleanStale(pods).empty());  // pod still exists
  ASSERT_TRUE(api.Delete("pods", "team-a", "train-0").ok());
  ASSERT_TRUE(Eventually([&] { return !pods.Find(uid_here).has_value(); }));
  EXPECT_EQ(store.CleanStale(pods), std::vector<std::string>{uid_here + "_main"});
  EXPECT_FALSE(std::filesystem::exists(dir));
  pods.Stop();
}

}  // namespace
}  // namespace hami::monitor
