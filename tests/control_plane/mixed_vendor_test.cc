// A mixed cluster end to end (label integration): NVIDIA, Ascend, Hygon and Cambricon nodes
// registered exactly as those vendors' device plugins annotate/capacity them, on the fake API
// server; pods go webhook -> create -> filter -> bind through the production control plane wired
// with a VendorSet (as `hami scheduler --device-config` wires it). Each pod must land only where a
// device fits it, with the decision annotations that vendor's device plugin reads (values as in
// src/vendors/mixed_cluster_test.cc); a second replica rebuilds every vendor's usage from those
// annotations.
#include <gtest/gtest.h>

#include <set>
#include <span>

#include "extender/metrics.h"
#include "harness.h"
#include "vendors/testing/mixed_config.h"
#include "vendors/vendor_set.h"

namespace hami::controlplane {
namespace {

using k8s::testing::FakeApiServer;

const char* const kConfig = vendors::testing::kMixedConfig;

Json NodeObject(const std::string& name, const Json& annotations, const Json& capacity) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"annotations", annotations}}},
              {"status", {{"capacity", capacity}, {"allocatable", capacity}}}};
}

// The four nodes as their device plugins register them.
std::vector<Json> MixedNodes() {
  return {
      NodeObject(
          "gpu-node",
          {{"hami.io/node-nvidia-register",
            R"([{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":true,"mode":"hami-core"}])"}},
          {{"nvidia.com/gpu", "10"}}),
      NodeObject(
          "npu-node",
          {{"hami.io/node-register-Ascend910B3",
            R"([{"id":"910B3-0","count":4,"devmem":65536,"devcore":100,"type":"Ascend910B3","health":true}])"}},
          {{"huawei.com/Ascend910B3", "4"}}),
      NodeObject("dcu-node",
                 {{"hami.io/node-dcu-register", "DCU-0a1b,4,16368,100,DCU-Z100L,0,true,0,:"}},
                 {{"hygon.com/dcunum", "4"}}),
      NodeObject("mlu-node", Json::object(), {{"cambricon.com/mlu.smlu.vcore", "200"}}),
  };
}

// A control-plane replica with vendors: the objects scheduler_main.cc builds, minus the HTTP server
// (the verbs are called directly; the API traffic is real).
struct MixedReplica {
  MixedReplica(FakeApiServer& api, const vendors::VendorSet& set) {
    k8s::ClientConfig cfg;
    cfg.server = api.url();
    cfg.qps = 0;
    client = std::move(*k8s::Client::Create(cfg, {}));
    scheduler::SchedulerOptions so;
    so.vendor_rules = &set;
    sched = std::move(*scheduler::Scheduler::Create(so));
    extender::StateOptions sto;
    sto.vendors = &set;
    state = std::make_unique<extender::ClusterState>(*sched, sto);
    controller =
        std::make_unique<extender::Controller>(*client, *state, extender::ControllerOptions{});
    extender::ExtenderOptions eo;
    ext = std::make_unique<extender::Extender>(*sched, *state, client.get(), eo);
    webhook::WebhookOptions wo;
    wo.vendors = &set;
    wh = std::make_unique<webhook::Webhook>(wo);
    controller->Start();
  }
  ~MixedReplica() { controller->Stop(); }

  std::unique_ptr<k8s::Client> client;
  std::unique_ptr<scheduler::Scheduler> sched;
  std::unique_ptr<extender::ClusterState> state;
  std::unique_ptr<extender::Controller> controller;
  std::unique_ptr<extender::Extender> ext;
  std::unique_ptr<webhook::Webhook> wh;
};

// `containers`: one container object, or an array of them.
Json Pod(const std::string& name, const Json& containers) {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "mixed"}}},
      {"spec", {{"containers", containers.is_array() ? containers : Json::array({containers})}}}};
}
Json Ctr(const std::string& name, const Json& limits) {
  return Json{{"name", name}, {"image", "app"}, {"resources", {{"limits", limits}}}};
}

// The decision keys a vendor's device plugin reads, with their values, are on the pod.
void ExpectAnnotations(const Json& ann, const std::map<std::string, std::string>& want) {
  for (const auto& [k, v] : want) {
    ASSERT_TRUE(ann.contains(k)) << k << " missing in " << ann.dump();
    EXPECT_EQ(ann[k], v) << k;
  }
}

