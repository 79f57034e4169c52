// A mixed cluster at the library level: NVIDIA, Ascend, Hygon and Cambricon nodes (and, in the
// second test, AWS Neuron, Vastai, Biren and Intel ones) registered the way their device plugins
// do. Every pod is parsed by every enabled vendor; its request is feasible only on nodes of its
// vendor, and its decision annotations are what that vendor's device plugin reads.
#include <gtest/gtest.h>

#include <span>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/testing/mixed_config.h"

namespace hami::vendors {
namespace {

const char* const kConfig = testing::kMixedConfig;

struct Node {
  std::string name;
  NodeView view;
};

std::vector<Node> Cluster() {
  std::vector<Node> nodes(4);
  nodes[0].name = "gpu-node";  // docs/upstream-contract.md#node-registration-and-handshake example
  nodes[0].view.annotations["hami.io/node-nvidia-register"] =
      R"([{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"health":true,"mode":"hami-core"}])";
  nodes[1].name = "npu-node";  // constructed
  nodes[1].view.annotations["hami.io/node-register-Ascend910B3"] =
      R"([{"id":"910B3-0","count":4,"devmem":65536,"devcore":100,"type":"Ascend910B3","health":true}])";
  nodes[2].name = "dcu-node";  // constructed
  nodes[2].view.annotations["hami.io/node-dcu-register"] =
      "DCU-0a1b,4,16368,100,DCU-Z100L,0,true,0,:";
  nodes[3].name = "mlu-node";
  nodes[3].view.capacity["cambricon.com/mlu.smlu.vcore"] = 200;
  for (Node& n : nodes) n.view.name = n.name;
  return nodes;
}

struct PodCase {
  const char* name;
  nlohmann::json resources;
  std::string node;                                // the only node it may land on
  std::string allocated_key;                       // decision key its device plugin reads
  std::string allocated;                           // the expected value
  std::map<std::string, std::string> extras = {};  // hand-off keys its device plugin reads
};

// Every pod is parsed by every vendor; exactly one claims it, it fits only on `pod.node` (the
// node's full device list, all vendors together, as the scheduler holds it) and gets its decision.
void ExpectEachPodOnItsNode(const std::vector<std::unique_ptr<Vendor>>& vendors,
                            const std::vector<Node>& nodes, std::span<const PodCase> pods) {
  for (const PodCase& pod : pods) {
    SCOPED_TRACE(pod.name);
    int asked = 0;
    for (const auto& v : vendors) {
      auto req = v->ParseRequest(pod.resources, {});
      ASSERT_TRUE(req.ok()) << req.status();
      if (!*req) continue;
      ++asked;
      for (const Node& n : nodes) {
        // The node's full device list, all vendors together, as the scheduler would hold it.
        std::vector<core::DeviceInfo> devs;
        for (const auto& w : vendors) {
          auto d = w->DecodeNode(n.view);
          ASSERT_TRUE(d.ok()) << d.status();
          devs.insert(devs.end(), d->begin(), d->end());
        }
        std::vector<core::DeviceUsage> usage(devs.size());
        const FitResult fit = v->Fit(**req, devs, usage, {}, n.view);
        EXPECT_EQ(fit.ok(), n.name == pod.node)
            << n.name << ": " << fit.Summary(static_cast<int>(devs.size()));
        if (!fit.ok()) continue;
        core::PodAllocation a;
        a.node = n.name;
        a.containers = {fit.devices};
        auto ann = v->EncodeDecision(a, 1700000000);
        ASSERT_TRUE(ann.ok()) << ann.status();
        EXPECT_EQ(ann->at(pod.allocated_key), pod.allocated);
        for (const auto& [k, want] : pod.extras) {
          ASSERT_TRUE(ann->count(k)) << k;
          EXPECT_EQ(ann->at(k), want) << k;
        }
      }
    }
    EXPECT_EQ(asked, 1) << "exactly one vendor claims the container";
  }
}

TEST(MixedClusterTest, EachPodFitsOnlyItsVendorAndGetsItsDecision) {
  auto vendors = LoadVendors(kConfig);
  ASSERT_TRUE(vendors.ok()) << vendors.status();
  ASSERT_EQ(vendors->size(), 5u);  // NVIDIA, Ascend, Hygon DCU and HCU, Cambricon
  const auto nodes = Cluster();
  const PodCase pods[] = {
      {"cuda",
       {{"limits",
         {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}, {"nvidia.com/gpucores", 30}}}},
       "gpu-node",
       "hami.io/vgpu-devices-allocated",
       "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;"},
      {"npu",
       {{"limits", {{"huawei.com/Ascend910B3", 1}, {"huawei.com/Ascend910B3-memory", 10000}}}},
       "npu-node",
       "hami.io/Ascend910B3-devices-allocated",
       "910B3-0,Ascend910B3,16384,25:;"},
      {"dcu",
       {{"limits",
         {{"hygon.com/dcunum", 1}, {"hygon.com/dcumem", 2000}, {"hygon.com/dcucores", 20}}}},
       "dcu-node",
       "hami.io/dcu-devices-allocated",
       "DCU-0a1b,DCU,2000,20:;"},
      {"mlu",
       {{"limits",
         {{"cambricon.com/vmlu", 1},
          {"cambricon.com/mlu.smlu.vmemory", 16},  // 256 MiB units
          {"cambricon.com/mlu.smlu.vcore", 25}}}},
       "mlu-node",
       "hami.io/cambricon-mlu-devices-allocated",
       "mlu-node-cambricon-mlu-0,MLU,4096,25:;"},
  };
  ExpectEachPodOnItsNode(*vendors, nodes, pods);
}

// The backends added after the first mixed cluster (AWS Neuron, Vastai, Biren, Intel), on nodes
// registered as their device plugins do, beside an NVIDIA node.
TEST(MixedClusterTest, NewerVendorsFitOnlyTheirNodesWithTheirPluginsHandOff) {
  auto vendors = LoadVendors("nvidia: {}\nawsneuron: {}\nvastai: {}\nbiren: {}\nintel: {}\n");
  ASSERT_TRUE(vendors.ok()) << vendors.status();
  ASSERT_EQ(vendors->size(), 6u);
  std::vector<Node> nodes(6);
  nodes[0] = Cluster()[0];
  nodes[1].name = "trn-node";
  nodes[1].view.capacity = {{"aws.amazon.com/neuron", 4}, {"aws.amazon.com/neuroncore", 8}};
  nodes[1].view.labels["node.kubernetes.io/instance-type"] = "trn1.32xlarge";
  nodes[2].name = "va-node";
  nodes[2].view.annotations["hami.io/node-va-register"] =
      R"([{"id":"va-0","index":0,"count":4,"devmem":32768,"devcore":100,"type":"Vastai","health":true}])";
  nodes[3].name = "br-node";
  nodes[3].view.annotations["hami.io/node-biren-register"] =
      R"([{"id":"br-0","index":0,"count":2,"devmem":65536,"devcore":100,"type":"Biren","health":true}])";
  nodes[4].name = "i915-node";
  nodes[4].view.capacity = {{"gpu.intel.com/i915", 20},
                            {"gpu.intel.com/millicores", 2000},
                            {"gpu.intel.com/memory.max", int64_t{32} << 30}};
  nodes[5].name = "xe-node";
  nodes[5].view.capacity = {{"gpu.intel.com/xe", 1}};
  for (Node& n : nodes) n.view.name = n.name;
  const PodCase pods[] = {
      {"neuron: 1 core, on the last device",
       {{"limits", {{"aws.amazon.com/neuroncore", 1}}}},
       "trn-node",
       "hami.io/aws-neuron-devices-allocated",
       "trn-node-AWSNeuron-3,AWSNeuron,0,1:;",
       {{"AWS_NEURON_IDS", "6"},
        {"NEURON_RESOURCE_TYPE", "aws.amazon.com/neuroncore"},
        {"aws.amazon.com/predicate-node", "trn-node"},
        {"NEURON_ALLOCATED", "false"}}},
      {"neuron: 4 devices, one aligned block",
       {{"limits", {{"aws.amazon.com/neuron", 4}}}},
       "trn-node",
       "hami.io/aws-neuron-devices-allocated",
       "trn-node-AWSNeuron-0,AWSNeuron,0,2:trn-node-AWSNeuron-1,AWSNeuron,0,2:"
       "trn-node-AWSNeuron-2,AWSNeuron,0,2:trn-node-AWSNeuron-3,AWSNeuron,0,2:;",
       {{"AWS_NEURON_IDS", "0,1,2,3"}}},
      {"vastai: a time slice",
       {{"limits", {{"vastaitech.com/va", 1}}}},
       "va-node",
       "hami.io/Vastai-devices-allocated",
       "va-0,Vastai,0,0:;",
       {{"hami.io/Vastai-devices-to-allocate", "va-0,Vastai,0,0:;"}}},
      {"biren: a time slice",
       {{"requests", {{"birentech.com/gpu", 1}}}},
       "br-node",
       "hami.io/Biren-devices-allocated",
       "br-0,Biren,0,0:;",
       {{"hami.io/Biren-devices-to-allocate", "br-0,Biren,0,0:;"}}},
      {"intel i915: half a GPU and 4 GiB",
       {{"limits",
         {{"gpu.intel.com/i915", 1},
          {"gpu.intel.com/millicores", 500},
          {"gpu.intel.com/memory.max", "4Gi"}}}},
       "i915-node",
       "hami.io/IntelI915-devices-allocated",
       "i915-node-i915-card0,IntelI915,4096,50:;",
       {{"gas-container-cards", "card0"}}},
      {"intel xe: one share",
       {{"limits", {{"gpu.intel.com/xe", 1}}}},
       "xe-node",
       "hami.io/IntelXe-devices-allocated",
       "xe-node-xe-card0,IntelXe,0,0:;",
       {{"gas-container-cards", "card0"}}},
  };
  ExpectEachPodOnItsNode(*vendors, nodes, pods);
}

}  // namespace
}  // namespace hami::vendors
