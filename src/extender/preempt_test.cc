// The preemption verb (preempt.h, Extender::Preempt) on the pure paths: the rules as tables and the
// verb over a ClusterState fed the way the informers feed it. Names follow upstream HAMi's
// pkg/scheduler/preempt tests (docs/migration.md).
#include "extender/preempt.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "extender/extender.h"
#include "extender/metrics.h"
#include "vendors/testing/mixed_config.h"

namespace hami::extender {
namespace {

constexpr int64_t kNow = 1'700'000'000;
constexpr char kNode[] = "node1";

// A node with `gpus` cards of `slots` tasks, `mem` MiB and 100 cores each (devices node1-gpu<i>).
Json NodeJson(const std::string& name, int gpus, int slots, int64_t mem) {
  Json devs = Json::array();
  for (int i = 0; i < gpus; ++i)
    devs.push_back({{"id", name + "-gpu" + std::to_string(i)},
                    {"index", i},
                    {"count", slots},
                    {"devmem", mem},
                    {"devcore", 100},
                    {"type", "NVIDIA-T4"},
                    {"health", true}});
  return Json{{"metadata",
               {{"name", name}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}}};
}

// A pod of one container asking for one GPU share of `mem` MiB and `cores`, at `priority`.
Json PodJson(const std::string& uid, int64_t mem, int cores, int priority) {
  return Json{
      {"metadata",
       {{"name", "pod-" + uid},
        {"namespace", "default"},
        {"uid", uid},
        {"creationTimestamp", "2026-01-01T00:00:00Z"}}},
      {"spec",
       {{"schedulerName", "hami-scheduler"},
        {"priority", priority},
        {"containers", Json::array({{{"name", "main"},
                                     {"resources",
                                      {{"limits",
                                        {{"nvidia.com/gpu", "1"},
                                         {"nvidia.com/gpumem", std::to_string(mem)},
                                         {"nvidia.com/gpucores", std::to_string(cores)}}}}}}})}}},
      {"status", {{"phase", "Running"}}}};
}

// PodJson bound to node1 with its grant on node1-gpu<gpu> written in upstream's annotations.
Json Placed(const std::string& uid, int64_t mem, int cores, int priority, int gpu = 0) {
  Json p = PodJson(uid, mem, cores, priority);
  p["spec"]["nodeName"] = kNode;
  p["metadata"]["annotations"] = {{"hami.io/vgpu-node", kNode},
                                  {"hami.io/vgpu-devices-allocated",
                                   std::string(kNode) + "-gpu" + std::to_string(gpu) + ",NVIDIA," +
                                       std::to_string(mem) + "," + std::to_string(cores) + ":;"}};
  return p;
}

Json WithOwner(Json p, const std::string& kind) {
  p["metadata"]["ownerReferences"] =
      Json::array({{{"kind", kind}, {"name", "o"}, {"uid", "o1"}, {"controller", true}}});
  return p;
}

Json Pdb(const std::string& ns, Json selector, int allowed) {
  return Json{{"metadata", {{"name", "pdb"}, {"namespace", ns}}},
              {"spec", {{"minAvailable", 1}, {"selector", std::move(selector)}}},
              {"status", {{"disruptionsAllowed", allowed}}}};
}

class PreemptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::move(*scheduler::Scheduler::Create({}));
    StateOptions so;
    so.clock = &clock_;
    state_ = std::make_unique<ClusterState>(*sched_, so);
    NewExtender(true);
  }
  // with_lookups: the informer-backed lookups main() wires (pods by uid and by name, PDBs).
  void NewExtender(bool with_lookups) {
    ExtenderOptions eo;
    eo.clock = &clock_;
    eo.is_leader = [this] { return leader_; };
    eo.synced = [this] { return synced_; };
    eo.pod_lookup = [this](const std::string& ns, const std::string& name) {
      for (const auto& [uid, p] : pods_)
        if (p["metadata"]["namespace"] == ns && p["metadata"]["name"] == name)
          return std::make_shared<const Json>(p);
      return ExtenderOptions::LivePodRef();
    };
    if (with_lookups) {
      eo.pod_by_uid = [this](const std::string& uid) {
        auto it = pods_.find(uid);
        return it == pods_.end() ? nullptr : std::make_shared<const Json>(it->second);
      };
      eo.pdbs = [this] { return pdbs_; };
    }
    ext_ = std::make_unique<Extender>(*sched_, *state_, nullptr, eo);
  }
  void Node(int gpus, int slots, int64_t mem) { state_->OnNode(NodeJson(kNode, gpus, slots, mem)); }
  void Add(const Json& pod) {
    pods_[pod["metadata"]["uid"].get<std::string>()] = pod;
    state_->OnPod(pod);
  }
  // Preempt with MetaVictims (nodeCacheCapable) proposing `uids` on `node`.
  ExtenderPreemptionResult Preempt(const Json& preemptor, std::vector<std::string> uids,
                                   const std::string& node = kNode) {
    ExtenderPreemptionArgs a;
    a.pod = preemptor;
    a.node_to_meta_victims = std::map<std::string, MetaVictims>{{node, {std::move(uids), 0}}};
    auto r = ext_->Preempt(a);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ExtenderPreemptionResult{};
  }
  static std::vector<std::string> VictimsOn(const ExtenderPreemptionResult& r,
                                            const std::string& node = kNode) {
    auto it = r.node_to_meta_victims.find(node);
    return it == r.node_to_meta_victims.end() ? std::vector<std::string>{"<node left out>"}
                                              : it->second.pod_uids;
  }

