// MPS nodes in `hami sim` (docs/sim.md, "MPS nodes"): the node file's `mode` column and the pod
// file's `vgpu_mode: mps`, run through the production scheduler: mps tasks land only on the MPS
// node's GPUs, hami-core tasks only on the others, tasks naming no mode on either.
#include <gtest/gtest.h>

#include <map>

#include "core/annotations.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::sim {
namespace {

TEST(MpsTraceTest, ModeColumn) {
  struct Case {
    const char* name;
    std::string nodes;
    bool mps;
    const char* error;  // nullptr: parses
  };
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model,mode,mig,vendor\n";
  const Case cases[] = {
      {"absent column", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,T4\n", false, nullptr},
      {"empty", header + "n,1,1,2,T4,,,\n", false, nullptr},
      {"hami-core", header + "n,1,1,2,T4,hami-core,,\n", false, nullptr},
      {"mps", header + "n,1,1,2,T4,mps,,\n", true, nullptr},
      {"unknown mode", header + "n,1,1,2,T4,mig,,\n", false,
       "nodes.csv:2: field mode: 'mig' is not hami-core or mps"},
      {"no GPUs", header + "n,1,1,0,,mps,,\n", false, "field mode: the node has no GPUs"},
      {"another vendor", header + "n,1,1,2,Z100L,mps,,hygon\n", false, "MPS is NVIDIA's"},
      {"one operating mode per node", header + "n,1,1,2,A100,mps,A100-40GB,\n", false,
       "field mode: mps and the MIG set A100-40GB exclude each other"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseNodesCsv(c.nodes, "nodes.csv");
    ASSERT_EQ(n.ok(), c.error == nullptr) << n.status();
    if (n.ok()) {
      EXPECT_EQ((*n)[0].mps, c.mps);
      const core::NodeInfo info = ToNodeInfo((*n)[0], "0001-n");
      for (const auto& d : info.devices) EXPECT_EQ(d.mode, c.mps ? "mps" : "") << d.uuid;
    } else {
      EXPECT_NE(std::string(n.status().message()).find(c.error), std::string::npos) << n.status();
    }
  }
  auto pods = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,vgpu_mode\na,1,1,1,500,mps\n", "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)[0].vgpu_mode, "mps");
}

TEST(MpsTraceTest, MpsTasksLandOnTheMpsNode) {
  auto nodes = ParseNodesCsv(
      "sn,cpu_milli,memory_mib,gpu,model,mode\n"
      "mps,64000,262144,2,T4,mps\n"
      "core,64000,262144,2,T4,\n",
      "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto tasks = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,vgpu_mode\n"
      "mps-a,1000,1024,1,300,mps\n"
      "mps-b,1000,1024,1,200,mps\n"
      "core-a,1000,1024,1,300,hami-core\n"
      "any,1000,1024,1,100,\n",
      "pods.csv");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  for (const char* policy : {"hami", "default", "best-fit"}) {
    SCOPED_TRACE(policy);
    RunConfig config{policy, 42, 1.3};
    config.record_placements = true;
    auto r = RunInflation(*nodes, *tasks, config);
    ASSERT_TRUE(r.ok()) << r.status();
    std::map<std::string, int> placed;  // by vgpu_mode
    for (const TaskPlacement& p : r->placements) {
      if (p.node.empty()) continue;
      const TraceTask& t = (*tasks)[p.task];
      ++placed[t.vgpu_mode];
      const bool on_mps = p.node.find("-mps") != std::string::npos;
      if (t.vgpu_mode == core::kModeMps) {
        EXPECT_TRUE(on_mps) << t.name << " on " << p.node;
      }
      if (t.vgpu_mode == core::kModeHamiCore) {
        EXPECT_FALSE(on_mps) << t.name << " on " << p.node;
      }
    }
    // Both GPUs of each node are shared by several tasks of their mode.
    EXPECT_GT(placed["mps"], 2);
    EXPECT_GT(placed["hami-core"], 2);
    EXPECT_GT(placed[""], 0);
  }
}

}  // namespace
}  // namespace hami::sim
