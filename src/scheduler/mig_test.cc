// Dynamic MIG through the one scheduler path (Schedule + Reserve, as the extender and `hami sim`
// call it): a container on a MIG-mode GPU gets a profile instance at a free placement, is charged
// the profile's memory and cores, and the slices stay taken until the pod leaves. Cases named
// Upstream* replay upstream HAMi's pkg/device/nvidia/mig_*_test.go through Schedule.
#include "core/mig.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "core/annotations.h"
#include "scheduler/scheduler.h"
#include "scheduler/testing/builders.h"

namespace hami::scheduler {
namespace {
using namespace testing;

// Upstream's A100-40GB test profiles (mig_capability_test.go).
std::vector<core::MigProfile> A100Profiles() {
  return {
      {"1g.5gb", 5120, 14, 1, {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}},
      {"2g.10gb", 10240, 28, 2, {{0, 2}, {2, 2}, {4, 2}}},
      {"3g.20gb", 20480, 42, 3, {{0, 4}, {4, 4}}},
  };
}

// A node whose devices in `mig` are A100s in MIG mode; the others are plain hami-core A100s.
core::NodeInfo MigNode(const std::string& name, int gpus, std::vector<int> mig) {
  core::NodeInfo n = NodeBuilder(name).Gpus(gpus, 40960, "NVIDIA-A100-SXM4-40GB", 7);
  for (int i : mig) {
    n.devices[i].mode = core::kModeMig;
    n.devices[i].mig_profiles = A100Profiles();
  }
  return n;
}

std::unique_ptr<Scheduler> Make(std::vector<core::NodeInfo> nodes) {
  auto s = Scheduler::Create({});
  EXPECT_TRUE(s.ok()) << s.status();
  for (auto& n : nodes) (*s)->UpsertNode(std::move(n));
  return std::move(*s);
}

struct Grant {
  std::string profile;
  core::MigPlacement placement;
  int64_t mem = 0;
  int cores = 0;
};

// Schedules and reserves a one-container, one-GPU pod; the grant of its device.
Grant Place(Scheduler& s, const std::string& uid, int64_t mem, int cores = 0,
            const std::string& mode = "") {
  core::PodRequest pod = PodBuilder(uid).Gpu(1, mem, cores);
  pod.selectors.vgpu_mode = mode;
  auto d = s.ScheduleAndReserve(pod, nullptr);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok() || d->node.empty()) return {};
  const core::ContainerDevice& cd = d->allocation.containers.at(0).at(0);
  return {cd.mig_profile, cd.mig_placement, cd.usedmem_mib, cd.usedcores};
}

std::string WhyNot(Scheduler& s, int64_t mem, int cores = 0, const std::string& mode = "") {
  core::PodRequest pod = PodBuilder("why").Gpu(1, mem, cores);
  pod.selectors.vgpu_mode = mode;
  ScheduleOptions o;
  o.explain = true;
  auto d = s.Schedule(pod, nullptr, o);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok() || !d->node.empty() || d->failures.empty()) return "placed";
  return d->failures[0].reason + (d->failures[0].retryable ? "" : " (never)");
}

