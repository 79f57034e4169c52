#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>

#include "core/pod_request.h"
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

// Vendor rules that count: their per-pod state (a vendor's parsed selector annotations) is
// prepared once per scheduling cycle, however many devices of however many nodes the cycle checks,
// and every Check and Pick gets that state.
class CountingRules final : public VendorRules {
 public:
  mutable std::atomic<int> prepared{0}, checked{0}, foreign{0};
  mutable std::atomic<const PodState*> current{nullptr};
  bool Covers(const std::string& vendor) const override { return vendor == "X"; }
  std::unique_ptr<const PodState> Prepare(const core::PodRequest&) const override {
    ++prepared;
    auto state = std::make_unique<PodState>();
    current = state.get();
    return state;
  }
  Verdict Check(const PodState& pod, const core::DeviceRequest&, const core::DeviceInfo&,
                const core::DeviceUsage&) const override {
    ++checked;
    if (&pod != current.load()) ++foreign;
    return {};
  }
  Take Grant(const core::DeviceRequest& r, const core::DeviceInfo&) const override {
    return {r.memreq_mib, r.coresreq};
  }
  bool Pick(const PodState& pod, const core::DeviceRequest&, std::span<const core::DeviceInfo>,
            std::span<const core::DeviceUsage>, std::span<const int>,
            std::vector<int>*) const override {
    if (&pod != current.load()) ++foreign;
    return false;
  }
};

TEST(SchedulerTest, VendorPodStateIsPreparedOncePerCycle) {
  CountingRules rules;
  SchedulerOptions o;
  o.policy = "hami";
  o.vendor_rules = &rules;
  auto s = Scheduler::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  for (const char* name : {"n1", "n2", "n3", "n4"}) {
    core::NodeInfo n = NodeBuilder(name).Gpus(4);
    for (auto& d : n.devices) d.vendor = "X";
    (*s)->UpsertNode(n);
  }
  core::PodRequest pod = PodBuilder("p").Gpu(1, 1000, 10).Build();
  pod.containers[0].devices[0].vendor = "X";
  for (int cycle = 1; cycle <= 2; ++cycle) {
    auto d = (*s)->Schedule(pod, nullptr);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->node.empty());
    EXPECT_EQ(rules.prepared.load(), cycle);
  }
  EXPECT_GE(rules.checked.load(), 2 * 16);  // every device of every node, each cycle
  EXPECT_EQ(rules.foreign.load(), 0);
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
  auto s = MakeCluster("gpu-packing", {NodeBuilder("b").Gpus(2), NodeBuilder("a").Gpus(2),
                                       NodeBuilder("c").Gpus(2)});
  auto d = s->Schedule(PodBuilder("p").Cpu(100), nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "a");
  std::vector<std::string> cand = {"c", "b"};
  d = s->Schedule(PodBuilder("p").Cpu(100), &cand);
  EXPECT_EQ(d->node, "b");
}

