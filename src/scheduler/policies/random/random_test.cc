#include <set>

#include "gtest/gtest.h"
#include "scheduler/testing/harness.h"
#include "scheduler/testing/sim_like.h"

namespace hami::scheduler {
namespace {
using namespace testing;

std::vector<std::string> PlaceAll(uint64_t seed) {
  Rng rng(seed);
  // c is too small for the pods (CPU), so it must never be chosen.
  auto s = MakeCluster("random", {SimNode("a", 4), SimNode("b", 4), SimNode("c", 4, 500)});
  std::vector<std::string> out;
  ScheduleOptions o;
  o.rng = &rng;
  for (int i = 0; i < 24; ++i) {
    auto d = s->ScheduleAndReserve(SimPod("p" + std::to_string(i), 1, 100), nullptr, o);
    EXPECT_TRUE(d.ok());
    out.push_back(Describe(*d));
  }
  return out;
}

TEST(RandomTest, UniformOverFeasibleNodesAndGpusAndReproducible) {
  auto a = PlaceAll(7);
  EXPECT_EQ(a, PlaceAll(7));
  EXPECT_NE(a, PlaceAll(8));
  std::set<std::string> nodes, gpus;
  for (const auto& d : a) {
    nodes.insert(d.substr(0, d.find(':')));
    gpus.insert(d.substr(d.find(':') + 1));
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"a", "b"}));
  EXPECT_GE(gpus.size(), 6u);  // 8 fitting GPUs, 24 draws
}

}  // namespace
}  // namespace hami::scheduler