// One device's usage as the scheduler cache of a replica must come to hold it.
struct Usage {
  std::string node, uuid;
  core::DeviceUsage want;
};
void ExpectUsages(MixedReplica& r, std::span<const Usage> usages) {
  for (const Usage& u : usages) {
    SCOPED_TRACE(u.uuid);
    EXPECT_TRUE(WaitFor([&] {
      auto snap = r.sched->cache().Snapshot(u.node);
      if (!snap) return false;
      for (size_t i = 0; i < snap->info.devices.size(); ++i)
        if (snap->info.devices[i].uuid == u.uuid) return snap->usage[i] == u.want;
      return false;
    })) << "usage of "
        << u.uuid << " on " << u.node;
  }
}

const std::vector<std::string> kNodes = {"gpu-node", "npu-node", "dcu-node", "mlu-node"};

class MixedVendorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    for (const auto& n : node_objects_) ASSERT_TRUE(api_.Upsert("nodes", n).ok());
    auto set = vendors::VendorSet::Load(config_);
    ASSERT_TRUE(set.ok()) << set.status();
    set_ = std::move(*set);
  }
  std::unique_ptr<MixedReplica> Start() {
    auto r = std::make_unique<MixedReplica>(api_, *set_);
    EXPECT_TRUE(r->controller->WaitForSync(std::chrono::seconds(20)));
    const size_t want = registered_nodes_ != 0 ? registered_nodes_ : nodes_.size();
    EXPECT_TRUE(WaitFor([&] { return r->sched->cache().node_count() == want; }))
        << r->sched->cache().node_count() << " nodes registered";
    return r;
  }
  // Webhook -> create -> filter -> bind. Returns the stored pod, or null with the reason in *why.
  Json Schedule(MixedReplica& rep, const Json& spec, std::string* why,
                extender::ExtenderFilterResult* filtered) {
    webhook::AdmissionRequest req;
    req.uid = "r";
    req.namespace_ = "mixed";
    req.operation = "CREATE";
    req.kind = "Pod";
    req.object = spec;
    const webhook::AdmissionResponse adm = rep.wh->Review(req);
    if (!adm.allowed) {
      *why = adm.message;
      return nullptr;
    }
    Json admitted = adm.patch ? spec.patch(*adm.patch) : spec;
    auto created = rep.client->Create(k8s::kPods, "mixed", admitted);
    if (!created.ok()) {
      *why = std::string(created.status().message());
      return nullptr;
    }
    extender::ExtenderArgs args;
    args.pod = *created;
    args.node_names = nodes_;
    *filtered = rep.ext->Filter(args);
    if (!filtered->error.empty() || !filtered->node_names || filtered->node_names->size() != 1) {
      *why = filtered->error.empty() ? "unschedulable" : filtered->error;
      return nullptr;
    }
    const std::string node = (*filtered->node_names)[0];
    const auto bound = rep.ext->Bind(
        {(*created)["metadata"]["name"], "mixed", (*created)["metadata"]["uid"], node});
    if (!bound.error.empty()) {
      *why = bound.error;
      return nullptr;
    }
    return *api_.Get("pods", "mixed", (*created)["metadata"]["name"]);
  }

  // A pod through webhook, /filter and /bind, and where it must land.
  struct LandingCase {
    const char* name;
    Json spec;
    std::string node;  // "" = must not be scheduled
    std::map<std::string, std::string> annotations;
  };
  // Schedules each case in order; the stored pods of those that landed, by case name.
  std::map<std::string, Json> Land(MixedReplica& rep, std::span<const LandingCase> cases) {
    std::map<std::string, Json> out;
    for (const LandingCase& c : cases) {
      SCOPED_TRACE(c.name);
      std::string why;
      extender::ExtenderFilterResult unused;
      const Json pod = Schedule(rep, c.spec, &why, &unused);
      EXPECT_EQ(pod.is_null(), c.node.empty()) << why;
      if (pod.is_null() || c.node.empty()) continue;
      EXPECT_EQ(pod["spec"]["nodeName"], c.node);
      ExpectAnnotations(pod["metadata"]["annotations"], c.annotations);
      out[c.name] = pod;
    }
    return out;
  }

  FakeApiServer api_;
  std::unique_ptr<vendors::VendorSet> set_;
  // The cluster: vendor configuration, node objects and their names (a subclass sets others).
  std::string config_ = kConfig;
  std::vector<Json> node_objects_ = MixedNodes();
  std::vector<std::string> nodes_ = kNodes;
  size_t registered_nodes_ = 0;  // nodes with devices (0: all of nodes_)
};

