#include "k8s/errors.h"

#include <gtest/gtest.h>

#include "k8s/client.h"

namespace hami::k8s {
namespace {

TEST(ErrorsTest, HttpCodesMapToKinds) {
  struct Case {
    int code;
    std::string body;
    absl::StatusCode want;
    std::string want_in_message;
  };
  auto status = [](int code, const std::string& reason, const std::string& msg) {
    return StrCat(
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")", msg,
        R"(","reason":")", reason, R"(","code":)", code, "}");
  };
  std::vector<Case> cases = {
      {404, status(404, "NotFound", "pods \\\"p\\\" not found"), absl::StatusCode::kNotFound,
       "pods \"p\" not found (HTTP 404 NotFound)"},
      {409, status(409, "Conflict", "the object has been modified"), absl::StatusCode::kAborted,
       "has been modified"},
      {409, status(409, "AlreadyExists", "pods \\\"p\\\" already exists"),
       absl::StatusCode::kAlreadyExists, "already exists"},
      {410, status(410, "Expired", "too old resource version: 1 (5)"),
       absl::StatusCode::kOutOfRange, "too old"},
      {422, status(422, "Invalid", "bad"), absl::StatusCode::kInvalidArgument, "bad"},
      {401, "", absl::StatusCode::kUnauthenticated, "(empty reply)"},
      {403, status(403, "Forbidden", "no"), absl::StatusCode::kPermissionDenied, "no"},
      {429, "slow down", absl::StatusCode::kResourceExhausted, "reply: slow down"},
      {500, status(500, "InternalError", "boom"), absl::StatusCode::kInternal, "boom"},
      {503, "<html>", absl::StatusCode::kUnavailable, "<html>"},
      {504, "", absl::StatusCode::kDeadlineExceeded, "HTTP 504"},
  };
  for (const auto& c : cases) {
    Status s = StatusFromHttp(c.code, c.body, "GET /api/v1/pods");
    EXPECT_EQ(s.code(), c.want) << c.code << " " << s;
    EXPECT_NE(std::string(s.message()).find(c.want_in_message), std::string::npos) << s;
    EXPECT_NE(std::string(s.message()).find("GET /api/v1/pods"), std::string::npos) << s;
  }
  EXPECT_TRUE(IsConflict(StatusFromHttp(409, status(409, "Conflict", "x"), "")));
  EXPECT_TRUE(IsGone(StatusFromHttp(410, "", "")));
  EXPECT_FALSE(IsConflict(StatusFromHttp(409, status(409, "AlreadyExists", "x"), "")));
}

TEST(ErrorsTest, RetryableCodes) {
  for (int code : {429, 500, 502, 503, 504}) EXPECT_TRUE(IsRetryableHttpCode(code)) << code;
  for (int code : {200, 400, 404, 409, 410, 422}) EXPECT_FALSE(IsRetryableHttpCode(code)) << code;
}

TEST(WatchEventTest, ParsesAndRejects) {
  struct Case {
    std::string line;
    bool ok;
    WatchEvent::Type type = WatchEvent::Type::kAdded;
  };
  std::vector<Case> cases = {
      {R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})", true, WatchEvent::Type::kAdded},
      {R"({"type":"MODIFIED","object":{}})", true, WatchEvent::Type::kModified},
      {R"({"type":"DELETED","object":{}})", true, WatchEvent::Type::kDeleted},
      {R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})", true,
       WatchEvent::Type::kBookmark},
      {R"({"type":"ERROR","object":{"kind":"Status","code":410}})", true, WatchEvent::Type::kError},
      {R"({"type":"SIDEWAYS","object":{}})", false},
      {R"({"type":"ADDED"})", false},
      {R"({"type":1,"object":{}})", false},
      {R"([1,2])", false},
      {R"({"type":"ADDED","object":)", false},
  };
  for (const auto& c : cases) {
    auto ev = ParseWatchEvent(c.line);
    EXPECT_EQ(ev.ok(), c.ok) << c.line;
    if (ev.ok()) {
      EXPECT_EQ(ev->type, c.type) << c.line;
    }
  }
}

TEST(TimeTest, FormatsAndParses) {
  EXPECT_EQ(FormatTime(1782907200), "2026-07-01T12:00:00Z");
  EXPECT_EQ(FormatMicroTime(1782907200'123456LL), "2026-07-01T12:00:00.123456Z");
  auto t = ParseTimeMicros("2026-07-01T12:00:00.123456Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1782907200'123456LL);
  EXPECT_EQ(*ParseTimeMicros("2026-07-01T12:00:00Z"), 1782907200'000000LL);
  EXPECT_FALSE(ParseTimeMicros("yesterday").ok());
  EXPECT_FALSE(ParseTimeMicros("2026-07-01T12:00:00+02:00").ok());
}

TEST(ResourcePathTest, Paths) {
  EXPECT_EQ(ResourcePath(kPods, "ns1", "p", "binding"), "/api/v1/namespaces/ns1/pods/p/binding");
  EXPECT_EQ(ResourcePath(kPods, ""), "/api/v1/pods");
  EXPECT_EQ(ResourcePath(kNodes, "ignored", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(ResourcePath(kLeases, "kube-system", "hami"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/hami");
}

}  // namespace
}  // namespace hami::k8s