// mig_topology_test.go TestSelectMigPlacementUsesBalancedPacking, one pod at a time, then the card
// is full (mig_topology_test.go TestCanPlaceMigProfilesA100: nothing overlaps what is active).
TEST(MigScheduleTest, UpstreamSelectMigPlacementUsesBalancedPacking) {
  auto s = Make({MigNode("n1", 1, {0})});
  struct Case {
    int64_t mem;
    const char* profile;
    int start, size;
    int64_t charged_mem;
    int charged_cores;
  };
  const Case cases[] = {{20000, "3g.20gb", 4, 4, 20480, 42},
                        {10000, "2g.10gb", 0, 2, 10240, 28},
                        {5000, "1g.5gb", 3, 1, 5120, 14},
                        {5000, "1g.5gb", 2, 1, 5120, 14}};
  int i = 0;
  for (const Case& c : cases) {
    const Grant g = Place(*s, "p" + std::to_string(i++), c.mem);
    EXPECT_EQ(g.profile, c.profile) << c.mem;
    EXPECT_EQ(g.placement, (core::MigPlacement{c.start, c.size})) << c.profile;
    EXPECT_EQ(g.mem, c.charged_mem) << c.profile;
    EXPECT_EQ(g.cores, c.charged_cores) << c.profile;
  }
  const auto n = s->cache().Snapshot("n1");
  EXPECT_EQ(n->usage[0].mig_slices, 0xffu);
  EXPECT_EQ(n->usage[0].usedmem_mib, 20480 + 10240 + 5120 * 2);
  EXPECT_EQ(n->usage[0].usedcores, 42 + 28 + 14 * 2);
  EXPECT_EQ(n->usage[0].used, 4);
  EXPECT_EQ(WhyNot(*s, 1000), "1/1 CardMigTopologyInfeasible");
  // The pod leaves: its slices are free again, and the next 1g instance takes them.
  ASSERT_TRUE(s->RemovePod("p2").ok());
  EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].mig_slices, 0xf7u);
  EXPECT_EQ(Place(*s, "p9", 1000).placement, (core::MigPlacement{3, 1}));
}

// mig_preference_test.go TestFitHonorsMigProfilePreference through Schedule + Reserve: the pod's
// nvidia.com/mig-profile-preference (parsed into its selectors) picks the 4g.20gb profile, which is
// charged as reported; a preference for another model's profile leaves the default.
TEST(MigScheduleTest, UpstreamFitHonorsMigProfilePreference) {
  struct Case {
    const char* name;
    std::vector<std::string> preference;
    const char* want;
    core::MigPlacement at;
    int64_t mem;
    int cores;
  };
  const Case cases[] = {
      {"no preference keeps the smallest profile", {}, "3g.20gb", {4, 4}, 20480, 42},
      {"slice class preference", {"4g"}, "4g.20gb", {0, 4}, 20480, 52},
      {"exact profile preference", {"4g.20gb"}, "4g.20gb", {0, 4}, 20480, 52},
      {"preference for another model's profile is ignored on this card",
       {"4g.40gb"},
       "3g.20gb",
       {4, 4},
       20480,
       42},
  };
  for (const Case& c : cases) {
    core::NodeInfo n = MigNode("n1", 1, {0});
    n.devices[0].mig_profiles.push_back({"4g.20gb", 20480, 52, 4, {{0, 4}}});
    auto s = Make({n});
    core::PodRequest pod = PodBuilder("p").Gpu(1, 20000, 0);
    pod.selectors.mig_profile_preference = c.preference;
    auto d = s->ScheduleAndReserve(pod, nullptr);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.status();
    ASSERT_EQ(d->node, "n1") << c.name;
    const core::ContainerDevice& cd = d->allocation.containers.at(0).at(0);
    EXPECT_EQ(cd.mig_profile, c.want) << c.name;
    EXPECT_EQ(cd.mig_placement, c.at) << c.name;
    EXPECT_EQ(cd.usedmem_mib, c.mem) << c.name;
    EXPECT_EQ(cd.usedcores, c.cores) << c.name;
    EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].mig_slices, core::MigSliceMask(c.at)) << c.name;
  }
}

// mig_capability_test.go TestCustomFilterUsesReportedPlacementCapacity: three 2g instances leave
// no fourth 2g but a 1g.
TEST(MigScheduleTest, UpstreamCustomFilterUsesReportedPlacementCapacity) {
  auto s = Make({MigNode("n1", 1, {0})});
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(Place(*s, "p" + std::to_string(i), 10000).profile, "2g.10gb");
  EXPECT_EQ(WhyNot(*s, 10000), "1/1 CardMigTopologyInfeasible");
  EXPECT_EQ(Place(*s, "small", 5000).profile, "1g.5gb");
}