TEST_F(MixedVendorTest, EachPodLandsOnItsVendorWithItsDevicePluginsAnnotations) {
  auto rep = Start();
  struct Case {
    const char* name;
    Json spec;
    std::string node;                                // "" = must not be scheduled
    std::map<std::string, std::string> annotations;  // decision keys its device plugin reads
    std::vector<std::string> absent = {};   // keys of other vendors that must not be written
    std::string unschedulable_on_npu = "";  // with node "": reason part on npu-node
  };
  const Case cases[] = {
      {"cuda share",
       Pod("cuda", {Ctr("c", {{"nvidia.com/gpu", "1"},
                              {"nvidia.com/gpumem", "3000"},
                              {"nvidia.com/gpucores", "30"}})}),
       "gpu-node",
       {{"hami.io/vgpu-devices-allocated",
         "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;"},
        {"hami.io/vgpu-devices-to-allocate",
         "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;"}},
       {"hami.io/dcu-devices-allocated", "hami.io/Ascend910B3-devices-allocated"}},
      {"npu: 10000 MiB rounds up to vir05 (the webhook adds nothing but the scheduler)",
       Pod("npu", {Ctr("c", {{"huawei.com/Ascend910B3", "1"},
                             {"huawei.com/Ascend910B3-memory", "10000"}})}),
       "npu-node",
       {{"hami.io/Ascend910B3-devices-allocated", "910B3-0,Ascend910B3,16384,25:;"},
        {"hami.io/Ascend910B3-devices-to-allocate", "910B3-0,Ascend910B3,16384,25:;"},
        {"huawei.com/Ascend910B3",
         R"([{"UUID":"910B3-0","core":25,"memory":16384,"temp":"vir05_1c_16g"}])"}},
       {"hami.io/vgpu-devices-allocated"}},
      {"npu: memory alone, the webhook adds the count; 20000 MiB rounds up to vir10",
       Pod("npu2", {Ctr("c", {{"huawei.com/Ascend910B3-memory", "20000"}})}),
       "npu-node",
       {{"hami.io/Ascend910B3-devices-allocated", "910B3-0,Ascend910B3,32768,50:;"}},
       {}},
      {"dcu share",
       Pod("dcu", {Ctr("c", {{"hygon.com/dcunum", "1"},
                             {"hygon.com/dcumem", "2000"},
                             {"hygon.com/dcucores", "20"}})}),
       "dcu-node",
       {{"hami.io/dcu-devices-allocated", "DCU-0a1b,DCU,2000,20:;"},
        {"hami.io/dcu-devices-to-allocate", "DCU-0a1b,DCU,2000,20:;"}},
       {"hami.io/vgpu-devices-allocated"}},
      {"mlu share with its profile",
       Pod("mlu", {Ctr("c", {{"cambricon.com/vmlu", "1"},
                             {"cambricon.com/mlu.smlu.vmemory", "16"},  // 256 MiB units
                             {"cambricon.com/mlu.smlu.vcore", "25"}})}),
       "mlu-node",
       // Two idle cards: upstream's spread order takes the one registered last.
       {{"hami.io/cambricon-mlu-devices-allocated", "mlu-node-cambricon-mlu-1,MLU,4096,25:;"},
        {"CAMBRICON_DSMLU_PROFILE", "1_25_16"},
        {"CAMBRICON_DSMLU_ASSIGNED", "false"}},
       {"hami.io/vgpu-devices-allocated"}},
      {"npu: a third template no longer fits (16384 MiB left, vir10 needs 32768)",
       Pod("npu3", {Ctr("c", {{"huawei.com/Ascend910B3", "1"},
                              {"huawei.com/Ascend910B3-memory", "30000"}})}),
       "",
       {},
       {},
       "CardInsufficientMemory"},
      {"one container NVIDIA, one DCU: no node has both",
       Pod("both", {Ctr("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}}),
                    Ctr("b", {{"hygon.com/dcunum", "1"}, {"hygon.com/dcumem", "1000"}})}),
       "",
       {},
       {},
       "NodeInsufficientDevice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string why;
    extender::ExtenderFilterResult filtered;
    Json pod = Schedule(*rep, c.spec, &why, &filtered);
    if (c.node.empty()) {
      EXPECT_TRUE(pod.is_null());
      EXPECT_EQ(why, "unschedulable");
      std::string on_npu = filtered.failed_nodes.count("npu-node")
                               ? filtered.failed_nodes["npu-node"]
                               : filtered.failed_and_unresolvable["npu-node"];
      EXPECT_NE(on_npu.find(c.unschedulable_on_npu), std::string::npos) << on_npu;
      continue;
    }
    ASSERT_FALSE(pod.is_null()) << why;
    EXPECT_EQ(pod["spec"]["nodeName"], c.node);
    const Json& ann = pod["metadata"]["annotations"];
    EXPECT_EQ(ann["hami.io/vgpu-node"], c.node);
    EXPECT_EQ(ann["hami.io/bind-phase"], "allocating");
    ExpectAnnotations(ann, c.annotations);
    for (const auto& k : c.absent) EXPECT_FALSE(ann.contains(k)) << k;
    // The chosen node is not among the refused ones (on success the extender reports refusals only
    // when it has them; an unschedulable pod gets a reason per node, checked above).
    EXPECT_EQ(filtered.failed_nodes.count(c.node) + filtered.failed_and_unresolvable.count(c.node),
              0u);
  }
  // Each vendor's quota resources count that vendor's grants (upstream's quota manager): NVIDIA
  // the CUDA share only, Ascend the two templates as rounded, Cambricon in MiB (16 x 256).
  const extender::PodTotals want = {{"nvidia.com/gpumem", 3000},
                                    {"nvidia.com/gpucores", 30},
                                    {"huawei.com/Ascend910B3-memory", 16384 + 32768},
                                    {"huawei.com/Ascend910B3-core", 25 + 50},
                                    {"hygon.com/dcumem", 2000},
                                    {"hygon.com/dcucores", 20},
                                    {"cambricon.com/mlu.smlu.vmemory", 4096},
                                    {"cambricon.com/mlu.smlu.vcore", 25}};
  EXPECT_EQ(rep->state->NamespaceUsage()["mixed"], want);
  // The Cambricon lock carries the decision time (RFC 3339).
  auto mlu = api_.Get("pods", "mixed", "mlu");
  ASSERT_TRUE(mlu.has_value());
  EXPECT_TRUE((*mlu)["metadata"]["annotations"].contains("cambricon.com/dsmlu.lock"));

  // A fresh replica rebuilds every vendor's usage from the annotations alone.
  auto second = Start();
  const Usage usages[] = {
      {"gpu-node", "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", {1, 3000, 30}},
      {"npu-node", "910B3-0", {2, 16384 + 32768, 75}},
      {"dcu-node", "DCU-0a1b", {1, 2000, 20}},
      {"mlu-node", "mlu-node-cambricon-mlu-0", {0, 0, 0}},
      {"mlu-node", "mlu-node-cambricon-mlu-1", {1, 4096, 25}},
  };
  for (auto* r : {rep.get(), second.get()}) ExpectUsages(*r, usages);
}

TEST_F(MixedVendorTest, WebhookRefusesWhatAVendorCannotPlace) {
  auto rep = Start();
  std::string why;
  extender::ExtenderFilterResult filtered;
  Json pod = Schedule(
      *rep,
      Pod("split",
          {Ctr("c", {{"huawei.com/Ascend910B3", "2"}, {"huawei.com/Ascend910B3-memory", "8000"}})}),
      &why, &filtered);
  EXPECT_TRUE(pod.is_null());
  EXPECT_NE(why.find("cannot split memory across more than 1 device"), std::string::npos) << why;
}

TEST_F(MixedVendorTest, HousekeepingAsksEveryVendorsHandshake) {
  auto rep = Start();
  std::map<std::string, std::set<std::string>>
      asked;  // node -> handshake keys set to Requesting_<time>
  for (const auto& [node, patch] : rep->state->Housekeeping(api_.List("nodes")))
    for (const auto& [k, v] : patch["metadata"]["annotations"].items())
      if (v.is_string() && v.get<std::string>().rfind("Requesting_", 0) == 0) asked[node].insert(k);
  const std::map<std::string, std::set<std::string>> want = {
      {"gpu-node", {"hami.io/node-handshake"}},
      {"npu-node", {"hami.io/node-handshake-Ascend910B3"}},
      {"dcu-node", {"hami.io/node-handshake-dcu"}},
      // mlu-node: Cambricon registers through capacity and has no handshake key.
  };
  EXPECT_EQ(asked, want);
}

// The backends added later (AWS Neuron, Vastai, Biren, Intel i915), nodes as their device plugins
// publish them, through webhook, /filter and /bind on the fake API server.
class NewerVendorTest : public MixedVendorTest {
 protected:
  NewerVendorTest() {
    config_ = "nvidia: {}\nawsneuron: {}\nvastai: {}\nbiren: {}\nintel: {}\n";
    Json trn = NodeObject("trn-node", Json::object(),
                          {{"aws.amazon.com/neuron", "4"}, {"aws.amazon.com/neuroncore", "8"}});
    trn["metadata"]["labels"] = {{"node.kubernetes.io/instance-type", "trn1.32xlarge"}};
    node_objects_ = {
        trn,
        NodeObject(
            "va-node",
            {{"hami.io/node-va-register",
              R"([{"id":"va-0","index":0,"count":4,"devmem":32768,"devcore":100,"type":"Vastai","health":true}])"}},
            {{"vastaitech.com/va", "4"}}),
        NodeObject(
            "br-node",
            {{"hami.io/node-biren-register",
              R"([{"id":"br-0","index":0,"count":2,"devmem":65536,"devcore":100,"type":"Biren","health":true}])"}},
            {{"birentech.com/gpu", "2"}}),
        NodeObject("i915-node", Json::object(),
                   {{"gpu.intel.com/i915", "20"},
                    {"gpu.intel.com/millicores", "2000"},
                    {"gpu.intel.com/memory.max", "32Gi"}}),
    };
    nodes_ = {"trn-node", "va-node", "br-node", "i915-node"};
  }
};

TEST_F(NewerVendorTest, EachPodLandsOnItsVendorWithItsDevicePluginsAnnotations) {
  auto rep = Start();
  const LandingCase cases[] = {
      {"neuron: one core of the last device",
       Pod("core", Ctr("c", {{"aws.amazon.com/neuroncore", "1"}})),
       "trn-node",
       {{"hami.io/aws-neuron-devices-allocated", "trn-node-AWSNeuron-3,AWSNeuron,0,1:;"},
        {"AWS_NEURON_IDS", "6"},
        {"NEURON_RESOURCE_TYPE", "aws.amazon.com/neuroncore"},
        {"aws.amazon.com/predicate-node", "trn-node"},
        {"NEURON_ALLOCATED", "false"}}},
      {"neuron: 2 devices are no aligned block on Trainium",
       Pod("two", Ctr("c", {{"aws.amazon.com/neuron", "2"}})),
       "",
       {}},
      {"neuron: a device hosts one pod, the next core pod takes device 2",
       Pod("core2", Ctr("c", {{"aws.amazon.com/neuroncore", "2"}})),
       "trn-node",
       {{"hami.io/aws-neuron-devices-allocated", "trn-node-AWSNeuron-2,AWSNeuron,0,2:;"},
        {"AWS_NEURON_IDS", "2"}}},
      {"vastai: a time slice",
       Pod("va", Ctr("c", {{"vastaitech.com/va", "1"}})),
       "va-node",
       {{"hami.io/Vastai-devices-allocated", "va-0,Vastai,0,0:;"},
        {"hami.io/Vastai-devices-to-allocate", "va-0,Vastai,0,0:;"}}},
      {"biren: a time slice",
       Pod("br", Ctr("c", {{"birentech.com/gpu", "1"}})),
       "br-node",
       {{"hami.io/Biren-devices-allocated", "br-0,Biren,0,0:;"},
        {"hami.io/Biren-devices-to-allocate", "br-0,Biren,0,0:;"}}},
      {"intel: half a GPU and 4 GiB",
       Pod("gpu", Ctr("c", {{"gpu.intel.com/i915", "1"},
                            {"gpu.intel.com/millicores", "500"},
                            {"gpu.intel.com/memory.max", "4Gi"}})),
       "i915-node",
       // two idle GPUs: the default policy's order takes the one registered last
       {{"hami.io/IntelI915-devices-allocated", "i915-node-i915-card1,IntelI915,4096,50:;"},
        {"gas-container-cards", "card1"}}},
      {"intel: 1500 millicores on one GPU is denied by the webhook",
       Pod("big", Ctr("c", {{"gpu.intel.com/i915", "1"}, {"gpu.intel.com/millicores", "1500"}})),
       "",
       {}},
  };
  Land(*rep, cases);
  // A fresh replica rebuilds the usage of every new vendor from the annotations alone.
  auto second = Start();
  const Usage usages[] = {
      {"trn-node", "trn-node-AWSNeuron-3", {1, 0, 1}},
      {"trn-node", "trn-node-AWSNeuron-2", {1, 0, 2}},
      {"va-node", "va-0", {1, 0, 0}},
      {"br-node", "br-0", {1, 0, 0}},
      {"i915-node", "i915-node-i915-card1", {1, 4096, 50}},
  };
  ExpectUsages(*second, usages);
}

}  // namespace
}  // namespace hami::controlplane

