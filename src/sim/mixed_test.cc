// Heterogeneous traces: the optional vendor column, vendor resolution, and a mixed cluster run
// through the production scheduler with the vendors' rules.
#include <gtest/gtest.h>

#include "sim/experiment.h"
#include "sim/report.h"
#include "sim/trace.h"
#include "vendors/config.h"

namespace hami::sim {
namespace {

// One task of a mixed trace: 1 CPU, 1 GiB, `gpus` devices of `milli` each of `vendor`.
TraceTask task(const char* name, int gpus, int milli, const char* vendor) {
  TraceTask t;
  t.name = name;
  t.cpu_milli = 1000;
  t.memory_mib = 1024;
  t.num_gpu = gpus;
  t.gpu_milli = milli;
  t.vendor = vendor;
  return t;
}

TEST(MixedTraceTest, VendorColumnTable) {
  struct Case {
    const char* name;
    std::string nodes;
    std::string want_vendor;  // of the first node; or the error part
    bool ok;
  };
  const Case cases[] = {
      {"absent: NVIDIA", "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\n", "", true},
      {"nvidia in any case: NVIDIA",
       "sn,cpu_milli,memory_mib,gpu,model,vendor\nn,1,1,1,T4,NVidia\n", "", true},
      {"empty: NVIDIA", "sn,cpu_milli,memory_mib,gpu,model,vendor\nn,1,1,1,T4,\n", "", true},
      {"other vendor, free model",
       "sn,cpu_milli,memory_mib,gpu,model,vendor\nn,1,1,1,Z100L,hygon\n", "hygon", true},
      {"NVIDIA keeps the openb models",
       "sn,cpu_milli,memory_mib,gpu,model,vendor\nn,1,1,1,Z100L,nvidia\n",
       "nodes.csv:2: field model: unknown GPU model 'Z100L'", false},
      {"other vendor needs a model", "sn,cpu_milli,memory_mib,gpu,model,vendor\nn,1,1,1,,DCU\n",
       "nodes.csv:2: field model: empty model", false},
      {"vendor is one token", "sn,cpu_milli,memory_mib,gpu,model,vendor\nn,1,1,1,X,a b\n",
       "nodes.csv:2: field vendor: 'a b' is not a vendor name", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto n = ParseNodesCsv(c.nodes, "nodes.csv");
    ASSERT_EQ(n.ok(), c.ok) << n.status();
    if (c.ok) {
      EXPECT_EQ((*n)[0].vendor, c.want_vendor);
    } else {
      EXPECT_NE(std::string(n.status().message()).find(c.want_vendor), std::string::npos)
          << n.status();
    }
  }
  auto pods = ParsePodsCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,vendor\n"
      "a,1,1,1,500,T4,\nb,1,1,1,500,Z100L,DCU\n",
      "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)[0].vendor, "");
  EXPECT_EQ((*pods)[1].vendor, "DCU");
  EXPECT_EQ((*pods)[1].gpu_spec, std::vector<std::string>{"Z100L"});
}

TEST(MixedTraceTest, ResolveVendorsNamesTheRow) {
  vendors::VendorSet set(vendors::AllVendorsWithDefaults());
  std::vector<TraceNode> nodes = {
      {"a", 1, 1, 1, "T4", ""}, {"b", 1, 1, 1, "Z100L", "hygon"}, {"c", 1, 1, 1, "x", "nvidia"}};
  std::vector<TraceTask> tasks(1);
  tasks[0].name = "t";
  tasks[0].vendor = "mlu";
  ASSERT_TRUE(ResolveVendors(set, &nodes, &tasks).ok());
  EXPECT_EQ(nodes[1].vendor, "DCU");
  EXPECT_EQ(nodes[2].vendor, "") << "NVIDIA is the empty vendor";
  EXPECT_EQ(tasks[0].vendor, "MLU");
  nodes[0].vendor = "tpu";
  Status s = ResolveVendors(set, &nodes, &tasks);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("node a: vendor 'tpu' is not enabled"), std::string::npos)
      << s;
}

// Three nodes of three vendors; every task asks one vendor. A task lands only on its vendor's GPUs,
// and the vendor rules apply: Kunlun whole XPUs come in counts of 1, 2, 4, 8, so a 3-XPU task never
// fits.
TEST(MixedTraceTest, RunPlacesEachTaskOnItsVendor) {
  vendors::VendorSet set(vendors::AllVendorsWithDefaults());
  std::vector<TraceNode> nodes = {{"gpu", 64000, 262144, 2, "T4", ""},
                                  {"dcu", 64000, 262144, 2, "Z100L", "hygon"},
                                  {"xpu", 64000, 262144, 4, "P800", "kunlun"}};
  struct Case {
    const char* name;
    std::vector<TraceTask> tasks;
    int64_t scheduled;
  };
  const Case cases[] = {
      {"each vendor's share fits",
       {task("a", 1, 500, ""), task("b", 1, 500, "hygon"), task("c", 1, 1000, "kunlun")},
       3},
      {"a vendor with no node", {task("a", 1, 500, "mlu")}, 0},
      {"kunlun counts: 3 is not allowed, 4 is",
       {task("three", 3, 1000, "kunlun"), task("four", 4, 1000, "kunlun")},
       1},
      {"dcu: three whole cards on a 2-card node", {task("d", 3, 1000, "hygon")}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto ns = nodes;
    auto ts = c.tasks;
    ASSERT_TRUE(ResolveVendors(set, &ns, &ts).ok());
    // inflation 1e-9: exactly the trace, no resampled copies.
    auto r = RunInflation(ns, ts, {"hami", 42, 1e-9, &set});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tasks_scheduled, c.scheduled);
    EXPECT_EQ(r->tasks_arrived, static_cast<int64_t>(ts.size()));
  }
  // The per-vendor counts of one run: NVIDIA 1/1, DCU 1/1, kunlun 1/1 for the first case above.
  auto ns = nodes;
  auto first = cases[0].tasks;
  ASSERT_TRUE(ResolveVendors(set, &ns, &first).ok());
  auto r0 = RunInflation(ns, first, {"hami", 42, 1e-9, &set});
  ASSERT_TRUE(r0.ok());
  ASSERT_EQ(r0->by_vendor.size(), 3u);
  EXPECT_EQ(r0->by_vendor.at("DCU").arrived, 1);
  EXPECT_EQ(r0->by_vendor.at("DCU").scheduled, 1);
  EXPECT_EQ(r0->by_vendor.at("NVIDIA").scheduled, 1);
  auto ts = std::vector<TraceTask>{task("b", 1, 500, "DCU")};
  auto r = RunInflation(nodes, ts, {"hami", 42, 1.0, &vendors::VendorSet::NvidiaOnly()});
  EXPECT_FALSE(r.ok()) << "a mixed trace on a set without its vendors is an error";
}

// The backends added later (AWS Neuron, Vastai, Biren, Intel) in one mixed trace beside NVIDIA:
// each task lands on its vendor, and Neuron's topology applies (off Inferentia several devices come
// in aligned blocks of 1, 4, 8 or 16: 2 never fits on a Trainium node, 4 does).
TEST(MixedTraceTest, RunIncludesTheNewerVendors) {
  vendors::VendorSet set(vendors::AllVendorsWithDefaults());
  std::vector<TraceNode> nodes = {{"gpu", 64000, 262144, 2, "T4", ""},
                                  {"trn", 64000, 262144, 8, "trn1.32xlarge", "awsneuron"},
                                  {"va", 64000, 262144, 2, "VA1", "vastai"},
                                  {"br", 64000, 262144, 2, "BR104", "biren"},
                                  {"i915", 64000, 262144, 2, "Flex170", "intel"}};
  std::vector<TraceTask> tasks = {task("cuda", 1, 500, ""),
                                  task("neuron", 1, 1000, "awsneuron"),
                                  task("va", 1, 500, "vastai"),
                                  task("br", 2, 1000, "biren"),
                                  task("gpu", 1, 500, "intel"),
                                  task("neuron2", 2, 1000, "awsneuron"),
                                  task("neuron4", 4, 1000, "AWSNeuron")};
  ASSERT_TRUE(ResolveVendors(set, &nodes, &tasks).ok());
  EXPECT_EQ(nodes[4].vendor, "IntelI915");
  auto r = RunInflation(nodes, tasks, {"hami", 42, 1e-9, &set});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tasks_arrived, 7);
  EXPECT_EQ(r->by_vendor.at("Vastai").scheduled, 1);
  EXPECT_EQ(r->by_vendor.at("Biren").scheduled, 1);
  EXPECT_EQ(r->by_vendor.at("IntelI915").scheduled, 1);
  EXPECT_EQ(r->by_vendor.at("NVIDIA").scheduled, 1);
  // neuron (1 device, the last one) and neuron4 (an aligned block of 4) fit in either order;
  // neuron2 never does.
  EXPECT_EQ(r->by_vendor.at("AWSNeuron").arrived, 3);
  EXPECT_EQ(r->by_vendor.at("AWSNeuron").scheduled, 2);
}

// Remote GPUs (docs/vendors.md#remote-gpu) in a run: a lupine server registers its cards as its
// device plugin does, each remote task takes a whole server and runs on another node.
TEST(MixedTraceTest, RemoteGpuTasksTakeAWholeServerAndRunElsewhere) {
  vendors::VendorSet set(vendors::AllVendorsWithDefaults());
  std::vector<TraceNode> nodes = {{"gpu", 64000, 262144, 2, "T4", ""},
                                  {"lupine", 64000, 262144, 2, "A100", "remotegpu"},
                                  {"cpu", 64000, 262144, 0, "", ""}};
  std::vector<TraceTask> tasks = {task("cuda", 1, 500, ""), task("remote", 1, 1000, "remotegpu"),
                                  task("remote2", 1, 1000, "RemoteGPU")};
  ASSERT_TRUE(ResolveVendors(set, &nodes, &tasks).ok());
  RunConfig config{"default", 42, 1e-9, &set};
  config.record_placements = true;
  auto r = RunInflation(nodes, tasks, config);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->by_vendor.at("NVIDIA").scheduled, 1);
  // One server, given whole: the first remote task gets both cards, the second none.
  EXPECT_EQ(r->by_vendor.at("RemoteGPU").arrived, 2);
  EXPECT_EQ(r->by_vendor.at("RemoteGPU").scheduled, 1);
  int remote = 0;
  for (const auto& p : r->placements) {
    if (tasks[p.task].vendor != "RemoteGPU" || p.node.empty()) continue;
    ++remote;
    EXPECT_EQ(p.node.find("lupine"), std::string::npos) << p.node;  // never on the server
    ASSERT_EQ(p.allocation.containers.size(), 1u);
    ASSERT_EQ(p.allocation.containers[0].size(), 2u);
    EXPECT_NE(p.allocation.containers[0][0].uuid.find("-lupine/"), std::string::npos)
        << p.allocation.containers[0][0].uuid;
  }
  EXPECT_EQ(remote, 1);
}

