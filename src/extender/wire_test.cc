// Conformance of the extender wire types with docs/upstream-contract.md#scheduler-extender-v1:
// tables of JSON as kube-scheduler sends and reads it.
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
      {"cache capable",
       R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1","n2"]})",
       true,
       false,
       true,
       {"n1", "n2"},
       ""},
      {"not cache capable",
       R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]},"NodeNames":null})",
       true,
       true,
       false,
       {"a", "b"},
       ""},
      {"lower-case keys (Go decodes case-insensitively)",
       R"({"pod":{},"nodenames":["x"]})",
       true,
       false,
       true,
       {"x"},
       ""},
      {"both null: zero candidates",
       R"({"Pod":{},"Nodes":null,"NodeNames":null})",
       true,
       false,
       false,
       {},
       ""},
      {"empty items",
       R"({"Pod":{},"Nodes":{"metadata":{},"items":[]},"NodeNames":null})",
       true,
       true,
       false,
       {},
       ""},
      {"not json", R"({"Pod":)", false, false, false, {}, "not valid JSON"},
      {"array body", R"([])", false, false, false, {}, "JSON object"},
      {"no pod", R"({"NodeNames":["a"]})", false, false, false, {}, "Pod"},
      {"pod not object", R"({"Pod":"x"})", false, false, false, {}, "Pod"},
      {"names not array", R"({"Pod":{},"NodeNames":"a"})", false, false, false, {}, "NodeNames"},
      {"name not string", R"({"Pod":{},"NodeNames":[1]})", false, false, false, {}, "NodeNames[0]"},
      {"node without name",
       R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})",
       false,
       false,
       false,
       {},
       "Nodes.items[0]"},
      {"nodes not object", R"({"Pod":{},"Nodes":[1]})", false, false, false, {}, "Nodes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = ParseExtenderArgs(c.body);
    ASSERT_EQ(a.ok(), c.ok) << a.status();
    if (!c.ok) {
      EXPECT_NE(std::string(a.status().message()).find(c.error_part), std::string::npos)
          << a.status();
      continue;
    }
    EXPECT_EQ(a->nodes.has_value(), c.has_nodes);
    EXPECT_EQ(a->node_names.has_value(), c.has_names);
    EXPECT_EQ(a->CandidateNames(), c.candidates);
  }
}

