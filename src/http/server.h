#pragma once
// The HTTP(S) server of `hami scheduler` (extender, webhook, metrics listeners) and `hami monitor`:
// event-driven (Boost.Beast over Boost.Asio), so a slow or idle client costs a socket and a few
// KiB, never a thread. A few I/O threads read and write, each running its own event loop for the
// connections given to it in turn; handlers run on a separate worker pool, so a slow handler delays
// only its own connection. Up to inline_handlers at once run on the I/O thread that read them, when
// their connection is alone on that thread (a connection accepted meanwhile waits at most ~20 ms).
// Limits and their reasons: docs/security.md, "HTTP surfaces".
//
// Per connection: a TLS handshake and a request header must each complete within header_timeout, a
// body within body_timeout, a response be taken by the client within write_timeout; an idle
// keep-alive connection is closed after idle_timeout. Requests on one connection are answered one
// at a time, in order (pipelined requests wait in the buffer). At max_connections the connection
// idle the longest (or reading its header) is closed to admit the new one; when every connection is
// busy the new one is closed at once.
//
// Refusals, each with Connection: close: 400 (malformed request, JSON nested deeper than
// max_json_depth), 413 (body over max_body_bytes, for Content-Length and chunked alike), 415
// (Content-Encoding other than identity), 431 (header too large), 501 (a transfer coding other than
// chunked), 503 (bodies in flight would pass max_buffered_body_bytes), 404/405 (no route).
//
// TLS: when a certificate is configured the files are re-read when they change on disk
// (cert-manager rotates them in place): every new handshake uses the newest pair that loaded; a
// pair that fails to load (half-written, weak key, too large) is logged and the previous one keeps
// serving.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "http/request_reader.h"

namespace hami::http {

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string bind = "127.0.0.1:0";  // "ADDR:PORT"; port 0 = any free port
  std::string cert_file, key_file;   // both empty = plain HTTP
  int threads = 16;                  // handler worker pool
  int io_threads = 2;                // socket I/O and TLS: one event loop each
  // Handlers that may run at once on the I/O thread that read their request, when theirs is the
  // only connection of that thread's loop; the rest go to the worker pool. A request that comes
  // while a slot is free costs no thread hand-off. A connection accepted meanwhile waits until it
  // returns, or at most about 20 ms (then another thread runs the loop). 0 = every handler on the
  // pool.
  int inline_handlers = 1;
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 16u << 10;
  size_t max_buffered_body_bytes =
      256u << 20;  // all requests' bodies together (chunked counts as the cap)
  size_t max_connections = 1024;
  int max_json_depth = 1000;  // request bodies nested deeper get 400; 0 = not checked
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
  std::chrono::milliseconds idle_timeout{90000};
  std::chrono::milliseconds reload_interval{1000};  // how often the certificate files are checked
};

// Splits "ADDR:PORT" ("[::1]:443" for IPv6, ":9395" = all interfaces). Errors name the value.
Status SplitHostPort(const std::string& bind, std::string* host, int* port);

// Counters (tests, docs/security.md figures).
struct HttpServerStats {
  int64_t accepted = 0;             // connections accepted
  int64_t evicted = 0;              // idle/header-reading connections closed to admit a new one
  int64_t refused = 0;              // connections closed at once (every slot busy)
  int64_t timed_out = 0;            // connections closed by a timeout
  int64_t rejected = 0;             // requests refused with 4xx/5xx before reaching a handler
  int64_t handled = 0;              // requests that reached a handler
  int64_t open = 0;                 // connections open now
  int64_t buffered_body_bytes = 0;  // body bytes reserved by requests in flight now
  int64_t rescuer_polls = 0;        // times the rescuer thread looked for a stuck inline handler
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions opts);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes (exact path) must be added before Start().
  void Route(const std::string& method, const std::string& path, HttpHandler handler);
  // Loads the certificate (when configured), binds and serves on background threads.
  Status Start();
  // Stops accepting, closes every connection, waits for running handlers. Idempotent.
  void Stop();
  int port() const;
  bool tls() const;
  // Times the certificate pair was (re)loaded successfully (tests).
  int64_t cert_loads() const;
  // Times a changed pair was refused and the previous one kept (tests).
  int64_t cert_rejects() const;
  HttpServerStats stats() const;

  struct Impl;  // opaque; named here so server.cc's connection types can refer to it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::http