// A candidate list names nodes, not positions: the same list after a node was added before the
// candidate (every index after it shifts) or after the candidate left, and on another cache.
TEST(SchedulerTest, RepeatedCandidateListFollowsNodeChanges) {
  auto s = MakeCluster("hami", {NodeBuilder("b").Gpus(2), NodeBuilder("c").Gpus(2)});
  const std::vector<std::string> cand = {"c"};
  auto d = s->Schedule(PodBuilder("p").Gpu(1, 1000, 10), &cand);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "c");
  // "a" takes index 0: "c" moves from 1 to 2, and index 1 is now "b".
  s->UpsertNode(NodeBuilder("a").Gpus(2).Build());
  d = s->Schedule(PodBuilder("p").Gpu(1, 1000, 10), &cand);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "c");
  s->RemoveNode("c");
  d = s->Schedule(PodBuilder("p").Gpu(1, 1000, 10), &cand);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "");  // no candidate left
  // Another cache, same list, its own nodes.
  auto t = MakeCluster("hami", {NodeBuilder("c").Gpus(2), NodeBuilder("d").Gpus(2)});
  d = t->Schedule(PodBuilder("p").Gpu(1, 1000, 10), &cand);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, "c");
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
    b.Cpu(8000 + 8000 * static_cast<int64_t>(rng.Uniform(8)))
        .Memory(65536 * (1 + static_cast<int64_t>(rng.Uniform(4))));
    const int k = static_cast<int>(rng.Uniform(3));
    const int gpus = 1 + static_cast<int>(rng.Uniform(8));
    const int split = 1 + static_cast<int>(rng.Uniform(4));
    b.Gpus(gpus, mems[k], types[k], split);
    if (rng.Uniform(5) == 0)
      b.Gpus(1, mems[(k + 1) % 3], types[(k + 1) % 3], split);  // mixed kinds
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
    case 0:
      return PodBuilder(uid).Cpu(cpu, memory);
    case 1:
      return PodBuilder(uid).Gpu(1 + static_cast<int>(rng.Uniform(4)), 0, 100, cpu,
                                 memory);  // whole GPUs
    case 2: {                              // a share given as a percentage of the device's memory
      core::PodRequest p =
          PodBuilder(uid).Gpu(1, 0, 5 * static_cast<int>(rng.Uniform(20)), cpu, memory);
      p.containers[0].devices[0].mem_percentage = 5 + 5 * static_cast<int>(rng.Uniform(19));
      return p;
    }
    case 3:
      return PodBuilder(uid)
          .Init(1, 4000, 10)
          .Gpu(2, 2000 * static_cast<int64_t>(1 + rng.Uniform(8)), 20, cpu, memory);
    case 4:
      return PodBuilder(uid)
          .Gpu(1, 1000 * static_cast<int64_t>(1 + rng.Uniform(30)), 0, cpu, memory)
          .UseType("A100");
    default:
      return PodBuilder(uid).Gpu(1 + static_cast<int>(rng.Uniform(2)),
                                 1000 * static_cast<int64_t>(1 + rng.Uniform(30)),
                                 5 * static_cast<int>(rng.Uniform(20)), cpu, memory);
  }
}

// Policies whose scorer bounds its scores take a best-bound-first scan that stops early; explain
// and full_scan take the full scan. Two identical schedulers fed the same pods (one scanning fully)
// must decide identically at every step, with and without candidate lists (shuffled, duplicates,
// unknown).
TEST(SchedulerTest, BoundedScanDecidesAsTheFullScan) {
  for (const char* policy :
       {"hami", "hami-binpack", "hami-spread", "best-fit", "fgd", "default", "gpu-packing"}) {
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
        if (rng.Uniform(3) == 0) {  // pods also leave
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
    EXPECT_GT(bounded, checked / 3);  // some pods (several requests) and mixed nodes have no bound
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
  s->UpsertNode(
      NodeBuilder("n103").Gpus(3, 32000, "NVIDIA-Tesla V100-SXM2-32GB"));  // re-registered
  check();
}

// Decisions of `s` for pods `from`..`to` of the stream `seed` (each reserved when it fits), with a
// fixed random stream per pod, so that only the scheduler's own state can make two runs differ.
std::vector<std::string> Decide(Scheduler& s, uint64_t seed, int from, int to) {
  std::vector<std::string> out;
  Rng pods(seed);
  for (int i = 0; i < to; ++i) {
    const core::PodRequest pod = RandomPod(pods, i);
    if (i < from) continue;
    Rng rng(seed * 7919 + static_cast<uint64_t>(i));
    ScheduleOptions so;
    so.rng = &rng;
    auto d = s.Schedule(pod, nullptr, so);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) break;
    out.push_back(Describe(*d));
    if (!d->node.empty()) {
      EXPECT_TRUE(s.Reserve(pod, *d).ok());
    }
  }
  return out;
}

// Schedule has no side effect: a pod decided (and explained) a thousand times but never reserved -
// kube-scheduler retrying an unschedulable pod, explain re-runs, lost races - leaves every later
// decision as it was, for every registered policy.
TEST(SchedulerReserveTest, ScheduleAThousandTimesChangesNothing) {
  for (const auto& row : Policies()) {
    SCOPED_TRACE(row.name);
    Rng rng(11);
    const auto nodes = RandomNodes(rng, 30);
    auto a = MakeCluster(row.name, nodes);
    auto b = MakeCluster(row.name, nodes);
    ASSERT_EQ(Decide(*a, 5, 0, 60), Decide(*b, 5, 0, 60));
    const core::PodRequest ghost = PodBuilder("ghost").Gpu(3, 7000, 35, 6000, 8192).UseType("V100");
    ScheduleOptions explain;
    explain.explain = true;
    for (int i = 0; i < 1000; ++i) {
      Rng r(static_cast<uint64_t>(i));
      ScheduleOptions so = i % 10 == 0 ? explain : ScheduleOptions{};
      so.rng = &r;
      ASSERT_TRUE(a->Schedule(ghost, nullptr, so).ok());
    }
    EXPECT_EQ(Decide(*a, 5, 60, 260), Decide(*b, 5, 60, 260));
  }
}

// What Reserve charges is what the cache counts for the placed pod (core::EffectiveDeviceUsage): a
// sidecar declared before an init container runs next to it, so the init phase holds both. Before,
// the decision charged max(sidecars + apps, init alone) = 6000 MiB while the pod's annotations
// recount as 9000, leaving 3000 MiB that another pod could be given until the informer caught up.
TEST(SchedulerReserveTest, ReservedUsageIsTheEffectiveUsageOfThePlacement) {
  const std::vector<core::NodeInfo> nodes = {NodeBuilder("n1").Gpus(1, 16000).Build()};
  for (const auto& row : Policies()) {
    SCOPED_TRACE(row.name);
    auto s = MakeCluster(row.name, nodes);
    core::PodRequest pod = PodBuilder("p")
                               .Container(core::ContainerKind::kSidecar, 1, 3000, 10, 0, 0)
                               .Init(1, 6000, 0)
                               .Gpu(1, 1000, 10)
                               .Build();
    auto d = s->Schedule(pod, nullptr, {});
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->node, "n1");
    const auto eff = core::EffectiveDeviceUsage(core::ContainerKinds(pod), d->allocation);
    ASSERT_EQ(eff.size(), 1u);
    ASSERT_EQ(d->delta.devices.size(), 1u);
    EXPECT_EQ(d->delta.devices[0].mem_mib, eff.begin()->second.usedmem_mib);
    EXPECT_EQ(d->delta.devices[0].mem_mib, 9000);
    EXPECT_EQ(d->delta.devices[0].cores, eff.begin()->second.usedcores);
    EXPECT_EQ(d->delta.devices[0].slots, eff.begin()->second.used);
  }
}

