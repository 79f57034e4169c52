// One scheduler (docs/sim.md, "What production must do to place as the simulator does"): a slice of
// the bundled openb default trace replayed twice - by `hami sim`'s own run loop (sim::RunInflation,
// the scheduler library driven directly) and through the extender over HTTP against the fake API
// server, with a stand-in for kube-scheduler configured as deploy/base/scheduler-config.yaml ships
// it - must put every pod on the same node and the same GPUs, for every registered policy.
//
// The stand-in does what kube-scheduler does with that configuration:
//  - nodes carry the NVIDIA registration annotation and status.allocatable CPU, memory and pods;
//  - NodeResourcesFit filters CPU, memory and the pod count against what its own cache holds (the
//    pods it bound), skipping the resources the configuration tells it to ignore;
//  - the extender is called only for pods it is interested in (kube-scheduler's rule: every pod
//  when
//    the extender has no managedResources, else only pods that ask for one of them); a pod no node
//    fits never reaches the extender;
//  - every feasible node goes in NodeNames (percentageOfNodesToScore: 100), in an order of its own
//    (shuffled per pod here: kube-scheduler starts its walk at a rotating node), then /bind.
// A pod nothing fits is deleted (the simulator drops it; the cluster only fills, so it never fits
// later).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/rng.h"
#include "core/pod_codec.h"
#include "core/pod_request.h"
#include "core/quantity.h"
#include "extender/metrics.h"
#include "extender/state.h"
#include "harness.h"
#include "scheduler/registry.h"
#include "sim/experiment.h"
#include "sim/report.h"
#include "sim/trace.h"
#include "sim/usage_sim.h"
#include "usage/recommend.h"
#include "usage/synthetic.h"
#include "vendors/nvidia/annotations.h"

