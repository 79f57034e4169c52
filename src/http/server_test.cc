// HttpServer over loopback: routing, limits and their statuses, pipelining, timeouts, connection
// limits, the worker pool, TLS weak-key reload. Waits are bounded; no test asserts a duration.
#include "http/server.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "http/testing/raw_client.h"
#include "http/testing/self_signed.h"
#include "http/testing/tls_client.h"

namespace hami::http {
namespace {

using namespace std::chrono_literals;
using testing::ConnectLoopback;
using testing::Exchange;
using testing::PeerCommonName;
using testing::RawResponse;
using testing::ReadOne;
using testing::ReadResponse;
using testing::SendAll;
using testing::WaitClosed;

constexpr auto kWait = 10s;  // bound on every wait for an answer

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
const std::string kHealthz = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

// Holds handlers until opened (bounded: a test that forgets to open it does not hang).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> inside{0};
  void Wait() {
    inside++;
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, 20s, [&] { return open; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> l(mu);
      open = true;
    }
    cv.notify_all();
  }
  bool WaitInside(int n) {
    for (int i = 0; i < 2000 && inside.load() < n; ++i) std::this_thread::sleep_for(5ms);
    return inside.load() >= n;
  }
};

// /echo, /healthz, and with a gate /slow, which answers once the gate opens.
void AddRoutes(HttpServer& s, Gate* gate = nullptr) {
  if (gate != nullptr)
    s.Route("POST", "/slow", [gate](const HttpRequest&) {
      gate->Wait();
      return HttpResponse{200, "text/plain", "slow"};
    });
  s.Route("POST", "/echo", [](const HttpRequest& r) {
    return HttpResponse{200, "text/plain", r.path + ":" + r.body};
  });
  s.Route("GET", "/healthz", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", "ok"};
  });
}

TEST(HttpServer, StatusTable) {
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  std::string chunked_big = "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 150; ++i) chunked_big += "a\r\n0123456789\r\n";
  chunked_big += "0\r\n\r\n";
  struct Case {
    const char* name;
    std::string request;
    int status;
    std::string body;  // "" = not checked
  };
  const Case cases[] = {
      {"echo", Post("/echo", "hi"), 200, "/echo:hi"},
      {"healthz", kHealthz, 200, "ok"},
      {"no route", "GET /nope HTTP/1.1\r\n\r\n", 404, ""},
      {"wrong method", Post("/healthz", "x"), 405, ""},
      {"length over cap", "POST /echo HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n", 413, ""},
      {"chunked over cap", chunked_big, 413, ""},
      {"gzip", Post("/echo", "\x1f\x8b", "Content-Encoding: gzip\r\n"), 415, ""},
      {"te gzip", "POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, ""},
      {"garbage", "\x01\x02\x03 nonsense\r\n\r\n", 400, ""},
      {"deep json", Post("/echo", std::string(600, '[')), 200, ""},
      {"header too large", "GET /healthz HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n",
       431, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    RawResponse r = Exchange(s.port(), c.request, kWait);
    EXPECT_EQ(r.status, c.status) << r.head << "\n" << r.body;
    if (!c.body.empty()) {
      EXPECT_EQ(r.body, c.body);
    }
  }
  s.Stop();
}

TEST(HttpServer, JsonNestingLimit) {
  HttpServerOptions o;
  o.max_json_depth = 50;
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  EXPECT_EQ(
      Exchange(s.port(), Post("/echo", std::string(50, '[') + std::string(50, ']')), kWait).status,
      200);
  RawResponse deep = Exchange(s.port(), Post("/echo", std::string(51, '{')), kWait);
  EXPECT_EQ(deep.status, 400);
  EXPECT_NE(deep.body.find("nested deeper than 50"), std::string::npos) << deep.body;
  // Brackets inside strings do not count.
  EXPECT_EQ(Exchange(s.port(), Post("/echo", "[\"" + std::string(100, '[') + "\"]"), kWait).status,
            200);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  HttpServer s({});
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  const int fd = ConnectLoopback(s.port());
  ASSERT_GE(fd, 0);
  std::string burst;
  for (int i = 0; i < 50; ++i) burst += Post("/echo", std::to_string(i));
  ASSERT_TRUE(SendAll(fd, burst));
  std::string carry;
  int answered = 0;
  for (int i = 0; i < 50; ++i) {
    RawResponse r;
    if (!ReadResponse(fd, &carry, &r, kWait)) break;
    EXPECT_EQ(r.body, "/echo:" + std::to_string(i));
    ++answered;
  }
  EXPECT_EQ(answered, 50);
  ::close(fd);
}

TEST(HttpServer, ExpectContinue) {
  HttpServer s({});
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  const int fd = ConnectLoopback(s.port());
  ASSERT_TRUE(
      SendAll(fd, "POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"));
  std::string got;
  ASSERT_TRUE(testing::ReadSome(fd, &got, kWait));
  EXPECT_EQ(got.rfind("HTTP/1.1 100 Continue", 0), 0u) << got;
  ASSERT_TRUE(SendAll(fd, "abc"));
  EXPECT_EQ(ReadOne(fd, kWait).body, "/echo:abc");
  ::close(fd);
}

TEST(HttpServer, HeaderAndIdleTimeoutsClose) {
  HttpServerOptions o;
  o.header_timeout = 200ms;
  o.idle_timeout = 200ms;
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  // A header that never completes.
  const int drip = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(drip, "GET /healthz HTTP/1.1\r\n"));
  EXPECT_TRUE(WaitClosed(drip, kWait));
  ::close(drip);
  // A keep-alive connection that goes quiet after one request.
  const int idle = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(idle, kHealthz));
  ASSERT_EQ(ReadOne(idle, kWait).status, 200);
  EXPECT_TRUE(WaitClosed(idle, kWait));
  ::close(idle);
  for (int i = 0; i < 1000 && s.stats().timed_out < 2; ++i)
    std::this_thread::sleep_for(5ms);  // counted after the close
  EXPECT_GE(s.stats().timed_out, 2);
}