TEST(MixedTraceTest, VendorTableMediansPerPolicy) {
  auto run = [](const char* policy, std::map<std::string, RunResult::VendorCount> counts) {
    RunResult r;
    r.policy = policy;
    r.by_vendor = std::move(counts);
    return r;
  };
  struct Case {
    const char* name;
    std::vector<RunResult> runs;
    std::vector<std::string> want_lines;  // substrings, in order; empty = no table
  };
  const Case cases[] = {
      {"one vendor: no table", {run("hami", {{"NVIDIA", {10, 5}}})}, {}},
      {"two vendors, three seeds: medians",
       {run("hami", {{"NVIDIA", {10, 5}}, {"DCU", {4, 4}}}),
        run("hami", {{"NVIDIA", {10, 7}}, {"DCU", {4, 1}}}),
        run("hami", {{"NVIDIA", {10, 9}}, {"DCU", {4, 2}}}), run("random", {{"NVIDIA", {10, 10}}})},
       {"DCU      NVIDIA", "hami", "50.00       70.00", "random", "-      100.00"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string t = ToVendorTable(c.runs);
    if (c.want_lines.empty()) {
      EXPECT_EQ(t, "");
      continue;
    }
    size_t at = 0;
    for (const auto& w : c.want_lines) {
      const size_t found = t.find(w, at);
      ASSERT_NE(found, std::string::npos) << "'" << w << "' after " << at << " in\n" << t;
      at = found + w.size();
    }
  }
}

}  // namespace
}  // namespace hami::sim
