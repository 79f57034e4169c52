// resource.k8s.io/v1 on the fake API server: each case is a write over HTTP and the reply (and
// stored object) the real API server gives for it.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/test_util.h"
#include "k8s/testing/wire_fixture.h"

namespace hami::k8s::testing {
namespace {

using nlohmann::json;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kClasses[] = "/apis/resource.k8s.io/v1/deviceclasses";
constexpr char kClaims[] = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
constexpr char kTemplates[] = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates";
constexpr char kDriver[] = "hami-core-gpu.project-hami.io";

json Gpu(const std::string& name) {
  return {{"name", name},
          {"allowMultipleAllocations", true},
          {"attributes", {{"type", {{"string", "hami-gpu"}}}, {"index", {{"int", 0}}}}},
          {"capacity",
           {{"memory",
             {{"value", "16Gi"},
              {"requestPolicy",
               {{"default", "16Gi"}, {"validRange", {{"min", "1Mi"}, {"step", "1Mi"}}}}}}},
            {"cores", {{"value", "100"}}}}}};
}

json Slice(const std::string& name = "node-1-gpu") {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", "node-1"},
            {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", {Gpu("gpu-0"), Gpu("gpu-1")}}}}};
}

json Claim(const std::string& name = "c") {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"devices",
             {{"requests",
               {{{"name", "gpu"},
                 {"exactly",
                  {{"deviceClassName", kDriver},
                   {"count", 1},
                   {"capacity", {{"requests", {{"memory", "4Gi"}, {"cores", "30"}}}}}}}}}}}}}}};
}

json Allocation(const std::string& request = "gpu") {
  return {{"devices",
           {{"results",
             {{{"request", request},
               {"driver", kDriver},
               {"pool", "node-1"},
               {"device", "gpu-0"},
               {"shareID", "0b9a3c4e-1f2d-4c5b-8a7e-6d5c4b3a2f10"},
               {"consumedCapacity", {{"memory", "4Gi"}, {"cores", "30"}}}}}}}},
          {"nodeSelector",
           {{"nodeSelectorTerms",
             {{{"matchFields",
                {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"node-1"}}}}}}}}}}};
}