namespace hami::controlplane {
namespace {

using k8s::testing::FakeApiServer;

constexpr const char* kNamespace = "openb";
// Every kNodeStride-th node and task of the trace (the same ratio of pods to GPUs as the whole
// trace).
constexpr size_t kNodeStride = 35;
constexpr uint64_t kSeed = 42;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What the shipped KubeSchedulerConfiguration (deploy/base) tells kube-scheduler about our
// extender.
struct KubeSchedulerConfig {
  std::set<std::string> managed;  // extenders[0].managedResources (empty: interested in every pod)
  std::set<std::string>
      ignored;  // resources NodeResourcesFit skips (ignoredByScheduler + ignoredResources)
  std::set<std::string> ignored_groups;
  int percentage_of_nodes_to_score = 0;
  std::string scheduler_name;
};

KubeSchedulerConfig ShippedConfig() {
  KubeSchedulerConfig out;
  YAML::Node cm;
  for (const auto& doc : YAML::LoadAll(Read("deploy/base/scheduler-config.yaml")))
    if (doc["kind"] && doc["kind"].as<std::string>() == "ConfigMap") cm = doc;
  EXPECT_TRUE(cm) << "deploy/base/scheduler-config.yaml has no ConfigMap";
  if (!cm) return out;
  YAML::Node c = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  out.percentage_of_nodes_to_score = c["percentageOfNodesToScore"].as<int>(0);
  out.scheduler_name = c["profiles"][0]["schedulerName"].as<std::string>("");
  if (YAML::Node m = c["extenders"][0]["managedResources"]; m && m.IsSequence())
    for (const auto& e : m) {
      out.managed.insert(e["name"].as<std::string>());
      if (e["ignoredByScheduler"] && e["ignoredByScheduler"].as<bool>())
        out.ignored.insert(e["name"].as<std::string>());
    }
  if (YAML::Node pcs = c["profiles"][0]["pluginConfig"]; pcs && pcs.IsSequence())
    for (const auto& pc : pcs) {
      if (pc["name"].as<std::string>("") != "NodeResourcesFit") continue;
      if (YAML::Node r = pc["args"]["ignoredResources"]; r && r.IsSequence())
        for (const auto& n : r) out.ignored.insert(n.as<std::string>());
      if (YAML::Node g = pc["args"]["ignoredResourceGroups"]; g && g.IsSequence())
        for (const auto& n : g) out.ignored_groups.insert(n.as<std::string>());
    }
  return out;
}

struct Trace {
  std::vector<sim::TraceNode> nodes;
  std::vector<sim::TraceTask> tasks;
};

// Every `stride`-th node and task of the bundled default trace (stride 1: the whole trace).
Trace Bundled(size_t stride) {
  Trace t;
  auto n = sim::FindBundledTrace("openb_node_list_gpu_node.csv");
  auto p = sim::FindBundledTrace("openb_pod_list_default.csv");
  EXPECT_TRUE(n.ok() && p.ok()) << "bundled openb trace not found";
  if (!n.ok() || !p.ok()) return t;
  auto nodes = sim::ReadNodesCsv(*n);
  auto tasks = sim::ReadPodsCsv(*p);
  EXPECT_TRUE(nodes.ok() && tasks.ok());
  if (!nodes.ok() || !tasks.ok()) return t;
  for (size_t i = 0; i < nodes->size(); i += stride) t.nodes.push_back((*nodes)[i]);
  for (size_t i = 0; i < tasks->size(); i += stride) t.tasks.push_back((*tasks)[i]);
  return t;
}

// The Node object a GPU node of the trace registers as (device plugin annotation + kubelet's
// allocatable).
Json NodeObject(const core::NodeInfo& n) {
  Json devs = Json::array();
  for (const auto& d : n.devices)
    devs.push_back({{"id", d.uuid},
                    {"index", d.index},
                    {"count", d.count},
                    {"devmem", d.devmem_mib},
                    {"devcore", d.devcore},
                    {"type", d.type},
                    {"health", true},
                    {"mode", "hami-core"}});
  const Json alloc{{"cpu", StrCat(n.cpu_milli, "m")},
                   {"memory", StrCat(n.memory_mib, "Mi")},
                   {"pods", "110"},
                   {"nvidia.com/gpu",
                    std::to_string(n.devices.size() * static_cast<size_t>(sim::kSimSplitCount))}};
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", n.name}, {"annotations", {{vendors::nvidia::kNodeNvidiaRegister, devs.dump()}}}}},
      {"status", {{"capacity", alloc}, {"allocatable", alloc}}}};
}

// The Pod a user writes for a trace task (docs/sim.md, "How a trace task becomes a HAMi pod").
Json PodObject(const std::string& name, const sim::TraceTask& t,
               const std::string& scheduler_name) {
  Json requests = Json::object(), limits = Json::object();
  if (t.cpu_milli > 0) requests["cpu"] = StrCat(t.cpu_milli, "m");
  if (t.memory_mib > 0) requests["memory"] = StrCat(t.memory_mib, "Mi");
  if (t.num_gpu > 0) {
    limits["nvidia.com/gpu"] = std::to_string(t.num_gpu);
    limits["nvidia.com/gpumem"] = std::to_string(int64_t{t.gpu_milli} * sim::kMibPerMilli);
    if (t.gpu_milli / 10 > 0) limits["nvidia.com/gpucores"] = std::to_string(t.gpu_milli / 10);
  }
  Json resources = Json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;
  Json meta{{"name", name}, {"namespace", kNamespace}};
  if (!t.gpu_spec.empty()) {
    std::string list;
    for (const auto& m : t.gpu_spec) list += StrCat(list.empty() ? "" : ",", m);
    meta["annotations"] = {{vendors::nvidia::kUseGpuType, list}};
  }
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", meta},
              {"spec",
               {{"schedulerName", scheduler_name},
                {"containers",
                 Json::array({{{"name", "main"}, {"image", "x"}, {"resources", resources}}})}}}};
}

bool IsIgnored(const KubeSchedulerConfig& c, const std::string& resource) {
  if (c.ignored.count(resource)) return true;
  const size_t slash = resource.find('/');
  return slash != std::string::npos && c.ignored_groups.count(resource.substr(0, slash)) > 0;
}

// kube-scheduler's side: its own accounting of what it bound, NodeResourcesFit and the extender's
// interest.
class KubeSchedulerModel {
 public:
  KubeSchedulerModel(const KubeSchedulerConfig& config, const std::vector<core::NodeInfo>& nodes)
      : config_(config) {
    for (const auto& n : nodes) {
      free_[n.name] = {n.cpu_milli, n.memory_mib, 110,
                       static_cast<int64_t>(n.devices.size()) * sim::kSimSplitCount};
      alloc_[n.name] = free_[n.name];
    }
  }

