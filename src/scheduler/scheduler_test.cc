#include "scheduler/scheduler.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"

namespace hami::scheduler {
namespace {
using namespace testing;

TEST(RegistryTest, EveryRowBuildsAndUnknownNamesAreRejected) {
  for (const auto& row : Policies()) {
    auto p = MakeProfile(row.name);
    ASSERT_TRUE(p.ok()) << row.name << ": " << p.status();
    EXPECT_EQ((*p)->name, row.name);
  }
  auto bad = MakeProfile("nope");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  PolicyConfig cfg;
  cfg.gpu_policy = "sideways";
  EXPECT_FALSE(MakeProfile("hami", cfg).ok());
}

TEST(SchedulerTest, ReserveCommitsOnlyWhatStillFits) {
  auto s = MakeCluster("hami", {NodeBuilder("n1").Gpus(1, 16000)});
  auto p1 = PodBuilder("p1").Gpu(1, 10000, 0).Build();
  auto p2 = PodBuilder("p2").Gpu(1, 10000, 0).Build();
  auto d1 = s->Schedule(p1, nullptr);
  auto d2 = s->Schedule(p2, nullptr);
  ASSERT_TRUE(d1.ok() && d2.ok());
  ASSERT_EQ(d1->node, "n1");
  ASSERT_EQ(d2->node, "n1");
  EXPECT_TRUE(s->Reserve(p1, *d1).ok());
  EXPECT_EQ(s->Reserve(p2, *d2).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(s->Unreserve("p1").ok());
  EXPECT_TRUE(s->Reserve(p2, *d2).ok());
}

TEST(SchedulerTest, NoFitReturnsEmptyDecisionWithReasons) {
  auto s = MakeCluster("best-fit", {NodeBuilder("n1").Gpus(1, 16000), NodeBuilder("n2")});
  ScheduleOptions o;
  o.explain = true;
  auto d = s->Schedule(PodBuilder("p").Gpu(1, 20000, 0), nullptr, o);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->node.empty());
  ASSERT_EQ(d->failures.size(), 2u);
  EXPECT_EQ(d->failures[0].reason, "1/1 CardInsufficientMemory");
  EXPECT_EQ(d->failures[1].reason, "NodeInsufficientDevice");
}

TEST(SchedulerTest, TiesGoToTheFirstNodeByName) {
  auto s = MakeCluster("gpu-packing", {NodeBuilder("b").Gpus(2), NodeBuilder("a").Gpus(2), NodeBuilder("c").Gpus(2)});
  auto d = s->Schedule(PodBuilder("p").Cpu(100), nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "a");
  std::vector<std::string> cand = {"c", "b"};
  d = s->Schedule(PodBuilder("p").Cpu(100), &cand);
  EXPECT_EQ(d->node, "b");
}

TEST(SchedulerTest, AllocationCarriesDeviceDetails) {
  auto s = MakeCluster("hami", {NodeBuilder("n1").Gpus(1, 16000)});
  auto d = s->ScheduleAndReserve(PodBuilder("p").Gpu(1, 3000, 25), nullptr);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->allocation.containers.size(), 1u);
  const auto& dev = d->allocation.containers[0].at(0);
  EXPECT_EQ(dev.uuid, "n1-gpu0");
  EXPECT_EQ(dev.usedmem_mib, 3000);
  EXPECT_EQ(dev.usedcores, 25);
  EXPECT_EQ(dev.vendor, "NVIDIA");
  EXPECT_EQ(d->allocation.node, "n1");
}

// A random cluster exercising what the summaries and bounds look at: several device kinds, nodes
// mixing kinds, unhealthy and cordoned devices, few slots per device, tight CPU.
std::vector<core::NodeInfo> RandomNodes(Rng& rng, int n) {
  const char* types[] = {"NVIDIA-Tesla T4", "NVIDIA-Tesla V100-SXM2-32GB", "NVIDIA-A100-80GB"};
  const int64_t mems[] = {16000, 32000, 80000};
  std::vector<core::NodeInfo> out;
  for (int i = 0; i < n; ++i) {
    NodeBuilder b("n" + std::to_string(100 + i));
    b.Cpu(8000 + 8000 * static_cast<int64_t>(rng.Uniform(8))).Memory(65536 * (1 + static_cast<int64_t>(rng.Uniform(4))));
    const int k = static_cast<int>(rng.Uniform(3));
    const int gpus = 1 + static_cast<int>(rng.Uniform(8));
    const int split = 1 + static_cast<int>(rng.Uniform(4));
    b.Gpus(gpus, mems[k], types[k], split);
    if (rng.Uniform(5) == 0) b.Gpus(1, mems[(k + 1) % 3], types[(k + 1) % 3], split);   // mixed kinds
    if (rng.Uniform(6) == 0) b.Unhealthy(0);
    if (rng.Uniform(6) == 0) b.Cordon(gpus - 1);
    out.push_back(b);
  }
  return out;
}

core::PodRequest RandomPod(Rng& rng, int i) {
  const std::string uid = "p" + std::to_string(i);
  const int64_t cpu = 500 * static_cast<int64_t>(rng.Uniform(9));
  const int64_t memory = 4096 * static_cast<int64_t>(rng.Uniform(6));
  switch (rng.Uniform(7)) {
    case 0: return PodBuilder(uid).Cpu(cpu, memory);
    case 1: return PodBuilder(uid).Gpu(1 + static_cast<int>(rng.Uniform(4)), 0, 100, cpu, memory);   // whole GPUs
    case 2: {  // a share given as a percentage of the device's memory
      core::PodRequest p = PodBuilder(uid).Gpu(1, 0, 5 * static_cast<int>(rng.Uniform(20)), cpu, memory);
      p.containers[0].devices[0].mem_percentage = 5 + 5 * static_cast<int>(rng.Uniform(19));
      return p;
    }
    case 3: return PodBuilder(uid).Init(1, 4000, 10).Gpu(2, 2000 * static_cast<int64_t>(1 + rng.Uniform(8)), 20, cpu, memory);
    case 4: return PodBuilder(uid).Gpu(1, 1000 * static_cast<int64_t>(1 + rng.Uniform(30)), 0, cpu, memory).UseType("A100");
    default:
      return PodBuilder(uid).Gpu(1 + static_cast<int>(rng.Uniform(2)), 1000 * static_cast<int64_t>(1 + rng.Uniform(30)),
                                 5 * static_cast<int>(rng.Uniform(20)), cpu, memory);
  }
}

// Policies whose scorer bounds its scores take a best-bound-first scan that stops early; explain and
// full_scan take the full scan. Two identical schedulers fed the same pods (one scanning fully) must
// decide identically at every step, with and without candidate lists (shuffled, duplicates, unknown).
TEST(SchedulerTest, BoundedScanDecidesAsTheFullScan) {
  for (const char* policy : {"hami", "hami-binpack", "hami-spread", "best-fit", "fgd", "default", "gpu-packing"}) {
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(std::string(policy) + " seed " + std::to_string(seed));
      Rng rng(seed);
      const auto nodes = RandomNodes(rng, 40);
      auto full = MakeCluster(policy, nodes);
      auto fast = MakeCluster(policy, nodes);
      ScheduleOptions explain, scan;
      explain.explain = true;
      scan.full_scan = true;
      std::vector<std::string> placed;
      int scheduled = 0;
      for (int i = 0; i < 250; ++i) {
        const core::PodRequest pod = RandomPod(rng, i);
        std::vector<std::string> cand;
        const bool listed = i % 4 == 3;
        if (listed) {
          for (const auto& n : nodes)
            if (rng.Uniform(2)) cand.push_back(n.name);
          if (!cand.empty()) cand.push_back(cand[rng.Uniform(cand.size())]);
          cand.push_back("unknown");
          rng.Shuffle(cand);
        }
        auto a = full->Schedule(pod, listed ? &cand : nullptr, i % 2 ? explain : scan);
        auto b = fast->Schedule(pod, listed ? &cand : nullptr);
        ASSERT_TRUE(a.ok() && b.ok()) << i;
        ASSERT_EQ(Describe(*a), Describe(*b)) << "pod " << i;
        ASSERT_EQ(a->score, b->score) << "pod " << i;
        if (a->node.empty()) continue;
        ++scheduled;
        ASSERT_TRUE(full->Reserve(pod, *a).ok());
        ASSERT_TRUE(fast->Reserve(pod, *b).ok());
        placed.push_back(pod.uid);
        if (rng.Uniform(3) == 0) {   // pods also leave
          const size_t k = rng.Uniform(placed.size());
          ASSERT_TRUE(full->Unreserve(placed[k]).ok());
          ASSERT_TRUE(fast->Unreserve(placed[k]).ok());
          placed.erase(placed.begin() + static_cast<long>(k));
        }
      }
      EXPECT_GT(scheduled, 60);
    }
  }
}

