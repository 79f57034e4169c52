// Upstream HAMi's AWS Neuron tests (pkg/device/awsneuron/device_test.go), case by case, through our
// Vendor interface; each table is named after the upstream test it comes from. Differences are in
// docs/vendors.md#aws-neuron (one pod per device) and docs/migration.md.
#include <gtest/gtest.h>

#include <limits>

#include "nlohmann/json.hpp"
#include "vendors/config.h"
#include "vendors/testing/defaults.h"

namespace hami::vendors {
namespace {

using testing::ByWord;

const Vendor& Neuron() {
  return ByWord("AWSNeuron");
}

NodeView Node(int64_t devices, int64_t cores, std::string instance_type = "") {
  NodeView n;
  n.name = "test";
  n.capacity = {{"aws.amazon.com/neuron", devices}, {"aws.amazon.com/neuroncore", cores}};
  if (!instance_type.empty()) n.labels["node.kubernetes.io/instance-type"] = instance_type;
  return n;
}

TEST(AwsNeuronUpstream, Test_MutateAdmission) {
  struct Case {
    const char* name;
    const char* part;  // limits or requests
    const char* resource;
    int64_t value;
    const char* denial;  // "" = admitted
  } cases[] = {
      {"set neuron number", "limits", "aws.amazon.com/neuron", 2, ""},
      {"set request-only neuron number", "requests", "aws.amazon.com/neuron", 2, ""},
      {"set neuron cores", "limits", "aws.amazon.com/neuroncore", 2, ""},
      {"reject odd neuron core count greater than one", "limits", "aws.amazon.com/neuroncore", 3,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"reject request-only odd neuron core count greater than one", "requests",
       "aws.amazon.com/neuroncore", 3,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"reject zero neuron core count", "limits", "aws.amazon.com/neuroncore", 0,
       "aws.amazon.com/neuroncore must be greater than 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto m = Neuron().Mutate({{c.part, {{c.resource, c.value}}}}, {});
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->add_limits.empty());
    if (*c.denial) {
      ASSERT_EQ(m->denials.size(), 1u);
      EXPECT_EQ(m->denials[0], c.denial);
    } else {
      EXPECT_TRUE(m->denials.empty());
    }
  }
  // Negative and past-int32 values are malformed quantities here (an error naming the resource),
  // where upstream has its own messages: both reject the pod.
  for (int64_t bad : {int64_t{-2}, int64_t{std::numeric_limits<int32_t>::max()} + 1}) {
    auto m = Neuron().Mutate({{"limits", {{"aws.amazon.com/neuroncore", bad}}}}, {});
    ASSERT_FALSE(m.ok());
    EXPECT_NE(std::string(m.status().message()).find("aws.amazon.com/neuroncore"),
              std::string::npos);
  }
  // "no neuron devices": not this vendor's container.
  auto none = Neuron().Mutate({{"limits", nlohmann::json::object()}}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(AwsNeuronUpstream, Test_GetNodeDevices) {
  auto devs = Neuron().DecodeNode(Node(1, 2, "inf2"));
  ASSERT_TRUE(devs.ok()) << devs.status();
  ASSERT_EQ(devs->size(), 1u);
  const core::DeviceInfo& d = (*devs)[0];
  EXPECT_EQ(d.uuid, "test-AWSNeuron-0");
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.devmem_mib, 0);
  EXPECT_EQ(d.devcore, 2);  // cores, where upstream keeps the mask 0b11
  EXPECT_EQ(d.count, 1);    // one pod per device (upstream: 2 core slots)
  EXPECT_EQ(d.type, "AWSNeuron-inf2");
  EXPECT_EQ(d.vendor, "AWSNeuron");
  EXPECT_TRUE(d.health);
  // Inf1: four cores per device.
  auto inf1 = Neuron().DecodeNode(Node(4, 16, "inf1.6xlarge"));
  ASSERT_TRUE(inf1.ok());
  ASSERT_EQ(inf1->size(), 4u);
  EXPECT_EQ((*inf1)[3].uuid, "test-AWSNeuron-3");
  EXPECT_EQ((*inf1)[3].devcore, 4);
}

TEST(AwsNeuronUpstream, Test_GenerateResourceRequests) {
  struct Case {
    const char* name;
    nlohmann::json resources;
    bool has;  // a request of this vendor
    bool error = false;
    int nums = 0, coresreq = 0, mem_percentage = 0;
  } cases[] = {
      {"allocate neuron device",
       {{"limits", {{"aws.amazon.com/neuron", 1}}}, {"requests", {{"aws.amazon.com/neuron", 1}}}},
       true,
       false,
       1,
       2,
       100},
      {"allocate neuron core",
       {{"limits", {{"aws.amazon.com/neuroncore", 1}}},
        {"requests", {{"aws.amazon.com/neuroncore", 1}}}},
       true,
       false,
       1,
       1,
       0},
      // upstream returns an empty request (the pod goes unaccounted); ours is an error that keeps
      // the pod Pending with the webhook's message
      {"reject odd neuron core request when admission is bypassed",
       {{"limits", {{"aws.amazon.com/neuroncore", 3}}}},
       true,
       true},
      {"reject request-only odd neuron core request when admission is bypassed",
       {{"requests", {{"aws.amazon.com/neuroncore", 3}}}},
       true,
       true},
      // as upstream: no request (the webhook denies it)
      {"reject zero neuron core request when admission is bypassed",
       {{"limits", {{"aws.amazon.com/neuroncore", 0}}}},
       false},
      {"reject negative neuron core request when admission is bypassed",
       {{"limits", {{"aws.amazon.com/neuroncore", -2}}}},
       true,
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Neuron().ParseRequest(c.resources, {});
    if (c.error) {
      EXPECT_FALSE(r.ok());
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->has_value(), c.has);
    if (!c.has) continue;
    EXPECT_EQ((*r)->vendor, "AWSNeuron");
    EXPECT_EQ((*r)->nums, c.nums);
    EXPECT_EQ((*r)->coresreq, c.coresreq);
    EXPECT_EQ((*r)->mem_percentage, c.mem_percentage);
  }
}

TEST(AwsNeuronUpstream, Test_splitCoreRequest) {
  struct Case {
    const char* name;
    int per_device;
    int64_t cores;
    int nums, coresreq;
    const char* error;
  } cases[] = {
      {"single core takes one device", 2, 1, 1, 1, ""},
      {"a full device is one device", 2, 2, 1, 2, ""},
      {"whole devices divide evenly", 2, 6, 3, 2, ""},
      {"odd count above one has no representable shape", 2, 3, 0, 0,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 2, got 3"},
      {"inf1 four-core device is addressed fully", 4, 4, 1, 4, ""},
      {"inf1 partial request fits within one four-core device", 4, 3, 1, 3, ""},
      {"inf1 whole four-core devices divide evenly", 4, 8, 2, 4, ""},
      {"inf1 odd count above one four-core device has no representable shape", 4, 5, 0, 0,
       "aws.amazon.com/neuroncore must be 1 or a multiple of 4, got 5"},
      {"unknown per-device cores falls back to the addressable limit", 0, 4, 2, 2, ""},
      // ours: at most 1024 devices per container (upstream: int32)
      {"device count stays within the device limit", 1, 1025, 0, 0,
       "aws.amazon.com/neuroncore needs 1025 devices, which exceeds the maximum of 1024"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string yaml = c.per_device > 0
                                 ? StrCat("awsneuron: {coresPerDevice: ", c.per_device, "}\n")
                                 : std::string("awsneuron: {}\n");
    auto vendors = LoadVendors(yaml);
    ASSERT_TRUE(vendors.ok()) << vendors.status();
    const Vendor& v = *vendors->back();
    ASSERT_EQ(v.common_word(), "AWSNeuron");
    const nlohmann::json res = {{"limits", {{"aws.amazon.com/neuroncore", c.cores}}}};
    auto r = v.ParseRequest(res, {});
    auto m = v.Mutate(res, {});
    ASSERT_TRUE(m.ok());
    if (*c.error) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().message(), c.error);
      ASSERT_EQ(m->denials.size(), 1u);
      EXPECT_EQ(m->denials[0], c.error);
      continue;
    }
    ASSERT_TRUE(r.ok() && *r) << r.status();
    EXPECT_EQ((*r)->nums, c.nums);
    EXPECT_EQ((*r)->coresreq, c.coresreq);
    EXPECT_TRUE(m->denials.empty());
  }
}

// Test_graphSelect: 16 devices, some in use; several devices are a consecutive free run on
// Inferentia, an aligned block of 1/4/8/16 elsewhere.
TEST(AwsNeuronUpstream, Test_graphSelect) {
  struct Case {
    const char* name;
    const char* instance_type;
    std::vector<int> used;
    int count;
    std::vector<int> want;  // device indices; empty = no fit
  } cases[] = {
      {"full allocate", "inf2", {}, 16, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
      {"8 allocate fail", "trn", {7, 13}, 8, {}},
      {"8 allocate success", "trn", {7}, 8, {8, 9, 10, 11, 12, 13, 14, 15}},
      {"8 allocate", "inf", {5, 14}, 8, {6, 7, 8, 9, 10, 11, 12, 13}},
      // constructed beside upstream's: 2 devices are no aligned block off Inferentia
      {"2 on trainium", "trn1.32xlarge", {}, 2, {}},
      {"3 consecutive on inferentia", "inf2.48xlarge", {0, 4}, 3, {1, 2, 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView node = Node(16, 32, c.instance_type);
    auto devs = Neuron().DecodeNode(node);
    ASSERT_TRUE(devs.ok());
    std::vector<core::DeviceUsage> usage(devs->size());
    for (int u : c.used) usage[u] = {1, 0, 2};
    auto req = Neuron().ParseRequest({{"limits", {{"aws.amazon.com/neuron", c.count}}}}, {});
    ASSERT_TRUE(req.ok() && *req);
    const FitResult fit = Neuron().Fit(**req, *devs, usage, {}, node);
    std::vector<int> got;
    for (const auto& g : fit.devices) got.push_back(g.index);
    EXPECT_EQ(got, c.want) << fit.Summary(16);
    if (c.want.empty()) {
      ASSERT_FALSE(fit.refusals.empty());
      EXPECT_EQ(fit.refusals.back().reason, scheduler::Reason::kNumaNotFit);
    }
  }
}

TEST(AwsNeuronUpstream, TestDevices_Fit) {
  struct Case {
    const char* name;
    int64_t cores;  // neuroncore request (upstream's table asks 2 cores)
    int nums = 1;
    std::vector<core::DeviceUsage> usage;  // of devices 0 and 1 (two 2-core trn devices)
    std::map<std::string, std::string> annotations;
    bool healthy = true;
    const char* want;  // granted uuid, or the refusal reason
  } cases[] = {
      {"fit success", 2, 1, {{}, {}}, {}, true, "test-AWSNeuron-1"},
      {"fit fail: core not enough",
       2,
       1,
       {{1, 0, 1}, {1, 0, 1}},
       {},
       true,
       "CardTimeSlicingExhausted"},
      {"fit fail: user assign use uuid mismatch",
       2,
       1,
       {{}, {}},
       {{"aws.amazon.com/use-neuron-uuid", "dev-0"}},
       true,
       "CardUuidMismatch"},
      {"fit fail: user assign no use uuid match",
       2,
       1,
       {{}, {}},
       {{"aws.amazon.com/nouse-neuron-uuid", "test-AWSNeuron-0,test-AWSNeuron-1"}},
       true,
       "CardUuidMismatch"},
      {"fit fail: card overused",
       2,
       1,
       {{1, 0, 2}, {1, 0, 2}},
       {},
       true,
       "CardTimeSlicingExhausted"},
      {"fit fail: NumaNotFit with multiple devices", 4, 2, {{}, {}}, {}, true, "NumaNotFit"},
      {"fit fail: CardNotHealth", 2, 1, {{}, {}}, {}, false, "CardNotHealth"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    NodeView node = Node(2, 4, "trn1.2xlarge");
    auto devs = Neuron().DecodeNode(node);
    ASSERT_TRUE(devs.ok());
    for (auto& d : *devs) d.health = c.healthy;
    auto req = Neuron().ParseRequest({{"limits", {{"aws.amazon.com/neuroncore", c.cores}}}}, {});
    ASSERT_TRUE(req.ok() && *req) << req.status();
    EXPECT_EQ((*req)->nums, c.nums);
    auto sel = Neuron().ParseSelectors(c.annotations);
    ASSERT_TRUE(sel.ok());
    const FitResult fit = Neuron().Fit(**req, *devs, c.usage, *sel, node);
    if (std::string(c.want).rfind("test-", 0) == 0) {
      ASSERT_EQ(fit.devices.size(), 1u) << fit.Summary(2);
      EXPECT_EQ(fit.devices[0].uuid, c.want);
      EXPECT_EQ(fit.devices[0].usedcores, 2);
      continue;
    }
    EXPECT_FALSE(fit.ok());
    bool found = false;
    for (const auto& r : fit.refusals)
      found = found || scheduler::ReasonName(r.reason) == std::string(c.want);
    EXPECT_TRUE(found) << fit.Summary(2);
  }
}

TEST(AwsNeuronUpstream, Test_PatchAnnotations) {
  struct Case {
    const char* name;
    std::vector<std::vector<core::ContainerDevice>> containers;
    std::string ids;
    bool core_type;
  } cases[] = {
      {"neuron device",
       {{{"test1", "AWSNeuron", 0, 2, 0}, {"test2", "AWSNeuron", 0, 2, 1}}},
       "0,1",
       false},
      {"neuroncore device", {{{"test1", "AWSNeuron", 0, 1, 1}}}, "2", true},
      {"init container neuron device", {{{"test1", "AWSNeuron", 0, 2, 0}}, {}}, "0", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    core::PodAllocation a;
    a.node = "node-a";
    a.containers = c.containers;
    auto ann = Neuron().EncodeDecision(a, 1700000000);
    ASSERT_TRUE(ann.ok()) << ann.status();
    EXPECT_EQ(ann->at("AWS_NEURON_IDS"), c.ids);
    EXPECT_EQ(ann->at("aws.amazon.com/predicate-node"), "node-a");
    EXPECT_EQ(ann->at("NEURON_ALLOCATED"), "false");
    EXPECT_EQ(ann->at("NEURON_ALLOC_TIME"), "1700000000000000000");
    EXPECT_EQ(ann->count("NEURON_RESOURCE_TYPE"), c.core_type ? 1u : 0u);
    if (c.core_type) {
      EXPECT_EQ(ann->at("NEURON_RESOURCE_TYPE"), "aws.amazon.com/neuroncore");
    }
    EXPECT_EQ(ann->count("hami.io/aws-neuron-devices-allocated"), 1u);
  }
  // No devices: no hand-off keys.
  core::PodAllocation empty;
  empty.containers = {{}};
  auto ann = Neuron().EncodeDecision(empty, 0);
  ASSERT_TRUE(ann.ok());
  EXPECT_EQ(ann->count("AWS_NEURON_IDS"), 0u);
}

// device_geometry_test.go TestGetNodeDevicesRejectsInvalidGeometry: NeuronCores that do not divide
// evenly among the node's devices are refused (upstream: "is not divisible"); before, the remainder
// was dropped (2 devices, 3 cores: one core each).
TEST(AwsNeuronUpstream, TestGetNodeDevicesRejectsInvalidGeometry) {
  struct Case {
    const char* name;
    int64_t devices, cores;
    int per_device;  // cores of each decoded device; -1 = refused
  } cases[] = {
      {"TestGetNodeDevicesRejectsInvalidGeometry: 2 devices, 3 cores", 2, 3, -1},
      {"7 cores on 4 devices", 4, 7, -1},
      {"inf1: 4 devices, 16 cores", 4, 16, 4},
      {"trn1: 1 device, 2 cores", 1, 2, 2},
      {"no neuroncore capacity: devices without cores", 2, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto devs = Neuron().DecodeNode(Node(c.devices, c.cores, "inf1.xlarge"));
    if (c.per_device < 0) {
      ASSERT_FALSE(devs.ok());
      EXPECT_NE(std::string(devs.status().message()).find("is not divisible"), std::string::npos)
          << devs.status();
      continue;
    }
    ASSERT_TRUE(devs.ok()) << devs.status();
    ASSERT_EQ(devs->size(), static_cast<size_t>(c.devices));
    for (const auto& d : *devs) EXPECT_EQ(d.devcore, c.per_device);
  }
}

// device_geometry_test.go TestMixedNodeGeometryAllocationWorkflow: the NeuronCore ids handed to the
// device plugin follow the target node's cores per device (upstream: a 2-core request on device 1
// is "2,3" on inf2 and "4,5" on inf1). Ours writes a part of a device as ids
// `coresPerDevice x index + k`, which are right only on devices with coresPerDevice cores: on any
// other device a core request takes the whole device (its index, as upstream's whole-device ids
// name the same cores), and a device with fewer cores than coresPerDevice is refused (its whole
// grant would read as a part). Before, a 1-core pod on inf1 device 1 with the default 2 was handed
// core 2, a core of device 0.
TEST(AwsNeuronUpstream, TestMixedNodeGeometryAllocationWorkflow) {
  struct Case {
    const char* name;
    int per_device;  // awsneuron.coresPerDevice
    int64_t devices, cores;
    const char* instance;
    const char* resource;
    int64_t value;
    const char* want;       // AWS_NEURON_IDS, or the refusal reason
    bool core_ids = false;  // NEURON_RESOURCE_TYPE written
    int usedcores = 0;
  } cases[] = {
      {"two-core target keeps two-core index stride (upstream 2,3: the same cores)", 2, 2, 4,
       "inf2.8xlarge", "aws.amazon.com/neuroncore", 2, "1", false, 2},
      {"four-core target keeps four-core index stride (upstream 4,5: whole device here)", 2, 2, 8,
       "inf1.6xlarge", "aws.amazon.com/neuroncore", 2, "1", false, 4},
      {"one core on a four-core device with coresPerDevice 2: the whole device", 2, 2, 8,
       "inf1.6xlarge", "aws.amazon.com/neuroncore", 1, "1", false, 4},
      {"one core on a two-core device", 2, 2, 4, "inf2.8xlarge", "aws.amazon.com/neuroncore", 1,
       "2", true, 1},
      {"coresPerDevice 4 on inf1: one core", 4, 2, 8, "inf1.6xlarge", "aws.amazon.com/neuroncore",
       1, "4", true, 1},
      {"coresPerDevice 4 on inf1: three cores", 4, 2, 8, "inf1.6xlarge",
       "aws.amazon.com/neuroncore", 3, "4,5,6", true, 3},
      {"coresPerDevice 4 on inf2: a whole device is refused", 4, 2, 4, "inf2.8xlarge",
       "aws.amazon.com/neuron", 1, "CardTypeMismatch"},
      {"coresPerDevice 4 on inf2: one core is refused", 4, 2, 4, "inf2.8xlarge",
       "aws.amazon.com/neuroncore", 1, "CardTypeMismatch"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto vendors = LoadVendors(StrCat("awsneuron: {coresPerDevice: ", c.per_device, "}\n"));
    ASSERT_TRUE(vendors.ok()) << vendors.status();
    const Vendor& v = *vendors->back();
    ASSERT_EQ(v.common_word(), "AWSNeuron");
    NodeView node = Node(c.devices, c.cores, c.instance);
    auto devs = v.DecodeNode(node);
    ASSERT_TRUE(devs.ok()) << devs.status();
    auto req = v.ParseRequest({{"limits", {{c.resource, c.value}}}}, {});
    ASSERT_TRUE(req.ok() && *req) << req.status();
    auto sel = v.ParseSelectors({});
    ASSERT_TRUE(sel.ok());
    const std::vector<core::DeviceUsage> usage(devs->size());
    const FitResult fit = v.Fit(**req, *devs, usage, *sel, node);
    if (std::string(c.want).find_first_not_of("0123456789,") != std::string::npos) {
      EXPECT_FALSE(fit.ok()) << "granted " << (fit.ok() ? fit.devices[0].uuid : "");
      bool found = false;
      for (const auto& r : fit.refusals)
        found = found || (scheduler::ReasonName(r.reason) == std::string(c.want) && r.never &&
                          r.detail.find("coresPerDevice") != std::string::npos);
      EXPECT_TRUE(found) << fit.Summary(static_cast<int>(devs->size()));
      continue;
    }
    ASSERT_EQ(fit.devices.size(), 1u) << fit.Summary(static_cast<int>(devs->size()));
    EXPECT_EQ(fit.devices[0].uuid, "test-AWSNeuron-1");
    EXPECT_EQ(fit.devices[0].usedcores, c.usedcores);
    core::PodAllocation a;
    a.node = "test";
    a.containers = {fit.devices};
    auto ann = v.EncodeDecision(a, 1700000000);
    ASSERT_TRUE(ann.ok()) << ann.status();
    EXPECT_EQ(ann->at("AWS_NEURON_IDS"), c.want);
    EXPECT_EQ(ann->count("NEURON_RESOURCE_TYPE"), c.core_ids ? 1u : 0u);
  }
}

}  // namespace
}  // namespace hami::vendors
