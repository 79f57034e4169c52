#include "sim/report.h"

#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace hami::sim {
namespace {

RunResult FakeRun(const std::string& policy, uint64_t seed, double a100) {
  RunResult r;
  r.policy = policy;
  r.seed = seed;
  r.curve.assign(kCurveMax + 1, 50.0);
  r.curve[100] = a100;
  return r;
}

TEST(ReportTest, SummaryJsonAndSvg) {
  std::vector<RunResult> runs = {FakeRun("best-fit", 42, 92.0), FakeRun("best-fit", 43, 94.0),
                                 FakeRun("best-fit", 44, 93.5), FakeRun("random", 42, 86.0)};
  auto s = Summarize(runs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].policy, "best-fit");
  EXPECT_DOUBLE_EQ(s[0].a100_median, 93.5);
  EXPECT_DOUBLE_EQ(s[0].a100_min, 92.0);
  EXPECT_DOUBLE_EQ(s[0].a100_max, 94.0);
  EXPECT_NEAR(s[0].a100_mean, 93.1666, 1e-3);
  EXPECT_DOUBLE_EQ(Median({1, 4, 2, 3}), 2.5);

  auto j = nlohmann::json::parse(ToJson({"n.csv", "p.csv", 10, 1.3}, {1, 8, 64000, 1024}, runs));
  EXPECT_EQ(j["cluster"]["gpus"], 8);
  ASSERT_EQ(j["runs"].size(), 4u);
  EXPECT_EQ(j["runs"][0]["curve"].size(), 131u);
  EXPECT_EQ(j["runs"][0]["curve"][100][0], 100);
  EXPECT_DOUBLE_EQ(j["runs"][0]["curve"][100][1].get<double>(), 92.0);
  EXPECT_DOUBLE_EQ(j["summary"][0]["a100_median"].get<double>(), 93.5);
  for (const char* key :
       {"policy", "seed", "tasks_arrived", "tasks_scheduled", "tasks_failed", "wall_seconds"})
    EXPECT_TRUE(j["runs"][0].contains(key)) << key;

  std::string svg = ToSvg(runs, "t <&>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("best-fit"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;&amp;>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 10, true);
  EXPECT_NE(ToTable(runs, true).find("92.91"),
            std::string::npos);  // published best-fit value shown
}

TEST(ReportTest, PlacementsCsv) {
  std::vector<TraceTask> tasks(2);
  tasks[0] = {"p0", 4000, 1024, 2, 1000, {"V100M16", "V100M32"}};
  tasks[1] = {"p1", 500, 64, 0, 0, {}};
  RunResult r = FakeRun("default", 7, 90.0);
  core::PodAllocation a;
  a.containers.push_back({{"n-gpu1", core::kNvidiaVendor, 16000, 100, 1},
                          {"n-gpu3", core::kNvidiaVendor, 16000, 100, 3}});
  r.placements = {{0, "0003-n", a}, {1, "", {}}, {0, "", {}}};
  struct Case {
    size_t line;
    std::string want;
  };
  const std::vector<Case> cases = {
      {0,
       "policy,seed,event,task,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,node,devices"},
      {1, "default,7,0,0,p0,4000,1024,2,1000,V100M16|V100M32,0003-n,1:1000|3:1000"},
      {2, "default,7,1,1,p1,500,64,0,0,,,"},
      {3, "default,7,2,0,p0,4000,1024,2,1000,V100M16|V100M32,,"},
  };
  std::vector<std::string> lines;
  std::stringstream ss(ToPlacementsCsv({r}, tasks));
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), cases.size());
  for (const Case& c : cases) EXPECT_EQ(lines[c.line], c.want) << c.line;
}

}  // namespace
}  // namespace hami::sim
