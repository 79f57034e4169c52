// Conformance of the extender wire types with k8s-wire.md §1: tables of JSON as kube-scheduler sends
// and reads it.
#include "extender/wire.h"

#include <gtest/gtest.h>

namespace hami::extender {
namespace {

struct ArgsCase {
  const char* name;
  const char* body;
  bool ok;
  bool has_nodes;
  bool has_names;
  std::vector<std::string> candidates;
  const char* error_part;
};

TEST(ExtenderArgs, ParsesBothNodeCacheModes) {
  const ArgsCase cases[] = {
      {"cache capable", R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1","n2"]})", true, false, true,
       {"n1", "n2"}, ""},
      {"not cache capable", R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]},"NodeNames":null})",
       true, true, false, {"a", "b"}, ""},
      {"lower-case keys (Go decodes case-insensitively)", R"({"pod":{},"nodenames":["x"]})", true, false, true, {"x"}, ""},
      {"both null: zero candidates", R"({"Pod":{},"Nodes":null,"NodeNames":null})", true, false, false, {}, ""},
      {"empty items", R"({"Pod":{},"Nodes":{"metadata":{},"items":[]},"NodeNames":null})", true, true, false, {}, ""},
      {"not json", R"({"Pod":)", false, false, false, {}, "not valid JSON"},
      {"array body", R"([])", false, false, false, {}, "JSON object"},
      {"no pod", R"({"NodeNames":["a"]})", false, false, false, {}, "Pod"},
      {"pod not object", R"({"Pod":"x"})", false, false, false, {}, "Pod"},
      {"names not array", R"({"Pod":{},"NodeNames":"a"})", false, false, false, {}, "NodeNames"},
      {"name not string", R"({"Pod":{},"NodeNames":[1]})", false, false, false, {}, "NodeNames[0]"},
      {"node without name", R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})", false, false, false, {}, "Nodes.items[0]"},
      {"nodes not object", R"({"Pod":{},"Nodes":[1]})", false, false, false, {}, "Nodes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = ParseExtenderArgs(c.body);
    ASSERT_EQ(a.ok(), c.ok) << a.status();
    if (!c.ok) {
      EXPECT_NE(std::string(a.status().message()).find(c.error_part), std::string::npos) << a.status();
      continue;
    }
    EXPECT_EQ(a->nodes.has_value(), c.has_nodes);
    EXPECT_EQ(a->node_names.has_value(), c.has_names);
    EXPECT_EQ(a->CandidateNames(), c.candidates);
  }
}

TEST(ExtenderArgs, SerialisesCapitalisedKeysWithNulls) {
  ExtenderArgs a;
  a.pod = Json{{"metadata", {{"name", "p"}}}};
  a.node_names = std::vector<std::string>{"n1"};
  EXPECT_EQ(ToJson(a), Json::parse(R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1"]})"));
  a.node_names.reset();
  a.nodes = std::vector<Json>{Json{{"metadata", {{"name", "n1"}}}}};
  EXPECT_EQ(ToJson(a), Json::parse(R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"n1"}}]},"NodeNames":null})"));
}

TEST(ExtenderFilterResult, ExactKeysNeverOmitted) {
  struct Case {
    const char* name;
    ExtenderFilterResult r;
    const char* json;
  };
  ExtenderFilterResult one;
  one.node_names = std::vector<std::string>{"n1"};
  one.failed_nodes = {{"n2", "1/4 CardInsufficientMemory"}};
  ExtenderFilterResult err;
  err.error = "boom";
  ExtenderFilterResult full;
  full.nodes = std::vector<Json>{Json{{"metadata", {{"name", "n1"}}}}};
  full.node_names = std::vector<std::string>{"n1"};
  full.failed_and_unresolvable = {{"n3", "4/4 CardTypeMismatch"}};
  const Case cases[] = {
      {"one node", one,
       R"({"Nodes":null,"NodeNames":["n1"],"FailedNodes":{"n2":"1/4 CardInsufficientMemory"},"FailedAndUnresolvableNodes":{},"Error":""})"},
      {"error", err, R"({"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":"boom"})"},
      {"full nodes", full,
       R"({"Nodes":{"metadata":{},"items":[{"metadata":{"name":"n1"}}]},"NodeNames":["n1"],"FailedNodes":{},"FailedAndUnresolvableNodes":{"n3":"4/4 CardTypeMismatch"},"Error":""})"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Json j = ToJson(c.r);
    EXPECT_EQ(j, Json::parse(c.json));
    auto back = ParseExtenderFilterResult(j.dump());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->node_names, c.r.node_names);
    EXPECT_EQ(back->failed_nodes, c.r.failed_nodes);
    EXPECT_EQ(back->failed_and_unresolvable, c.r.failed_and_unresolvable);
    EXPECT_EQ(back->error, c.r.error);
    EXPECT_EQ(back->nodes.has_value(), c.r.nodes.has_value());
  }
}

TEST(ExtenderBindingArgs, Table) {
  struct Case {
    const char* name;
    const char* body;
    bool ok;
    ExtenderBindingArgs want;
    const char* error_part;
  };
  const Case cases[] = {
      {"exact", R"({"PodName":"p","PodNamespace":"ns","PodUID":"u-1","Node":"n1"})", true, {"p", "ns", "u-1", "n1"}, ""},
      {"case folded", R"({"podname":"p","podNamespace":"ns","poduid":"","node":"n1"})", true, {"p", "ns", "", "n1"}, ""},
      {"no node", R"({"PodName":"p","PodNamespace":"ns","PodUID":"u"})", false, {}, "Node is empty"},
      {"no name", R"({"PodNamespace":"ns","Node":"n"})", false, {}, "PodName is empty"},
      {"wrong type", R"({"PodName":1,"PodNamespace":"ns","Node":"n"})", false, {}, "PodName must be a string"},
      {"garbage", "nope", false, {}, "not valid JSON"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = ParseExtenderBindingArgs(c.body);
    ASSERT_EQ(a.ok(), c.ok) << a.status();
    if (!c.ok) {
      EXPECT_NE(std::string(a.status().message()).find(c.error_part), std::string::npos) << a.status();
      continue;
    }
    EXPECT_EQ(a->pod_name, c.want.pod_name);
    EXPECT_EQ(a->pod_namespace, c.want.pod_namespace);
    EXPECT_EQ(a->pod_uid, c.want.pod_uid);
    EXPECT_EQ(a->node, c.want.node);
    EXPECT_EQ(ToJson(*a), Json({{"PodName", c.want.pod_name}, {"PodNamespace", c.want.pod_namespace},
                                {"PodUID", c.want.pod_uid}, {"Node", c.want.node}}));
  }
}

TEST(ExtenderBindingResult, RoundTrip) {
  EXPECT_EQ(ToJson(ExtenderBindingResult{}).dump(), R"({"Error":""})");
  EXPECT_EQ(ToJson(ExtenderBindingResult{"x"}).dump(), R"({"Error":"x"})");
  auto r = ParseExtenderBindingResult(R"({"error":"late"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error, "late");
}

TEST(HostPriority, IsAnArray) {
  EXPECT_EQ(ToJson(std::vector<HostPriority>{{"a", 10}, {"b", 0}}).dump(), R"([{"Host":"a","Score":10},{"Host":"b","Score":0}])");
}

}  // namespace
}  // namespace hami::extender