  FakeClock clock_{kNow};
  bool leader_ = true, synced_ = true;
  std::map<std::string, Json> pods_;
  std::optional<std::vector<Json>> pdbs_ = std::vector<Json>{};
  std::unique_ptr<scheduler::Scheduler> sched_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<Extender> ext_;
};

const std::vector<std::string> kLeftOut = {"<node left out>"};

// ---- the rules ----

TEST(PreemptRules, IsProtectedFromPreemption) {
  struct Case {
    const char* name;
    Json pod;
    bool want;
  };
  Json terminating = PodJson("p", 1000, 10, 10);
  terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  Json finished = PodJson("p", 1000, 10, 10);
  finished["status"]["phase"] = "Succeeded";
  Json kube_system = PodJson("p", 1000, 10, 10);
  kube_system["metadata"]["namespace"] = "kube-system";
  Json bad_priority = PodJson("p", 1000, 10, 10);
  bad_priority["spec"]["priority"] = "high";
  Json not_controller = WithOwner(PodJson("p", 1000, 10, 10), "DaemonSet");
  not_controller["metadata"]["ownerReferences"][0]["controller"] = false;
  const std::vector<Case> cases = {
      {"normal pod", PodJson("p", 1000, 10, 10), false},
      {"terminating", terminating, true},
      {"finished", finished, true},
      {"DaemonSet owned", WithOwner(PodJson("p", 1000, 10, 10), "DaemonSet"), true},
      {"DaemonSet owner that is not the controller", not_controller, false},
      {"ReplicaSet owned", WithOwner(PodJson("p", 1000, 10, 10), "ReplicaSet"), false},
      {"critical priority", PodJson("p", 1000, 10, 2000000001), true},
      {"kube-system namespace", kube_system, true},
      {"unreadable priority", bad_priority, true},
      {"not an object", Json::array(), true},
  };
  for (const auto& c : cases) EXPECT_EQ(IsProtectedFromPreemption(c.pod), c.want) << c.name;
}

TEST(PreemptRules, IsCriticalPod) {
  auto with = [](const char* key, Json value, const char* where = "spec") {
    Json p{{"metadata", {{"name", "critical"}, {"namespace", "my-app"}}},
           {"spec", {{"containers", Json::array({{{"name", "c"}}})}}}};
    p[where][key] = std::move(value);
    return p;
  };
  struct Case {
    const char* name;
    Json pod;
    bool want;
  };
  const std::vector<Case> cases = {
      {"kube-system namespace protected", with("namespace", "kube-system", "metadata"), true},
      {"kube-public namespace NOT protected", with("namespace", "kube-public", "metadata"), false},
      {"system-cluster-critical PriorityClass protected",
       with("priorityClassName", "system-cluster-critical"), true},
      {"system-node-critical PriorityClass protected",
       with("priorityClassName", "system-node-critical"), true},
      {"high priority value protected", with("priority", kCriticalPriority + 100), true},
      {"exactly the threshold protected", with("priority", kCriticalPriority), true},
      {"regular pod NOT protected", with("priority", 5), false},
  };
  for (const auto& c : cases) EXPECT_EQ(IsCriticalPod(c.pod), c.want) << c.name;
}

