#include "k8s/testing/selectors.h"

#include <gtest/gtest.h>

namespace hami::k8s::testing {
namespace {

using nlohmann::json;

TEST(SelectorTest, Labels) {
  const json pod = {{"metadata", {{"labels", {{"app", "web"}, {"tier", "front"}}}}}};
  const json bare = {{"metadata", json::object()}};
  struct Case {
    std::string sel;
    bool pod, bare;
  };
  std::vector<Case> cases = {
      {"", true, true},
      {"app=web", true, false},
      {"app==web", true, false},
      {"app!=web", false, true},
      {"app!=db", true, true},
      {"app in (db, web)", true, false},
      {"app notin (db,web)", false, true},
      {"app", true, false},
      {"!app", false, true},
      {"app=web,tier=front", true, false},
      {"app=web,tier=back", false, false},
  };
  for (const auto& c : cases) {
    auto s = Selector::ParseLabels(c.sel);
    ASSERT_TRUE(s.ok()) << c.sel << ": " << s.status();
    EXPECT_EQ(s->Matches(pod), c.pod) << c.sel;
    EXPECT_EQ(s->Matches(bare), c.bare) << c.sel;
  }
  for (std::string bad : {"app in web", "a b=c", "x,,y"}) {
    EXPECT_FALSE(Selector::ParseLabels(bad).ok()) << bad;
  }
}

TEST(SelectorTest, Fields) {
  const json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
                    {"spec", {{"nodeName", "n1"}, {"hostNetwork", true}}},
                    {"status", {{"phase", "Running"}}}};
  const json pending = {
      {"metadata", {{"name", "q"}}}, {"spec", json::object()}, {"status", {{"phase", "Pending"}}}};
  struct Case {
    std::string sel;
    bool pod, pending;
  };
  std::vector<Case> cases = {
      {"spec.nodeName=n1", true, false},
      {"spec.nodeName=", false, true},
      {"spec.nodeName!=", true, false},
      {"status.phase==Running", true, false},
      {"status.phase!=Succeeded,status.phase!=Failed", true, true},
      {"metadata.name=q", false, true},
      {"spec.hostNetwork=true", true, false},
  };
  for (const auto& c : cases) {
    auto s = Selector::ParseFields(c.sel);
    ASSERT_TRUE(s.ok()) << c.sel;
    EXPECT_EQ(s->Matches(pod), c.pod) << c.sel;
    EXPECT_EQ(s->Matches(pending), c.pending) << c.sel;
  }
  EXPECT_FALSE(Selector::ParseFields("spec.nodeName").ok());
  EXPECT_FALSE(Selector::ParseFields("=x").ok());
}

}  // namespace
}  // namespace hami::k8s::testing