TEST(HttpServer, AtTheConnectionLimitTheIdlestGoesFirst) {
  HttpServerOptions o;
  o.max_connections = 8;
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(ConnectLoopback(s.port()));
  // Every new connection past 8 evicted an idle one; a fresh request still gets through.
  EXPECT_EQ(Exchange(s.port(), kHealthz, kWait).status, 200);
  EXPECT_GE(s.stats().evicted, 12);
  for (int i = 0; i < 1000 && s.stats().open > 9; ++i)
    std::this_thread::sleep_for(5ms);  // evictions are posted
  EXPECT_LE(s.stats().open, 9);
  for (int fd : idle) ::close(fd);
}

// Connections that die while the acceptor looks for one to evict: the eviction scan must not drop
// the last reference to a session (whose destructor unregisters it) while it holds the registry
// lock. Before the fix this deadlocked the acceptor within a few thousand churned connections.
TEST(HttpServer, EvictionScanSurvivesConnectionsDyingUnderIt) {
  HttpServerOptions o;
  o.max_connections = 64;
  o.io_threads = 4;
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  // Floods of idle connections: past the limit each admission evicts one, and the evicted ones die
  // on other I/O threads while the next admission scans the registry.
  for (int round = 0; round < 6; ++round) {
    std::vector<int> idle;
    for (int i = 0; i < 1000; ++i) idle.push_back(ConnectLoopback(s.port()));
    ASSERT_EQ(Exchange(s.port(), kHealthz, kWait).status, 200) << "round " << round;
    for (int fd : idle) testing::ResetClose(fd);
  }
  EXPECT_GT(s.stats().evicted, 5000);
}

TEST(HttpServer, BusyConnectionsAreNotEvictedAndExcessIsRefused) {
  HttpServerOptions o;
  o.max_connections = 2;
  o.threads = 4;
  HttpServer s(o);
  Gate gate;
  AddRoutes(s, &gate);
  ASSERT_TRUE(s.Start().ok());
  int busy[2];
  for (int& fd : busy) {
    fd = ConnectLoopback(s.port());
    ASSERT_TRUE(SendAll(fd, Post("/slow", "x")));
  }
  ASSERT_TRUE(gate.WaitInside(2));
  RawResponse refused = Exchange(s.port(), kHealthz, kWait);
  EXPECT_EQ(refused.status, 503);
  EXPECT_GE(s.stats().refused, 1);
  gate.Open();
  for (int fd : busy) {
    EXPECT_EQ(ReadOne(fd, kWait).body, "slow");
    ::close(fd);
  }
}

TEST(HttpServer, ASlowHandlerDoesNotHoldOthers) {
  HttpServerOptions o;
  o.threads = 2;
  HttpServer s(o);
  Gate gate;
  AddRoutes(s, &gate);
  ASSERT_TRUE(s.Start().ok());
  const int slow = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(slow, Post("/slow", "x")));
  ASSERT_TRUE(gate.WaitInside(1));
  EXPECT_EQ(Exchange(s.port(), kHealthz, kWait).status, 200);
  gate.Open();
  EXPECT_EQ(ReadOne(slow, kWait).body, "slow");
  ::close(slow);
}

// A handler running inline (on the event loop, not the pool) holds neither the I/O nor the pool:
// with the inline slot and the only pool thread both held, requests that need no handler are still
// answered, and both held requests finish once released.
// One I/O thread, one inline handler slot and one pool thread, with the routes above; null when it
// does not start.
std::unique_ptr<HttpServer> StartInlineServer(Gate* gate) {
  HttpServerOptions o;
  o.io_threads = 1;
  o.inline_handlers = 1;
  o.threads = 1;
  auto s = std::make_unique<HttpServer>(o);
  AddRoutes(*s, gate);
  if (!s->Start().ok()) return nullptr;
  return s;
}