TEST(PreemptRules, SortVictimsByPreference) {
  struct Case {
    const char* name;
    std::vector<VictimCandidate> pods;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"priority order ascending",
       {{"high", 100, 60, 1}, {"low", 10, 60, 1}, {"mid", 50, 60, 1}},
       {"low", "mid", "high"}},
      {"timestamp tiebreak - newer first",
       {{"old", 10, 100, 1}, {"new", 10, 200, 1}},
       {"new", "old"}},
      {"then the larger grant",
       {{"small", 10, 100, 5}, {"large", 10, 100, 50}},
       {"large", "small"}},
      {"then the uid", {{"b", 10, 100, 5}, {"a", 10, 100, 5}}, {"a", "b"}},
  };
  for (auto c : cases) {
    SortVictimsByPreference(c.pods);
    std::vector<std::string> got;
    for (const auto& p : c.pods) got.push_back(p.uid);
    EXPECT_EQ(got, c.want) << c.name;
  }
}

TEST(PreemptRules, PDBViolationsUpperBound) {
  struct Case {
    const char* name;
    int64_t proposed;
    size_t kept;
    int64_t want;
  };
  const std::vector<Case> cases = {{"original smaller", 10, 100, 10},
                                   {"kept smaller", 100, 10, 10},
                                   {"equal", 50, 50, 50},
                                   {"zero original", 0, 50, 0},
                                   {"zero kept", 50, 0, 0}};
  for (const auto& c : cases)
    EXPECT_EQ(PdbViolationsUpperBound(c.proposed, c.kept), c.want) << c.name;
}

TEST(PreemptRules, LabelSelectorMatches) {
  const Json labels{{"app", "critical"}, {"tier", "gpu"}};
  struct Case {
    const char* name;
    Json selector;
    int want;  // 1 match, 0 no match, -1 error
  };
  const std::vector<Case> cases = {
      {"empty selects all", Json::object(), 1},
      {"matchLabels equal", {{"matchLabels", {{"app", "critical"}}}}, 1},
      {"matchLabels differ", {{"matchLabels", {{"app", "web"}}}}, 0},
      {"In",
       {{"matchExpressions", {{{"key", "tier"}, {"operator", "In"}, {"values", {"gpu"}}}}}},
       1},
      {"NotIn",
       {{"matchExpressions", {{{"key", "tier"}, {"operator", "NotIn"}, {"values", {"gpu"}}}}}},
       0},
      {"Exists", {{"matchExpressions", {{{"key", "app"}, {"operator", "Exists"}}}}}, 1},
      {"DoesNotExist", {{"matchExpressions", {{{"key", "x"}, {"operator", "DoesNotExist"}}}}}, 1},
      {"unknown operator", {{"matchExpressions", {{{"key", "x"}, {"operator", "Near"}}}}}, -1},
      {"In without values", {{"matchExpressions", {{{"key", "x"}, {"operator", "In"}}}}}, -1},
      {"bad error after a mismatch",
       {{"matchLabels", {{"app", "web"}}}, {"matchExpressions", "x"}},
       -1},
      {"matchLabels value not a string", {{"matchLabels", {{"app", 1}}}}, -1},
      {"not an object", Json::array(), -1},
  };
  for (const auto& c : cases) {
    auto m = LabelSelectorMatches(c.selector, labels);
    EXPECT_EQ(m.ok() ? (*m ? 1 : 0) : -1, c.want) << c.name << ": " << m.status();
  }
}