class DraApiTest : public FakeApiServerFixture {
 protected:
  void Start(int minor = 36, std::map<std::string, bool> gates = {}) {
    FakeApiServerOptions o;
    o.kube_minor = minor;
    o.feature_gates = std::move(gates);
    StartServer(o);
  }
  std::pair<int, json> Do(const std::string& method, const std::string& path,
                          const json& body = nullptr, const std::string& ct = "application/json") {
    return FakeApiServerFixture::Do(method, path, body.is_null() ? "" : body.dump(), ct);
  }
  // Asserts a 422 whose message holds `want`, or a 201 when `want` is empty.
  void ExpectCreate(const std::string& path, const json& body, const std::string& want) {
    auto [code, reply] = Do("POST", path, body);
    if (want.empty()) {
      EXPECT_EQ(code, 201) << reply.dump();
      return;
    }
    EXPECT_EQ(code, 422) << reply.dump();
    EXPECT_EQ(reply["reason"], "Invalid");
    const std::string msg = reply.value("message", "");
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
};

TEST_F(DraApiTest, ResourceSliceValidation) {
  Start();
  struct Case {
    std::string name;
    std::function<void(json&)> edit;
    std::string want;  // "" = accepted
  };
  const std::vector<Case> cases = {
      {"valid", [](json&) {}, ""},
      {"name not a subdomain", [](json& s) { s["metadata"]["name"] = "Node_1"; },
       "metadata.name: Invalid value: \"Node_1\""},
      {"no driver", [](json& s) { s["spec"].erase("driver"); }, "spec.driver: Required value"},
      {"driver upper case", [](json& s) { s["spec"]["driver"] = "GPU.example.com"; },
       "spec.driver: Invalid value: \"GPU.example.com\""},
      {"driver of 64", [](json& s) { s["spec"]["driver"] = std::string(60, 'a') + ".com"; },
       "spec.driver: Too long: may not be more than 63 bytes"},
      {"no pool name", [](json& s) { s["spec"]["pool"].erase("name"); },
       "spec.pool.name: Required value"},
      {"pool name with empty segment", [](json& s) { s["spec"]["pool"]["name"] = "a//b"; },
       "spec.pool.name: Invalid value: \"a//b\""},
      {"pool of subdomains", [](json& s) { s["spec"]["pool"]["name"] = "zone-a/node-1"; }, ""},
      {"negative generation", [](json& s) { s["spec"]["pool"]["generation"] = -1; },
       "spec.pool.generation: Invalid value: -1: must be greater than or equal to 0"},
      {"zero slice count", [](json& s) { s["spec"]["pool"]["resourceSliceCount"] = 0; },
       "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"},
      {"no node selection", [](json& s) { s["spec"].erase("nodeName"); },
       "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`"},
      {"nodeName and allNodes", [](json& s) { s["spec"]["allNodes"] = true; },
       "but multiple fields are set"},
      {"allNodes alone",
       [](json& s) {
         s["spec"].erase("nodeName");
         s["spec"]["allNodes"] = true;
       },
       ""},
      {"129 devices",
       [](json& s) {
         s["spec"]["devices"] = json::array();
         for (int i = 0; i < 129; ++i)
           s["spec"]["devices"].push_back({{"name", "d" + std::to_string(i)}});
       },
       "spec.devices: Too many: 129: must have at most 128 items"},
      {"128 devices",
       [](json& s) {
         s["spec"]["devices"] = json::array();
         for (int i = 0; i < 128; ++i)
           s["spec"]["devices"].push_back({{"name", "d" + std::to_string(i)}});
       },
       ""},
      {"65 devices with a taint",
       [](json& s) {
         s["spec"]["devices"] = json::array();
         for (int i = 0; i < 65; ++i)
           s["spec"]["devices"].push_back({{"name", "d" + std::to_string(i)}});
         s["spec"]["devices"][0]["taints"] = {{{"key", "k"}, {"effect", "NoSchedule"}}};
       },
       "spec.devices: Too many: 65: must have at most 64 items"},
      {"duplicate device", [](json& s) { s["spec"]["devices"][1]["name"] = "gpu-0"; },
       "spec.devices[1].name: Duplicate value: \"gpu-0\""},
      {"device name not a label", [](json& s) { s["spec"]["devices"][0]["name"] = "gpu.0"; },
       "spec.devices[0].name: Invalid value: \"gpu.0\""},
      {"attribute not a C identifier",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["product-name"] = {{"string", "x"}};
       },
       "spec.devices[0].attributes[product-name]: Invalid value"},
      {"attribute id of 33",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"][std::string(33, 'a')] = {{"string", "x"}};
       },
       "Too long: may not be more than 32 bytes"},
      {"attribute with a domain",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["resource.kubernetes.io/pcieRoot"] = {
             {"string", "pci0000:00"}};
       },
       ""},
      {"attribute domain of 64",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"][std::string(60, 'a') + ".com/x"] = {{"int", 1}};
       },
       "Too long: may not be more than 63 bytes"},
      {"attribute with two values",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["index"] = {{"int", 0}, {"string", "0"}};
       },
       "exactly one value must be specified"},
      {"attribute with no value",
       [](json& s) { s["spec"]["devices"][0]["attributes"]["index"] = json::object(); },
       "attributes[index]: Required value: exactly one value must be specified"},
      {"string of 65",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["type"] = {{"string", std::string(65, 'x')}};
       },
       "attributes[type].string: Too long: may not be more than 64 bytes"},
      {"version not semver",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["driverVersion"] = {{"version", "550"}};
       },
       "attributes[driverVersion].version: Invalid value: \"550\""},
      {"semver version",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["driverVersion"] = {{"version", "550.54.15"}};
       },
       ""},
      {"33 attributes and capacities",
       [](json& s) {
         for (int i = 0; i < 31; ++i)
           s["spec"]["devices"][0]["attributes"]["a" + std::to_string(i)] = {{"int", i}};
       },
       "spec.devices[0]: Too many: 35: must have at most 32 attributes and capacities combined"},
      {"capacity name not a C identifier",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["mem-ory"] = {{"value", "1"}};
       },
       "capacity[mem-ory]: Invalid value"},
      {"capacity value not a quantity",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["cores"]["value"] = "lots"; },
       "capacity[cores].value: Invalid value: \"lots\""},
      {"capacity without value",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["cores"].erase("value"); },
       "capacity[cores].value: Required value"},
      {"request policy on an exclusive device",
       [](json& s) { s["spec"]["devices"][0].erase("allowMultipleAllocations"); },
       "capacity[memory].requestPolicy: Forbidden: allowed only when allowMultipleAllocations is "
       "true"},
      {"policy default above the value",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["default"] = "32Gi";
       },
       "requestPolicy.default: Invalid value: \"32Gi\": must not exceed the capacity value"},
      {"policy default off the step",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["default"] = "1500Ki";
       },
       "must be min plus a multiple of step"},
      {"valid values not ascending",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["cores"]["requestPolicy"] = {
             {"default", "50"}, {"validValues", {"50", "25", "100"}}};
       },
       "values must be sorted in ascending order and unique"},
      {"valid values without the default",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["cores"]["requestPolicy"] = {
             {"default", "30"}, {"validValues", {"25", "50", "100"}}};
       },
       "must be one of validValues"},
      {"both values and range",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["cores"]["requestPolicy"] = {
             {"default", "50"}, {"validValues", {"50"}}, {"validRange", {{"min", "1"}}}};
       },
       "exactly one of `validValues` or `validRange` may be set"},
      {"range without min",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["cores"]["requestPolicy"] = {
             {"default", "50"}, {"validRange", {{"max", "100"}}}};
       },
       "validRange.min: Required value"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    json s = Slice("slice-" + std::to_string(i));
    cases[i].edit(s);
    ExpectCreate(kSlices, s, cases[i].want);
  }
}