namespace hami::controlplane {
namespace {

// Dynamic MIG end to end: a node whose A100 registers in mig mode with its profiles (as upstream's
// device plugin writes it) beside a hami-core node. Pods asking nvidia.com/vgpu-mode: mig get a
// profile instance at a free placement, written to hami.io/vgpu-mig-allocations beside the usual
// records; a second replica charges the same slices from the annotations alone.
class MigVendorTest : public MixedVendorTest {
 protected:
  MigVendorTest() {
    config_ = "nvidia: {}\n";
    node_objects_ = {
        NodeObject(
            "mig-node",
            {{"hami.io/node-nvidia-register",
              R"([{"id":"GPU-mig0","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","health":true,"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":5120,"core":14,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":1,"size":1},{"start":2,"size":1},{"start":3,"size":1},{"start":4,"size":1},{"start":5,"size":1},{"start":6,"size":1}]},{"name":"2g.10gb","memoryMB":10240,"core":28,"sliceCount":2,"placements":[{"start":0,"size":2},{"start":2,"size":2},{"start":4,"size":2}]},{"name":"3g.20gb","memoryMB":20480,"core":42,"sliceCount":3,"placements":[{"start":0,"size":4},{"start":4,"size":4}]}]}])"}},
            {{"nvidia.com/gpu", "7"}}),
        NodeObject(
            "gpu-node",
            {{"hami.io/node-nvidia-register",
              R"([{"id":"GPU-core0","count":10,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","health":true,"mode":"hami-core"}])"}},
            {{"nvidia.com/gpu", "10"}}),
    };
    nodes_ = {"mig-node", "gpu-node"};
  }
  // One container asking one GPU with `mem` MiB, the pod asking nvidia.com/vgpu-mode `mode`.
  static Json GpuPod(const char* name, const char* mem, const char* mode) {
    Json pod = Pod(name, Ctr("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", mem}}));
    pod["metadata"]["annotations"] = {{"nvidia.com/vgpu-mode", mode}};
    return pod;
  }
};