TEST(HttpServer, InlineHandlersLeaveTheIoThreadsFree) {
  Gate gate;
  auto server = StartInlineServer(&gate);
  ASSERT_NE(server, nullptr);
  HttpServer& s = *server;
  const int a = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(a, Post("/slow", "x")));
  ASSERT_TRUE(gate.WaitInside(1));
  const int b = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(b, Post("/slow", "y")));
  ASSERT_TRUE(gate.WaitInside(2));  // one inline, one on the pool
  EXPECT_EQ(Exchange(s.port(), "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", kWait).status, 404);
  EXPECT_EQ(Exchange(s.port(), Post("/healthz", ""), kWait).status, 405);
  gate.Open();
  EXPECT_EQ(ReadOne(a, kWait).body, "slow");
  EXPECT_EQ(ReadOne(b, kWait).body, "slow");
  // Afterwards the inline slot is free again and the server answers as before.
  EXPECT_EQ(Exchange(s.port(), kHealthz, kWait).body, "ok");
  ::close(a);
  ::close(b);
}

// An idle server's rescuer thread stops polling, and the next inline handler wakes it: while that
// handler blocks its loop's only thread, the loop still accepts and answers other connections.
TEST(HttpServer, IdleRescuerSleepsUntilAnInlineHandlerStarts) {
  Gate gate;
  auto server = StartInlineServer(&gate);
  ASSERT_NE(server, nullptr);
  HttpServer& s = *server;
  // Asleep: no poll for 100 ms (ten polls' time when awake). Polling does not stop while broken.
  auto asleep = [&s] {
    for (int i = 0; i < 100; ++i) {
      const int64_t before = s.stats().rescuer_polls;
      std::this_thread::sleep_for(100ms);
      if (before > 0 && s.stats().rescuer_polls == before) return true;
    }
    return false;
  };
  ASSERT_TRUE(asleep());
  const int64_t polls = s.stats().rescuer_polls;
  const int a = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(a, Post("/slow", "x")));
  ASSERT_TRUE(gate.WaitInside(1));  // inline, on the only I/O thread
  EXPECT_EQ(Exchange(s.port(), "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", kWait).status, 404);
  EXPECT_GT(s.stats().rescuer_polls, polls);
  gate.Open();
  EXPECT_EQ(ReadOne(a, kWait).body, "slow");
  ::close(a);
  EXPECT_TRUE(asleep());  // and back to sleep once the server is idle again
}

TEST(HttpServer, NegativeInlineHandlersAreRefused) {
  HttpServerOptions o;
  o.inline_handlers = -1;
  HttpServer s(o);
  EXPECT_FALSE(s.Start().ok());
}

TEST(HttpServer, BodiesInFlightShareABudget) {
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  o.max_buffered_body_bytes = 1500;
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  // One half-sent 1000-byte body holds 1000 of the 1500: a second one must wait its turn (503).
  const int holder = ConnectLoopback(s.port());
  ASSERT_TRUE(SendAll(holder, "POST /echo HTTP/1.1\r\nContent-Length: 1000\r\n\r\nabc"));
  for (int i = 0; i < 1000 && s.stats().buffered_body_bytes < 1000; ++i)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(s.stats().buffered_body_bytes, 1000);
  EXPECT_EQ(Exchange(s.port(), Post("/echo", std::string(1000, 'b')), kWait).status, 503);
  EXPECT_EQ(Exchange(s.port(), Post("/echo", std::string(400, 'c')), kWait).status, 200);
  ::close(holder);
}

TEST(HttpServer, StopWithOpenConnections) {
  auto s = std::make_unique<HttpServer>(HttpServerOptions{});
  AddRoutes(*s);
  ASSERT_TRUE(s->Start().ok());
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) fds.push_back(ConnectLoopback(s->port()));
  ASSERT_TRUE(SendAll(fds[0], "GET /heal"));
  s->Stop();
  for (int fd : fds) {
    EXPECT_TRUE(WaitClosed(fd, kWait));
    ::close(fd);
  }
}

TEST(HttpServer, WeakKeyAtStartAndReload) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hami-http-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "tls.crt").string(), key = (dir / "tls.key").string();
  HttpServerOptions o;
  o.cert_file = cert;
  o.key_file = key;
  o.reload_interval = 20ms;
  {
    ASSERT_TRUE(testing::WriteSelfSigned("weak", cert, key, "RSA:1024"));
    HttpServer weak(o);
    Status st = weak.Start();
    EXPECT_FALSE(st.ok());
    EXPECT_NE(std::string(st.message()).find("1024"), std::string::npos) << st;
  }
  ASSERT_TRUE(testing::WriteSelfSigned("good", cert, key));
  HttpServer s(o);
  AddRoutes(s);
  ASSERT_TRUE(s.Start().ok());
  EXPECT_EQ(PeerCommonName(s.port()), "good");
  ASSERT_TRUE(testing::WriteSelfSigned("weak", cert, key, "RSA:1024"));
  for (int i = 0; i < 500 && s.cert_rejects() < 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(s.cert_rejects(), 1);
  EXPECT_EQ(PeerCommonName(s.port()), "good");
  ASSERT_TRUE(testing::WriteSelfSigned("rotated", cert, key, "RSA:2048"));
  for (int i = 0; i < 500 && s.cert_loads() < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(PeerCommonName(s.port()), "rotated");
  s.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hami::http
