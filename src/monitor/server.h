#pragma once
// `hami monitor` at run time: HTTP (GET /metrics, GET /healthz) plus two background loops, feedback
// (every feedback_interval) and stale-region cleanup (every resync_interval).
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "http/server.h"
#include "monitor/exporter.h"
#include "monitor/feedback.h"

namespace hami::monitor {

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 9394;                      // 0 = any free port (tests)
  int64_t feedback_interval_ms = 5000;  // 0 = no feedback loop
  int64_t resync_interval_ms = 300000;  // cleanup period; 0 = no cleanup loop
};

// Parses a duration flag: "<n>ms", "<n>s", "<n>m", "<n>h" (a bare number is seconds). `flag` names
// the flag in errors.
StatusOr<int64_t> ParseDurationMs(const std::string& text, const std::string& flag);

// Splits "ADDR:PORT" ("0.0.0.0:9394", "[::1]:9394", ":9394" = all interfaces).
Status ParseBindAddress(const std::string& text, std::string* host, int* port);

class MonitorServer {
 public:
  // References must outlive the server.
  MonitorServer(ServerOptions options, Exporter& exporter, FeedbackLoop* feedback,
                RegionStore& store, const PodDirectory& pods);
  ~MonitorServer();  // Stop()

  // Binds and starts serving and the loops. Returns the bound port.
  StatusOr<int> Start();
  // Stops HTTP and the loops, and releases every region's feedback fields. Idempotent.
  void Stop();

 private:
  void Loop(int64_t period_ms, const std::function<void()>& fn);

  ServerOptions options_;
  Exporter& exporter_;
  FeedbackLoop* feedback_;
  RegionStore& store_;
  const PodDirectory& pods_;
  std::unique_ptr<http::HttpServer> http_;
  std::thread feedback_thread_, cleanup_thread_;
  Mutex mu_;
  CondVar cv_;  // stopping
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ = false;
};

}  // namespace hami::monitor