  // kube-scheduler's own choice for a pod it does not send to an extender (measurement only, not a
  // conformance model): of the default score plugins only NodeResourcesFit (LeastAllocated, CPU and
  // memory weight 1) and NodeResourcesBalancedAllocation tell these nodes apart (no affinity,
  // taints, images or topology spread in the trace); both weight 1, the pod's zero requests counted
  // as 100m and 200 MiB (the scheduler's non-zero defaults), ties broken uniformly (selectHost).
  std::string DefaultSchedulerChoice(const Json& pod, const std::vector<std::string>& feasible,
                                     Rng& rng) const {
    const Request r = RequestOf(pod);
    const int64_t cpu = r.cpu > 0 ? r.cpu : 100, mem = r.mem > 0 ? r.mem : 200;
    std::string best;
    int64_t best_score = -1, ties = 0;
    for (const std::string& name : feasible) {
      const Free& a = alloc_.at(name);
      const Free& f = free_.at(name);
      const int64_t used_cpu = a.cpu - f.cpu + cpu, used_mem = a.mem - f.mem + mem;
      const auto least = [](int64_t used, int64_t cap) {
        return cap <= 0 || used > cap ? int64_t{0} : (cap - used) * 100 / cap;
      };
      const int64_t fit = (least(used_cpu, a.cpu) + least(used_mem, a.mem)) / 2;
      const double fc = a.cpu > 0 ? std::min(1.0, static_cast<double>(used_cpu) / a.cpu) : 0;
      const double fm = a.mem > 0 ? std::min(1.0, static_cast<double>(used_mem) / a.mem) : 0;
      const int64_t balanced = static_cast<int64_t>((1 - std::abs(fc - fm) / 2) * 100);
      const int64_t score = fit + balanced;
      if (score > best_score) {
        best_score = score, best = name, ties = 1;
      } else if (score == best_score && rng.Uniform(static_cast<uint64_t>(++ties)) == 0) {
        best = name;
      }
    }
    return best;
  }

  // NodeResourcesFit over every node (percentageOfNodesToScore: 100), and the extended resources
  // the configuration does not ignore (only nvidia.com/gpu is advertised by the node).
  std::vector<std::string> Feasible(const Json& pod) const {
    std::vector<std::string> out;
    const Request r = RequestOf(pod);
    for (const auto& [name, f] : free_) {
      if (r.cpu > f.cpu || r.mem > f.mem || f.pods < 1) continue;
      if (!r.unadvertised.empty())
        continue;  // asks a resource no node advertises and nothing ignores
      if (r.gpu > f.gpu) continue;
      out.push_back(name);
    }
    return out;
  }
  // kube-scheduler's HTTPExtender.IsInterested.
  bool Interested(const Json& pod) const {
    if (config_.managed.empty()) return true;
    for (const auto& [name, v] : Resources(pod))
      if (config_.managed.count(name)) return true;
    return false;
  }
  void Bound(const Json& pod, const std::string& node) {
    const Request r = RequestOf(pod);
    auto& f = free_.at(node);
    f.cpu -= r.cpu, f.mem -= r.mem, f.pods -= 1, f.gpu -= r.gpu;
  }

 private:
  struct Free {
    int64_t cpu, mem, pods, gpu;
  };
  struct Request {
    int64_t cpu = 0, mem = 0, gpu = 0;
    std::vector<std::string> unadvertised;
  };
  // requests, with limits as their default (the API server's defaulting), of the one container.
  static std::map<std::string, std::string> Resources(const Json& pod) {
    std::map<std::string, std::string> out;
    const Json& res = pod["spec"]["containers"][0]["resources"];
    for (const char* part : {"limits", "requests"})
      if (res.contains(part))
        for (const auto& [k, v] : res[part].items()) out[k] = v.get<std::string>();
    return out;
  }
  Request RequestOf(const Json& pod) const {
    Request r;
    for (const auto& [name, v] : Resources(pod)) {
      auto q = core::ParseQuantity(v);
      EXPECT_TRUE(q.ok()) << name << ": " << v;
      if (!q.ok()) continue;
      if (name == "cpu")
        r.cpu = core::QuantityToMilli(*q).value_or(0);
      else if (name == "memory")
        r.mem = core::QuantityToMiB(*q);
      else if (IsIgnored(config_, name))
        continue;
      else if (name == "nvidia.com/gpu")
        r.gpu = core::QuantityToExactInt(*q).value_or(0);
      else
        r.unadvertised.push_back(name);
    }
    return r;
  }

  const KubeSchedulerConfig& config_;
  std::map<std::string, Free> free_, alloc_;
};

