#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"

namespace hami::scheduler {
namespace {
using namespace testing;

struct Case {
  std::string name;
  std::string policy;
  std::vector<core::NodeInfo> nodes;
  std::vector<core::PodRequest> existing;
  core::PodRequest pod;
  std::string want;
};
class HamiTest : public ::testing::TestWithParam<Case> {};

TEST_P(HamiTest, Chooses) {
  const Case& c = GetParam();
  auto s = MakeCluster(c.policy, c.nodes, c.existing);
  auto d = s->Schedule(c.pod, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), c.want);
}

NodeBuilder Two(const std::string& n) {
  return NodeBuilder(n).Gpus(2, 16000);
}
PodBuilder Used(const std::string& uid, const std::string& uuid, int64_t mem) {
  return PodBuilder(uid).Gpu(1, mem, 10).UseUuid(uuid);
}
NodeBuilder Topo() {
  // gpu0-gpu1 and gpu2-gpu3 are NVLink pairs; cross pairs are PCIe.
  return NodeBuilder("t")
      .Gpus(4)
      .Link(0, 1, 200)
      .Link(2, 3, 200)
      .Link(0, 2, 10)
      .Link(0, 3, 10)
      .Link(1, 2, 10)
      .Link(1, 3, 10);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HamiTest,
    ::testing::Values(
        Case{"hami_node_binpack",
             "hami",
             {Two("a"), Two("b")},
             {Used("x", "b-gpu0", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10),
             "b:b-gpu1"},
        Case{"hami_spread_node",
             "hami-spread",
             {Two("a"), Two("b")},
             {Used("x", "a-gpu0", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10),
             "b:b-gpu0"},
        Case{"hami_binpack_gpu",
             "hami-binpack",
             {Two("a")},
             {Used("x", "a-gpu1", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10),
             "a:a-gpu1"},
        Case{"pod_annotation_overrides",
             "hami",
             {Two("a"), Two("b")},
             {Used("x", "b-gpu0", 8000)},
             PodBuilder("p").Gpu(1, 1000, 10).NodePolicy("spread").GpuPolicy("binpack"),
             "a:a-gpu0"},
        Case{"mutex_only_idle_cards",
             "hami",
             {Two("a")},
             {Used("x", "a-gpu0", 1000)},
             PodBuilder("p").Gpu(1, 1000, 10).GpuPolicy("binpack,mutex"),
             "a:a-gpu1"},
        Case{"numa_key_lower_first",
             "hami",
             {NodeBuilder("a").Gpus(2).Numa(0, 1)},
             {},
             PodBuilder("p").Gpu(1, 1000, 10).GpuPolicy("numa"),
             "a:a-gpu1"},
        Case{"weights_memory_only",
             "hami-binpack",
             {Two("a")},
             {PodBuilder("x").Gpu(1, 8000, 0).UseUuid("a-gpu0"),
              PodBuilder("y").Gpu(1, 1000, 60).UseUuid("a-gpu1")},
             PodBuilder("p").Gpu(1, 1000, 0).Weights(0, 0, 1),
             "a:a-gpu0"},
        Case{"weights_core_only",
             "hami-binpack",
             {Two("a")},
             {PodBuilder("x").Gpu(1, 8000, 0).UseUuid("a-gpu0"),
              PodBuilder("y").Gpu(1, 1000, 60).UseUuid("a-gpu1")},
             PodBuilder("p").Gpu(1, 1000, 0).Weights(0, 1, 0),
             "a:a-gpu1"},
        Case{"topology_pair",
             "hami",
             {Topo()},
             {Used("x", "t-gpu0", 1000)},
             PodBuilder("p").Gpu(2, 1000, 10).GpuPolicy("topology-aware"),
             "t:t-gpu0,t-gpu1"},
        Case{"topology_single_least_connected",
             "hami",
             {Topo().Link(1, 3, 5)},
             {Used("x", "t-gpu2", 16000)},
             PodBuilder("p").Gpu(1, 1000, 10).GpuPolicy("topology-aware"),
             "t:t-gpu3"}),
    [](const auto& i) { return i.param.name; });

}  // namespace
}  // namespace hami::scheduler
