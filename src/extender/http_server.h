#pragma once
// The HTTP(S) front of `hami scheduler`: routes (method, path) to handlers, plain HTTP when no
// certificate is configured, TLS (OpenSSL) otherwise. The certificate and key files are re-read
// when they change on disk (cert-manager rotates them in place): every new TLS handshake uses the
// newest pair that loaded; a half-written pair is ignored until it becomes valid.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace hami::extender {

struct HttpRequest {
  std::string method, path, body;
};
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string bind = "127.0.0.1:0";   // "ADDR:PORT"; port 0 = any free port
  std::string cert_file, key_file;    // both empty = plain HTTP
  int threads = 16;
  size_t max_body_bytes = 8u << 20;
  std::chrono::milliseconds reload_interval{1000};  // how often the files' mtimes are checked
};

// Splits "ADDR:PORT" ("[::1]:443" for IPv6). Errors name the flag value.
Status SplitHostPort(const std::string& bind, std::string* host, int* port);

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions opts);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes must be added before Start().
  void Route(const std::string& method, const std::string& path, HttpHandler handler);
  // Loads the certificate (when configured), binds and serves on a background thread.
  Status Start();
  void Stop();
  int port() const;
  bool tls() const;
  // Times the certificate pair was (re)loaded successfully (tests).
  int64_t cert_loads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::extender