// ParseExtenderArgs scans the common shape itself and hands the rest to ParseExtenderArgsDom: both
// must agree on every body, accepted or not, including the words of the error.
TEST(ExtenderArgs, FastPathAgreesWithTheDomParser) {
  using namespace std::string_literals;
  const std::string bodies[] = {
      R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"Nodes":null,"NodeNames":["n1","n2","n3"]})",
      " \n{ \"Pod\" : {} ,\t\"NodeNames\" : [ \"a\" , \"b\" ] , \"Nodes\" : null } \r\n",
      R"({"Pod":{},"NodeNames":[]})",
      R"({"Pod":{},"NodeNames":null,"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]}})",
      R"({"NodeNames":["x"],"Pod":{"spec":{"containers":[{"name":"c]}{\"x"}]}}})",  // brackets
                                                                                    // inside
                                                                                    // strings
      R"({"pod":{"a":1},"POD":{"b":2},"nodeNames":["l"],"NODENAMES":["u"]})",  // folded: smallest
                                                                               // key wins
      R"({"pod":{"a":1},"Pod":{"b":2}})",                                      // exact beats folded
      R"({"Pod":{"a":1},"Pod":{"b":2},"NodeNames":["1"],"NodeNames":["2"]})",  // duplicates: last
                                                                               // wins
      R"({"Pod":{},"Extra":[1,{"x":"}"},-2.5e3,true,null],"NodeNames":["n"]})",  // unknown members
      // NodeNames read as the top-level scan passes it: every way a later key replaces it.
      R"({"Pod":{},"NodeNames":["a"],"NodeNames":null})",
      R"({"Pod":{},"NodeNames":null,"NodeNames":["b"]})",
      R"({"Pod":{},"nodenames":["f"],"NodeNames":["e"]})",
      R"({"Pod":{},"NodeNames":["e"],"nodenames":["f"]})",
      R"({"Pod":{},"NODENAMES":["u"],"nodeNames":["l"]})",
      R"({"Pod":{},"nodenames":["x"],"NODENAMES":["u"]})",
      R"({"Pod":{},"nodenames":["a\u0041"],"NodeNames":["e"]})",
      R"({"Pod":{},"NodeNames":["e"],"nodenames":["a\u0041"]})",
      R"({"Pod":{},"NodeNames":["a"],"NodeNames":["b"],"nodenames":["c"]})",
      R"({"Pod":{},"nodenames":["a"],"nodenames":"b"})",
      R"({"Pod":{},"nodenames":["a"],"nodenames":["b",]})",
      "{\"Pod\":{},\"NodeNames\":[\"a\"],\"nodenames\":[\"b\x01\"]}",
      " {\"Pod\":{} , \"NodeNames\" :\n[ \"a\" ,\t\"b\" ] } ",
      R"({"Pod":{},"NodeNames":[ ]})",
      R"({"Pod":{},"NodeNames":[,]})",
      R"({"Pod":{},"NodeNames":["a""b"]})",
      R"({"Pod":{},"NodeNames":["a"],"NodeNames":["b")",
      R"({"Pod":{},"NodeNames":["caf\u00e9","tab\t"]})",  // escapes: DOM path
      "{\"Pod\":{},\"NodeNames\":[\"caf\xc3\xa9\"]}",     // UTF-8: DOM path
      "{\"Pod\":{},\"NodeNames\":[\"bad\xff\"]}",         // invalid UTF-8
      "{\"Pod\":{},\"NodeNames\":[\"ctl\x01\"]}",         // raw control byte
      R"({"Pod":{},"Pod":{,},"NodeNames":["a"]})",   // an invalid value, even if replaced: rejected
      R"({"Pod":{},"pod":[,],"NodeNames":["a"]})",   // an invalid folded value beside the exact key
      R"({"Pod":{},"Extra":01,"NodeNames":["a"]})",  // invalid number in an unknown member
      R"({"Pod":{},"NodeNames":["a",]})",
      R"({"Pod":{},"NodeNames":["a"] "x":1})",
      R"({"Pod":{},"NodeNames":["a"]}x)",
      R"({"Pod":{},"NodeNames":["a"],})",
      R"({"Pod":{},"NodeNames":[1,"a"]})",
      R"({"Pod":{},"NodeNames":"a"})",
      R"({"Pod":[],"NodeNames":["a"]})",
      R"({"Pod":{},"Nodes":{"items":[{}]}})",
      R"({"Pod":{"a":"\"}"},"NodeNames":["a"]})",
      R"({"Pod":{"a":"x\)",
      R"({"Pod":{"a":[}]},"NodeNames":["a"]})",
      R"({"Pod":{}})",
      R"({})",
      R"({"Pod")",
      "",
      "[]",
      "\xef\xbb\xbf{\"Pod\":{}}",        // BOM
      "{\"Pod\":{},\"Nodes\":null\0}"s,  // NUL after a literal (nlohmann stops at it; the body is
                                         // invalid)
      "{\"Pod\":{},\"X\":12\0,\"NodeNames\":[]}"s,
  };
  for (const std::string& body : bodies) {
    SCOPED_TRACE(body);
    auto fast = ParseExtenderArgs(body);
    auto dom = ParseExtenderArgsDom(body);
    ASSERT_EQ(fast.ok(), dom.ok()) << fast.status() << " vs " << dom.status();
    if (!dom.ok()) {
      EXPECT_EQ(fast.status(), dom.status());
      continue;
    }
    EXPECT_EQ(fast->pod, dom->pod);
    EXPECT_EQ(fast->nodes, dom->nodes);
    EXPECT_EQ(fast->node_names, dom->node_names);
  }
}

TEST(ExtenderArgs, SerialisesCapitalisedKeysWithNulls) {
  ExtenderArgs a;
  a.pod = Json{{"metadata", {{"name", "p"}}}};
  a.node_names = std::vector<std::string>{"n1"};
  EXPECT_EQ(ToJson(a),
            Json::parse(R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1"]})"));
  a.node_names.reset();
  a.nodes = std::vector<Json>{Json{{"metadata", {{"name", "n1"}}}}};
  EXPECT_EQ(
      ToJson(a),
      Json::parse(
          R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"n1"}}]},"NodeNames":null})"));
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
      {"error", err,
       R"({"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":"boom"})"},
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

