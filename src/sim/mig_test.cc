// MIG nodes in `hami sim` (docs/sim.md, "MIG nodes"): the trace's `mig`, `vgpu_mode` and
// `mig_profile_preference` columns, and a run through the production scheduler in which MIG tasks
// land on instances of the MIG GPUs and the rest shares the other GPUs.
#include "core/mig.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "sim/experiment.h"
#include "sim/trace.h"

namespace hami::sim {
namespace {

TEST(MigTraceTest, Columns) {
  struct Case {
    const char* name;
    std::string nodes;
    const char* want;  // "<set>/<mig_gpus>" of the first node, or the error part
    bool ok;
  };
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model,mig,vendor\n";
  const Case cases[] = {
      {"absent column", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,T4\n", "/0", true},
      {"empty", header + "n,1,1,2,T4,,\n", "/0", true},
      {"every GPU, free model", header + "n,1,1,2,A100,A100-40GB,\n", "A100-40GB/2", true},
      {"the first GPU", header + "n,1,1,2,A100,A100-40GB:1,\n", "A100-40GB/1", true},
      {"unknown set", header + "n,1,1,2,A100,A100-41GB,\n",
       "nodes.csv:2: field mig: unknown MIG profile set 'A100-41GB' (known: A100-40GB, A100-80GB, "
       "H100-80GB)",
       false},
      {"A30 (the fake driver has no table for it)", header + "n,1,1,2,A30,A30,\n",
       "unknown MIG profile set 'A30'", false},
      {"count past the GPUs", header + "n,1,1,2,A100,H100-80GB:3,\n",
       "field mig: '3' is not a GPU count in 1..2", false},
      {"count zero", header + "n,1,1,2,A100,H100-80GB:0,\n", "field mig: '0' is not a GPU count",
       false},
      {"count not a number", header + "n,1,1,2,A100,H100-80GB:x,\n", "field mig: 'x'", false},
      {"no GPUs", header + "n,1,1,0,,H100-80GB,\n", "field mig: the node has no GPUs", false},
      {"another vendor", header + "n,1,1,2,Z100L,H100-80GB,hygon\n", "MIG is NVIDIA's", false},
      {"a MIG node needs a model", header + "n,1,1,2,,H100-80GB,\n", "field model: empty model",
       false},
      {"a plain NVIDIA node keeps the openb models", header + "n,1,1,2,A100,,\n",
       "unknown GPU model 'A100'", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseNodesCsv(c.nodes, "nodes.csv");
    ASSERT_EQ(n.ok(), c.ok) << n.status();
    if (c.ok) {
      EXPECT_EQ(StrCat((*n)[0].mig, "/", (*n)[0].mig_gpus), c.want);
    } else {
      EXPECT_NE(std::string(n.status().message()).find(c.want), std::string::npos) << n.status();
    }
  }
  const std::string pod_header =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,vgpu_mode,mig_profile_preference,vendor\n";
  auto pods =
      ParsePodsCsv(pod_header + "a,1,1,1,500,mig, 4g | 3g.20gb|4g,\nb,1,1,1,500,,,\n", "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)[0].vgpu_mode, "mig");
  EXPECT_EQ((*pods)[0].mig_profile_preference, (std::vector<std::string>{"4g", "3g.20gb"}));
  EXPECT_EQ((*pods)[1].vgpu_mode, "");
  for (const auto& [row, error] :
       {std::pair{"a,1,1,1,500,vgpu,,",
                  "pods.csv:2: field vgpu_mode: 'vgpu' is not hami-core, mig or mps"},
        std::pair{"a,1,1,1,500,mig,,hygon", "are NVIDIA's; the task's vendor is hygon"}}) {
    auto bad = ParsePodsCsv(pod_header + row + "\n", "pods.csv");
    ASSERT_FALSE(bad.ok()) << row;
    EXPECT_NE(std::string(bad.status().message()).find(error), std::string::npos) << bad.status();
  }
}

// A MIG GPU of the trace registers as the set says: mig mode, the GPU's memory and the profiles a
// node on the fake driver registers for it (NVML's MiB, cores = SMs in percent of the whole GPU's,
// rounded down, no "+me" profile; the same through the device plugin's code: SimMigRegistrationTest
// in src/cmd).
TEST(MigTraceTest, NodesRegisterTheirProfileSet) {
  TraceNode node{"m", 64000, 262144, 2, "A100"};
  node.mig = "A100-40GB";
  node.mig_gpus = 1;
  const core::NodeInfo n = ToNodeInfo(node, "0001-m");
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_TRUE(core::IsMigDevice(n.devices[0]));
  EXPECT_EQ(n.devices[0].devmem_mib, 40960);
  EXPECT_TRUE(core::ValidateMigRegistration(n.devices[0]).ok());
  EXPECT_FALSE(core::IsMigDevice(n.devices[1]));
  EXPECT_EQ(n.devices[1].devmem_mib, kSimGpuMemMib);
  // "<name> <MiB> <core> <slices> <placements>" per profile.
  auto text = [](const std::vector<core::MigProfile>& ps) {
    std::vector<std::string> out;
    for (const auto& p : ps) {
      std::string at;
      for (const auto& pl : p.placements)
        at += StrCat(at.empty() ? "" : ",", pl.start, "+", pl.size);
      out.push_back(StrCat(p.name, " ", p.memory_mib, " ", p.core, " ", p.slice_count, " ", at));
    }
    return out;
  };
  EXPECT_EQ(text(n.devices[0].mig_profiles),
            (std::vector<std::string>{"1g.5gb 4864 14 1 0+1,1+1,2+1,3+1,4+1,5+1,6+1",
                                      "2g.10gb 9984 28 2 0+2,2+2,4+2", "3g.20gb 20096 42 3 0+4,4+4",
                                      "4g.20gb 20096 57 4 0+4", "7g.40gb 40448 100 7 0+8"}));
  const std::map<std::string, std::vector<std::string>> want = {
      {"A100-40GB", text(n.devices[0].mig_profiles)},
      {"A100-80GB",
       {"1g.10gb 9728 14 1 0+1,1+1,2+1,3+1,4+1,5+1,6+1", "1g.20gb 19968 14 1 0+2,2+2,4+2,6+2",
        "2g.20gb 19968 28 2 0+2,2+2,4+2", "3g.40gb 40192 42 3 0+4,4+4", "4g.40gb 40192 57 4 0+4",
        "7g.80gb 81152 100 7 0+8"}},
      {"H100-80GB",
       {"1g.10gb 9984 12 1 0+1,1+1,2+1,3+1,4+1,5+1,6+1", "1g.20gb 20096 19 1 0+2,2+2,4+2,6+2",
        "2g.20gb 20096 24 2 0+2,2+2,4+2", "3g.40gb 40448 45 3 0+4,4+4", "4g.40gb 40448 48 4 0+4",
        "7g.80gb 81152 100 7 0+8"}},
  };
  std::map<std::string, std::vector<std::string>> have;
  for (const SimMigProfileSet& s : SimMigProfileSets()) {
    core::DeviceInfo d;
    d.uuid = s.name;
    d.mode = core::kModeMig;
    d.mig_profiles = s.profiles;
    EXPECT_TRUE(core::ValidateMigRegistration(d).ok()) << s.name;
    for (const auto& p : s.profiles)
      EXPECT_LE(p.memory_mib, s.memory_mib) << s.name << " " << p.name;
    have[s.name] = text(s.profiles);
  }
  EXPECT_EQ(have, want);
}

// The production scheduler on a cluster with MIG GPUs: a node of two A100-40GB in MIG mode, a node
// with one MIG GPU beside a plain one, and a plain T4 node. Tasks asking mig land only on
// instances, at placements that never overlap; hami-core tasks only on plain GPUs; tasks that name
// no mode may land on either (on a MIG GPU they get an instance).
TEST(MigTraceTest, MigTasksLandOnInstancesTheRestShares) {
  auto nodes = ParseNodesCsv(
      "sn,cpu_milli,memory_mib,gpu,model,mig\n"
      "mig-2,64000,262144,2,A100,A100-40GB\n"
      "mig-1,64000,262144,2,A100,A100-40GB:1\n"
      "t4,64000,262144,2,T4,\n",
      "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto tasks = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,vgpu_mode,mig_profile_preference\n"
      "mig-small,1000,1024,1,100,mig,\n"
      "mig-40,1000,1024,1,400,mig,\n"
      "mig-whole,1000,1024,1,1000,mig,\n"
      "mig-pref,1000,1024,1,500,mig,7g\n"
      "core-a,1000,1024,1,500,hami-core,\n"
      "core-b,1000,1024,1,200,hami-core,\n"
      "any,1000,1024,1,100,,\n",
      "pods.csv");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  for (const char* policy : {"hami", "default", "best-fit"}) {
    SCOPED_TRACE(policy);
    RunConfig config{policy, 42, 1.3};
    config.record_placements = true;
    auto r = RunInflation(*nodes, *tasks, config);
    ASSERT_TRUE(r.ok()) << r.status();
    std::map<std::string, int> placed;                     // by vgpu_mode
    std::map<std::pair<std::string, int>, uint32_t> held;  // (node, device) -> MIG slices
    int on_plain_gpu_without_mode = 0;
    for (const TaskPlacement& p : r->placements) {
      if (p.node.empty()) continue;
      const TraceTask& t = (*tasks)[p.task];
      ++placed[t.vgpu_mode];
      ASSERT_EQ(p.allocation.containers.size(), 1u);
      for (const core::ContainerDevice& cd : p.allocation.containers[0]) {
        const bool mig_gpu = p.node.find("mig-2") != std::string::npos ||
                             (p.node.find("mig-1") != std::string::npos && cd.index == 0);
        EXPECT_EQ(!cd.mig_profile.empty(), mig_gpu) << t.name << " on " << p.node;
        if (t.vgpu_mode == "mig") {
          EXPECT_TRUE(mig_gpu) << t.name << " on " << p.node;
        }
        if (t.vgpu_mode == "hami-core") {
          EXPECT_FALSE(mig_gpu) << t.name << " on " << p.node;
        }
        if (t.vgpu_mode.empty() && !mig_gpu) ++on_plain_gpu_without_mode;
        if (cd.mig_profile.empty()) continue;
        // 16 MiB and 0.1 core per milli: 100 -> 1g.5gb (14 cores); 400 -> 3g.20gb (42 cores);
        // 1000 -> 7g.40gb; 500 -> 4g.20gb (57 cores), or 7g.40gb where the preferred 7g is free.
        const std::map<std::string, std::string> want = {{"mig-small", "1g.5gb"},
                                                         {"mig-40", "3g.20gb"},
                                                         {"mig-whole", "7g.40gb"},
                                                         {"any", "1g.5gb"}};
        if (t.name == "mig-pref") {
          EXPECT_TRUE(cd.mig_profile == "7g.40gb" || cd.mig_profile == "4g.20gb") << cd.mig_profile;
        } else {
          EXPECT_EQ(cd.mig_profile, want.at(t.name)) << t.name;
        }
        uint32_t& slices = held[{p.node, cd.index}];
        const uint32_t mask = core::MigSliceMask(cd.mig_placement);
        EXPECT_EQ(slices & mask, 0u) << t.name << " overlaps on " << p.node << " GPU " << cd.index;
        slices |= mask;
      }
    }
    EXPECT_GT(placed["mig"], 0);
    EXPECT_GT(placed["hami-core"], 0);
    EXPECT_GT(placed[""], 0);
    // The plain GPUs are shared: more hami-core tasks landed than there are plain GPUs.
    EXPECT_GT(placed["hami-core"] + on_plain_gpu_without_mode, 3);
    // Every MIG GPU took instances.
    EXPECT_EQ(held.size(), 3u);
  }
  // The preference on its own: exactly the trace (inflation 1e-9), on empty MIG GPUs.
  auto two = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,vgpu_mode,mig_profile_preference\n"
      "pref,1000,1024,1,500,mig,7g\n"
      "default,1000,1024,1,500,mig,\n",
      "pods.csv");
  ASSERT_TRUE(two.ok()) << two.status();
  RunConfig config{"hami", 42, 1e-9};
  config.record_placements = true;
  auto r = RunInflation(*nodes, *two, config);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->placements.size(), 2u);
  std::map<std::string, std::string> profile;
  for (const TaskPlacement& p : r->placements) {
    ASSERT_FALSE(p.node.empty());
    profile[(*two)[p.task].name] = p.allocation.containers.at(0).at(0).mig_profile;
  }
  EXPECT_EQ(profile,
            (std::map<std::string, std::string>{{"default", "4g.20gb"}, {"pref", "7g.40gb"}}));
}

// The bundled made-up example (data/mig, docs/sim.md "MIG nodes") reads and runs: 10 of its 28 GPUs
// are in MIG mode, and its MIG tasks land on them.
TEST(MigTraceTest, BundledExampleRuns) {
  auto nodes = ReadNodesCsv("data/mig/nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto tasks = ReadPodsCsv("data/mig/pods.csv");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  int gpus = 0, mig = 0;
  for (const TraceNode& n : *nodes) gpus += n.gpus, mig += n.mig_gpus;
  EXPECT_EQ(gpus, 28);
  EXPECT_EQ(mig, 10);
  RunConfig config{"default", 42, 1.3};
  config.record_placements = true;
  auto r = RunInflation(*nodes, *tasks, config);
  ASSERT_TRUE(r.ok()) << r.status();
  int mig_placed = 0;
  for (const TaskPlacement& p : r->placements) {
    if (p.node.empty() || (*tasks)[p.task].vgpu_mode != "mig") continue;
    ++mig_placed;
    for (const auto& cd : p.allocation.containers.at(0)) EXPECT_FALSE(cd.mig_profile.empty());
  }
  EXPECT_GT(mig_placed, 10);
}

}  // namespace
}  // namespace hami::sim