std::string Describe(const std::string& node, const core::PodAllocation& a) {
  std::string s = node.empty() ? "(unscheduled)" : node;
  for (const auto& c : a.containers)
    for (const auto& d : c) s += StrCat(" ", d.uuid, ":", d.usedmem_mib, "/", d.usedcores);
  return s;
}

struct ReplayStats {
  int compared = 0, diverged = 0, gpu_pods = 0, cpu_pods = 0, failed = 0;
  double sim_a100 = 0, extender_a100 = 0;
};

// Replays `trace` (seed kSeed, inflation 1.3) through hami sim and through the extender, comparing
// every pod; stops after `max_divergences` differences (later pods see another cluster). With
// `cpu_pods_by_default_scheduler` the CPU-only pods are placed as the cluster's default scheduler
// would (KubeSchedulerModel::DefaultSchedulerChoice), not by the extender: nothing is compared,
// the curve of that cluster is measured.
void Replay(const Trace& trace, const std::string& policy, int max_divergences, ReplayStats* stats,
            bool cpu_pods_by_default_scheduler = false) {
  ASSERT_FALSE(trace.nodes.empty());
  const KubeSchedulerConfig config = ShippedConfig();
  ASSERT_EQ(config.percentage_of_nodes_to_score, 100)
      << "the model below hands every feasible node to the extender";

  // Through `hami sim`'s run loop.
  sim::RunConfig rc;
  rc.policy = policy;
  rc.seed = kSeed;
  rc.record_placements = true;
  auto run = sim::RunInflation(trace.nodes, trace.tasks, rc);
  ASSERT_TRUE(run.ok()) << run.status();
  Rng rng(kSeed);
  auto plan = sim::PlanRun(trace.nodes, trace.tasks, rc, rng);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(run->placements.size(), plan->order.size());
  ASSERT_GT(run->tasks_failed, 0) << "the slice should fill the cluster";

  // Through the extender.
  FakeApiServer api;
  ASSERT_TRUE(api.Start().ok());
  for (const auto& n : plan->nodes) ASSERT_TRUE(api.Upsert("nodes", NodeObject(n)).ok());
  ReplicaOptions ro;
  ro.policy = policy;
  ro.seed = kSeed;  // hami sim seeds the scheduler with the run's seed
  auto rep = StartSynced(api, plan->nodes.size(), ro);
  for (const auto& n :
       plan->nodes) {  // the cache reads the Node objects as the simulator registers them
    auto snap = rep->sched->cache().Snapshot(n.name);
    ASSERT_TRUE(snap.has_value()) << n.name;
    EXPECT_EQ(snap->info.cpu_milli, n.cpu_milli) << n.name;
    EXPECT_EQ(snap->info.memory_mib, n.memory_mib) << n.name;
    ASSERT_EQ(snap->info.devices.size(), n.devices.size()) << n.name;
  }
  KubeScheduler ks(rep->port());
  KubeSchedulerModel kube(config, plan->nodes);

  int& compared = stats->compared;
  int& diverged = stats->diverged;
  int& gpu_pods = stats->gpu_pods;
  int& cpu_pods = stats->cpu_pods;
  int& failed = stats->failed;
  sim::AllocationCurve curve(plan->capacity_milli);
  int64_t arrived = 0, used = 0;
  for (size_t i = 0; i < plan->order.size(); ++i) {
    const sim::TraceTask& t = trace.tasks[plan->order[i]];
    const sim::TaskPlacement& want = run->placements[i];
    const std::string name = "t" + std::to_string(i);
    SCOPED_TRACE(StrCat("pod ", name, " (task ", t.name, ", ", t.cpu_milli, "m CPU, ", t.num_gpu,
                        "x", t.gpu_milli, " milli GPU)"));
    std::string why;
    Json admitted = ks.Admit(PodObject(name, t, config.scheduler_name), kNamespace, &why);
    ASSERT_FALSE(admitted.is_null()) << why;
    auto created = rep->client->Create(k8s::kPods, kNamespace, admitted);
    ASSERT_TRUE(created.ok()) << created.status();
    // The pod parses to the request the simulator scheduled.
    auto parsed = vendors::VendorSet::NvidiaOnly().ParsePod(*created);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const core::PodRequest& sim_pod = plan->pods[plan->order[i]];
    ASSERT_EQ(parsed->containers.size(), 1u);
    EXPECT_EQ(parsed->containers[0].cpu_milli, sim_pod.containers[0].cpu_milli);
    EXPECT_EQ(parsed->containers[0].memory_mib, sim_pod.containers[0].memory_mib);
    ASSERT_EQ(parsed->containers[0].devices.size(), sim_pod.containers[0].devices.size());
    for (size_t k = 0; k < parsed->containers[0].devices.size(); ++k) {
      EXPECT_EQ(parsed->containers[0].devices[k].nums, sim_pod.containers[0].devices[k].nums);
      EXPECT_EQ(parsed->containers[0].devices[k].memreq_mib,
                sim_pod.containers[0].devices[k].memreq_mib);
      EXPECT_EQ(parsed->containers[0].devices[k].coresreq,
                sim_pod.containers[0].devices[k].coresreq);
    }
    EXPECT_EQ(parsed->selectors.use_types, sim_pod.selectors.use_types);

    std::string node;
    core::PodAllocation got;
    std::vector<std::string> feasible = kube.Feasible(*created);
    if (!feasible.empty()) {
      Rng order(kSeed * 1000003 + i);
      order.Shuffle(feasible);
      if (cpu_pods_by_default_scheduler && t.num_gpu == 0) {
        node = kube.DefaultSchedulerChoice(*created, feasible, order);
      } else if (kube.Interested(*created)) {
        std::string err;
        node = ks.Filter(*created, feasible, &err);
        ASSERT_TRUE(err.empty()) << err;
      } else {
        // kube-scheduler places it by its own scoring; the model cannot say where, so the pod must
        // be one the simulator places the same way (none: the simulator runs every task through the
        // policy). The shipped configuration must therefore call the extender for it.
        ADD_FAILURE()
            << "kube-scheduler would not call the extender for this pod (managedResources), while "
               "hami sim places it with the policy";
        node = feasible.front();
      }
    }
    if (node.empty()) {
      ASSERT_TRUE(api.Delete("pods", kNamespace, name).ok());
      ++failed;
    } else {
      ASSERT_EQ(ks.Bind(*created, node), "");
      kube.Bound(*created, node);
      auto stored = api.Get("pods", kNamespace, name);
      ASSERT_TRUE(stored.has_value());
      EXPECT_EQ((*stored)["spec"].value("nodeName", ""), node);
      if (t.num_gpu > 0) {
        auto held = extender::HeldAllocation(*stored);
        ASSERT_TRUE(held.has_value()) << "no decision on the bound pod";
        got = *held;
      }
    }
    (t.num_gpu > 0 ? gpu_pods : cpu_pods)++;
    ++compared;
    arrived += t.total_gpu_milli();
    if (!node.empty()) used += t.total_gpu_milli();
    curve.Record(arrived, used);
    // The same node and the same GPUs, memory and cores per container.
    got.node.clear();
    core::PodAllocation want_alloc = want.allocation;
    want_alloc.node.clear();
    for (auto* a : {&got, &want_alloc})
      for (auto& c : a->containers)
        for (auto& d : c) d.index = -1;
    if (cpu_pods_by_default_scheduler) continue;
    if (node != want.node ||
        (!node.empty() && t.num_gpu > 0 && got.containers != want_alloc.containers)) {
      ++diverged;
      ADD_FAILURE() << "extender: " << Describe(node, got)
                    << "\n    hami sim: " << Describe(want.node, want_alloc);
      if (diverged >= max_divergences) break;  // later pods see another cluster: nothing new
    }
  }
  stats->sim_a100 = run->curve[100];
  stats->extender_a100 = curve.Points()[100];
  std::printf(
      "[ replay ] policy %s: %d pods compared (%d with GPUs, %d CPU-only; %d failed %s), %d "
      "diverged; "
      "A(100) hami sim %.2f, extender %.2f%s\n",
      policy.c_str(), compared, gpu_pods, cpu_pods, failed,
      cpu_pods_by_default_scheduler ? "here" : "in both", diverged, stats->sim_a100,
      stats->extender_a100,
      cpu_pods_by_default_scheduler ? " (CPU-only pods by the default scheduler)" : "");
  EXPECT_EQ(compared, static_cast<int>(plan->order.size()));
  if (!cpu_pods_by_default_scheduler) {
    EXPECT_EQ(failed, run->tasks_failed);
  }
}