// The reply is written directly: byte for byte what nlohmann's dump of ToJson gives.
TEST(ExtenderFilterResult, SerialiseMatchesDomDump) {
  std::vector<ExtenderFilterResult> cases(6);
  cases[1].node_names = std::vector<std::string>{"n1"};
  cases[1].failed_nodes = {{"n2", "1/4 CardInsufficientMemory"},
                           {"n0", "node unregistered: \"x\"\n\ttab\\"}};
  cases[2].error = "pod ns/p: \x01 control, caf\xc3\xa9, quote \" and slash /";
  cases[3].nodes = std::vector<Json>{Json{{"metadata", {{"name", "n1"}}}}};
  cases[3].node_names = std::vector<std::string>{};
  cases[3].failed_and_unresolvable = {{"n3", "4/4 CardTypeMismatch"}};
  for (int i = 0; i < 5000; ++i)
    cases[4].failed_nodes["node-" + std::to_string(i)] = "8/8 CardInsufficientMemory";
  cases[5].nodes = std::vector<Json>{};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(SerializeFilterResult(cases[i]), ToJson(cases[i]).dump());
  }
  // Invalid UTF-8 (which dump() throws on) is replaced, and the reply still parses.
  ExtenderFilterResult bad;
  bad.error = "bad \xff byte";
  auto back = ParseExtenderFilterResult(SerializeFilterResult(bad));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->error, "bad \xef\xbf\xbd byte");
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
      {"exact",
       R"({"PodName":"p","PodNamespace":"ns","PodUID":"u-1","Node":"n1"})",
       true,
       {"p", "ns", "u-1", "n1"},
       ""},
      {"case folded",
       R"({"podname":"p","podNamespace":"ns","poduid":"","node":"n1"})",
       true,
       {"p", "ns", "", "n1"},
       ""},
      {"no node",
       R"({"PodName":"p","PodNamespace":"ns","PodUID":"u"})",
       false,
       {},
       "Node is empty"},
      {"no name", R"({"PodNamespace":"ns","Node":"n"})", false, {}, "PodName is empty"},
      {"wrong type",
       R"({"PodName":1,"PodNamespace":"ns","Node":"n"})",
       false,
       {},
       "PodName must be a string"},
      {"garbage", "nope", false, {}, "not valid JSON"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = ParseExtenderBindingArgs(c.body);
    ASSERT_EQ(a.ok(), c.ok) << a.status();
    if (!c.ok) {
      EXPECT_NE(std::string(a.status().message()).find(c.error_part), std::string::npos)
          << a.status();
      continue;
    }
    EXPECT_EQ(a->pod_name, c.want.pod_name);
    EXPECT_EQ(a->pod_namespace, c.want.pod_namespace);
    EXPECT_EQ(a->pod_uid, c.want.pod_uid);
    EXPECT_EQ(a->node, c.want.node);
    EXPECT_EQ(ToJson(*a), Json({{"PodName", c.want.pod_name},
                                {"PodNamespace", c.want.pod_namespace},
                                {"PodUID", c.want.pod_uid},
                                {"Node", c.want.node}}));
  }
}

TEST(ExtenderBindingResult, RoundTrip) {
  EXPECT_EQ(ToJson(ExtenderBindingResult{}).dump(), R"({"Error":""})");
  EXPECT_EQ(ToJson(ExtenderBindingResult{"x"}).dump(), R"({"Error":"x"})");
  auto r = ParseExtenderBindingResult(R"({"error":"late"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error, "late");
}

// Hostile input: bodies nested 100k levels deep anywhere (in Pod, in Nodes.items, in an unknown
// field, in NodeNames) are refused with the nesting error before any tree is built, by both parse
// paths.
TEST(ExtenderArgs, DeepNestingIsRefusedEverywhere) {
  const std::string deep_obj = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  const std::string deep_arr = std::string(100000, '[') + std::string(100000, ']');
  const std::string bodies[] = {
      "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":" + deep_obj + "},\"NodeNames\":[\"n\"]}",
      "{\"Pod\":{\"spec\":" + deep_arr + "},\"NodeNames\":[\"n\"]}",
      "{\"Pod\":{},\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"n\"},\"x\":" + deep_arr + "}]}}",
      "{\"Pod\":{},\"Other\":" + deep_obj + "}",
      "{\"Pod\":{},\"NodeNames\":" + deep_arr + "}",
      std::string(8u << 20, '['),
  };
  for (const auto& b : bodies) {
    for (auto parse : {&ParseExtenderArgs, &ParseExtenderArgsDom}) {
      auto r = parse(b);
      ASSERT_FALSE(r.ok());
      EXPECT_NE(
          std::string(r.status().message()).find("ExtenderArgs: JSON nested deeper than 1000"),
          std::string::npos)
          << r.status();
    }
  }
  auto bind = ParseExtenderBindingArgs("{\"PodName\":" + deep_arr + "}");
  ASSERT_FALSE(bind.ok());
  EXPECT_NE(std::string(bind.status().message()).find("nested deeper"), std::string::npos);
  // 1000 levels are still a document like any other.
  const std::string ok_depth = "{\"Pod\":{\"x\":" + std::string(998, '[') + std::string(998, ']') +
                               "},\"NodeNames\":[\"n\"]}";
  EXPECT_TRUE(ParseExtenderArgs(ok_depth).ok());
}

}  // namespace
}  // namespace hami::extender
