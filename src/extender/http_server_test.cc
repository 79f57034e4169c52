// HttpServer: routing over plain HTTP, TLS, and certificate rotation on disk without a restart.
#include "extender/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "extender/testing/self_signed.h"
#include "http/testing/tls_client.h"

namespace hami::extender {
namespace {

using http::testing::PeerCommonName;

TEST(SplitHostPort, Table) {
  struct Case {
    const char* in;
    bool ok;
    const char* host;
    int port;
  };
  const Case cases[] = {{"127.0.0.1:8443", true, "127.0.0.1", 8443},
                        {":9395", true, "0.0.0.0", 9395},
                        {"[::1]:443", true, "::1", 443},
                        {"0.0.0.0:0", true, "0.0.0.0", 0},
                        {"localhost", false, "", 0},
                        {"a:99999", false, "", 0},
                        {"a:x1", false, "", 0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    std::string h;
    int p = -1;
    Status s = SplitHostPort(c.in, &h, &p);
    EXPECT_EQ(s.ok(), c.ok) << s;
    if (c.ok) {
      EXPECT_EQ(h, c.host);
      EXPECT_EQ(p, c.port);
    }
  }
}

TEST(HttpServer, PlainRoutes) {
  HttpServer server({});
  server.Route("POST", "/filter", [](const HttpRequest& r) {
    return HttpResponse{200, "application/json", "echo:" + r.body};
  });
  server.Route("GET", "/healthz", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", "ok"};
  });
  ASSERT_TRUE(server.Start().ok());
  EXPECT_FALSE(server.tls());
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Post("/filter", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "echo:{}");
  auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->body, "ok");
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  server.Stop();
}

TEST(HttpServer, TlsAndCertificateRotation) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("h7-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "tls.crt").string(), key = (dir / "tls.key").string();
  ASSERT_TRUE(testing::WriteSelfSigned("first", cert, key));
  HttpServerOptions o;
  o.cert_file = cert;
  o.key_file = key;
  o.reload_interval = std::chrono::milliseconds(20);
  HttpServer server(o);
  server.Route("GET", "/readyz", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", "ready"};
  });
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(server.tls());
  httplib::SSLClient c("127.0.0.1", server.port());
  c.enable_server_certificate_verification(false);
  auto r = c.Get("/readyz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, "ready");
  EXPECT_EQ(PeerCommonName(server.port()), "first");

  ASSERT_TRUE(testing::WriteSelfSigned("second", cert, key));
  // Wait (bounded) for the watcher to pick the new pair up; no timing is asserted.
  for (int i = 0; i < 500 && server.cert_loads() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(server.cert_loads(), 2);
  EXPECT_EQ(PeerCommonName(server.port()), "second");

  // A broken file keeps the last good pair.
  { std::ofstream(cert) << "garbage"; }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(PeerCommonName(server.port()), "second");
  server.Stop();
  std::filesystem::remove_all(dir);
}

TEST(HttpServer, MissingCertificateFailsAtStart) {
  HttpServerOptions o;
  o.cert_file = "/nonexistent/tls.crt";
  o.key_file = "/nonexistent/tls.key";
  HttpServer server(o);
  Status s = server.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("/nonexistent/tls.crt"), std::string::npos) << s;
}

}  // namespace
}  // namespace hami::extender