TEST(MigScheduleTest, ModesAndNeverFits) {
  struct Case {
    const char* name;
    std::vector<int> mig;  // MIG-mode devices of a 2-GPU node
    int64_t mem;
    int cores;
    std::string mode;
    const char* want;  // profile, "plain" (hami-core grant) or the failure
  };
  const Case cases[] = {
      {"no mode asked, MIG card: a MIG instance", {0, 1}, 5000, 0, "", "1g.5gb"},
      {"mig asked, one MIG card of two", {1}, 5000, 0, "mig", "1g.5gb"},
      {"hami-core asked, only MIG cards",
       {0, 1},
       5000,
       0,
       "hami-core",
       "2/2 CardTypeMismatch (never)"},
      {"mig asked, no MIG card", {}, 5000, 0, "mig", "2/2 CardTypeMismatch (never)"},
      {"hami-core asked, one MIG card of two", {0}, 5000, 0, "hami-core", "plain"},
      {"bigger than every profile", {0, 1}, 30000, 0, "", "2/2 CardMigTopologyInfeasible (never)"},
      {"cores choose the profile", {0, 1}, 5000, 30, "", "3g.20gb"},
  };
  for (const Case& c : cases) {
    auto s = Make({MigNode("n1", 2, c.mig)});
    core::PodRequest pod = PodBuilder("p").Gpu(1, c.mem, c.cores);
    pod.selectors.vgpu_mode = c.mode;
    ScheduleOptions o;
    o.explain = true;
    auto d = s->Schedule(pod, nullptr, o);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.status();
    std::string got;
    if (!d->node.empty()) {
      const auto& cd = d->allocation.containers[0][0];
      got = cd.mig_profile.empty() ? "plain" : cd.mig_profile;
      const bool on_mig = core::IsMigDevice(s->cache().Snapshot("n1")->info.devices[cd.index]);
      EXPECT_EQ(on_mig, !cd.mig_profile.empty()) << c.name;
    } else {
      ASSERT_FALSE(d->failures.empty()) << c.name;
      got = d->failures[0].reason + (d->failures[0].retryable ? "" : " (never)");
    }
    EXPECT_EQ(got, c.want) << c.name;
  }
}

// Two containers of one pod on the one MIG card get two instances that do not overlap; the pod's
// effective usage holds both.
TEST(MigScheduleTest, ContainersOfOnePodGetSeparateInstances) {
  auto s = Make({MigNode("n1", 1, {0})});
  core::PodRequest pod = PodBuilder("p").Gpu(1, 10000, 0).Gpu(1, 10000, 0);
  auto d = s->ScheduleAndReserve(pod, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->node, "n1");
  const auto& a = d->allocation.containers[0][0];
  const auto& b = d->allocation.containers[1][0];
  EXPECT_EQ(a.mig_profile, "2g.10gb");
  EXPECT_EQ(b.mig_profile, "2g.10gb");
  EXPECT_EQ(core::MigSliceMask(a.mig_placement) & core::MigSliceMask(b.mig_placement), 0u);
  const auto n = s->cache().Snapshot("n1");
  EXPECT_EQ(n->usage[0].mig_slices,
            core::MigSliceMask(a.mig_placement) | core::MigSliceMask(b.mig_placement));
  EXPECT_EQ(n->usage[0].usedmem_mib, 2 * 10240);
}

// After a restart the cache is rebuilt from the pods' decisions: a recorded MIG grant takes its
// slices, so the next pod is placed around it; removing it frees them.
TEST(MigScheduleTest, RebuiltGrantsHoldTheirSlices) {
  auto s = Make({MigNode("n1", 1, {0})});
  core::PodAllocation a;
  a.node = "n1";
  core::ContainerDevice cd{"n1-gpu0", core::kNvidiaVendor, 20480, 42};
  cd.mig_profile = "3g.20gb";
  cd.mig_placement = {4, 4};
  a.containers = {{cd}};
  ASSERT_TRUE(s->AddPod("old", a).ok());
  EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].mig_slices, 0xf0u);
  EXPECT_EQ(Place(*s, "new", 20000).placement, (core::MigPlacement{0, 4}));
  EXPECT_EQ(WhyNot(*s, 20000), "1/1 CardMigTopologyInfeasible");
  ASSERT_TRUE(s->RemovePod("old").ok());
  EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].mig_slices, 0x0fu);
}

