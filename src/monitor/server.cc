#include "monitor/server.h"

#include <charconv>
#include <climits>
#include <cstdint>

#include "common/log.h"

namespace hami::monitor {

StatusOr<int64_t> ParseDurationMs(const std::string& text, const std::string& flag) {
  int64_t n = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  std::string unit(ptr, text.data() + text.size());
  int64_t scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  }
  if (ec != std::errc() || ptr == text.data() || n < 0 || scale == 0 || n > INT64_MAX / scale) {
    return InvalidArgument(flag, ": '", text, "' is not a duration like 300ms, 5s, 5m or 1h");
  }
  return n * scale;
}

Status ParseBindAddress(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("--metrics-bind: '", text, "' is not ADDR:PORT");
  }
  std::string h = text.substr(0, colon);
  std::string p = text.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) h = "0.0.0.0";
  int value = -1;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || value < 0 || value > 65535) {
    return InvalidArgument("--metrics-bind: port '", p, "' is not a number 0-65535");
  }
  *host = h;
  *port = value;
  return OkStatus();
}

MonitorServer::MonitorServer(ServerOptions options, Exporter& exporter, FeedbackLoop* feedback,
                             RegionStore& store, const PodDirectory& pods)
    : options_(std::move(options)),
      exporter_(exporter),
      feedback_(feedback),
      store_(store),
      pods_(pods) {}

MonitorServer::~MonitorServer() {
  Stop();
}

StatusOr<int> MonitorServer::Start() {
  // The same event-driven server as the scheduler's listeners: a scrape is a GET without a body, so
  // a small worker pool and the default limits are plenty.
  http::HttpServerOptions ho;
  ho.bind = options_.host.find(':') != std::string::npos
                ? StrCat("[", options_.host, "]:", options_.port)
                : StrCat(options_.host, ":", options_.port);
  ho.threads = 2;
  ho.max_body_bytes = 64u << 10;
  http_ = std::make_unique<http::HttpServer>(ho);
  http_->Route("GET", "/metrics", [this](const http::HttpRequest&) {
    return http::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", exporter_.Render()};
  });
  http_->Route("GET", "/healthz", [](const http::HttpRequest&) {
    return http::HttpResponse{200, "text/plain", "ok\n"};
  });
  if (Status s = http_->Start(); !s.ok()) return Unavailable("monitor: ", std::string(s.message()));
  const int port = http_->port();
  if (feedback_ != nullptr && options_.feedback_interval_ms > 0) {
    feedback_thread_ = std::thread([this] {
      Loop(options_.feedback_interval_ms, [this] {
        FeedbackStats s = feedback_->Tick();
        spdlog::debug("monitor: feedback over {} containers: {} limited, {} blocked, {} errors",
                      s.containers, s.switched_on, s.blocked, s.errors);
      });
    });
  }
  if (options_.resync_interval_ms > 0) {
    cleanup_thread_ = std::thread(
        [this] { Loop(options_.resync_interval_ms, [this] { store_.CleanStale(pods_); }); });
  }
  started_ = true;
  spdlog::info("monitor: serving /metrics on {}:{}", options_.host, port);
  return port;
}

void MonitorServer::Loop(int64_t period_ms, const std::function<void()>& fn) {
  MutexLock l(mu_);
  while (!stopping_) {
    l.Unlock();
    fn();
    l.Lock();
    cv_.WaitFor(mu_, std::chrono::milliseconds(period_ms),
                [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
  }
}

void MonitorServer::Stop() {
  {
    MutexLock l(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (http_) http_->Stop();
  for (std::thread* t : {&feedback_thread_, &cleanup_thread_}) {
    if (t->joinable()) t->join();
  }
  if (started_ && feedback_ != nullptr) feedback_->Release();
}

}  // namespace hami::monitor
