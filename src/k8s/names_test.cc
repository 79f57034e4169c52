// Kubernetes name shapes (k8s/names.h) and the checked URL path every Client verb uses.
#include "k8s/names.h"

#include <gtest/gtest.h>

#include <string>

#include "k8s/client.h"

namespace hami::k8s {
namespace {

TEST(Names, Table) {
  struct Case {
    std::string value;
    bool subdomain, label, uid;
  };
  const std::string l63(63, 'a'), l64(64, 'a');
  std::string s253;
  while (s253.size() < 253) s253 += s253.empty() ? "a" : ".a";  // 127 labels "a", 253 characters
  const std::vector<Case> cases = {
      {"gpu-pod-0", true, true, true},
      {"a", true, true, true},
      {"0", true, true, true},
      {"kube-system", true, true, true},
      {"node-1.example.com", true, false, false},
      {"1b4e28ba-2fa1-11d2-883f-0016d3cca427", true, true, true},
      {"", false, false, false},
      {".", false, false, false},
      {"..", false, false, false},
      {"a..b", false, false, false},
      {".a", false, false, false},
      {"a.", false, false, false},
      {"-a", false, false, true},
      {"a-", false, false, true},
      {"a/b", false, false, false},
      {"../kube-system", false, false, false},
      {"%2e%2e", false, false, false},
      {"A", false, false, true},
      {"Pod-X", false, false, true},
      {"a_b", false, false, false},
      {"a b", false, false, false},
      {std::string("a\0b", 3), false, false, false},
      {"a\nb", false, false, false},
      {"\xc3\xa9", false, false, false},
      {"a.-b", false, false, false},
      {l63, true, true, true},
      {l64, true, false, true},
      {l64 + "a", true, false, false},
      {s253, true, false, false},
      {s253 + "a", false, false, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("\"" + c.value + "\"");
    EXPECT_EQ(ValidateDns1123Subdomain(c.value).ok(), c.subdomain);
    EXPECT_EQ(ValidateDns1123Label(c.value).ok(), c.label);
    EXPECT_EQ(ValidateUid(c.value).ok(), c.uid);
  }
}

TEST(Names, ErrorsNameTheRuleAndQuoteTheValue) {
  Status s = ValidateDns1123Subdomain("a..b", "pod name");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(std::string(s.message()).find("pod name \"a..b\" is not a DNS-1123 subdomain"),
            std::string::npos)
      << s;
  s = ValidateDns1123Label(std::string("x\x01y"), "namespace");
  EXPECT_NE(std::string(s.message()).find("\"x\\x01y\""), std::string::npos) << s;
  s = ValidateDns1123Label(std::string(300, 'q'));
  EXPECT_NE(std::string(s.message()).find("longer than 63"), std::string::npos) << s;
  EXPECT_LT(s.message().size(), 200u);  // the value is cut in the message
}

TEST(Names, ObjectRef) {
  EXPECT_TRUE(ValidateObjectRef("ml", "train-0", "").ok());
  EXPECT_TRUE(ValidateObjectRef("ml", "train-0", "1b4e28ba-2fa1-11d2-883f-0016d3cca427").ok());
  EXPECT_FALSE(ValidateObjectRef("", "train-0", "").ok());
  EXPECT_TRUE(ValidateObjectRef("", "node-1", "", /*ns_optional=*/true).ok());
  EXPECT_FALSE(ValidateObjectRef("ml", "..", "").ok());
  EXPECT_FALSE(ValidateObjectRef("ml", "p", "../x").ok());
  EXPECT_FALSE(ValidateObjectRef("Ml", "p", "").ok());
}

TEST(Names, CheckedResourcePath) {
  auto p = CheckedResourcePath(kPods, "default", "gpu-pod", "binding");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, "/api/v1/namespaces/default/pods/gpu-pod/binding");
  EXPECT_EQ(*CheckedResourcePath(kPods, ""), "/api/v1/pods");
  EXPECT_EQ(*CheckedResourcePath(kNodes, "", "node-1.example.com"),
            "/api/v1/nodes/node-1.example.com");
  for (const char* bad : {"..", ".", "a/b", "x%2F.."}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(CheckedResourcePath(kPods, "default", bad).status()));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(CheckedResourcePath(kPods, "..", "p").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckedResourcePath(kPods, "default", "p", "../x").status()));
}

}  // namespace
}  // namespace hami::k8s