// ---- A usage trace (issue 27 part 3): the extender's usage rule and `hami sim --usage` ----

constexpr const char* kUsageNamespace = "serving";

// The profile annotation a pod of the trace carries: what the simulator packs it by (its own
// profile of the warm-up, or its workload's replica profile when it has too little history), with
// the peak set to the spike the simulator leaves room for. Its gpumem: the workload's
// recommendation. (As hami recommend's annotation would give it, per pod.)
struct UsagePod {
  std::string profile;
  int64_t gpumem_mib = 0;
  int32_t level = 0;  // UsageProfile::mem_all: the simulator places the largest first
};

std::vector<UsagePod> UsagePods(const usage::UsageTrace& trace, const sim::UsageSimConfig& c) {
  usage::LearnOptions lo;
  lo.profile = c.profile;
  lo.margin_pct = c.margin_pct;
  lo.workload_q_pct = c.workload_q_pct;
  lo.card_mib = c.gpu_memory_mib;
  const usage::Learned learned = usage::Learn(trace, c.warmup_min, lo);
  std::vector<UsagePod> out;
  for (size_t i = 0; i < trace.pods.size(); ++i) {
    const usage::WorkloadModel& w = learned.workloads[static_cast<size_t>(trace.pods[i].workload)];
    usage::UsageProfile p =
        learned.own[i].minutes >= c.min_own_minutes ? learned.own[i] : w.replica;
    p.mem_peak = static_cast<int32_t>(w.peak_mib > 0 ? w.peak_mib : c.gpu_memory_mib);
    out.push_back({usage::FormatUsageProfile(p), w.gpumem_mib, p.mem_all});
  }
  return out;
}

