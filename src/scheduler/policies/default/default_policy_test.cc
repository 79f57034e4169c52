#include "scheduler/policies/default/default_policy.h"

#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;

TEST(ProfileForTest, PodAnnotationsChooseThePolicy) {
  struct Case {
    const char* configured;
    const char* gpu_policy;
    const char* node_policy;
    const char* want;
  };
  const Case cases[] = {
      {"hami", "", "", "hami"},
      {"hami", "fgd", "", "fgd"},
      {"hami", "default", "", "default"},
      {"hami", "binpack", "", "hami"},
      {"default", "", "", "default"},
      {"default", "binpack", "", "hami"},  // upstream annotations keep upstream semantics
      {"default", "", "spread", "hami"},
      {"default", "fgd", "", "fgd"},
      {"default", "default", "", "default"},
      {"best-fit", "fgd", "", "fgd"},
      {"hami-binpack", "spread", "",
       "hami-binpack"},  // HAMi profiles read the annotations themselves
  };
  for (const auto& c : cases) {
    SchedulerOptions o;
    o.policy = c.configured;
    auto s = Scheduler::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    core::PodRequest pod = SimPod("p", 1, 500).Build();
    pod.gpu_policy = c.gpu_policy;
    pod.node_policy = c.node_policy;
    EXPECT_EQ((*s)->ProfileFor(pod).name, c.want)
        << c.configured << " / " << c.gpu_policy << " / " << c.node_policy;
  }
}

TEST(DefaultPolicyTest, ClosesAHoleLikeFgd) {
  // Node a has a GPU with exactly 500 free; node b is empty. A 500 task closes a's hole (FGD's
  // behaviour, kept by fgd-balance where CPU is plentiful).
  auto s = MakeCluster("default", {SimNode("a", 2), SimNode("b", 2)},
                       {SimPod("x", 1, 500).UseUuid("a-gpu0")});
  auto d = s->Schedule(SimPod("p", 1, 500).Build(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), "a:a-gpu0");
}

TEST(DefaultPolicyTest, PlacesAsFgdBalance) {
  // The cluster of FgdBalanceTest.KeepsCpuNextToFreeGpus: a CPU-only pod that would leave node a
  // with too little CPU for its free GPUs goes to b (fgd sends it to a).
  auto s = MakeCluster("default", {SimNode("a", 2, 8000), SimNode("b", 2, 64000)},
                       {SimPod("pinned", 1, 1000, 2000).UseUuid("b-gpu0")});
  auto d = s->Schedule(SimPod("cpu", 0, 0, 6000).Build(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->node, "b");
}

TEST(DefaultPolicyTest, PodsSelectingFgdLearnTheirOwnShapes) {
  // A scheduler configured with hami places a pod that asks for fgd through the fgd profile.
  auto s = MakeCluster("hami", {SimNode("a", 2), SimNode("b", 2)},
                       {SimPod("x", 1, 500).UseUuid("a-gpu0")});
  core::PodRequest pod = SimPod("p", 1, 500).Build();
  pod.gpu_policy = "fgd";
  auto d = s->Schedule(pod, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(Describe(*d), "a:a-gpu0");
}

}  // namespace
}  // namespace hami::scheduler