// What a server of each version keeps of a shared device and a fractional claim.
TEST_F(DraApiTest, ConsumableCapacityFieldsFollowTheGate) {
  struct Case {
    int minor;
    std::map<std::string, bool> gates;
    bool kept;
  };
  const std::vector<Case> cases = {
      {36, {}, true},
      {35, {}, false},
      {34, {}, false},
      {35, {{"DRAConsumableCapacity", true}}, true},
      {34, {{"DRAConsumableCapacity", true}}, true},
      {36, {{"DRAConsumableCapacity", false}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "1." << c.minor << " gates " << c.gates.size());
    Start(c.minor, c.gates);
    auto [code, slice] = Do("POST", kSlices, Slice());
    ASSERT_EQ(code, 201) << slice.dump();
    const json& dev = slice["spec"]["devices"][0];
    EXPECT_EQ(dev.contains("allowMultipleAllocations"), c.kept) << dev.dump();
    EXPECT_EQ(dev["capacity"]["memory"].contains("requestPolicy"), c.kept) << dev.dump();
    EXPECT_EQ(dev["capacity"]["memory"]["value"], "16Gi");  // capacity itself stays
    auto [ccode, claim] = Do("POST", kClaims, Claim());
    ASSERT_EQ(ccode, 201) << claim.dump();
    const json& exactly = claim["spec"]["devices"]["requests"][0]["exactly"];
    EXPECT_EQ(exactly.contains("capacity"), c.kept) << exactly.dump();
    json st = claim;
    st["status"]["allocation"] = Allocation();
    auto [scode, written] = Do("PUT", std::string(kClaims) + "/c/status", st);
    ASSERT_EQ(scode, 200) << written.dump();
    const json& result = written["status"]["allocation"]["devices"]["results"][0];
    EXPECT_EQ(result.contains("shareID"), c.kept) << result.dump();
    EXPECT_EQ(result.contains("consumedCapacity"), c.kept) << result.dump();
    // An update keeps what the stored object already uses (the strategy's "in use" rule): a
    // metadata-only change of the slice loses nothing more.
    json again = slice;
    again["metadata"]["labels"] = {{"a", "b"}};
    auto [ucode, updated] = Do("PUT", std::string(kSlices) + "/node-1-gpu", again);
    ASSERT_EQ(ucode, 200) << updated.dump();
    EXPECT_EQ(updated["spec"], slice["spec"]);
  }
}

TEST_F(DraApiTest, ServedFromOneThirtyFour) {
  struct Case {
    int minor;
    int code;
  };
  for (const Case& c : std::vector<Case>{{33, 404}, {34, 200}, {36, 200}}) {
    SCOPED_TRACE(c.minor);
    Start(c.minor);
    EXPECT_EQ(Do("GET", kSlices).first, c.code);
    EXPECT_EQ(Do("GET", "/apis/resource.k8s.io/v1").first, c.code);
    bool listed = false;
    const json groups = Do("GET", "/apis").second["groups"];
    for (const auto& g : groups) listed |= g["name"] == "resource.k8s.io";
    EXPECT_EQ(listed, c.code == 200);
    EXPECT_EQ(Do("GET", "/version").second["minor"], std::to_string(c.minor));
  }
}

TEST_F(DraApiTest, ClaimSpecValidation) {
  Start();
  struct Case {
    std::string name;
    std::function<void(json&)> edit;  // on spec.devices
    std::string want;
  };
  const std::vector<Case> cases = {
      {"valid", [](json&) {}, ""},
      {"neither exactly nor firstAvailable", [](json& d) { d["requests"][0].erase("exactly"); },
       "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable`"},
      {"both",
       [](json& d) {
         d["requests"][0]["firstAvailable"] = {{{"name", "a"}, {"deviceClassName", "x"}}};
       },
       "but multiple fields are set"},
      {"request name not a label", [](json& d) { d["requests"][0]["name"] = "GPU"; },
       "spec.devices.requests[0].name: Invalid value: \"GPU\""},
      {"duplicate request", [](json& d) { d["requests"].push_back(d["requests"][0]); },
       "spec.devices.requests[1].name: Duplicate value: \"gpu\""},
      {"no device class", [](json& d) { d["requests"][0]["exactly"].erase("deviceClassName"); },
       "spec.devices.requests[0].exactly.deviceClassName: Required value"},
      {"count zero", [](json& d) { d["requests"][0]["exactly"]["count"] = 0; },
       "exactly.count: Invalid value: 0: must be greater than zero"},
      {"All with a count", [](json& d) { d["requests"][0]["exactly"]["allocationMode"] = "All"; },
       "must not be specified when allocationMode is 'All'"},
      {"unknown mode", [](json& d) { d["requests"][0]["exactly"]["allocationMode"] = "Some"; },
       "exactly.allocationMode: Unsupported value: \"Some\""},
      {"empty selector",
       [](json& d) {
         d["requests"][0]["exactly"]["selectors"] = {{{"cel", {{"expression", ""}}}}};
       },
       "exactly.selectors[0].cel.expression: Required value"},
      {"capacity request not a quantity",
       [](json& d) { d["requests"][0]["exactly"]["capacity"]["requests"]["memory"] = "4 GiB"; },
       "capacity.requests[memory]: Invalid value: \"4 GiB\""},
      {"capacity request name",
       [](json& d) { d["requests"][0]["exactly"]["capacity"]["requests"]["sm-count"] = "1"; },
       "capacity.requests[sm-count]: Invalid value"},
      {"33 requests",
       [](json& d) {
         for (int i = 1; i < 33; ++i) {
           json r = d["requests"][0];
           r["name"] = "r" + std::to_string(i);
           d["requests"].push_back(r);
         }
       },
       "spec.devices.requests: Too many: 33: must have at most 32 items"},
      {"firstAvailable of 9",
       [](json& d) {
         d["requests"][0].erase("exactly");
         for (int i = 0; i < 9; ++i)
           d["requests"][0]["firstAvailable"].push_back(
               {{"name", "s" + std::to_string(i)}, {"deviceClassName", "x"}});
       },
       "spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items"},
      {"constraint on an unknown request",
       [](json& d) {
         d["constraints"] = {{{"requests", {"cpu"}}, {"matchAttribute", "gpu.example.com/numa"}}};
       },
       "spec.devices.constraints[0].requests[0]: Invalid value: \"cpu\""},
      {"constraint attribute without a domain",
       [](json& d) {
         d["constraints"] = {{{"distinctAttribute", "uuid"}}};
       },
       "constraints[0].distinctAttribute: Required value"},
      {"distinct attribute",
       [](json& d) {
         d["constraints"] = {{{"distinctAttribute", "a.io/uuid"}}};
       },
       ""},
      {"config without parameters",
       [](json& d) {
         d["config"] = {{{"opaque", {{"driver", kDriver}}}}};
       },
       "spec.devices.config[0].opaque.parameters: Required value"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    json c = Claim("c" + std::to_string(i));
    cases[i].edit(c["spec"]["devices"]);
    ExpectCreate(kClaims, c, cases[i].want);
  }
}

TEST_F(DraApiTest, ClaimStatusOnlyThroughStatusSubresource) {
  Start();
  json c = Claim();
  c["status"]["allocation"] = Allocation();
  auto [code, created] = Do("POST", kClaims, c);
  ASSERT_EQ(code, 201) << created.dump();
  EXPECT_FALSE(created.contains("status")) << "a create sets no status";
  const std::string path = std::string(kClaims) + "/c";

  // The main resource: status changes are ignored, spec changes refused.
  json put = created;
  put["status"]["allocation"] = Allocation();
  auto [pcode, kept] = Do("PUT", path, put);
  EXPECT_EQ(pcode, 200);
  EXPECT_FALSE(kept.contains("status")) << kept.dump();
  put["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2;
  auto [icode, immutable] = Do("PUT", path, put);
  EXPECT_EQ(icode, 422);
  EXPECT_NE(immutable["message"].get<std::string>().find(
                "spec: Invalid value: \"{...}\": field is immutable"),
            std::string::npos)
      << immutable.dump();

  struct Case {
    std::string name;
    std::function<void(json&)> edit;  // on status
    std::string want;                 // "" = 200
  };
  const std::vector<Case> cases = {
      {"reserved without allocation",
       [](json& s) {
         s["reservedFor"] = {{{"resource", "pods"}, {"name", "p"}, {"uid", "u1"}}};
       },
       "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"},
      {"result for an unknown request", [](json& s) { s["allocation"] = Allocation("cpu"); },
       "results[0].request: Invalid value: \"cpu\""},
      {"share id not a uuid",
       [](json& s) {
         s["allocation"] = Allocation();
         s["allocation"]["devices"]["results"][0]["shareID"] = "share-1";
       },
       "results[0].shareID: Invalid value: \"share-1\""},
      {"device name not a label",
       [](json& s) {
         s["allocation"] = Allocation();
         s["allocation"]["devices"]["results"][0]["device"] = "GPU_0";
       },
       "results[0].device: Invalid value"},
      {"device status of a device not allocated",
       [](json& s) {
         s["allocation"] = Allocation();
         s["devices"] = {{{"driver", kDriver}, {"pool", "node-1"}, {"device", "gpu-1"}}};
       },
       "status.devices[0]: Invalid value"},
      {"allocated and reserved",
       [](json& s) {
         s["allocation"] = Allocation();
         s["reservedFor"] = {{{"resource", "pods"}, {"name", "p"}, {"uid", "u1"}}};
         s["devices"] = {{{"driver", kDriver},
                          {"pool", "node-1"},
                          {"device", "gpu-0"},
                          {"shareID", "0b9a3c4e-1f2d-4c5b-8a7e-6d5c4b3a2f10"}}};
       },
       ""},
      {"allocation changed once set",
       [](json& s) { s["allocation"]["devices"]["results"][0]["device"] = "gpu-1"; },
       "status.allocation: Invalid value: \"{...}\": field is immutable"},
      {"duplicate consumer", [](json& s) { s["reservedFor"].push_back(s["reservedFor"][0]); },
       "status.reservedFor[1].uid: Duplicate value: \"u1\""},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    auto cur = fake_->Get("resourceclaims", "default", "c");
    ASSERT_TRUE(cur);
    json w = *cur;
    if (!w.contains("status")) w["status"] = json::object();
    k.edit(w["status"]);
    w["spec"]["devices"]["requests"][0]["name"] = "ignored";  // /status never changes spec
    auto [scode, reply] = Do("PUT", path + "/status", w);
    if (k.want.empty()) {
      EXPECT_EQ(scode, 200) << reply.dump();
      EXPECT_EQ(reply["spec"], created["spec"]);
      EXPECT_EQ(reply["status"]["reservedFor"].size(), 1u);
    } else {
      EXPECT_EQ(scode, 422) << reply.dump();
      EXPECT_NE(reply.value("message", "").find(k.want), std::string::npos) << reply.dump();
    }
  }
  // Merge patch of /status works as kubectl and the driver send it.
  auto [mcode, merged] = Do("PATCH", path + "/status", json{{"status", {{"reservedFor", nullptr}}}},
                            "application/merge-patch+json");
  EXPECT_EQ(mcode, 200) << merged.dump();
  EXPECT_FALSE(merged["status"].contains("reservedFor"));
}

TEST_F(DraApiTest, FirstAvailableFollowsThePrioritizedListGate) {
  struct Case {
    int minor;
    std::map<std::string, bool> gates;
    bool kept;  // false: dropped, and the request with nothing else left is refused
  };
  const std::vector<Case> cases = {
      {36, {}, true},
      {34, {}, true},  // beta, on by default from 1.34
      {36, {{"DRAPrioritizedList", false}}, false},
      {35, {{"DRAPrioritizedList", false}}, false},
  };
  json claim = Claim();
  json exactly = claim["spec"]["devices"]["requests"][0]["exactly"];
  exactly.erase("capacity");  // not gated by DRAConsumableCapacity here
  exactly["name"] = "small";
  claim["spec"]["devices"]["requests"][0] = {{"name", "gpu"},
                                             {"firstAvailable", json::array({exactly})}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "1." << c.minor << " gates " << c.gates.size());
    Start(c.minor, c.gates);
    json tpl = {{"metadata", {{"name", "fa"}}}, {"spec", {{"spec", claim["spec"]}}}};
    if (!c.kept) {
      ExpectCreate(kTemplates, tpl,
                   "spec.spec.devices.requests[0]: Required value: exactly one of `exactly` or "
                   "`firstAvailable`");
      ExpectCreate(kClaims, claim, "spec.devices.requests[0]: Required value");
      continue;
    }
    auto [code, created] = Do("POST", kTemplates, tpl);
    ASSERT_EQ(code, 201) << created.dump();
    EXPECT_EQ(created["spec"]["spec"], claim["spec"]);
  }
}

TEST_F(DraApiTest, TemplatesAndClasses) {
  Start(35);
  json tpl = {{"metadata", {{"name", "gpu-4g"}}}, {"spec", {{"spec", Claim()["spec"]}}}};
  auto [code, created] = Do("POST", kTemplates, tpl);
  ASSERT_EQ(code, 201) << created.dump();
  EXPECT_FALSE(created["spec"]["spec"]["devices"]["requests"][0]["exactly"].contains("capacity"))
      << "1.35 without the gate drops capacity requests";
  tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"].erase("deviceClassName");
  tpl["metadata"]["name"] = "bad";
  ExpectCreate(kTemplates, tpl, "spec.spec.devices.requests[0].exactly.deviceClassName: Required");
  json put = created;
  put["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3;
  auto [pcode, reply] = Do("PUT", std::string(kTemplates) + "/gpu-4g", put);
  EXPECT_EQ(pcode, 422) << reply.dump();

  json cls = {{"metadata", {{"name", kDriver}}},
              {"spec",
               {{"selectors",
                 {{{"cel", {{"expression", "device.driver == 'hami-core-gpu.project-hami.io'"}}}}}},
                {"extendedResourceName", "nvidia.com/gpu"}}}};
  auto [ccode, cstored] = Do("POST", kClasses, cls);
  ASSERT_EQ(ccode, 201) << cstored.dump();
  EXPECT_FALSE(cstored["spec"].contains("extendedResourceName")) << "DRAExtendedResource is off";
  cls["metadata"]["name"] = "other";
  cls["spec"]["selectors"][0]["cel"]["expression"] = "";
  ExpectCreate(kClasses, cls, "spec.selectors[0].cel.expression: Required value");
}

TEST_F(DraApiTest, ListWatchAndScopes) {
  Start();
  for (const char* node : {"node-1", "node-2"}) {
    json s = Slice(std::string(node) + "-gpu");
    s["spec"]["nodeName"] = node;
    s["spec"]["pool"]["name"] = node;
    ASSERT_EQ(Do("POST", kSlices, s).first, 201);
  }
  struct Case {
    std::string method, path;
    int code;
    size_t items;  // for lists
  };
  const std::vector<Case> cases = {
      {"GET", kSlices, 200, 2},
      {"GET", std::string(kSlices) + "?fieldSelector=spec.nodeName%3Dnode-2", 200, 1},
      {"GET", std::string(kSlices) + "?fieldSelector=spec.driver%3Dother.io", 200, 0},
      {"GET", std::string(kSlices) + "/node-1-gpu", 200, 0},
      {"GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceslices", 404, 0},
      {"GET", std::string(kSlices) + "/node-1-gpu/status", 404, 0},
      {"GET", "/apis/resource.k8s.io/v1/resourceclaims", 200, 0},
      {"DELETE", std::string(kSlices) + "/node-2-gpu", 200, 0},
      {"GET", kSlices, 200, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.path);
    auto [code, body] = Do(c.method, c.path);
    EXPECT_EQ(code, c.code) << body.dump();
    if (c.code == 200 && body.contains("items")) {
      EXPECT_EQ(body["items"].size(), c.items);
      if (c.path.find("resourceslices") != std::string::npos) {
        EXPECT_EQ(body["kind"], "ResourceSliceList");
      }
      EXPECT_EQ(body["apiVersion"], "resource.k8s.io/v1");
    }
  }
  // A watch sees slices as the driver writes them.
  ListOptions lo;
  lo.resource_version = fake_->CurrentResourceVersion();
  ASSERT_EQ(Do("POST", kClaims, Claim("w")).first, 201);
  std::vector<std::string> seen;
  Status s = client_->Watch(kResourceClaims, "default", lo, [&](WatchEvent& ev) {
    if (ev.type == WatchEvent::Type::kAdded)
      seen.push_back(ev.object["metadata"]["name"].get<std::string>());
    return false;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, std::vector<std::string>{"w"});
  // Discovery lists the kinds and the claim's status subresource.
  std::set<std::string> names;
  const json resources = Do("GET", "/apis/resource.k8s.io/v1").second["resources"];
  for (const auto& r : resources) names.insert(r["name"].get<std::string>());
  EXPECT_EQ(names,
            (std::set<std::string>{"deviceclasses", "resourceclaims", "resourceclaims/status",
                                   "resourceclaimtemplates", "resourceslices"}));
}

// The 1.36 rule on who may write a claim's status.devices
// (DRAResourceClaimGranularStatusAuthorization): resourceclaims/status is not enough; the writer
// also needs the driver's name on the synthetic resourceclaims/driver, with associated-node:<verb>
// when it is a service account of the node the claim is allocated to, arbitrary-node:<verb>
// otherwise. Each case: a policy, a token, a write.
TEST_F(DraApiTest, DeviceStatusNeedsTheDriverOnResourceClaimsDriver) {
  const json kSa = {{"kind", "ServiceAccount"}, {"name", "hami-dra"}, {"namespace", "hami"}};
  auto policy = [&](json rules) {
    return json::array(
        {{{"kind", "ClusterRole"}, {"metadata", {{"name", "dra"}}}, {"rules", std::move(rules)}},
         {{"kind", "ClusterRoleBinding"},
          {"metadata", {{"name", "dra"}}},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", "dra"}}},
          {"subjects", {kSa}}}});
  };
  auto rule = [](std::string resource, json verbs, json names = nullptr) {
    json r = {{"apiGroups", {"resource.k8s.io"}}, {"resources", {resource}}, {"verbs", verbs}};
    if (!names.is_null()) r["resourceNames"] = names;
    return r;
  };
  const json status_rules = {rule("resourceclaims", {"get"}),
                             rule("resourceclaims/status", {"get", "update", "patch"})};
  auto with = [&](json extra) {
    json r = status_rules;
    r.push_back(std::move(extra));
    return policy(r);
  };
  const json status_only = policy(status_rules);
  const json node_local = with(rule(
      "resourceclaims/driver", {"associated-node:update", "associated-node:patch"}, {kDriver}));
  const json other_driver =
      with(rule("resourceclaims/driver", {"associated-node:update", "associated-node:patch"},
                {"other.example.com"}));
  const json any_node = with(
      rule("resourceclaims/driver", {"arbitrary-node:update", "arbitrary-node:patch"}, {kDriver}));
  const json read_only = policy({rule("resourceclaims", {"get"})});
  const std::string kForbidden =
      "status.devices: Forbidden: changing status.devices requires "
      "resource=\"resourceclaims/driver\"";
  struct Case {
    std::string name;
    int minor;
    std::map<std::string, bool> gates;
    json policy;
    std::string token;  // node-1 (the claim's node), node-2, or an unknown one
    std::string method;
    int code;
    std::string want;  // in the message
  };
  const std::vector<Case> cases = {
      {"1.36: status alone is not enough",
       36,
       {},
       status_only,
       "node-1",
       "PUT",
       422,
       kForbidden + ", verb=\"[associated-node:update arbitrary-node:update]\" permission: "
                    "resourceclaims.resource.k8s.io \"hami-core-gpu.project-hami.io\" is "
                    "forbidden: User \"system:serviceaccount:hami:hami-dra\" cannot "
                    "associated-node:update resource \"resourceclaims/driver\""},
      {"1.36: node-local driver, update", 36, {}, node_local, "node-1", "PUT", 200, ""},
      {"1.36: node-local driver, patch", 36, {}, node_local, "node-1", "PATCH", 200, ""},
      {"1.36: node-local rule, another node's service account",
       36,
       {},
       node_local,
       "node-2",
       "PUT",
       422,
       kForbidden + ", verb=\"[arbitrary-node:update]\""},
      {"1.36: another driver's name",
       36,
       {},
       other_driver,
       "node-1",
       "PATCH",
       422,
       kForbidden + ", verb=\"[associated-node:patch arbitrary-node:patch]\""},
      {"1.36: arbitrary-node, from anywhere", 36, {}, any_node, "node-2", "PUT", 200, ""},
      {"1.36: no status permission",
       36,
       {},
       read_only,
       "node-1",
       "PUT",
       403,
       "User \"system:serviceaccount:hami:hami-dra\" cannot update resource "
       "\"resourceclaims/status\" in API group \"resource.k8s.io\" in the namespace \"default\""},
      {"1.36: unknown token", 36, {}, node_local, "stolen", "PUT", 401, "Unauthorized"},
      {"1.35: status is enough", 35, {}, status_only, "node-1", "PUT", 200, ""},
      {"1.36 with the gate off",
       36,
       {{"DRAResourceClaimGranularStatusAuthorization", false}},
       status_only,
       "node-1",
       "PUT",
       200,
       ""},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Start(k.minor, k.gates);
    for (const char* node : {"node-1", "node-2"})
      fake_->AddToken(node, {{"username", "system:serviceaccount:hami:hami-dra"},
                             {"groups", {"system:serviceaccounts", "system:authenticated"}},
                             {"extra", {{"authentication.kubernetes.io/node-name", {node}}}}});
    fake_->Authorize(k.policy);
    json c = Claim();
    c["status"]["allocation"] = Allocation();  // on node-1
    ASSERT_TRUE(fake_->Upsert("resourceclaims", c).ok());
    ClientConfig cfg;
    cfg.server = fake_->url();
    cfg.qps = 0;
    cfg.max_retries = 0;
    cfg.bearer_token = k.token;
    auto driver_client = Client::Create(cfg);
    ASSERT_TRUE(driver_client.ok());
    const json entry = {{"driver", kDriver},
                        {"pool", "node-1"},
                        {"device", "gpu-0"},
                        {"shareID", "0b9a3c4e-1f2d-4c5b-8a7e-6d5c4b3a2f10"},
                        {"conditions",
                         {{{"type", "Ready"},
                           {"status", "True"},
                           {"reason", "Prepared"},
                           {"message", ""},
                           {"lastTransitionTime", "2026-12-04T01:00:00Z"}}}},
                        {"data", {{"uuid", "GPU-0"}}}};
    json body;
    std::string ct = "application/json";
    if (k.method == "PUT") {
      body = *fake_->Get("resourceclaims", "default", "c");
      body["status"]["devices"] = {entry};
    } else {
      body = {{"status", {{"devices", {entry}}}}};
      ct = "application/merge-patch+json";
    }
    auto r =
        (*driver_client)->Request(k.method, std::string(kClaims) + "/c/status", body.dump(), ct);
    ASSERT_TRUE(r.ok()) << r.status();
    const json reply = json::parse(r->body, nullptr, false);
    EXPECT_EQ(r->code, k.code) << reply.dump();
    EXPECT_NE(reply.value("message", "").find(k.want), std::string::npos) << reply.dump();
    const json stored = *fake_->Get("resourceclaims", "default", "c");
    EXPECT_EQ(stored["status"].contains("devices"), k.code == 200) << stored.dump();
  }
}

// What a status.devices entry may hold: metav1 conditions (type, status, reason,
// lastTransitionTime) and data of at most 10 KiB.
TEST_F(DraApiTest, DeviceStatusConditionsAndData) {
  Start();
  json c = Claim();
  c["status"]["allocation"] = Allocation();
  ASSERT_TRUE(fake_->Upsert("resourceclaims", c).ok());
  const json ready = {{"type", "Ready"},
                      {"status", "True"},
                      {"reason", "Prepared"},
                      {"lastTransitionTime", "2026-12-04T01:00:00Z"}};
  struct Case {
    std::string name;
    std::function<void(json&)> edit;  // on the entry
    std::string want;                 // "" = 200
  };
  const std::vector<Case> cases = {
      {"a ready condition and data", [](json&) {}, ""},
      {"no lastTransitionTime", [](json& d) { d["conditions"][0].erase("lastTransitionTime"); },
       "status.devices[0].conditions[0].lastTransitionTime: Required value"},
      {"no reason", [](json& d) { d["conditions"][0].erase("reason"); },
       "status.devices[0].conditions[0].reason: Required value"},
      {"reason with a space", [](json& d) { d["conditions"][0]["reason"] = "not ready"; },
       "status.devices[0].conditions[0].reason: Invalid value: \"not ready\""},
      {"status yes", [](json& d) { d["conditions"][0]["status"] = "yes"; },
       "status.devices[0].conditions[0].status: Unsupported value: \"yes\""},
      {"type twice", [](json& d) { d["conditions"].push_back(d["conditions"][0]); },
       "status.devices[0].conditions[1].type: Duplicate value: \"Ready\""},
      {"data over 10 KiB", [](json& d) { d["data"]["blob"] = std::string(10 * 1024, 'x'); },
       "status.devices[0].data: Too long: may not be more than 10240 bytes"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    json entry = {{"driver", kDriver},     {"pool", "node-1"},
                  {"device", "gpu-0"},     {"shareID", "0b9a3c4e-1f2d-4c5b-8a7e-6d5c4b3a2f10"},
                  {"conditions", {ready}}, {"data", {{"uuid", "GPU-0"}}}};
    k.edit(entry);
    json w = *fake_->Get("resourceclaims", "default", "c");
    w["status"]["devices"] = {entry};
    auto [code, reply] = Do("PUT", std::string(kClaims) + "/c/status", w);
    EXPECT_EQ(code, k.want.empty() ? 200 : 422) << reply.dump();
    EXPECT_NE(reply.value("message", "").find(k.want), std::string::npos) << reply.dump();
  }
}

}  // namespace
}  // namespace hami::k8s::testing
