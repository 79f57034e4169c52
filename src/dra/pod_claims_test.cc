#include "dra/pod_claims.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace hami::dra {
namespace {

using Json = nlohmann::json;

TEST(PodClaims, ContainersWithSeveralClaims) {
  // Pod claim entries: "a" and "b" name objects directly, "t" comes from a template (resolved in
  // the status), "u" from a template not resolved yet.
  const Json pod = Json::parse(R"({
    "spec": {
      "resourceClaims": [{"name": "a", "resourceClaimName": "claim-a"},
                         {"name": "b", "resourceClaimName": "claim-b"},
                         {"name": "t", "resourceClaimTemplateName": "tmpl"},
                         {"name": "u", "resourceClaimTemplateName": "tmpl"}],
      "initContainers": [{"name": "init", "resources": {"claims": [{"name": "a"}, {"name": "t"}]}}],
      "containers": [
        {"name": "one", "resources": {"claims": [{"name": "a"}]}},
        {"name": "two", "resources": {"claims": [{"name": "b", "request": "gpu"}, {"name": "a"}]}},
        {"name": "same-twice", "resources": {"claims": [{"name": "a", "request": "r1"},
                                                        {"name": "a", "request": "r2"}]}},
        {"name": "unresolved", "resources": {"claims": [{"name": "a"}, {"name": "u"}]}},
        {"name": "unknown", "resources": {"claims": [{"name": "a"}, {"name": "nope"}]}},
        {"name": "none"}]},
    "status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "pod-t-x7"},
                                         {"name": "u"}]}})");
  struct Case {
    const char* what;
    std::set<std::string> claims;  // the claims of this driver in the call
    std::vector<ContainerClaims> want;
  };
  const Case cases[] = {
      {"all three ours",
       {"claim-a", "claim-b", "pod-t-x7"},
       {{"init", {"claim-a", "pod-t-x7"}}, {"two", {"claim-a", "claim-b"}}}},
      {"b is another driver's", {"claim-a", "pod-t-x7"}, {{"init", {"claim-a", "pod-t-x7"}}}},
      {"only a is ours", {"claim-a"}, {}},
      {"none", {}, {}},
  };
  for (const auto& c : cases)
    EXPECT_EQ(ContainersWithSeveralClaims(pod, c.claims), c.want) << c.what;
}

TEST(PodClaims, MalformedPodsYieldNothing) {
  for (
      const char* text :
      {R"(null)", R"([])", R"({"spec": 3})", R"({"spec": {"containers": {"a": 1}}})",
       R"({"spec": {"resourceClaims": [1, {"name": 2}], "containers": [{"resources": {"claims": [{}]}}]}})"}) {
    EXPECT_TRUE(ContainersWithSeveralClaims(Json::parse(text), {"x", "y"}).empty()) << text;
  }
}

TEST(PodClaims, ReservedPods) {
  const Json claim = Json::parse(R"({"status": {"reservedFor": [
      {"resource": "pods", "name": "p1", "uid": "u1"},
      {"apiGroup": "example.com", "resource": "pods", "name": "other", "uid": "u2"},
      {"resource": "jobs", "name": "j", "uid": "u3"},
      {"resource": "pods", "name": "", "uid": "u4"},
      {"resource": "pods", "name": "p2"}]}})");
  EXPECT_EQ(ReservedPods(claim), (std::vector<PodRef>{{"p1", "u1"}, {"p2", ""}}));
  EXPECT_TRUE(ReservedPods(Json::parse(R"({"status": {"reservedFor": 1}})")).empty());
  EXPECT_TRUE(ReservedPods(Json::parse("7")).empty());
}

}  // namespace
}  // namespace hami::dra
