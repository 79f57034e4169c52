// hami consolidate: the consolidation controller (consolidator/controller.h,
// docs/consolidation.md "The controller"). Flags and wiring only: leader election on a Lease,
// a round every --interval, /metrics.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "cmd/log_flags.h"
#include "cmd/subcommands.h"
#include "common/libc.h"
#include "common/log.h"
#include "common/mutex.h"
#include "consolidator/controller.h"
#include "http/server.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/leader_election.h"
#include "scheduler/gpu_reservation.h"
#include "scheduler/usage_rule.h"

namespace hami::cmd {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "hami consolidate: %s: %s\n", what.c_str(),
               std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int ConsolidateMain(int argc, char** argv) {
  NormalizeKlogArgs(argc, argv);
  CLI::App app{
      "hami consolidate: move serving replicas so that GPUs empty out when load falls "
      "(docs/consolidation.md)"};
  std::string kubeconfig, log_level = "info", metrics_bind = ":9396";
  LogFlags log_flags;
  bool dry_run = false, once = false, leader_elect = true;
  double interval_s = 1800;
  std::string lease_name = "hami-consolidate",
              lease_namespace = GetEnvOr("POD_NAMESPACE", "kube-system");
  consolidator::ControllerOptions o;
  o.usage.overcommit_pct = 200;
  std::vector<std::string> skip = {"kube-system"};
  int usage_duty_budget_pct = 100;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file; default: in-cluster service account, then $KUBECONFIG");
  app.add_flag("--dry-run", dry_run,
               "plan and print each round's moves and expected saving; evict and write nothing");
  app.add_flag("--once", once, "run one round and exit (0 when it ran)");
  app.add_option("--interval", interval_s, "seconds between rounds")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--metrics-bind", metrics_bind, "ADDR:PORT of /metrics; empty: none");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  AddLogFlags(app, log_flags);
  // What packs with what: the scheduler's usage rule (same flags, same meaning; keep them equal).
  app.add_option("--usage-namespaces", o.usage.namespaces,
                 "namespaces whose pods' hami.io/usage-profile is trusted ('*' = all); pods "
                 "elsewhere are never moved and their GPUs are left alone")
      ->delimiter(',');
  app.add_option("--usage-overcommit-pct", o.usage.overcommit_pct,
                 "as the scheduler's: limits booked on a card up to this % of it")
      ->check(CLI::Range(100, 1000));
  app.add_option("--usage-contention-bp", o.plan.pack.contention_bp,
                 "packing budget: contention likelihood per hour a destination may reach "
                 "(basis points)");
  app.add_option("--usage-duty-budget-pct", usage_duty_budget_pct,
                 "co-located duty above this is contention (percent)")
      ->check(CLI::Range(1, 100));
  app.add_option("--relief-contention-bp", o.plan.relief_contention_bp,
                 "a GPU whose pods pass this is relieved (basis points; above the packing budget)");
  app.add_option("--restart-min", o.plan.restart_min,
                 "a pod is never moved again within this many minutes of its start");
  app.add_option("--max-moves-pod-day", o.plan.max_moves_pod_day, "moves of one pod in 24 h");
  app.add_option("--max-concurrent-workload", o.plan.max_concurrent_workload,
                 "moves under way per workload (0: no cap)");
  app.add_option("--max-concurrent-cluster", o.plan.max_concurrent_cluster,
                 "moves under way in the cluster (0: no cap)");
  app.add_option("--window-min", o.plan.window_min, "the window of --max-moves-window (minutes)");
  app.add_option("--max-moves-window", o.plan.max_moves_window,
                 "moves started within the window (0: no cap)");
  app.add_option("--move-timeout-min", o.move_timeout_min,
                 "a move whose replacement does not run by then is given up and backs off");
  app.add_option("--reserve-min", o.reserve_min,
                 "the destination GPU is reserved for the moved pod's replacement this long (0: "
                 "not reserved)")
      ->check(CLI::Range(0, static_cast<int>(scheduler::kMaxGpuReservationS / 60)));
  app.add_option("--skip-namespaces", skip,
                 "namespaces never touched (also: a namespace "
                 "labelled hami.io/no-consolidate)")
      ->delimiter(',');
  app.add_flag("--leader-elect,!--no-leader-elect", leader_elect,
               "only the holder of the Lease plans and moves (default on)");
  std::string history_configmap = "hami-consolidate-history";
  app.add_option("--history-configmap", history_configmap,
                 "ConfigMap (in the Lease's namespace) keeping moves, moves under way and "
                 "back-offs across leaders (\"\": kept in memory only)");
  app.add_option("--leader-elect-resource-name", lease_name, "the Lease's name");
  app.add_option("--leader-elect-resource-namespace", lease_namespace,
                 "the Lease's namespace (default $POD_NAMESPACE, else kube-system)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status s = ApplyLogFlags(log_flags, log_level); !s.ok()) return Fail("--log-level", s);
  o.usage.duty_budget = usage_duty_budget_pct * 100;
  o.plan.pack.duty_budget = o.usage.duty_budget;
  o.plan.pack.overcommit_pct = o.usage.overcommit_pct;
  o.usage.contention_bp = o.plan.pack.contention_bp;
  if (Status s = scheduler::ValidateUsageRuleOptions(o.usage); !s.ok()) return Fail("--usage-*", s);
  o.eligibility.skip_namespaces = {skip.begin(), skip.end()};
  o.dry_run = dry_run;
  o.history_namespace = lease_namespace;
  o.history_name = history_configmap;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  o.host = host;

  auto cfg = k8s::LoadDefaultConfig(kubeconfig);
  if (!cfg.ok()) return Fail("Kubernetes API configuration", cfg.status());
  cfg->user_agent = "hami-consolidate";
  auto client = k8s::Client::Create(*cfg);
  if (!client.ok()) return Fail("Kubernetes API client", client.status());
  consolidator::Controller controller(**client, o, RealClock::Get());

  auto round = [&]() -> bool {
    auto r = controller.RunOnce();
    if (!r.ok()) {
      spdlog::warn("consolidate: round failed: {}", std::string(r.status().message()));
      return false;
    }
    if (dry_run || once) std::fputs(r->plan_text.c_str(), stdout);
    for (const std::string& line : r->lines) spdlog::info("consolidate: {}", line);
    if (dry_run) {
      spdlog::info("consolidate: dry run: {} moves planned (saving {} GPUs)", r->planned,
                   r->saving_gpus);
      return true;
    }
    spdlog::info(
        "consolidate: {} planned (saving {} GPUs), {} evicted, {} blocked, {} failed, {} skipped, "
        "{} GPUs free",
        r->planned, r->saving_gpus, r->evicted, r->blocked, r->failed, r->skipped, r->free_gpus);
    std::fflush(stdout);
    return true;
  };
  if (once) return round() ? 0 : 1;

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::unique_ptr<http::HttpServer> metrics;
  Mutex metrics_mu;  // the controller is not thread-safe: /metrics reads under this
  if (!metrics_bind.empty()) {
    http::HttpServerOptions ho;
    ho.bind = metrics_bind;
    ho.threads = 1;
    metrics = std::make_unique<http::HttpServer>(ho);
    metrics->Route("GET", "/metrics", [&](const http::HttpRequest&) {
      MutexLock l(metrics_mu);
      return http::HttpResponse{200, "text/plain; version=0.0.4",
                                controller.RenderMetrics() + BuildInfoMetric("consolidate")};
    });
    metrics->Route("GET", "/healthz", [](const http::HttpRequest&) {
      return http::HttpResponse{200, "text/plain", "ok"};
    });
    if (Status s = metrics->Start(); !s.ok()) return Fail("--metrics-bind", s);
  }
  std::unique_ptr<k8s::LeaderElector> elector;
  if (leader_elect) {
    k8s::LeaderElectionConfig le;
    le.identity = std::string(host) + "_" + std::to_string(::getpid());
    le.lease_name = lease_name;
    le.lease_namespace = lease_namespace;
    auto e = k8s::LeaderElector::Create(**client, le);
    if (!e.ok()) return Fail("--leader-elect-*", e.status());
    elector = *std::move(e);
    elector->Start();
  }
  // Leadership is checked again before every eviction, not only at the start of a round.
  k8s::LeaderElector* leading = elector.get();
  controller.SetMayAct([leading] { return leading == nullptr || leading->IsLeader(); });
  spdlog::info("hami consolidate: {} every {} s{}", dry_run ? "dry run" : "moving pods", interval_s,
               leader_elect ? ", leader-elected" : "");
  auto next = std::chrono::steady_clock::now();
  while (!g_stop) {
    // A candidate that is not leading checks again soon: a new leader starts its first round at
    // once, not an interval later.
    if (std::chrono::steady_clock::now() >= next && (!elector || elector->IsLeader())) {
      {
        MutexLock l(metrics_mu);
        round();
      }
      next = std::chrono::steady_clock::now() +
             std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (elector) elector->Stop();
  if (metrics) metrics->Stop();
  return 0;
}

}  // namespace hami::cmd
