// A mixed cluster at the library level: NVIDIA, Ascend, Hygon and Cambricon nodes registered the
// way their device plugins do. Every pod is parsed by every enabled vendor; its request is feasible
// only on nodes of its vendor, and its decision annotations are what that vendor's device plugin
// reads.
#include <gtest/gtest.h>

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
  std::string node;           // the only node it may land on
  std::string allocated_key;  // decision key its device plugin reads
  std::string allocated;      // the expected value
};

TEST(MixedClusterTest, EachPodFitsOnlyItsVendorAndGetsItsDecision) {
  auto vendors = LoadVendors(kConfig);
  ASSERT_TRUE(vendors.ok()) << vendors.status();
  ASSERT_EQ(vendors->size(), 4u);
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
  for (const PodCase& pod : pods) {
    SCOPED_TRACE(pod.name);
    int asked = 0;
    for (const auto& v : *vendors) {
      auto req = v->ParseRequest(pod.resources, {});
      ASSERT_TRUE(req.ok()) << req.status();
      if (!*req) continue;
      ++asked;
      for (const Node& n : nodes) {
        // The node's full device list, all vendors together, as the scheduler would hold it.
        std::vector<core::DeviceInfo> devs;
        for (const auto& w : *vendors) {
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
      }
    }
    EXPECT_EQ(asked, 1) << "exactly one vendor claims the container";
  }
}

}  // namespace
}  // namespace hami::vendors
