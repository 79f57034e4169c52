// Threads scheduling and reserving on a small cluster never oversubscribe a device or a node.
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/testing/builders.h"

namespace hami::scheduler {
namespace {

using testing::NodeBuilder;
using testing::PodBuilder;

TEST(ConcurrencyTest, ConcurrentReservationsNeverOversubscribe) {
  SchedulerOptions o;
  o.policy = "hami";
  auto s = Scheduler::Create(o);
  ASSERT_TRUE(s.ok());
  Scheduler& sched = **s;
  for (int i = 0; i < 3; ++i)
    sched.UpsertNode(NodeBuilder("n" + std::to_string(i)).Gpus(2, 10000).Cpu(16000));
  constexpr int kThreads = 4, kPodsPerThread = 40;
  std::vector<int> placed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPodsPerThread; ++i) {
        auto pod = PodBuilder("t" + std::to_string(t) + "-" + std::to_string(i))
                       .Gpu(1, 3000, 20, 500)
                       .Build();
        auto d = sched.ScheduleAndReserve(pod, nullptr);
        if (d.ok() && !d->node.empty()) ++placed[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  int total = 0;
  for (int p : placed) total += p;
  // Capacity: 6 cards x min(10000/3000, 100/20) = 6 x 3 = 18 pods.
  EXPECT_EQ(total, 18);
  for (const auto& name : sched.cache().NodeNames()) {
    auto st = sched.cache().Snapshot(name);
    ASSERT_TRUE(st);
    EXPECT_LE(st->cpu_used, st->info.cpu_milli);
    for (int d = 0; d < st->gpus(); ++d) {
      EXPECT_LE(st->usage[d].usedmem_mib, st->info.devices[d].devmem_mib);
      EXPECT_LE(st->usage[d].usedcores, st->info.devices[d].devcore);
      EXPECT_LE(st->usage[d].used, st->info.devices[d].count);
    }
  }
  EXPECT_EQ(sched.cache().pod_count(), 18u);
}

}  // namespace
}  // namespace hami::scheduler