TEST_F(MigVendorTest, MigPodsGetAProfileAtAFreePlacementAndAReplicaChargesThem) {
  auto rep = Start();
  const LandingCase cases[] = {
      {"10000 MiB: 2g.10gb from slot 0",
       GpuPod("a", "10000", "mig"),
       "mig-node",
       {{"hami.io/vgpu-devices-allocated", "GPU-mig0,NVIDIA,10240,28:;"},
        {"hami.io/vgpu-devices-to-allocate", "GPU-mig0,NVIDIA,10240,28:;"},
        {"hami.io/vgpu-mig-allocations",
         R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-mig0","profile":"2g.10gb","placement":{"start":0,"size":2}}])"}}},
      {"20000 MiB: 3g.20gb from the top",
       GpuPod("b", "20000", "mig"),
       "mig-node",
       {{"hami.io/vgpu-devices-allocated", "GPU-mig0,NVIDIA,20480,42:;"},
        {"hami.io/vgpu-mig-allocations",
         R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-mig0","profile":"3g.20gb","placement":{"start":4,"size":4}}])"}}},
      {"a second 3g.20gb overlaps the 2g: no room", GpuPod("c", "20000", "mig"), "", {}},
      {"hami-core pods stay off the MIG card",
       GpuPod("d", "20000", "hami-core"),
       "gpu-node",
       {{"hami.io/vgpu-devices-allocated", "GPU-core0,NVIDIA,20000,0:;"}}},
  };
  const auto landed = Land(*rep, cases);
  ASSERT_EQ(landed.count("hami-core pods stay off the MIG card"), 1u);
  EXPECT_FALSE(
      landed.at("hami-core pods stay off the MIG card")["metadata"]["annotations"].contains(
          "hami.io/vgpu-mig-allocations"));
  // A fresh replica rebuilds the MIG card's usage, slices included, from the annotations alone.
  auto second = Start();
  const Usage usages[] = {
      {"mig-node", "GPU-mig0", {2, 10240 + 20480, 28 + 42, 0xf3}},
      {"gpu-node", "GPU-core0", {1, 20000, 0}},
  };
  ExpectUsages(*second, usages);
  // Upstream's scheduler series of MIG instances, one per grant.
  const std::string metrics = extender::RenderMetrics(*second->sched, *second->state, nullptr);
  for (const char* want : {"profile=\"2g.10gb\",gpu_instance_id=\"\",compute_instance_id=\"\","
                           "placement_start=\"0\",placement_size=\"2\"",
                           "profile=\"3g.20gb\",gpu_instance_id=\"\",compute_instance_id=\"\","
                           "placement_start=\"4\",placement_size=\"4\""})
    EXPECT_NE(metrics.find(want), std::string::npos) << want << " in\n" << metrics;
}