Json UsageNode(const std::string& name, int64_t devmem_mib) {
  const Json devs = Json::array({{{"id", name},
                                  {"index", 0},
                                  {"count", 64},
                                  {"devmem", devmem_mib},
                                  {"devcore", 100},
                                  {"type", "NVIDIA-sim"},
                                  {"health", true},
                                  {"mode", "hami-core"}}});
  const Json alloc{{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "64"}};
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name}, {"annotations", {{vendors::nvidia::kNodeNvidiaRegister, devs.dump()}}}}},
      {"status", {{"capacity", alloc}, {"allocatable", alloc}}}};
}

Json UsagePodObject(const std::string& name, const UsagePod& p, const std::string& scheduler) {
  const Json limits{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(p.gpumem_mib)}};
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", kUsageNamespace},
        {"annotations", {{std::string(usage::kUsageProfileAnnotation), p.profile}}}}},
      {"spec",
       {{"schedulerName", scheduler},
        {"containers",
         Json::array({{{"name", "main"}, {"image", "x"}, {"resources", {{"limits", limits}}}}})}}}};
}

// The synthetic GenAI-shaped trace (seed 1: the sim's tests' trace) placed minute by minute by
// `hami sim --usage` (usage-aware, 80 GiB cards, hami-binpack) and through the extender on the fake
// API server with the usage rule on (the same cap, budget and contention bound): every pod must
// land on the same GPU with the same limit. Pods leave (are deleted) the minute after their last
// row, as in the simulator; the extender sees that through its watch before the next pod is
// filtered.
void ReplayUsage(const sim::UsageSimConfig& c) {
  const usage::UsageTrace trace = usage::SyntheticTrace({});
  auto run = sim::RunUsageSim(trace, c);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<UsagePod> pods = UsagePods(trace, c);

  FakeApiServer api;
  ASSERT_TRUE(api.Start().ok());
  for (const std::string& g : run->gpu_ids)
    ASSERT_TRUE(api.Upsert("nodes", UsageNode(g, c.gpu_memory_mib)).ok());
  ReplicaOptions ro;
  ro.policy = c.policy;
  ro.usage.overcommit_pct = c.overcommit_pct;
  ro.usage.duty_budget = c.duty_budget;
  ro.usage.contention_bp = c.contention_bp;
  ro.usage.fleet_contention_bp = c.fleet_contention_bp;
  ro.usage.card_contention_bp = c.card_contention_bp;
  ro.usage.namespaces = {kUsageNamespace};
  auto rep = StartSynced(api, run->gpu_ids.size(), ro);
  KubeScheduler ks(rep->port());
  const std::string scheduler_name = ShippedConfig().scheduler_name;

  std::map<std::string, int64_t> booked;  // node -> the limits of the pods on it (what we expect)
  std::vector<std::string> node_of(trace.pods.size());
  int placed = 0, diverged = 0, overcommitted_peak = 0;
  for (int32_t m = c.warmup_min; m < trace.minutes && diverged < 5; ++m) {
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      if (node_of[i].empty() || trace.pods[i].last() >= m) continue;
      ASSERT_TRUE(api.Delete("pods", kUsageNamespace, trace.pods[i].name).ok());
      booked[node_of[i]] -= pods[i].gpumem_mib;
      const std::string n = node_of[i];
      ASSERT_TRUE(WaitFor([&] {
        auto snap = rep->sched->cache().Snapshot(n);
        return snap && snap->usage[0].usedmem_mib == booked[n];
      })) << "the extender did not see "
          << trace.pods[i].name << " leave";
      node_of[i].clear();
    }
    std::vector<std::pair<int64_t, size_t>> order;  // the simulator's: largest level first
    for (size_t i = 0; i < trace.pods.size(); ++i) {
      const usage::PodSeries& p = trace.pods[i];
      if (m == c.warmup_min ? p.alive(m) : p.first == m) order.push_back({-pods[i].level, i});
    }
    std::sort(order.begin(), order.end());
    for (const auto& [key, i] : order) {
      const std::string& name = trace.pods[i].name;
      SCOPED_TRACE(StrCat("pod ", name, " at minute ", m));
      std::string why;
      Json admitted =
          ks.Admit(UsagePodObject(name, pods[i], scheduler_name), kUsageNamespace, &why);
      ASSERT_FALSE(admitted.is_null()) << why;
      auto created = rep->client->Create(k8s::kPods, kUsageNamespace, admitted);
      ASSERT_TRUE(created.ok()) << created.status();
      std::vector<std::string> nodes = run->gpu_ids;
      Rng shuffle(kSeed * 1000003 + i);
      shuffle.Shuffle(nodes);
      std::string err;
      const std::string node = ks.Filter(*created, nodes, &err);
      ASSERT_TRUE(err.empty()) << err;
      ASSERT_FALSE(node.empty()) << "the extender placed the pod nowhere";
      ASSERT_EQ(ks.Bind(*created, node), "");
      auto stored = api.Get("pods", kUsageNamespace, name);
      ASSERT_TRUE(stored.has_value());
      auto held = extender::HeldAllocation(*stored);
      ASSERT_TRUE(held.has_value()) << "no decision on the bound pod";
      ASSERT_EQ(held->containers.size(), 1u);
      ASSERT_EQ(held->containers[0].size(), 1u);
      ASSERT_FALSE(run->placement[i].empty());
      const usage::Segment& want = run->placement[i].front();
      const std::string& want_node = run->gpu_ids[static_cast<size_t>(want.gpu)];
      EXPECT_EQ(held->containers[0][0].usedmem_mib, want.mem_mib);
      if (node != want_node) {
        ++diverged;
        ADD_FAILURE() << "extender: " << node << ", hami sim: " << want_node;
      }
      node_of[i] = node;
      booked[node] += pods[i].gpumem_mib;
      ++placed;
    }
    int over = 0;
    for (const auto& [n, b] : booked) over += b > c.gpu_memory_mib;
    overcommitted_peak = std::max(overcommitted_peak, over);
  }
  std::printf(
      "[ replay ] usage trace: %d pods placed on %zu GPUs, %d diverged; at most %d GPUs booked "
      "past "
      "the card at once\n",
      placed, run->gpu_ids.size() - 1, diverged, overcommitted_peak);
  EXPECT_EQ(diverged, 0);
  EXPECT_GT(overcommitted_peak, 0)
      << "the trace should overcommit some cards (else nothing is shown)";
  const auto live = std::count_if(node_of.begin(), node_of.end(),
                                  [](const std::string& n) { return !n.empty(); });
  EXPECT_EQ(rep->sched->usage_rule()->stats().profiled_pods, static_cast<int64_t>(live));
  // /metrics says what the rule does: the cap, the pods it placed, the cards booked past their
  // memory (what `booked` counts now), and each card's capacity at the cap.
  int over_now = 0;
  for (const auto& [n, b] : booked) over_now += b > c.gpu_memory_mib;
  const std::string metrics = extender::RenderMetrics(*rep->sched, *rep->state, nullptr);
  for (const std::string& line :
       {StrCat("hami_scheduler_usage_overcommit_cap_percent ", c.overcommit_pct),
        StrCat("hami_scheduler_usage_profiled_pods ", live),
        StrCat("hami_scheduler_usage_overcommitted_gpus ", over_now)})
    EXPECT_NE(metrics.find(StrCat("\n", line, "\n")), std::string::npos) << line;
  const int64_t at_cap = c.gpu_memory_mib * c.overcommit_pct / 100 * 1024 * 1024;
  EXPECT_NE(metrics.find(StrCat("device_memory_limit=\"", at_cap, "\"")), std::string::npos);
  // A scheduler started now (a restart, a new leader) reads the running pods' decisions and
  // profiles: every pod counts with its profile again, the same cards booked past their memory.
  auto restarted = StartSynced(api, run->gpu_ids.size(), ro);
  ASSERT_TRUE(WaitFor([&] {
    return restarted->sched->usage_rule()->stats().profiled_pods == static_cast<int64_t>(live);
  })) << restarted->sched->usage_rule()->stats().profiled_pods
      << " of " << live;
  EXPECT_EQ(restarted->sched->usage_rule()->stats().overcommitted_gpus, over_now);
}