TEST(PreemptRules, ViolatePDB) {
  Json victim = PodJson("victim", 1000, 10, 5);
  victim["metadata"]["labels"] = {{"app", "critical"}};
  const Json critical{{"matchLabels", {{"app", "critical"}}}};
  struct Case {
    const char* name;
    std::vector<Json> pdbs;
    bool want;
  };
  const std::vector<Case> cases = {
      {"PDB with zero disruptions allowed - violates", {Pdb("default", critical, 0)}, true},
      {"PDB with disruptions allowed - does not violate", {Pdb("default", critical, 1)}, false},
      {"PDB of another namespace", {Pdb("other", critical, 0)}, false},
      {"selector that does not match",
       {Pdb("default", {{"matchLabels", {{"app", "x"}}}}, 0)},
       false},
      {"null selector selects no pods", {Pdb("default", nullptr, 0)}, false},
      {"empty selector selects every pod", {Pdb("default", Json::object(), 0)}, true},
      {"malformed selector is ignored",
       {Pdb("default", {{"matchExpressions", {{{"key", "a"}, {"operator", "?"}}}}}, 0)},
       false},
      {"no status yet allows nothing",
       {[&] {
         Json p = Pdb("default", critical, 0);
         p.erase("status");
         return p;
       }()},
       true},
  };
  for (const auto& c : cases) EXPECT_EQ(PdbBudgets(c.pdbs).Violates(victim), c.want) << c.name;
}

// Upstream's dummy lister: without PDBs nothing is ever protected by one.
TEST(PreemptRules, ViolatePDBWithDummyLister) {
  EXPECT_FALSE(PdbBudgets(std::vector<Json>{}).Violates(PodJson("p", 1000, 10, 5)));
}

// One disruption allowed: the first victim it covers uses it up.
TEST(PreemptRules, PdbBudgetIsChargedPerVictim) {
  Json a = PodJson("a", 1000, 10, 5), b = PodJson("b", 1000, 10, 5);
  a["metadata"]["labels"] = b["metadata"]["labels"] = {{"app", "x"}};
  PdbBudgets budgets(std::vector<Json>{Pdb("default", {{"matchLabels", {{"app", "x"}}}}, 1)});
  EXPECT_FALSE(budgets.Violates(a));
  budgets.Charge(a);
  EXPECT_TRUE(budgets.Violates(b));
}

// Which device a resource name asks for: upstream maps names to its device registry; here the
// enabled vendors' ParseRequest decide (the same parse /filter uses).
TEST(PreemptRules, ExtractDeviceTypeFromResourceName) {
  auto set = vendors::VendorSet::Load(vendors::testing::kMixedConfig);
  ASSERT_TRUE(set.ok()) << set.status();
  struct Case {
    const char* name;
    Json limits;
    std::string want_vendor;  // "" = no devices
  };
  const std::vector<Case> cases = {
      {"nvidia count", {{"nvidia.com/gpu", "1"}}, "NVIDIA"},
      {"nvidia memory", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}, "NVIDIA"},
      {"hygon", {{"hygon.com/dcunum", "1"}}, "DCU"},
      {"unknown resource", {{"unknown.com/device", "1"}}, ""},
  };
  for (const auto& c : cases) {
    Json pod{
        {"metadata", {{"name", "p"}, {"namespace", "d"}, {"uid", "u"}}},
        {"spec",
         {{"containers", Json::array({{{"name", "c"}, {"resources", {{"limits", c.limits}}}}})}}}};
    auto parsed = (*set)->ParsePod(pod);
    ASSERT_TRUE(parsed.ok()) << c.name << ": " << parsed.status();
    std::string got;
    if (parsed->HasDevices()) got = parsed->containers[0].devices[0].vendor;
    EXPECT_EQ(got, c.want_vendor) << c.name;
  }
}

// Upstream lists the whole-GPU resource of every vendor it supports; here every enabled vendor's
// count resource makes a device pod, so its preemptions are refined by the devices.
TEST(PreemptRules, GetNativeWholeGPUResourcesCompleteness) {
  auto set = vendors::VendorSet::Load(std::string(vendors::testing::kMixedConfig) + "kunlun: {}\n");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_GE((*set)->vendors().size(), 5u);
  for (const auto& v : (*set)->vendors()) {
    Json pod{{"metadata", {{"name", "p"}, {"namespace", "d"}, {"uid", "u"}}},
             {"spec",
              {{"containers",
                Json::array({{{"name", "c"},
                              {"resources", {{"limits", {{v->resources().count, "1"}}}}}}})}}}};
    auto parsed = (*set)->ParsePod(pod);
    ASSERT_TRUE(parsed.ok()) << v->name() << ": " << parsed.status();
    EXPECT_TRUE(parsed->HasDevices()) << v->name() << " (" << v->resources().count << ")";
  }
}

