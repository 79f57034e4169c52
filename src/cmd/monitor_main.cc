// `hami monitor`: the node exporter (Prometheus, :9394) over libvgpu's shared regions and NVML,
// with the utilisation/priority feedback loop and stale-region cleanup. Flags and wiring only.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "cmd/log_flags.h"
#include "cmd/subcommands.h"
#include "common/clock.h"
#include "common/libc.h"
#include "common/log.h"
#include "gpu/nvml_discovery.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "monitor/exporter.h"
#include "monitor/feedback.h"
#include "monitor/k8s_pod_directory.h"
#include "monitor/nvml_telemetry.h"
#include "monitor/region_store.h"
#include "monitor/server.h"

namespace hami::cmd {
namespace {

int Fail(const Status& s) {
  spdlog::error("monitor: {}", std::string(s.message()));
  return 1;
}

// Host GPU metrics are optional: a node without a working driver still exports container metrics.
class NoTelemetry final : public monitor::GpuTelemetry {
 public:
  explicit NoTelemetry(std::string why) : why_(std::move(why)) {}
  StatusOr<std::vector<monitor::HostGpu>> Devices() override { return Unavailable(why_); }
  StatusOr<std::vector<monitor::ProcessUtil>> ProcessUtilization(const std::string&,
                                                                 int64_t) override {
    return Unavailable(why_);
  }

 private:
  std::string why_;
};

}  // namespace

int MonitorMain(int argc, char** argv) {
  CLI::App app{
      "hami monitor: Prometheus exporter of libvgpu container usage and host GPU metrics, with the "
      "SM-limit/priority feedback loop and stale region cleanup"};
  std::string bind = "0.0.0.0:9394", region_root = "/usr/local/vgpu/containers", node_name,
              kubeconfig;
  std::string resync = "5m", feedback = "5s", shares = "100ms", log_level = "info",
              nvml_library = "libnvidia-ml.so.1";
  app.add_option("--metrics-bind", bind, "ADDR:PORT to serve GET /metrics and GET /healthz on")
      ->capture_default_str();
  app.add_option("--region-root", region_root,
                 "directory of the per-container region directories <podUID>_<container>/*.cache")
      ->capture_default_str();
  app.add_option("--node-name", node_name, "this node's name (default: env NODE_NAME)");
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)");
  app.add_option("--resync-interval", resync,
                 "how often stale region directories are deleted, and how long a directory of a "
                 "deleted pod "
                 "is kept (like upstream's HAMI_RESYNC_INTERVAL)")
      ->capture_default_str();
  app.add_option("--feedback-interval", feedback,
                 "period of the utilisation/priority feedback loop (0 = off; regions keep "
                 "libvgpu's default: "
                 "SM limits always on)")
      ->capture_default_str();
  app.add_option("--share-interval", shares,
                 "period of the work-conserving shares written into armed containers' limits files "
                 "(0 = off: each container is held to its SM limit under contention)")
      ->capture_default_str();
  app.add_option("--nvml-library", nvml_library, "NVML library to dlopen")->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  LogFlags log_flags;
  AddLogFlags(app, log_flags);
  NormalizeKlogArgs(argc, argv);
  CLI11_PARSE(app, argc, argv);
  // SIGINT/SIGTERM end the process through sigwait, so that Stop() releases the feedback fields.
  // Blocked before any thread starts, so every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  if (Status s = ApplyLogFlags(log_flags, log_level); !s.ok()) return Fail(s);
  std::string host;
  int port = 0;
  if (Status s = monitor::ParseBindAddress(bind, &host, &port); !s.ok()) return Fail(s);
  auto resync_ms = monitor::ParseDurationMs(resync, "--resync-interval");
  if (!resync_ms.ok()) return Fail(resync_ms.status());
  auto feedback_ms = monitor::ParseDurationMs(feedback, "--feedback-interval");
  if (!feedback_ms.ok()) return Fail(feedback_ms.status());
  auto share_ms = monitor::ParseDurationMs(shares, "--share-interval");
  if (!share_ms.ok()) return Fail(share_ms.status());
  if (node_name.empty()) {
    node_name = GetEnvOr("NODE_NAME");
    if (node_name.empty())
      return Fail(InvalidArgument("--node-name is empty and NODE_NAME is not set"));
  }

  auto config = k8s::LoadDefaultConfig(kubeconfig);
  if (!config.ok()) return Fail(Annotate(config.status(), "--kubeconfig"));
  auto client = k8s::Client::Create(*config);
  if (!client.ok()) return Fail(client.status());
  monitor::K8sPodDirectory pods(**client, node_name);
  pods.Start();

  std::unique_ptr<gpu::DeviceDiscovery> discovery;
  std::unique_ptr<monitor::GpuTelemetry> telemetry;
  gpu::NvmlOptions nvml_options;
  nvml_options.library = nvml_library;
  if (auto d = gpu::NvmlDiscovery::Open(nvml_options); d.ok()) {
    discovery = std::move(*d);
    if (auto t = monitor::NvmlTelemetry::Open(*discovery, nvml_library); t.ok()) {
      telemetry = std::move(*t);
    } else {
      telemetry = std::make_unique<NoTelemetry>(std::string(t.status().message()));
    }
  } else {
    spdlog::warn("monitor: no host GPU metrics: {}", std::string(d.status().message()));
    telemetry = std::make_unique<NoTelemetry>(std::string(d.status().message()));
  }

  const Clock& clock = RealClock::Get();
  monitor::RegionStoreOptions store_options;
  store_options.root = region_root;
  store_options.stale_after_seconds = *resync_ms / 1000;
  monitor::RegionStore store(store_options, clock);
  monitor::ExporterOptions exporter_options;
  exporter_options.node_name = node_name;
  exporter_options.build = monitor::CurrentBuildInfo();
  monitor::ActivityLog activity;
  monitor::Exporter exporter(exporter_options, store, pods, *telemetry, clock, &activity);
  monitor::FeedbackLoop loop(store, *telemetry, clock,
                             std::max<int64_t>(*feedback_ms, 1000) * 1'000'000, &activity);
  monitor::ServerOptions server_options;
  server_options.host = host;
  server_options.port = port;
  server_options.feedback_interval_ms = *feedback_ms;
  server_options.resync_interval_ms = *resync_ms;
  monitor::MonitorServer server(server_options, exporter, *feedback_ms > 0 ? &loop : nullptr, store,
                                pods);

  auto bound = server.Start();
  if (!bound.ok()) return Fail(bound.status());
  std::unique_ptr<monitor::ShareThread> share_thread;
  if (*share_ms > 0) share_thread = std::make_unique<monitor::ShareThread>(loop, *share_ms);
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("monitor: signal {}, stopping", sig);
  share_thread.reset();
  server.Stop();
  pods.Stop();
  return 0;
}

}  // namespace hami::cmd