// The random baseline without a per-call stream (the extender): a decision depends on the
// reservations made before it, not on how often Schedule ran (the extender explains a failure with
// a second call) nor on the order the candidates come in (kube-scheduler's own), so it decides as
// `hami sim` does.
TEST(SchedulerReserveTest, RandomDecisionsIgnoreRepeatsAndCandidateOrder) {
  Rng rng(13);
  const auto nodes = RandomNodes(rng, 40);
  auto a = MakeCluster("random", nodes);
  auto b = MakeCluster("random", nodes);
  std::vector<std::string> names, reversed;
  for (const auto& n : nodes) names.push_back(n.name);
  reversed.assign(names.rbegin(), names.rend());
  int placed = 0;
  for (int i = 0; i < 60; ++i) {
    const core::PodRequest pod = RandomPod(rng, i);
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(a->Schedule(pod, &names).ok());  // repeats draw nothing
    auto da = a->Schedule(pod, &names);
    auto db = b->Schedule(pod, &reversed);
    ASSERT_TRUE(da.ok() && db.ok());
    ASSERT_EQ(da->node, db->node) << pod.uid;
    ASSERT_EQ(da->allocation, db->allocation) << pod.uid;
    if (da->node.empty()) continue;
    ++placed;
    ASSERT_TRUE(a->Reserve(pod, *da).ok());
    ASSERT_TRUE(b->Reserve(pod, *db).ok());
  }
  EXPECT_GT(placed, 10);
}