// ---- the verb ----

// Upstream's New(nil) / New(factory): the verb works without the informer lookups too (device pods
// are found through their records), and with them.
TEST_F(PreemptTest, NewWithAndWithoutLookups) {
  for (bool lookups : {false, true}) {
    NewExtender(lookups);
    Node(1, 2, 20000);
    Add(Placed("low-a", 10000, 50, 10));
    Add(Placed("low-b", 10000, 50, 10));
    EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"low-b"})),
              std::vector<std::string>{"low-b"})
        << lookups;
  }
}

// With the usage rule on (cards registered at 200 %), the preemption check decides by the rule as
// /filter does: a pod without a profile needs room on the real card, so evicting the proposed
// 8,000 MiB pod is not enough (10,000 + 12,000 > 20,000) and the lower-priority pod goes too.
TEST_F(PreemptTest, PreemptDecidesByTheUsageRule) {
  for (int overcommit : {0, 200}) {
    SCOPED_TRACE(overcommit);
    scheduler::SchedulerOptions o;
    o.usage.overcommit_pct = overcommit;
    o.usage.namespaces = {"*"};
    ext_.reset();
    state_.reset();
    sched_ = std::move(*scheduler::Scheduler::Create(o));
    StateOptions so;
    so.clock = &clock_;
    state_ = std::make_unique<ClusterState>(*sched_, so);
    NewExtender(true);
    pods_.clear();
    Node(1, 4, overcommit ? 20000 : 40000);  // the same 40,000 MiB registered either way
    Add(Placed("low-a", 10000, 0, 10));
    Add(Placed("low-b", 8000, 0, 5));
    const std::vector<std::string> want =
        overcommit ? std::vector<std::string>{"low-b", "low-a"} : std::vector<std::string>{"low-b"};
    EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 12000, 0, 100), {"low-b"})), want);
  }
}

TEST_F(PreemptTest, PreemptHappyPath) {
  Node(1, 2, 20000);
  Add(Placed("low-a", 10000, 50, 10));
  Add(Placed("low-b", 10000, 50, 10));
  auto r = Preempt(PodJson("high-preemptor", 10000, 50, 100), {"low-b"});
  EXPECT_EQ(VictimsOn(r), std::vector<std::string>{"low-b"});
  EXPECT_EQ(r.node_to_meta_victims.size(), 1u);
}

// Deliberate difference (docs/migration.md): upstream answers the node with no victims;
// kube-scheduler refuses that from an extender that is not ignorable, so the node is left out.
TEST_F(PreemptTest, PreemptNodeWithZeroVictims) {
  Node(1, 1, 10000);
  EXPECT_EQ(VictimsOn(Preempt(PodJson("fit", 10000, 50, 100), {})), kLeftOut);
}

TEST_F(PreemptTest, PreemptProtectedPodDropsNode) {
  Node(1, 1, 10000);
  Add(WithOwner(Placed("ds", 10000, 100, 10), "DaemonSet"));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 100, 100), {"ds"})), kLeftOut);
}

TEST_F(PreemptTest, PreemptAddsAdditionalVictim) {
  Node(1, 2, 20000);
  Add(WithOwner(Placed("protected", 10000, 50, 10), "DaemonSet"));
  Add(Placed("evict", 10000, 50, 5));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"protected"})),
            std::vector<std::string>{"evict"});
}

// Victims are added best first (lowest priority, then newest) and only as many as needed; pods of
// equal or higher priority, unbound reservations and pods of other nodes are never added.
TEST_F(PreemptTest, PreemptAddsTheBestVictimsOnly) {
  Node(1, 4, 40000);
  Add(Placed("same-priority", 10000, 25, 100));
  Json newer = Placed("newer", 10000, 25, 5);
  newer["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z";
  Add(newer);
  Add(Placed("older", 10000, 25, 5));
  Add(Placed("lowest", 5000, 25, 1));
  // 5000 MiB free after "lowest"; the preemptor needs 15000: "lowest", then "newer".
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 15000, 25, 100), {"same-priority"})),
            (std::vector<std::string>{"lowest", "newer"}));
}