TEST(ReplayUsageTrace, ExtenderPacksByProfileAsTheSimulator) {
  ReplayUsage(sim::UsageSimConfig{});  // the defaults of `hami sim --usage`
}

// The same with the fleet budget on (usage/fleet.h): 31 GPUs instead of 33 on this trace, the
// overruns admitted by the same ledger in the extender's usage rule.
TEST(ReplayUsageTrace, ExtenderPacksByTheFleetBudgetAsTheSimulator) {
  sim::UsageSimConfig c;
  c.fleet_contention_bp = 200;
  c.card_contention_bp = 1200;
  ReplayUsage(c);
}

class ReplayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReplayTest, ExtenderPlacesEveryPodAsTheSimulator) {
  ReplayStats stats;
  Replay(Bundled(kNodeStride), GetParam(), 5, &stats);
  EXPECT_EQ(stats.extender_a100, stats.sim_a100);
}

// The whole default trace (1213 nodes, ~8,300 pods) end to end through the extender, for the
// policies in $HAMI_REPLAY_POLICIES (comma-separated; default "default"), printing A(100) of both
// paths (docs/sim.md). Runs with every test run for `default` (17-70 s of a dev build); more
// policies with
//   HAMI_REPLAY_POLICIES=default,fgd replay_test --gtest_filter='ReplayWholeTrace.*'
TEST(ReplayWholeTrace, WholeDefaultTrace) {
  const char* env = std::getenv("HAMI_REPLAY_POLICIES");
  std::string list = env && *env ? env : "default";
  const Trace trace = Bundled(1);
  for (size_t pos = 0; pos <= list.size();) {
    size_t comma = std::min(list.find(',', pos), list.size());
    const std::string policy = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (policy.empty()) continue;
    SCOPED_TRACE(policy);
    ReplayStats stats;
    Replay(trace, policy, 20, &stats);
    EXPECT_EQ(stats.extender_a100, stats.sim_a100);
  }
}

