#include "scheduler/scheduler.h"

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

}  // namespace
}  // namespace hami::scheduler