TEST_F(PreemptTest, PreemptEqualPriorityVictimIsRefused) {
  Node(1, 1, 10000);
  Add(Placed("peer", 10000, 50, 100));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"peer"})), kLeftOut);
}

// A whole card held (all its memory and cores) is freed by its pod's eviction.
TEST_F(PreemptTest, PreemptNativeGPUAccounting) {
  Node(1, 1, 10000);
  Add(Placed("native", 10000, 100, 5));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("vgpu", 10000, 50, 100), {"native"})),
            std::vector<std::string>{"native"});
  EXPECT_EQ(VictimsOn(Preempt(PodJson("vgpu", 10000, 50, 100), {})), kLeftOut);
}

TEST_F(PreemptTest, PreemptMultiContainerPod) {
  Node(2, 1, 10000);
  Json victim = Placed("victim", 10000, 50, 5);
  victim["spec"]["containers"].push_back(victim["spec"]["containers"][0]);
  victim["spec"]["containers"][1]["name"] = "second";
  victim["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] =
      "node1-gpu0,NVIDIA,10000,50:;node1-gpu1,NVIDIA,10000,50:;";
  Add(victim);
  Json preemptor = PodJson("preemptor", 10000, 50, 100);
  preemptor["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
  EXPECT_EQ(VictimsOn(Preempt(preemptor, {"victim"})), std::vector<std::string>{"victim"});
}

// A PodDisruptionBudget that allows no disruption keeps its pod; kube-scheduler's own victim and
// an unprotected one are chosen instead.
TEST_F(PreemptTest, PreemptPDBViolation) {
  Node(1, 3, 30000);
  Json guarded = Placed("protected", 10000, 30, 5);
  guarded["metadata"]["labels"] = {{"app", "critical"}};
  Json guarded2 = Placed("protected-2", 10000, 30, 1);
  guarded2["metadata"]["labels"] = {{"app", "critical"}};
  Add(guarded);
  Add(guarded2);
  Add(Placed("evictable", 10000, 30, 5));
  pdbs_ = std::vector<Json>{Pdb("default", {{"matchLabels", {{"app", "critical"}}}}, 0)};
  // kube-scheduler's proposal stands.
  EXPECT_EQ(VictimsOn(Preempt(PodJson("preemptor", 10000, 30, 100), {"evictable"})),
            std::vector<std::string>{"evictable"});
  // Needing two more victims, both guarded but one: the budget keeps them, the node is left out.
  EXPECT_EQ(VictimsOn(Preempt(PodJson("preemptor", 20000, 30, 100), {"evictable"})), kLeftOut);
  // A budget of one disruption lets one guarded pod go (the lower priority one), not two.
  pdbs_ = std::vector<Json>{Pdb("default", {{"matchLabels", {{"app", "critical"}}}}, 1)};
  EXPECT_EQ(VictimsOn(Preempt(PodJson("preemptor", 20000, 30, 100), {"evictable"})),
            (std::vector<std::string>{"evictable", "protected-2"}));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("preemptor", 30000, 30, 100), {"evictable"})), kLeftOut);
  // Budgets not listed yet: kube-scheduler's own victim still goes, none is added.
  pdbs_ = std::nullopt;
  EXPECT_EQ(VictimsOn(Preempt(PodJson("preemptor", 10000, 30, 100), {"evictable"})),
            std::vector<std::string>{"evictable"});
  EXPECT_EQ(VictimsOn(Preempt(PodJson("preemptor", 20000, 30, 100), {"evictable"})), kLeftOut);
}

// An init container's grant counts while the init container runs; evicting its pod frees it.
TEST_F(PreemptTest, PreemptInitContainerRecognition) {
  Node(1, 2, 20000);
  Json victim = Placed("victim", 10000, 50, 5);
  victim["spec"]["initContainers"] = victim["spec"]["containers"];
  victim["spec"]["initContainers"][0]["name"] = "init";
  victim["spec"]["containers"][0]["resources"] = Json::object();
  victim["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] =
      "node1-gpu0,NVIDIA,15000,50:;;";
  Add(victim);
  ASSERT_EQ(state_->Pods().size(), 1u);
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"victim"})),
            std::vector<std::string>{"victim"});
}