// A decision on a MIG-mode GPU without its MIG entry (a plain grant, e.g. written by an older HAMi)
// blocks the GPU, which then reads as unhealthy (upstream's TestGetNodesUsageFailsClosedWithout-
// MigAllocation; end to end in StateTest.UpstreamTestGetNodesUsageFailsClosedWithoutMigAllocation).
// The cache counts such grants per GPU: the slice mask cannot say it (a plain grant has no slices),
// so the GPU opens only when the last of them leaves, whatever MIG grants come and go meanwhile.
TEST(MigScheduleTest, PlainGrantsBlockAMigGpuUntilTheLastLeaves) {
  // n1's one GPU is in MIG mode, n2's is a hami-core A100.
  auto s = Make({MigNode("n1", 1, {0}), MigNode("n2", 1, {})});
  auto grant = [](const std::string& node, const std::string& profile, int start) {
    core::PodAllocation a;
    a.node = node;
    core::ContainerDevice cd{node + "-gpu0", core::kNvidiaVendor, 5120, 14};
    cd.mig_profile = profile;
    if (!profile.empty()) cd.mig_placement = {start, 1};
    a.containers = {{cd}};
    return a;
  };
  const std::vector<std::string> n1 = {"n1"};
  auto why_not = [&] {  // a 1g pod filtered against n1
    ScheduleOptions o;
    o.explain = true;
    auto d = s->Schedule(PodBuilder("why").Gpu(1, 5000, 0), &n1, o);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok() || !d->node.empty() || d->failures.empty()) return std::string("placed");
    return d->failures[0].reason + (d->failures[0].retryable ? "" : " (never)");
  };
  auto blocked = [&](const char* node) { return s->cache().Snapshot(node)->plain_on_mig.at(0); };
  struct Step {
    const char* what;
    bool add;  // else remove
    const char* uid;
    core::PodAllocation allocation;
    int blocked;  // n1's plain_on_mig after the step
    const char* filter;
  };
  const Step steps[] = {
      {"a MIG grant", true, "m1", grant("n1", "1g.5gb", 6), 0, "placed"},
      {"a plain grant", true, "a", grant("n1", "", 0), 1, "1/1 CardNotHealth"},
      {"a second one", true, "b", grant("n1", "", 0), 2, "1/1 CardNotHealth"},
      {"one leaves", false, "a", {}, 1, "1/1 CardNotHealth"},
      {"the MIG grant leaves", false, "m1", {}, 1, "1/1 CardNotHealth"},
      {"a MIG grant comes", true, "m2", grant("n1", "1g.5gb", 0), 1, "1/1 CardNotHealth"},
      {"the last leaves", false, "b", {}, 0, "placed"},
  };
  for (const Step& st : steps) {
    SCOPED_TRACE(st.what);
    ASSERT_TRUE((st.add ? s->AddPod(st.uid, st.allocation) : s->RemovePod(st.uid)).ok());
    EXPECT_EQ(blocked("n1"), st.blocked);
    EXPECT_EQ(why_not(), st.filter);
  }
  EXPECT_EQ(s->cache().Snapshot("n1")->usage[0].mig_slices, 0x01u);  // m2's slice only
  // A plain grant is what a hami-core GPU takes: nothing is blocked.
  ASSERT_TRUE(s->AddPod("shared", grant("n2", "", 0)).ok());
  EXPECT_EQ(blocked("n2"), 0);

  // A decision made before the block does not commit after it.
  core::PodRequest late = PodBuilder("late").Gpu(1, 5000, 0);
  auto d = s->Schedule(late, &n1);
  ASSERT_TRUE(d.ok() && d->node == "n1") << d.status();
  ASSERT_TRUE(s->AddPod("c", grant("n1", "", 0)).ok());
  EXPECT_TRUE(absl::IsAborted(s->Reserve(late, *d)));

  // The count follows the registration: registered hami-core the GPU is not blocked, back in mig
  // mode it is again.
  s->UpsertNode(MigNode("n1", 1, {}));
  EXPECT_EQ(blocked("n1"), 0);
  EXPECT_EQ(why_not(), "placed");
  s->UpsertNode(MigNode("n1", 1, {0}));
  EXPECT_EQ(blocked("n1"), 1);
  EXPECT_EQ(why_not(), "1/1 CardNotHealth");
  ASSERT_TRUE(s->RemovePod("c").ok());
  EXPECT_EQ(why_not(), "placed");
}