// The bound itself, node by node: never below the score of the placement the policy would choose.
TEST(SchedulerTest, UpperBoundIsAtLeastTheScore) {
  for (const char* policy : {"hami", "hami-spread", "best-fit", "fgd", "default"}) {
    SCOPED_TRACE(policy);
    Rng rng(5);
    auto s = MakeCluster(policy, RandomNodes(rng, 30));
    const Profile& profile = s->profile();
    ASSERT_TRUE(profile.scorer->bounded());
    int checked = 0, bounded = 0;
    for (int i = 0; i < 300; ++i) {
      const core::PodRequest pod = RandomPod(rng, i);
      ExpectBoundsHold(*s, pod, rng, "pod " + std::to_string(i), &checked, &bounded);
      auto d = s->ScheduleAndReserve(pod, nullptr);
      ASSERT_TRUE(d.ok());
    }
    EXPECT_GT(checked, 1000);
    EXPECT_GT(bounded, checked / 3);   // some pods (several requests) and mixed nodes have no bound
  }
}

TEST(ClusterCacheTest, SummariesFollowEveryChange) {
  Rng rng(9);
  auto s = MakeCluster("hami", RandomNodes(rng, 12));
  auto check = [&] {
    s->cache().Read([&](const ClusterCache::View& view) {
      for (size_t n = 0; n < view.size(); ++n) {
        const NodeSummary sum = view.Summary(n);
        view.WithNode(n, [&](const NodeState& node) {
          const NodeSummary want = node.Summarize();
          EXPECT_EQ(view.IndexOf(node.info.name), static_cast<int>(n));
          EXPECT_EQ(sum.cpu_free, want.cpu_free) << node.info.name;
          EXPECT_EQ(sum.free_milli_total, want.free_milli_total) << node.info.name;
          EXPECT_EQ(sum.max_free_mem, want.max_free_mem) << node.info.name;
          EXPECT_EQ(sum.usable, want.usable) << node.info.name;
          EXPECT_EQ(sum.last_slot, want.last_slot) << node.info.name;
          EXPECT_EQ(sum.free_levels, want.free_levels) << node.info.name;
          EXPECT_EQ(sum.gpus, want.gpus) << node.info.name;
          EXPECT_EQ(sum.kind < 0, sum.kind_device == nullptr);
        });
      }
    });
  };
  for (int i = 0; i < 60; ++i) {
    auto d = s->ScheduleAndReserve(RandomPod(rng, i), nullptr);
    ASSERT_TRUE(d.ok());
    if (i % 7 == 0) (void)s->Unreserve("p" + std::to_string(i));
  }
  check();
  s->RemoveNode("n105");
  s->UpsertNode(NodeBuilder("n000").Gpus(2));
  s->UpsertNode(NodeBuilder("n103").Gpus(3, 32000, "NVIDIA-Tesla V100-SXM2-32GB"));   // re-registered
  check();
}

}  // namespace
}  // namespace hami::scheduler