TEST_F(PreemptTest, PassthroughMetaVictims) {
  Json cpu_only{
      {"metadata", {{"name", "cpu-only"}, {"namespace", "default"}, {"uid", "c"}}},
      {"spec",
       {{"containers",
         Json::array({{{"name", "c"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}})}}}};
  auto r = Preempt(cpu_only, {"some-uid"});
  EXPECT_EQ(VictimsOn(r), std::vector<std::string>{"some-uid"});
}

TEST_F(PreemptTest, ResolveVictimsMapLegacyFormat) {
  Node(1, 2, 20000);
  Add(Placed("low-a", 10000, 50, 10));
  Add(Placed("low-b", 10000, 50, 10));
  ExtenderPreemptionArgs a;
  a.pod = PodJson("high", 10000, 50, 100);
  a.node_to_victims = std::map<std::string, Victims>{{kNode, {{pods_["low-b"]}, 1}}};
  auto r = ext_->Preempt(a);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(VictimsOn(*r), std::vector<std::string>{"low-b"});
  EXPECT_EQ(r->node_to_meta_victims[kNode].num_pdb_violations, 1);
}

TEST_F(PreemptTest, ResolveVictimsMapEmptyAndMinimal) {
  ExtenderPreemptionArgs a;
  a.pod = PodJson("high", 10000, 50, 100);
  auto r = ext_->Preempt(a);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->node_to_meta_victims.empty());
}

// A node whose registration does not decode offers no devices (upstream: the device plugin's
// GetNodeDevices fails).
TEST_F(PreemptTest, PreemptHardwareDriverError) {
  state_->OnNode(
      Json{{"metadata",
            {{"name", kNode}, {"annotations", {{"hami.io/node-nvidia-register", "[{garbage"}}}}}});
  Add(Placed("low", 10000, 50, 10));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"low"})), kLeftOut);
}

TEST_F(PreemptTest, PreemptDeviceFitFails) {
  Node(1, 2, 20000);
  Add(Placed("low", 10000, 50, 10));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 30000, 50, 100), {"low"})), kLeftOut);
}

TEST_F(PreemptTest, PreemptNodeNotFoundInCache) {
  EXPECT_EQ(
      VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"any-uid"}, "ghost-node"), "ghost-node"),
      kLeftOut);
}

// Deliberate difference: a victim that is gone has freed its devices; when the pod fits without
// any victim the node is left out (upstream answers it with none).
TEST_F(PreemptTest, PreemptVictimNotFoundInCache) {
  Node(1, 1, 10000);
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"ghost-pod-uid"})), kLeftOut);
  Add(Placed("real", 10000, 50, 10));
  EXPECT_EQ(VictimsOn(Preempt(PodJson("high", 10000, 50, 100), {"ghost-pod-uid"})),
            std::vector<std::string>{"real"});
}