// Upstream's MIG preference and a container asking two GPUs where one MIG GPU fits, end to end:
// the webhook admits an allowlisted preference (upstream's chart list) and denies another; the
// preferred 3g is granted at its placement; the two instances of one GPU are recorded once each
// (the UUID twice in the records, two entries of hami.io/vgpu-mig-allocations) and a second
// replica charges them from the annotations alone.
TEST_F(MigVendorTest, PreferenceAndSeveralInstancesOfOneGpu) {
  auto rep = Start();
  Json denied = GpuPod("denied", "10000", "mig");
  denied["metadata"]["annotations"]["nvidia.com/mig-profile-preference"] = "5g";
  Json preferred = GpuPod("pref", "10000", "mig");
  preferred["metadata"]["annotations"]["nvidia.com/mig-profile-preference"] = "3g";
  Json two = Pod("two", Ctr("c", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "5000"}}));
  two["metadata"]["annotations"] = {{"nvidia.com/vgpu-mode", "mig"}};
  const LandingCase cases[] = {
      {"a preference outside the allowlist is denied", denied, "", {}},
      {"10000 MiB preferring 3g: 3g.20gb from the top",
       preferred,
       "mig-node",
       {{"hami.io/vgpu-devices-allocated", "GPU-mig0,NVIDIA,20480,42:;"},
        {"hami.io/vgpu-mig-allocations",
         R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-mig0","profile":"3g.20gb","placement":{"start":4,"size":4}}])"}}},
      {"two GPUs of one MIG GPU: two 1g instances",
       two,
       "mig-node",
       {{"hami.io/vgpu-devices-allocated", "GPU-mig0,NVIDIA,5120,14:GPU-mig0,NVIDIA,5120,14:;"},
        {"hami.io/vgpu-mig-allocations",
         R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-mig0","profile":"1g.5gb","placement":{"start":3,"size":1}},{"containerIndex":0,"deviceIndex":1,"gpuUUID":"GPU-mig0","profile":"1g.5gb","placement":{"start":2,"size":1}}])"}}},
  };
  Land(*rep, cases);
  auto second = Start();
  const Usage usages[] = {{"mig-node", "GPU-mig0", {3, 20480 + 2 * 5120, 42 + 2 * 14, 0xfc}}};
  ExpectUsages(*second, usages);
}

