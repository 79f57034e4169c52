#include "scheduler/cluster_cache.h"

#include "gtest/gtest.h"
#include "scheduler/testing/builders.h"

namespace hami::scheduler {
namespace {

using testing::NodeBuilder;

core::PodAllocation Alloc(const std::string& node,
                          std::vector<std::vector<core::ContainerDevice>> c) {
  core::PodAllocation a;
  a.node = node;
  a.containers = std::move(c);
  return a;
}
core::ContainerDevice Dev(const std::string& uuid, int64_t mem, int cores) {
  core::ContainerDevice d;
  d.uuid = uuid;
  d.usedmem_mib = mem;
  d.usedcores = cores;
  return d;
}

TEST(ClusterCacheTest, AddRemovePodUpdatesUsageAndDerivedState) {
  ClusterCache c;
  c.UpsertNode(NodeBuilder("n1").Gpus(2, 16000));
  ASSERT_TRUE(c.AddPod("u1", Alloc("n1", {{Dev("n1-gpu1", 8000, 50)}}), {1000, 2048, {}}).ok());
  auto s = c.Snapshot("n1");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->usage[1], (core::DeviceUsage{1, 8000, 50}));
  EXPECT_EQ(s->free_milli[1], 500);
  EXPECT_EQ(s->free_milli_total, 1500);
  EXPECT_EQ(s->fully_free, 1);
  EXPECT_EQ(s->cpu_used, 1000);
  EXPECT_EQ(s->mem_used, 2048);
  EXPECT_EQ(s->class_count[0], 1);
  ASSERT_TRUE(c.RemovePod("u1").ok());
  s = c.Snapshot("n1");
  EXPECT_EQ(s->usage[1], core::DeviceUsage{});
  EXPECT_EQ(s->free_milli_total, 2000);
  EXPECT_EQ(s->classes_present, 0);
  EXPECT_EQ(c.RemovePod("u1").code(), absl::StatusCode::kNotFound);
}

TEST(ClusterCacheTest, PodBeforeNodeIsAppliedWhenNodeArrives) {
  ClusterCache c;
  ASSERT_TRUE(c.AddPod("u1", Alloc("n1", {{Dev("n1-gpu0", 4000, 0)}})).ok());
  c.UpsertNode(NodeBuilder("n1").Gpus(1, 16000));
  EXPECT_EQ(c.Snapshot("n1")->usage[0].usedmem_mib, 4000);
  // Re-registration with another card list keeps the usage of cards that remain.
  c.UpsertNode(NodeBuilder("n1").Gpus(2, 16000));
  EXPECT_EQ(c.Snapshot("n1")->usage[0].usedmem_mib, 4000);
  EXPECT_EQ(c.Snapshot("n1")->usage[1].usedmem_mib, 0);
  c.RemoveNode("n1");
  EXPECT_FALSE(c.Snapshot("n1"));
  c.UpsertNode(NodeBuilder("n1").Gpus(1, 16000));
  EXPECT_EQ(c.Snapshot("n1")->usage[0].usedmem_mib, 4000);
}

TEST(ClusterCacheTest, AddPodTwiceReplaces) {
  ClusterCache c;
  c.UpsertNode(NodeBuilder("n1").Gpus(1, 16000));
  ASSERT_TRUE(c.AddPod("u1", Alloc("n1", {{Dev("n1-gpu0", 4000, 10)}})).ok());
  ASSERT_TRUE(c.AddPod("u1", Alloc("n1", {{Dev("n1-gpu0", 6000, 20)}})).ok());
  EXPECT_EQ(c.Snapshot("n1")->usage[0], (core::DeviceUsage{1, 6000, 20}));
}

TEST(ClusterCacheTest, InitContainersCountAtTheirPeak) {
  ClusterCache c;
  c.UpsertNode(NodeBuilder("n1").Gpus(1, 16000));
  ClusterCache::PodResources res;
  res.kinds = {core::ContainerKind::kInit, core::ContainerKind::kInit, core::ContainerKind::kApp};
  ASSERT_TRUE(c.AddPod("u1",
                       Alloc("n1", {{Dev("n1-gpu0", 9000, 30)},
                                    {Dev("n1-gpu0", 5000, 70)},
                                    {Dev("n1-gpu0", 3000, 10)}}),
                       res)
                  .ok());
  EXPECT_EQ(c.Snapshot("n1")->usage[0], (core::DeviceUsage{1, 9000, 70}));
}

TEST(ClusterCacheTest, ReserveChecksFitAndUnreserveGivesBack) {
  ClusterCache c;
  c.UpsertNode(NodeBuilder("n1").Gpus(1, 16000).Cpu(4000));
  PodDelta d;
  d.cpu_milli = 1000;
  d.devices = {{0, 1, 10000, 30}};
  ASSERT_TRUE(c.Reserve("u1", "n1", d).ok());
  EXPECT_EQ(c.Reserve("u1", "n1", d).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(c.Reserve("u2", "n1", d).code(), absl::StatusCode::kAborted);  // 20000 > 16000 MiB
  EXPECT_EQ(c.Reserve("u2", "nx", d).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(c.RemovePod("u1").ok());
  EXPECT_TRUE(c.Reserve("u2", "n1", d).ok());
  EXPECT_EQ(c.Snapshot("n1")->usage[0], (core::DeviceUsage{1, 10000, 30}));
  EXPECT_EQ(c.pod_count(), 1u);
}

TEST(ClusterCacheTest, NodesIterateInNameOrder) {
  ClusterCache c;
  for (const char* n : {"b", "c", "a"}) c.UpsertNode(NodeBuilder(n).Gpus(1));
  EXPECT_EQ(c.NodeNames(), (std::vector<std::string>{"a", "b", "c"}));
  c.RemoveNode("b");
  EXPECT_EQ(c.NodeNames(), (std::vector<std::string>{"a", "c"}));
}

// The cache counts a placed pod as core::EffectiveDeviceUsage does, sidecars included: a sidecar
// declared before an init container runs next to it; once the init containers succeeded only the
// sidecars and app containers count.
TEST(ClusterCacheTest, EffectiveUsageTable) {
  using K = core::ContainerKind;
  struct Case {
    const char* name;
    std::vector<K> kinds;
    std::vector<int64_t> mem;  // per container, all on n1-gpu0
    bool init_finished;
    core::DeviceUsage want;
  };
  const Case cases[] = {
      {"apps add up", {K::kApp, K::kApp}, {3000, 2000}, false, {2, 5000, 20}},
      {"init peak above the apps", {K::kInit, K::kApp}, {9000, 1000}, false, {1, 9000, 10}},
      {"sidecar before init runs next to it",
       {K::kSidecar, K::kInit, K::kApp},
       {3000, 6000, 1000},
       false,
       {2, 9000, 20}},
      {"sidecar after init does not",
       {K::kInit, K::kSidecar, K::kApp},
       {6000, 3000, 1000},
       false,
       {2, 6000, 20}},
      {"init finished: only sidecars and apps",
       {K::kSidecar, K::kInit, K::kApp},
       {3000, 6000, 1000},
       true,
       {2, 4000, 20}},
  };
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.name);
    ClusterCache c;
    c.UpsertNode(NodeBuilder("n1").Gpus(1, 16000));
    ClusterCache::PodResources res;
    res.kinds = cs.kinds;
    res.init_finished = cs.init_finished;
    std::vector<std::vector<core::ContainerDevice>> containers;
    for (int64_t m : cs.mem) containers.push_back({Dev("n1-gpu0", m, 10)});
    ASSERT_TRUE(c.AddPod("u1", Alloc("n1", containers), res).ok());
    EXPECT_EQ(c.Snapshot("n1")->usage[0], cs.want);
  }
}

TEST(ClusterCacheTest, GpuCapacityFollowsNodeChanges) {
  ClusterCache cache;
  EXPECT_TRUE(cache.gpu_capacity()->empty());
  cache.UpsertNode(NodeBuilder("a").Gpus(2, 16000, "T4"));
  cache.UpsertNode(NodeBuilder("b").Gpus(4, 32000, "V100").Gpus(1, 16000, "T4"));
  cache.UpsertNode(NodeBuilder("cpu").Cpu(8000));
  const auto before = cache.gpu_capacity();
  EXPECT_EQ(*before, (GpuCapacity{{"T4", 3}, {"V100", 4}}));
  cache.UpsertNode(NodeBuilder("a").Gpus(8, 16000, "A100"));  // re-registered with other GPUs
  EXPECT_EQ(*cache.gpu_capacity(), (GpuCapacity{{"A100", 8}, {"T4", 1}, {"V100", 4}}));
  cache.RemoveNode("b");
  EXPECT_EQ(*cache.gpu_capacity(), (GpuCapacity{{"A100", 8}}));
  EXPECT_EQ(*before, (GpuCapacity{{"T4", 3}, {"V100", 4}}));  // a snapshot never changes
}

}  // namespace
}  // namespace hami::scheduler