// A reservation whose placement was taken meanwhile (a concurrent decision on a copy of the node)
// does not commit.
TEST(MigScheduleTest, ReserveRefusesATakenPlacement) {
  auto s = Make({MigNode("n1", 1, {0})});
  core::PodRequest p1 = PodBuilder("p1").Gpu(1, 20000, 0);
  core::PodRequest p2 = PodBuilder("p2").Gpu(1, 20000, 0);
  auto d1 = s->Schedule(p1, nullptr);
  auto d2 = s->Schedule(p2, nullptr);
  ASSERT_TRUE(d1.ok() && d2.ok());
  ASSERT_TRUE(s->Reserve(p1, *d1).ok());
  EXPECT_TRUE(absl::IsAborted(s->Reserve(p2, *d2)));
  auto again = s->ScheduleAndReserve(p2, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->allocation.containers[0][0].mig_placement, (core::MigPlacement{0, 4}));
}

// One container asking n GPUs on a node whose only GPU is in MIG mode gets n instances of that GPU
// (upstream's Fit looks at a MIG device again), each at its own placement, all charged.
TEST(MigScheduleTest, OneContainerAskingSeveralGpusGetsInstancesOfOneMigGpu) {
  struct Case {
    const char* name;
    int gpus;
    int64_t mem;
    std::vector<std::string> preference;
    std::vector<std::pair<std::string, core::MigPlacement>> want;  // empty: does not fit
  };
  const Case cases[] = {
      {"two 2g", 2, 10000, {}, {{"2g.10gb", {0, 2}}, {"2g.10gb", {2, 2}}}},
      {"three 2g fill the 2g placements",
       3,
       10000,
       {},
       {{"2g.10gb", {0, 2}}, {"2g.10gb", {2, 2}}, {"2g.10gb", {4, 2}}}},
      {"a fourth 2g has no placement", 4, 10000, {}, {}},
      {"seven 1g",
       7,
       5000,
       {},
       {{"1g.5gb", {6, 1}},
        {"1g.5gb", {5, 1}},
        {"1g.5gb", {4, 1}},
        {"1g.5gb", {3, 1}},
        {"1g.5gb", {2, 1}},
        {"1g.5gb", {1, 1}},
        {"1g.5gb", {0, 1}}}},
      // mig_preference_test.go TestPlanMigContainerFallsBackSequentiallyWhenJointFails: the first
      // keeps the preference, the second takes the remaining 3g span.
      {"preferred 4g, then 3g", 2, 20000, {"4g"}, {{"4g.20gb", {0, 4}}, {"3g.20gb", {4, 4}}}},
      // TestPlanMigContainerNeverRejectsForAPreference: 3g first leaves no room for three
      // instances, so the default order places them.
      {"a preference that does not fit yields",
       3,
       10000,
       {"3g"},
       {{"2g.10gb", {0, 2}}, {"2g.10gb", {2, 2}}, {"2g.10gb", {4, 2}}}},
      {"three 20 GB never fit", 3, 20000, {"4g"}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    core::NodeInfo n = MigNode("n1", 1, {0});
    n.devices[0].mig_profiles.push_back({"4g.20gb", 20480, 52, 4, {{0, 4}}});
    auto s = Make({n});
    core::PodRequest pod = PodBuilder("p").Gpu(c.gpus, c.mem, 0);
    pod.selectors.mig_profile_preference = c.preference;
    auto d = s->ScheduleAndReserve(pod, nullptr);
    ASSERT_TRUE(d.ok()) << d.status();
    if (c.want.empty()) {
      EXPECT_EQ(d->node, "");
      continue;
    }
    ASSERT_EQ(d->node, "n1");
    const auto& devs = d->allocation.containers.at(0);
    std::vector<std::pair<std::string, core::MigPlacement>> got;
    core::DeviceUsage sum;
    for (const auto& cd : devs) {
      EXPECT_EQ(cd.uuid, "n1-gpu0");
      got.push_back({cd.mig_profile, cd.mig_placement});
      sum.used += 1;
      sum.usedmem_mib += cd.usedmem_mib;
      sum.usedcores += cd.usedcores;
      EXPECT_EQ(sum.mig_slices & core::MigSliceMask(cd.mig_placement), 0u) << "overlap";
      sum.mig_slices |= core::MigSliceMask(cd.mig_placement);
    }
    EXPECT_EQ(got, c.want);
    EXPECT_EQ(s->cache().Snapshot("n1")->usage[0], sum);
    // After a restart the decision is read back from its records: the same usage.
    auto fresh = Make({n});
    ASSERT_TRUE(fresh->AddPod("p", d->allocation).ok());
    EXPECT_EQ(fresh->cache().Snapshot("n1")->usage[0], sum);
    ASSERT_TRUE(fresh->RemovePod("p").ok());
    EXPECT_EQ(fresh->cache().Snapshot("n1")->usage[0], core::DeviceUsage{});
  }
}

// Where the fitting GPUs are enough, a request takes distinct GPUs (one instance each; upstream
// would put both instances on the first MIG GPU: docs/migration.md); a plain GPU and a MIG GPU
// together hold three when the MIG GPU takes two instances.
TEST(MigScheduleTest, DistinctGpusFirstThenMoreInstances) {
  {
    auto s = Make({MigNode("n1", 2, {0, 1})});
    auto d = s->ScheduleAndReserve(PodBuilder("p").Gpu(2, 10000, 0), nullptr);
    ASSERT_TRUE(d.ok() && d->node == "n1");
    const auto& devs = d->allocation.containers.at(0);
    ASSERT_EQ(devs.size(), 2u);
    EXPECT_NE(devs[0].uuid, devs[1].uuid);
  }
  auto s = Make({MigNode("n1", 2, {1})});
  auto d = s->ScheduleAndReserve(PodBuilder("p").Gpu(3, 10000, 0), nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->node, "n1");
  std::map<std::string, int> per_gpu;
  for (const auto& cd : d->allocation.containers.at(0)) ++per_gpu[cd.uuid + "/" + cd.mig_profile];
  EXPECT_EQ(per_gpu, (std::map<std::string, int>{{"n1-gpu0/", 1}, {"n1-gpu1/2g.10gb", 2}}));
  // A MIG GPU that fits one instance but not all: it says so (retryable).
  {
    auto full = Make({MigNode("n3", 1, {0})});
    ScheduleOptions o;
    o.explain = true;
    auto d4 = full->Schedule(PodBuilder("four").Gpu(4, 10000, 0), nullptr, o);
    ASSERT_TRUE(d4.ok());
    EXPECT_EQ(d4->node, "");
    ASSERT_FALSE(d4->failures.empty());
    EXPECT_EQ(d4->failures[0].reason, "1/1 CardMigTopologyInfeasible");
    EXPECT_TRUE(d4->failures[0].retryable);
  }
  // numa-bind keeps to distinct GPUs of one NUMA node: a single MIG GPU does not take two.
  auto one = Make({MigNode("n2", 1, {0})});
  core::PodRequest numa = PodBuilder("q").Gpu(2, 10000, 0);
  numa.selectors.numa_bind = true;
  auto none = one->Schedule(numa, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->node, "");
}

}  // namespace
}  // namespace hami::scheduler