// Remote GPUs (docs/vendors.md#remote-gpu) end to end: two lupine servers register their cards in
// remote mode, a node without devices runs the clients. /filter chooses a whole server per pod
// (the smallest that serves it), puts the pod on the client node, writes the fleet's decision keys
// and the server's endpoint, and charges the cards on their server; a second replica rebuilds that
// from the annotations alone, and a deleted pod gives its server back.
class RemoteGpuVendorTest : public MixedVendorTest {
 protected:
  RemoteGpuVendorTest() {
    config_ = "remotegpu:\n  libImage: projecthami/hami:test\n";
    auto server = [](const std::string& name, const std::string& ip, const std::string& port,
                     int cards) {
      Json gpus = Json::array();
      for (int i = 0; i < cards; ++i)
        gpus.push_back({{"id", StrCat("GPU-", name, "-", i)},
                        {"index", i},
                        {"count", 10},
                        {"devmem", 40960},
                        {"devcore", 100},
                        {"type", "NVIDIA-A100-SXM4-40GB"},
                        {"health", true},
                        {"mode", "remote"}});
      Json n = NodeObject(name, {{"hami.io/node-nvidia-register", gpus.dump()}},
                          {{"cpu", "64"}, {"memory", "256Gi"}});
      n["metadata"]["labels"] = {{"hami.io/lupine-server", port}};
      n["status"]["addresses"] = Json::array({{{"type", "InternalIP"}, {"address", ip}}});
      return n;
    };
    node_objects_ = {server("lupine-a", "10.0.0.5", "14900", 2),
                     server("lupine-b", "10.0.0.6", "", 1),
                     NodeObject("client", Json::object(), {{"cpu", "32"}, {"memory", "64Gi"}})};
    nodes_ = {"lupine-a", "lupine-b", "client"};
    registered_nodes_ = 2;  // the client node has no devices: the cache does not hold it
  }
  static Json RemotePod(const char* name) {
    return Pod(name, Json::array({Ctr("a", {{"nvidia.com/remote-gpu", "1"}}),
                                  Ctr("b", {{"nvidia.com/remote-gpu", "1"}})}));
  }
};

