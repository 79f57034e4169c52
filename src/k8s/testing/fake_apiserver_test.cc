// Wire-level checks of the fake API server: what it sends must look like the real one
// since every k8s test trusts it.
#include "k8s/testing/fake_apiserver.h"

#include <gtest/gtest.h>

#include "k8s/client.h"
#include "k8s/testing/test_util.h"
#include "k8s/testing/wire_fixture.h"

namespace hami::k8s::testing {
namespace {

using nlohmann::json;

class FakeApiServerTest : public FakeApiServerFixture {
 protected:
  void SetUp() override {
    FakeApiServerOptions o;
    o.compaction_window = 5;
    StartServer(o);
  }
};

TEST_F(FakeApiServerTest, ErrorsAreStatusObjects) {
  struct Case {
    std::string method, path, body, content_type;
    int code;
    std::string reason, message;
  };
  ASSERT_TRUE(fake_->Upsert("pods", MakePod("default", "p")).ok());
  std::vector<Case> cases = {
      {"GET", "/api/v1/namespaces/default/pods/x", "", "", 404, "NotFound", "pods \"x\" not found"},
      {"GET", "/api/v1/widgets", "", "", 404, "NotFound",
       "the server could not find the requested resource"},
      {"GET", "/api/v1/pods/p", "", "", 404, "NotFound",
       "the server could not find the requested resource"},
      {"POST", "/api/v1/namespaces/default/pods", MakePod("default", "p").dump(),
       "application/json", 409, "AlreadyExists", "pods \"p\" already exists"},
      {"POST", "/api/v1/namespaces/default/pods", "{not json", "application/json", 400,
       "BadRequest", "unknown format"},
      {"POST", "/api/v1/namespaces/other/pods", MakePod("default", "q").dump(), "application/json",
       400, "BadRequest", "does not match the namespace"},
      {"POST", "/api/v1/namespaces/default/pods", R"({"metadata":{}})", "application/json", 422,
       "Invalid", "name or generateName is required"},
      {"PATCH", "/api/v1/namespaces/default/pods/p", R"({"metadata":{"resourceVersion":"1"}})",
       "application/merge-patch+json", 409, "Conflict",
       "Operation cannot be fulfilled on pods \"p\": the object has been modified"},
      {"PATCH", "/api/v1/namespaces/default/pods/p", "{}", "text/plain", 415,
       "UnsupportedMediaType", "unknown format"},
      {"GET", "/api/v1/pods?labelSelector=a%20in%20b", "", "", 400, "BadRequest", "label selector"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.method + " " + c.path);
    auto [code, body] = Do(c.method, c.path, c.body, c.content_type);
    EXPECT_EQ(code, c.code);
    EXPECT_EQ(body["kind"], "Status");
    EXPECT_EQ(body["apiVersion"], "v1");
    EXPECT_EQ(body["status"], "Failure");
    EXPECT_EQ(body["reason"], c.reason);
    EXPECT_EQ(body["code"], c.code);
    EXPECT_NE(body["message"].get<std::string>().find(c.message), std::string::npos) << body.dump();
  }
}

TEST_F(FakeApiServerTest, CreateWithGenerateNameAndListShape) {
  auto [code, created] = Do("POST", "/api/v1/namespaces/default/pods",
                            R"({"metadata":{"generateName":"job-"},"spec":{"containers":[]}})");
  EXPECT_EQ(code, 201);
  const std::string name = created["metadata"]["name"];
  EXPECT_EQ(name.rfind("job-", 0), 0u);
  EXPECT_EQ(name.size(), 9u);
  EXPECT_EQ(created["kind"], "Pod");
  auto [lcode, list] = Do("GET", "/api/v1/namespaces/default/pods");
  EXPECT_EQ(lcode, 200);
  EXPECT_EQ(list["kind"], "PodList");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_EQ(list["metadata"]["resourceVersion"], fake_->CurrentResourceVersion());
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_FALSE(list["items"][0].contains("kind"));
}

TEST_F(FakeApiServerTest, ResourceVersionsIncreaseAndNoopsKeepThem) {
  auto a = fake_->Upsert("nodes", MakeNode("n"));
  const std::string rv1 = (*a)["metadata"]["resourceVersion"];
  auto [c1, same] = Do("PATCH", "/api/v1/nodes/n", R"({"metadata":{"labels":null}})",
                       "application/merge-patch+json");
  EXPECT_EQ(c1, 200);
  auto [c2, changed] = Do("PATCH", "/api/v1/nodes/n", R"({"metadata":{"labels":{"a":"b"}}})",
                          "application/merge-patch+json");
  EXPECT_EQ(c2, 200);
  EXPECT_GT(std::stoll(changed["metadata"]["resourceVersion"].get<std::string>()), std::stoll(rv1));
  // PUT with the current resourceVersion succeeds, with an old one conflicts.
  json put = changed;
  put["metadata"]["labels"]["c"] = "d";
  EXPECT_EQ(Do("PUT", "/api/v1/nodes/n", put.dump()).first, 200);
  EXPECT_EQ(Do("PUT", "/api/v1/nodes/n", put.dump()).first, 409);
  put["metadata"].erase("resourceVersion");  // unconditional
  EXPECT_EQ(Do("PUT", "/api/v1/nodes/n", put.dump()).first, 200);
}

TEST_F(FakeApiServerTest, DiscoveryDocuments) {
  struct Case {
    std::string path, kind;
  };
  for (const Case& c : std::vector<Case>{{"/api", "APIVersions"},
                                         {"/apis", "APIGroupList"},
                                         {"/api/v1", "APIResourceList"},
                                         {"/apis/coordination.k8s.io/v1", "APIResourceList"}}) {
    auto [code, body] = Do("GET", c.path);
    EXPECT_EQ(code, 200) << c.path;
    EXPECT_EQ(body["kind"], c.kind) << c.path;
  }
  auto [code, v1] = Do("GET", "/api/v1");
  bool has_binding = false;
  for (const auto& r : v1["resources"]) has_binding |= r["name"] == "pods/binding";
  EXPECT_TRUE(has_binding);
  EXPECT_EQ(Do("GET", "/version").second["major"], "1");
}

TEST_F(FakeApiServerTest, InjectedFaultsCountDown) {
  fake_->InjectErrors("GET", "/nodes$", 503, 2);
  EXPECT_EQ(Do("GET", "/api/v1/nodes").first, 503);
  EXPECT_EQ(Do("POST", "/api/v1/nodes", MakeNode("x").dump()).first,
            201);  // other method unaffected
  EXPECT_EQ(Do("GET", "/api/v1/nodes").first, 503);
  EXPECT_EQ(Do("GET", "/api/v1/nodes").first, 200);
  EXPECT_EQ(fake_->CountRequests("GET", "/nodes$"), 3);
}

TEST_F(FakeApiServerTest, CompactionWindowExpiresOldVersions) {
  const std::string start = fake_->CurrentResourceVersion();
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(fake_->Upsert("nodes", MakeNode("n" + std::to_string(i))).ok());
  ListOptions lo;
  lo.resource_version = start;  // 10 changes ago, window is 5
  Status s = client_->Watch(kNodes, "", lo, [](WatchEvent&) { return true; });
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  // Recent enough: replays the last changes, then we stop.
  lo.resource_version = std::to_string(std::stoll(fake_->CurrentResourceVersion()) - 3);
  std::vector<std::string> names;
  s = client_->Watch(kNodes, "", lo, [&](WatchEvent& ev) {
    names.push_back(ev.object["metadata"]["name"]);
    return names.size() < 3;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(names, (std::vector<std::string>{"n7", "n8", "n9"}));
}

TEST_F(FakeApiServerTest, SeedAcceptsListsAndArrays) {
  json seed = {{"kind", "List"}, {"items", {MakeNode("a"), MakePod("x", "p")}}};
  ASSERT_TRUE(fake_->Seed(seed).ok());
  ASSERT_TRUE(fake_->Seed(json::array({MakeNode("b")})).ok());
  ASSERT_TRUE(
      fake_->Seed({{"kind", "NodeList"}, {"items", {{{"metadata", {{"name", "c"}}}}}}}).ok());
  EXPECT_EQ(fake_->List("nodes").size(), 3u);
  EXPECT_TRUE(fake_->Get("pods", "x", "p").has_value());
  EXPECT_FALSE(fake_->Seed({{"kind", "Deployment"}, {"metadata", {{"name", "d"}}}}).ok());
}

// policy/v1 Eviction as the API server's eviction REST answers it (docs/consolidation.md relies on
// each row): what comes back, whether the pod is gone, and the PDB's disruptionsAllowed after.
TEST_F(FakeApiServerTest, EvictionAsksThePodDisruptionBudget) {
  auto pdb = [](const std::string& name, json selector, int allowed, int generation = 0) {
    json p = {{"apiVersion", "policy/v1"},
              {"kind", "PodDisruptionBudget"},
              {"metadata", {{"name", name}, {"namespace", "ns"}}},
              {"spec", {{"selector", std::move(selector)}}},
              {"status",
               {{"disruptionsAllowed", allowed},
                {"desiredHealthy", 2},
                {"currentHealthy", 2 + allowed},
                {"observedGeneration", 1}}}};
    if (generation > 0) p["metadata"]["generation"] = generation;
    return p;
  };
  const json app = {{"matchLabels", {{"app", "a"}}}};
  struct Case {
    const char* name;
    std::vector<json> pdbs;
    const char* phase;
    std::string body_name;  // "" = the pod's
    std::string uid;        // deleteOptions.preconditions.uid; "" = none, "same" = the pod's
    int code;
    const char* message;  // substring
    bool gone;
    int allowed_after;  // of the first PDB; -1: none
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"no pdb", {}, "Running", "", "", 201, "", true, -1},
      {"pdb allows", {pdb("p", app, 1)}, "Running", "", "same", 201, "", true, 0},
      {"pdb allows none", {pdb("p", app, 0)}, "Running", "", "", 429,
       "The disruption budget p needs 2 healthy pods and has 2 currently", false, 0},
      {"pdb not observed yet", {pdb("p", app, 1, 2)}, "Running", "", "", 429, "still being processed", false, 1},
      {"pdb of other pods", {pdb("p", {{"matchLabels", {{"app", "b"}}}}, 0)}, "Running", "", "", 201, "", true, 0},
      {"empty selector matches nothing", {pdb("p", json::object(), 0)}, "Running", "", "", 201, "", true, 0},
      {"two pdbs", {pdb("p", app, 1), pdb("q", app, 1)}, "Running", "", "", 500, "more than one PodDisruptionBudget", false, 1},
      {"pending pod ignores the pdb", {pdb("p", app, 0)}, "Pending", "", "", 201, "", true, 0},
      {"name mismatch", {}, "Running", "other", "", 400, "does not match", false, -1},
      {"uid precondition", {pdb("p", app, 1)}, "Running", "", "not-the-uid", 409, "Precondition failed", false, 1},
  };
  // clang-format on

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (const json& p : fake_->List("poddisruptionbudgets"))
      ASSERT_TRUE(fake_->Delete("poddisruptionbudgets", "ns", p["metadata"]["name"]).ok());
    for (const json& p : c.pdbs) ASSERT_TRUE(fake_->Upsert("poddisruptionbudgets", p).ok());
    json pod = MakePod("ns", "w", "n1", {{"app", "a"}});
    pod["status"]["phase"] = c.phase;
    auto stored = fake_->Upsert("pods", pod);
    ASSERT_TRUE(stored.ok());
    json ev = {
        {"apiVersion", "policy/v1"},
        {"kind", "Eviction"},
        {"metadata", {{"name", c.body_name.empty() ? "w" : c.body_name}, {"namespace", "ns"}}}};
    if (!c.uid.empty()) {
      ev["deleteOptions"]["preconditions"]["uid"] =
          c.uid == "same" ? (*stored)["metadata"]["uid"].get<std::string>() : c.uid;
    }
    auto [code, body] = Do("POST", "/api/v1/namespaces/ns/pods/w/eviction", ev.dump());
    EXPECT_EQ(code, c.code) << body.dump();
    EXPECT_EQ(body["kind"], "Status");
    if (c.code == 201) {
      EXPECT_EQ(body["status"], "Success");
    } else {
      const std::string all = body.dump();
      EXPECT_NE(all.find(c.message), std::string::npos) << all;
    }
    if (c.code == 429) {
      EXPECT_EQ(body["reason"], "TooManyRequests");
      EXPECT_EQ(body["message"],
                "Cannot evict pod as it would violate the pod's disruption budget.");
      EXPECT_EQ(body["details"]["causes"][0]["reason"], "DisruptionBudget");
    }
    EXPECT_EQ(!fake_->Get("pods", "ns", "w").has_value(), c.gone);
    if (c.allowed_after >= 0) {
      auto p = fake_->Get("poddisruptionbudgets", "ns", "p");
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ((*p)["status"]["disruptionsAllowed"], c.allowed_after);
      EXPECT_EQ(
          (*p)["status"].contains("disruptedPods") && (*p)["status"]["disruptedPods"].contains("w"),
          c.code == 201 &&
              c.allowed_after <
                  static_cast<int>(c.pdbs[0]["status"]["disruptionsAllowed"].get<int>()));
    }
  }
  // A pod that is not there: 404.
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/ns/pods/none/eviction",
               json{{"apiVersion", "policy/v1"}, {"kind", "Eviction"}}.dump())
                .first,
            404);
}

}  // namespace
}  // namespace hami::k8s::testing