// A decision is learned when reserved and only then: reserving a pod and rolling the reservation
// back leaves the scheduler as if the pod had never come; a pod that ran and left (RemovePod) stays
// learned.
TEST(SchedulerReserveTest, UnreserveTakesTheLearningBack) {
  for (const char* policy : {"fgd", "fgd-balance", "default"}) {
    SCOPED_TRACE(policy);
    Rng rng(12);
    const auto nodes = RandomNodes(rng, 30);
    auto a = MakeCluster(policy, nodes);
    auto b = MakeCluster(policy, nodes);
    ASSERT_EQ(Decide(*a, 6, 0, 40), Decide(*b, 6, 0, 40));
    // Shapes the stream never asks: a new one and a heavy one, each reserved 50 times and rolled
    // back.
    for (int i = 0; i < 50; ++i) {
      for (const core::PodRequest& x :
           {PodBuilder("x" + std::to_string(i)).Gpu(1, 123, 7, 777, 0).Build(),
            PodBuilder("y" + std::to_string(i)).Gpu(1, 1000, 0, 32000, 0).Build()}) {
        auto d = a->Schedule(x, nullptr);
        ASSERT_TRUE(d.ok());
        if (d->node.empty()) continue;
        ASSERT_TRUE(a->Reserve(x, *d).ok());
        ASSERT_TRUE(a->Unreserve(x.uid).ok());
      }
    }
    EXPECT_EQ(Decide(*a, 6, 40, 200), Decide(*b, 6, 40, 200));

    // The same pods reserved and then removed as finished do teach the policy (the test can fail).
    auto c = MakeCluster(policy, nodes);
    (void)Decide(*c, 6, 0, 40);
    for (int i = 0; i < 50; ++i) {
      const core::PodRequest x =
          PodBuilder("z" + std::to_string(i)).Gpu(1, 1000, 0, 32000, 0).Build();
      auto d = c->Schedule(x, nullptr);
      ASSERT_TRUE(d.ok());
      if (d->node.empty()) continue;
      ASSERT_TRUE(c->Reserve(x, *d).ok());
      ASSERT_TRUE(c->RemovePod(x.uid).ok());
    }
    auto fresh = MakeCluster(policy, nodes);
    (void)Decide(*fresh, 6, 0, 40);
    EXPECT_NE(Decide(*c, 6, 40, 200), Decide(*fresh, 6, 40, 200));
  }
}

// A dry run (DryRun(): the extender's Simulate) decides with the live models: given the same nodes
// and usage it decides as the live scheduler, and what it reserves teaches the live scheduler
// nothing.
TEST(SchedulerReserveTest, DryRunUsesTheLiveModels) {
  for (const char* policy : {"fgd", "default"}) {
    SCOPED_TRACE(policy);
    Rng rng(13);
    const auto nodes = RandomNodes(rng, 20);
    auto live = MakeCluster(policy, nodes);
    auto twin = MakeCluster(policy, nodes);
    (void)Decide(*live, 8, 0, 80);
    (void)Decide(*twin, 8, 0, 80);
    auto dry = live->DryRun();
    for (const auto& n : nodes) dry->UpsertNode(n);
    int compared = 0;
    Rng pods(9);
    for (int i = 0; i < 40; ++i) {
      const core::PodRequest pod = RandomPod(pods, 1000 + i);
      auto d = dry->Schedule(pod, nullptr);
      ASSERT_TRUE(d.ok());
      if (d->node.empty()) continue;
      ASSERT_TRUE(dry->Reserve(pod, *d).ok());
      ++compared;
    }
    EXPECT_GT(compared, 10);
    // Nothing reserved on the dry run reached the live models.
    EXPECT_EQ(Decide(*live, 8, 80, 200), Decide(*twin, 8, 80, 200));
    // Same usage, same decision: a dry run over a copy of the live usage decides like the live one.
    auto copy = live->DryRun();
    for (const auto& n : nodes) copy->UpsertNode(n);
    for (const auto& n : nodes) {
      auto snap = live->cache().Snapshot(n.name);
      ASSERT_TRUE(snap.has_value());
      core::PodAllocation a;
      a.node = n.name;
      for (size_t d = 0; d < snap->usage.size(); ++d)
        for (int k = 0; k < snap->usage[d].used; ++k)
          a.containers.push_back(
              {core::ContainerDevice{.uuid = n.devices[d].uuid,
                                     .usedmem_mib = k == 0 ? snap->usage[d].usedmem_mib : 0,
                                     .usedcores = k == 0 ? snap->usage[d].usedcores : 0}});
      ClusterCache::PodResources res;
      res.cpu_milli = snap->cpu_used;
      res.memory_mib = snap->mem_used;
      ASSERT_TRUE(copy->AddPod("usage/" + n.name, a, res).ok());
    }
    Rng more(10);
    for (int i = 0; i < 30; ++i) {
      const core::PodRequest pod = RandomPod(more, 2000 + i);
      auto l = live->Schedule(pod, nullptr);
      auto d = copy->Schedule(pod, nullptr);
      ASSERT_TRUE(l.ok() && d.ok());
      EXPECT_EQ(Describe(*l), Describe(*d)) << pod.uid;
    }
  }
}

}  // namespace
}  // namespace hami::scheduler