TEST_F(RemoteGpuVendorTest, EachPodGetsAWholeServerAndRunsOnTheClientNode) {
  auto rep = Start();
  const std::string b0 = "lupine-b/GPU-lupine-b-0,RemoteGPU,40960,100:";
  const std::string a01 =
      "lupine-a/GPU-lupine-a-0,RemoteGPU,40960,100:lupine-a/GPU-lupine-a-1,RemoteGPU,40960,100:";
  const LandingCase cases[] = {
      {"the smallest server, every container sees its card",
       RemotePod("r1"),
       "client",
       {{"hami.io/remote-gpu-devices-allocated", b0 + ";" + b0 + ";"},
        {"hami.io/remote-gpu-devices-to-allocate", b0 + ";" + b0 + ";"},
        {"hami.io/lupine-endpoint", "10.0.0.6:14833"},
        {"hami.io/vgpu-node", "client"}}},
      {"the other server, whole, at its labelled port",
       RemotePod("r2"),
       "client",
       {{"hami.io/remote-gpu-devices-allocated", a01 + ";" + a01 + ";"},
        {"hami.io/lupine-endpoint", "10.0.0.5:14900"}}},
      {"no server left", RemotePod("r3"), "", {}},
  };
  Land(*rep, cases);
  // A second replica charges the servers from the annotations alone, and refuses a third pod too.
  auto second = Start();
  const Usage usages[] = {
      {"lupine-b", "lupine-b/GPU-lupine-b-0", {1, 40960, 100}},
      {"lupine-a", "lupine-a/GPU-lupine-a-0", {1, 40960, 100}},
      {"lupine-a", "lupine-a/GPU-lupine-a-1", {1, 40960, 100}},
  };
  ExpectUsages(*second, usages);
  const LandingCase again[] = {{"still no server left", RemotePod("r4"), "", {}}};
  Land(*second, again);
  // Deleting the first pod gives lupine-b back; the next pod gets it.
  ASSERT_TRUE(api_.Delete("pods", "mixed", "r1").ok());
  const Usage freed[] = {{"lupine-b", "lupine-b/GPU-lupine-b-0", {}}};
  ExpectUsages(*second, freed);
  // A dry run (the full Nodes list, as the cluster-autoscaler sends it) with only the client node:
  // the servers come from the cache, the answer is the client, and nothing is reserved.
  extender::ExtenderArgs dry;
  dry.pod = RemotePod("dry");
  dry.pod["metadata"]["uid"] = "dry-uid";
  dry.nodes = std::vector<Json>{node_objects_[2]};
  const extender::ExtenderFilterResult sim = second->ext->Filter(dry);
  EXPECT_EQ(sim.error, "");
  ASSERT_TRUE(sim.node_names.has_value());
  EXPECT_EQ(*sim.node_names, std::vector<std::string>{"client"});
  ExpectUsages(*second, freed);
  const LandingCase after[] = {{"lupine-b again",
                                RemotePod("r5"),
                                "client",
                                {{"hami.io/lupine-endpoint", "10.0.0.6:14833"}}}};
  Land(*second, after);
}
}  // namespace
}  // namespace hami::controlplane