// What the webhook's CPU-only opt-in is for (docs/sim.md, docs/install.md): the whole default trace
// with its CPU-only pods placed by the cluster's default scheduler instead of hami-scheduler's
// policy, GPU pods through the extender. A measurement (about a minute), run when
// HAMI_REPLAY_CPU_PODS_BY_DEFAULT=1:
//   HAMI_REPLAY_CPU_PODS_BY_DEFAULT=1 replay_test --gtest_filter='ReplayWholeTrace.CpuPods*'
TEST(ReplayWholeTrace, CpuPodsByTheDefaultScheduler) {
  const char* env = std::getenv("HAMI_REPLAY_CPU_PODS_BY_DEFAULT");
  if (env == nullptr || std::string(env) != "1")
    GTEST_SKIP() << "set HAMI_REPLAY_CPU_PODS_BY_DEFAULT=1 to measure";
  ReplayStats stats;
  Replay(Bundled(1), "default", 0, &stats, /*cpu_pods_by_default_scheduler=*/true);
  // hami sim's number overstates such a cluster (docs/sim.md).
  EXPECT_LT(stats.extender_a100, stats.sim_a100);
}

std::vector<std::string> AllPolicies() {
  std::vector<std::string> out;
  for (const auto& row : scheduler::Policies()) out.push_back(row.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, ReplayTest, ::testing::ValuesIn(AllPolicies()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace hami::controlplane