TEST_F(PreemptTest, PreemptMetricsIncrement) {
  const int64_t before = ext_->counters().preempt_total.load();
  Preempt(PodJson("high", 10000, 50, 100), {});
  EXPECT_EQ(ext_->counters().preempt_total.load(), before + 1);
  EXPECT_EQ(ext_->HandlePreempt("{").status, 400);
  EXPECT_EQ(ext_->counters().preempt_total.load(), before + 2);
  const std::string metrics = RenderMetrics(*sched_, *state_, &ext_->counters());
  EXPECT_NE(metrics.find("hami_extender_preempt_requests_total 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("hami_extender_preempt_errors_total 1"), std::string::npos) << metrics;
}

// The request and the gates, over HandlePreempt: errors are HTTP errors (the reply has no Error).
TEST_F(PreemptTest, HandlePreemptStatusTable) {
  Node(1, 2, 20000);
  Add(Placed("low-a", 10000, 50, 10));
  Add(Placed("low-b", 10000, 50, 10));
  const std::string ok =
      Json{{"Pod", PodJson("high", 10000, 50, 100)},
           {"NodeNameToVictims", nullptr},
           {"NodeNameToMetaVictims",
            {{kNode, {{"Pods", {{{"UID", "low-a"}}}}, {"NumPDBViolations", 0}}}}}}
          .dump();
  struct Case {
    const char* name;
    std::string body;
    bool leader, synced;
    int code;
    std::string body_part;
  };
  const std::vector<Case> cases = {
      {"ok", ok, true, true, 200,
       R"({"NodeNameToMetaVictims":{"node1":{"NumPDBViolations":0,"Pods":[{"UID":"low-a"}]}}})"},
      {"not JSON", "{", true, true, 400, "not valid JSON"},
      {"no Pod", R"({"NodeNameToMetaVictims":{}})", true, true, 400, "field Pod"},
      {"UID not a string", R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":1}]}}})", true,
       true, 400, "Pods[0] has no UID"},
      {"victims not an object", R"({"Pod":{},"NodeNameToVictims":[1]})", true, true, 400,
       "NodeNameToVictims must be an object"},
      {"victim pod without uid", R"({"Pod":{},"NodeNameToVictims":{"n":{"Pods":[{}]}}})", true,
       true, 400, "metadata.uid"},
      {"negative PDB count",
       R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[],"NumPDBViolations":-1}}})", true, true,
       400, "NumPDBViolations"},
      {"bad priority",
       R"({"Pod":{"metadata":{"name":"p","namespace":"d"},"spec":{"priority":"x"}}})", true, true,
       400, "spec.priority"},
      // Full victims whose keys differ in case (Go's decoder matches them): the uid the parser
      // read is the one answered (it was answered empty, a result that does not parse back).
      {"victim keys in another case",
       R"({"Pod":{"metadata":{"name":"cpu","namespace":"d","uid":"u-cpu"},"spec":{"containers":[]}},)"
       R"("NodeNameToVictims":{"n1":{"Pods":[{"metAdata":{"UID":"u-low"}}],"NumPDBViolations":1}}})",
       true, true, 200,
       R"({"NodeNameToMetaVictims":{"n1":{"NumPDBViolations":1,"Pods":[{"UID":"u-low"}]}}})"},
      {"not the leader", ok, false, true, 503, "not the leader"},
      {"not synced", ok, true, false, 503, "not synced"},
  };
  for (const auto& c : cases) {
    leader_ = c.leader;
    synced_ = c.synced;
    HttpResponse r = ext_->HandlePreempt(c.body);
    EXPECT_EQ(r.status, c.code) << c.name << ": " << r.body;
    EXPECT_NE(r.body.find(c.body_part), std::string::npos) << c.name << ": " << r.body;
  }
}

TEST(PreemptWire, RoundTripAndCaps) {
  ExtenderPreemptionArgs a;
  a.pod = Json{{"metadata", {{"name", "p"}}}};
  a.node_to_meta_victims = std::map<std::string, MetaVictims>{{"n1", {{"u1", "u2"}, 3}}};
  auto back = ParseExtenderPreemptionArgs(ToJson(a).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->node_to_meta_victims, a.node_to_meta_victims);
  EXPECT_FALSE(back->node_to_victims.has_value());
  // Go's encoding/json keys are matched case-insensitively; null entries are skipped.
  auto folded = ParseExtenderPreemptionArgs(
      R"({"pod":{},"nodenametometavictims":{"a":null,"b":{"pods":[null,{"uid":"x"}]}}})");
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(folded->node_to_meta_victims->size(), 1u);
  EXPECT_EQ(folded->node_to_meta_victims->at("b").pod_uids, std::vector<std::string>{"x"});

  ExtenderPreemptionResult r;
  r.node_to_meta_victims["n1"] = {{"u1"}, 1};
  auto rb = ParseExtenderPreemptionResult(ToJson(r).dump());
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->node_to_meta_victims, r.node_to_meta_victims);

  Json many = Json::object();
  for (size_t i = 0; i <= kMaxPreemptionNodes; ++i) many["n" + std::to_string(i)] = nullptr;
  auto capped = ParseExtenderPreemptionArgs(
      Json{{"Pod", Json::object()}, {"NodeNameToMetaVictims", many}}.dump());
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("more than"), std::string_view::npos);
  Json victims = Json::array();
  for (size_t i = 0; i <= kMaxVictimsPerNode; ++i) victims.push_back({{"UID", "u"}});
  capped = ParseExtenderPreemptionArgs(Json{
      {"Pod", Json::object()},
      {"NodeNameToMetaVictims",
       {{"n", {{"Pods", victims}}}}}}.dump());
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("more than"), std::string_view::npos);
}

}  // namespace
}  // namespace hami::extender
