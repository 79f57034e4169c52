// RequestReader: what it accepts, what it refuses (and with which status), pipelining, chunked
// bodies, and that feeding one byte at a time gives the same result as feeding everything at once.
#include "http/request_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/testing/decode.h"

namespace hami::http {
namespace {

using Outcome = testing::Decoded;

Outcome Decode(const std::string& wire, RequestLimits limits = {}, size_t step = 0,
               bool eof = true) {
  return testing::DecodeStream(wire, limits, step, eof);
}

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(RequestReader, Table) {
  const std::string chunked_ok =
      "POST /bind HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
      "chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
  struct Case {
    const char* name;
    std::string wire;
    size_t requests;
    int error;
    std::string first_body;
  };
  RequestLimits small;
  small.max_body_bytes = 16;
  const std::vector<Case> cases = {
      {"get", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 1, 0, ""},
      {"post", Post("/filter", "{}"), 1, 0, "{}"},
      {"chunked", chunked_ok, 1, 0, "{\"a\":1}"},
      {"pipelined x3", Post("/a", "1") + Post("/b", "22") + "GET /c HTTP/1.1\r\n\r\n", 3, 0, "1"},
      {"gzip", Post("/filter", "xx", "Content-Encoding: gzip\r\n"), 0, 415, ""},
      {"deflate", Post("/filter", "xx", "Content-Encoding: deflate\r\n"), 0, 415, ""},
      {"identity encoding", Post("/filter", "{}", "Content-Encoding: identity\r\n"), 1, 0, "{}"},
      {"te gzip", "POST /f HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc", 0, 501, ""},
      {"te gzip,chunked", "POST /f HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
       0, 501, ""},
      {"te + content-length",
       "POST /f HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0,
       400, ""},
      {"two lengths", "POST /f HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 0,
       400, ""},
      {"garbage line", "\x16\x03\x01\x02\x00garbage\r\n\r\n", 0, 400, ""},
      {"no version", "GET /\r\n\r\n", 0, 400, ""},
      {"bad chunk size", "POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, 400,
       ""},
      {"cut short", Post("/filter", "{}").substr(0, 60), 0, 400, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
      SCOPED_TRACE(step);
      Outcome o = Decode(c.wire, {}, step);
      EXPECT_EQ(o.requests.size(), c.requests) << o.reason;
      EXPECT_EQ(o.error, c.error) << o.reason;
      if (!o.requests.empty()) {
        EXPECT_EQ(o.requests[0].body, c.first_body);
      }
    }
  }
}

TEST(RequestReader, PipelinedRequestsKeepTheirOrder) {
  std::string wire;
  for (int i = 0; i < 50; ++i) wire += Post("/r" + std::to_string(i), std::to_string(i));
  for (size_t step : {size_t{0}, size_t{3}}) {
    Outcome o = Decode(wire, {}, step);
    ASSERT_EQ(o.requests.size(), 50u);
    for (int i = 0; i < 50; ++i) {
      EXPECT_EQ(o.requests[i].path, "/r" + std::to_string(i));
      EXPECT_EQ(o.requests[i].body, std::to_string(i));
    }
  }
}

TEST(RequestReader, BodyCapHoldsForLengthAndChunked) {
  RequestLimits limits;
  limits.max_body_bytes = 1000;
  // Content-Length over the cap: refused from the header alone, before any body byte is read.
  RequestReader r(limits);
  const std::string head = "POST /f HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n";
  EXPECT_EQ(r.Feed(head), head.size());
  EXPECT_EQ(r.state(), RequestReader::State::kError);
  EXPECT_EQ(r.error_status(), 413);
  // Exactly the cap passes; one more byte does not.
  EXPECT_EQ(Decode(Post("/f", std::string(1000, 'a')), limits).error, 0);
  EXPECT_EQ(Decode(Post("/f", std::string(1001, 'a')), limits).error, 413);
  // Chunked: many small chunks whose sum passes the cap.
  std::string chunked = "POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 200; ++i) chunked += "a\r\n0123456789\r\n";
  chunked += "0\r\n\r\n";
  Outcome o = Decode(chunked, limits, 64);
  EXPECT_EQ(o.error, 413);
  EXPECT_TRUE(o.requests.empty());
  // One huge chunk size announced.
  EXPECT_EQ(
      Decode("POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\nab", limits).error,
      413);
}

TEST(RequestReader, HeaderCap) {
  RequestLimits limits;
  limits.max_header_bytes = 1024;
  Outcome o = Decode("GET / HTTP/1.1\r\nX: " + std::string(4096, 'a') + "\r\n\r\n", limits, 100);
  EXPECT_EQ(o.error, 431);
  // A request line that never ends is refused once it passes the cap, without waiting for more.
  Outcome line = Decode("GET /" + std::string(5000, 'a'), limits, 100, /*eof=*/false);
  EXPECT_EQ(line.error, 431);
}

TEST(RequestReader, HeaderFacts) {
  RequestReader r;
  const std::string head =
      "POST /webhook?timeout=10s HTTP/1.1\r\nExpect: 100-continue\r\nConnection: "
      "close\r\nContent-Length: 2\r\n\r\n";
  EXPECT_EQ(r.Feed(head + "{}"), head.size());
  ASSERT_EQ(r.state(), RequestReader::State::kHeaderDone);
  EXPECT_TRUE(r.expects_continue());
  EXPECT_FALSE(r.keep_alive());
  EXPECT_EQ(r.body_reservation(), 2u);
  EXPECT_EQ(r.version(), 11);
  r.AcceptBody();
  EXPECT_EQ(r.Feed("{}"), 2u);
  ASSERT_EQ(r.state(), RequestReader::State::kDone);
  HttpRequest q = r.Take();
  EXPECT_EQ(q.method, "POST");
  EXPECT_EQ(q.path, "/webhook");
  EXPECT_EQ(q.query, "timeout=10s");
  EXPECT_EQ(q.body, "{}");
}

// The Authorization header reaches the handler (the /refit route's bearer token), only when it is
// sent once: two values would leave which one counts to whoever reads them.
TEST(RequestReader, AuthorizationHeader) {
  const struct {
    const char* extra;
    const char* want;
  } cases[] = {{"", ""},
               {"Authorization: Bearer abc.def\r\n", "Bearer abc.def"},
               {"authorization: Bearer x\r\n", "Bearer x"},
               {"Authorization: Bearer a\r\nAuthorization: Bearer b\r\n", ""}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.extra);
    RequestReader r;
    const std::string wire = Post("/refit", "{}", c.extra);
    const size_t used = r.Feed(wire);
    if (r.state() == RequestReader::State::kHeaderDone) {
      r.AcceptBody();
      r.Feed(wire.substr(used));
    }
    ASSERT_EQ(r.state(), RequestReader::State::kDone);
    EXPECT_EQ(r.Take().authorization, c.want);
  }
}

TEST(RequestReader, ChunkedReservesTheCap) {
  RequestLimits limits;
  limits.max_body_bytes = 12345;
  RequestReader r(limits);
  r.Feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_EQ(r.state(), RequestReader::State::kHeaderDone);
  EXPECT_EQ(r.body_reservation(), 12345u);
}

}  // namespace
}  // namespace hami::http
