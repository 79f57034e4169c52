// PruneJson: what it cuts and keeps, table by table, against nlohmann's parser callback making the
// same cut, and texts that do not scan coming back whole.
#include "k8s/json_prune.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <set>

namespace hami::k8s {
namespace {

using Json = nlohmann::json;

// Cuts, at any depth, the members named "drop" and "big", and "deep" at depth 2 only.
bool Cut(int depth, const std::string& key) {
  return key == "drop" || key == "big" || (key == "deep" && depth == 2);
}

// The reference: the whole text parsed with the same cut in nlohmann's parser callback.
Json ParseWithCallback(const std::string& text) {
  return Json::parse(
      text,
      [](int depth, Json::parse_event_t event, Json& parsed) {
        return event != Json::parse_event_t::key || !parsed.is_string() ||
               !Cut(depth, parsed.get_ref<const std::string&>());
      },
      /*allow_exceptions=*/false);
}

TEST(PruneJson, CutsWhatTheParserCallbackCuts) {
  struct Case {
    const char* name;
    std::string text;
    std::string want;  // the pruned text
  };
  const Case cases[] = {
      {"nothing to cut", R"({"a": 1, "b": [true, null, "x"]})", R"({"a":1,"b":[true,null,"x"]})"},
      {"first member", R"({"drop": 1, "a": 2})", R"({"a":2})"},
      {"last member", R"({"a": 2, "drop": {"x": [1, 2]}})", R"({"a":2})"},
      {"only member", R"({"drop": [1, {"y": "}"}]})", R"({})"},
      {"middle, nested", R"({"a":{"b":1,"big":"s","c":2},"d":3})", R"({"a":{"b":1,"c":2},"d":3})"},
      {"inside arrays", R"([{"drop":1,"k":1},{"k":2,"drop":2}])", R"([{"k":1},{"k":2}])"},
      {"at one depth only", R"({"deep":1,"x":{"deep":2,"y":{"deep":3}}})",
       R"({"deep":1,"x":{"y":{"deep":3}}})"},
      {"brackets and quotes in cut strings", R"({"big":"]}\"{[\\","a":1})", R"({"a":1})"},
      {"escaped quote before the end", R"({"big":["\\\"]","\\"],"a":"\\"})", R"({"a":"\\"})"},
      {"a key with an escape is kept", R"({"dr\u006fp":1})", R"({"dr\u006fp":1})"},
      {"values named like cut keys are kept", R"({"a":"drop","b":["big"]})",
       R"({"a":"drop","b":["big"]})"},
      {"scalars byte for byte", R"({"n":-1.5e+300,"u":18446744073709551615,"z":0})",
       R"({"n":-1.5e+300,"u":18446744073709551615,"z":0})"},
      {"UTF-8 kept as is", "{\"s\":\"\xC3\xA9\xF0\x9F\x98\x80\",\"drop\":\"\xE4\xB8\xAD\"}",
       "{\"s\":\"\xC3\xA9\xF0\x9F\x98\x80\"}"},
      {"top-level scalar", " 42 ", "42"},
      {"empty containers", R"({"a":{},"b":[],"drop":{}})", R"({"a":{},"b":[]})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string pruned = PruneJson(c.text, Cut);
    EXPECT_EQ(pruned, c.want);
    const Json want = ParseWithCallback(c.text);
    ASSERT_FALSE(want.is_discarded());
    EXPECT_EQ(ParseWithCallback(pruned), want);
  }
}

// A text that does not scan comes back whole (the parser then rejects it as before).
TEST(PruneJson, ReturnsWhatDoesNotScanWhole) {
  const std::string deep =
      std::string(kMaxPruneDepth + 1, '[') + std::string(kMaxPruneDepth + 1, ']');
  const std::string deep_cut = R"({"drop":)" + std::string(kMaxPruneDepth + 1, '[') +
                               std::string(kMaxPruneDepth + 1, ']') + "}";
  const std::string texts[] = {
      "",
      "   ",
      R"({"a":1 "b":2})",  // missing comma
      R"({"a" 1})",        // missing colon
      R"({"a":1,})",       // trailing comma
      R"({"a":1)",         // unclosed
      R"({"a":1]})",       // wrong closer
      R"({"drop":[1,2})",  // wrong closer inside a cut value
      R"({"drop":"unterminated)",
      R"({"a":"x\"})",       // the quote is escaped: unterminated
      R"({a:1})",            // key not a string
      R"({"a":1} {"b":2})",  // two values
      R"({"a":,"b":1})",     // no value
      deep,
      deep_cut,
  };
  for (const std::string& t : texts) {
    SCOPED_TRACE(t.substr(0, 40));
    EXPECT_EQ(PruneJson(t, Cut), t);
  }
}

// A realistic list page: the cut leaves what the parser callback leaves, the size falls.
TEST(PruneJson, ListPageOfPods) {
  Json page = {{"kind", "PodList"}, {"metadata", {{"continue", "abc"}}}, {"items", Json::array()}};
  for (int i = 0; i < 20; ++i) {
    Json pod = {{"metadata",
                 {{"name", "p" + std::to_string(i)},
                  {"big", Json::array({{{"manager", "kubectl"}, {"fieldsV1", {{"f:x", {}}}}}})}}},
                {"spec", {{"containers", Json::array({{{"name", "c"}, {"drop", "v"}}})}}}};
    page["items"].push_back(pod);
  }
  const std::string text = page.dump(2);
  const std::string pruned = PruneJson(text, Cut);
  EXPECT_LT(pruned.size(), text.size() / 2);
  EXPECT_EQ(ParseWithCallback(pruned), ParseWithCallback(text));
}

// TopLevelMember finds a member of the top-level object only, without parsing anything.
TEST(TopLevelMember, FindsTheTopLevelMemberOnly) {
  struct Case {
    const char* text;
    std::optional<std::string> want;
  };
  const Case cases[] = {
      {R"({"metadata":{"continue":"abc"},"items":[]})", R"({"continue":"abc"})"},
      {R"({"items":[{"metadata":{"x":1}}],"kind":"PodList","metadata":{"continue":"d"}})",
       R"({"continue":"d"})"},
      {R"( { "a" : "}" , "metadata" : [1, "]", {"b":null}] } )", R"([1, "]", {"b":null}])"},
      {R"({"metadata":"s\"q"})", R"("s\"q")"},
      {R"({"metadata":12,"metadata":13})", "12"},        // the first one
      {R"({"items":[{"metadata":{}}]})", std::nullopt},  // only deeper
      {R"({"meta\u0064ata":{}})", std::nullopt},         // escaped key
      {R"({})", std::nullopt},
      {R"([{"metadata":{}}])", std::nullopt},
      {R"({"items":[1,2})", std::nullopt},  // does not scan
      {R"({"items" 1,"metadata":{}})", std::nullopt},
      {R"({"items":1 "metadata":{}})", std::nullopt},
      {R"({"metadata":{"continue":"abc")", std::nullopt},
      {"", std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const auto got = TopLevelMember(c.text, "metadata");
    ASSERT_EQ(got.has_value(), c.want.has_value());
    if (got) {
      EXPECT_EQ(std::string(*got), *c.want);
    }
  }
}

}  // namespace
}  // namespace hami::k8s
