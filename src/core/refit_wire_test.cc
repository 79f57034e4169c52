// The /refit wire (upstream device.NumaRefitRequest / NumaRefitResponse): field names, the
// validation every hostile body meets before any lookup, and the containerDevices format.
#include "core/refit_wire.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

namespace hami::core {
namespace {

using nlohmann::json;

json Valid() {
  return json{{"podUID", "3f2c-11aa"},  {"podNamespace", "default"},
              {"podName", "refit-pod"}, {"nodeName", "node-1"},
              {"containerIndex", 0},    {"containerName", "main"},
              {"deviceType", "NVIDIA"}, {"allowedDeviceUUIDs", {"GPU-b", "GPU-c"}}};
}

TEST(RefitWireTest, ParsesUpstreamFields) {
  json body = Valid();
  body["someFutureField"] = 1;  // ignored, as Go's decoder ignores unknown members
  auto r = ParseRefitRequest(body.dump());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pod_uid, "3f2c-11aa");
  EXPECT_EQ(r->pod_namespace, "default");
  EXPECT_EQ(r->pod_name, "refit-pod");
  EXPECT_EQ(r->node_name, "node-1");
  EXPECT_EQ(r->container_index, 0);
  EXPECT_EQ(r->container_name, "main");
  EXPECT_EQ(r->device_type, "NVIDIA");
  EXPECT_EQ(r->allowed_device_uuids, (std::vector<std::string>{"GPU-b", "GPU-c"}));
  auto back = ParseRefitRequest(EncodeRefitRequest(*r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *r);
}

// Upstream TestRefitNumaAllocationValidation's rows that the wire already refuses, plus the
// hostile bodies a network peer can send.
TEST(RefitWireTest, RefusesBadRequests) {
  const struct {
    const char* name;
    std::function<void(json&)> mutate;
    const char* want;
  } cases[] = {
      {"incomplete request", [](json& j) { j["podNamespace"] = ""; }, "incomplete refit request"},
      {"missing uid", [](json& j) { j.erase("podUID"); }, "incomplete refit request"},
      {"empty allowed set", [](json& j) { j["allowedDeviceUUIDs"] = json::array(); },
       "empty allowed device set"},
      {"null allowed set", [](json& j) { j["allowedDeviceUUIDs"] = nullptr; },
       "empty allowed device set"},
      {"too many allowed devices",
       [](json& j) {
         j["allowedDeviceUUIDs"] = json::array();
         for (int i = 0; i < 513; ++i)
           j["allowedDeviceUUIDs"].push_back("GPU-" + std::to_string(i));
       },
       "limit is 512"},
      {"negative container index", [](json& j) { j["containerIndex"] = -1; },
       "outside the pod's containers"},
      {"fractional container index", [](json& j) { j["containerIndex"] = 0.5; }, "containerIndex"},
      {"container index as a string", [](json& j) { j["containerIndex"] = "0"; }, "containerIndex"},
      {"namespace with a slash", [](json& j) { j["podNamespace"] = "a/b"; }, "podNamespace"},
      {"pod name with a query", [](json& j) { j["podName"] = "p?x=1"; }, "podName"},
      {"node name upper case", [](json& j) { j["nodeName"] = "Node-1"; }, "nodeName"},
      {"uid with a slash", [](json& j) { j["podUID"] = "../x"; }, "podUID"},
      {"uuid that breaks the annotation", [](json& j) { j["allowedDeviceUUIDs"] = {"GPU-a,1:"}; },
       "allowedDeviceUUIDs entry"},
      {"uuid not a string", [](json& j) { j["allowedDeviceUUIDs"] = {7}; }, "expected strings"},
      {"allowed set not an array", [](json& j) { j["allowedDeviceUUIDs"] = "GPU-a"; },
       "expected an array"},
      {"device type with a control byte", [](json& j) { j["deviceType"] = "NVI\nDIA"; },
       "deviceType"},
      {"container name not a label", [](json& j) { j["containerName"] = "Main"; }, "containerName"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    json body = Valid();
    c.mutate(body);
    auto r = ParseRefitRequest(body.dump());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status();
  }
  for (const char* body : {"", "{not-json", "[]", "null", "\"x\""}) {
    SCOPED_TRACE(body);
    EXPECT_FALSE(ParseRefitRequest(body).ok());
  }
  EXPECT_FALSE(ParseRefitRequest(std::string(kMaxRefitBodyBytes + 1, ' ')).ok());
  EXPECT_FALSE(ParseRefitRequest(std::string(5000, '[') + std::string(5000, ']')).ok());
}

TEST(RefitWireTest, ResponseRoundTrips) {
  const RefitResponse ok{true, "GPU-b,NVIDIA,20000,30:", ""};
  EXPECT_EQ(EncodeRefitResponse(ok),
            R"({"containerDevices":"GPU-b,NVIDIA,20000,30:","succeeded":true})");
  auto back = ParseRefitResponse(EncodeRefitResponse(ok));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, ok);
  const RefitResponse refused{false, "", "no allowed device fits"};
  back = ParseRefitResponse(EncodeRefitResponse(refused));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, refused);
  EXPECT_FALSE(ParseRefitResponse(R"({"succeeded":"yes"})").ok());
}

TEST(RefitWireTest, ContainerDevicesFormat) {
  const std::vector<ContainerDevice> devs{{"GPU-b", "NVIDIA", 20000, 30},
                                          {"GPU-c", "NVIDIA", 20000, 30}};
  auto text = EncodeContainerDevices(devs);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "GPU-b,NVIDIA,20000,30:GPU-c,NVIDIA,20000,30:");
  auto back = DecodeContainerDevices(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].uuid, "GPU-c");
  EXPECT_FALSE(DecodeContainerDevices("GPU-b,NVIDIA,1,1:;GPU-c,NVIDIA,1,1:").ok());
  EXPECT_FALSE(DecodeContainerDevices("GPU-b,NVIDIA,-1,1:").ok());
}

}  // namespace
}  // namespace hami::core
