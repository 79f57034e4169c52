// hami scheduler: the control plane — kube-scheduler extender (/filter, /bind, /preempt) on its own
// listener
// (--extender-bind, loopback: kube-scheduler runs in the same pod), mutating webhook (/webhook),
// the device plugins' NUMA refit (/refit), health (/healthz, /readyz) and Prometheus metrics
// (/metrics) on --http-bind, over HTTPS when a certificate is given. Flags and wiring only; the
// logic lives in src/extender and src/webhook.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "cmd/config_wiring.h"
#include "cmd/log_flags.h"
#include "cmd/subcommands.h"
#include "common/libc.h"
#include "common/log.h"
#include "core/text_util.h"
#include "extender/controller.h"
#include "extender/dra_hook.h"
#include "extender/extender.h"
#include "extender/metrics.h"
#include "extender/refit_auth.h"
#include "http/server.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/event_recorder.h"
#include "k8s/leader_election.h"
#include "scheduler/registry.h"
#include "scheduler/scheduler.h"
#include "vendors/vendor_set.h"
#include "webhook/dra_template_gc.h"
#include "webhook/usage_reload.h"
#include "webhook/webhook.h"

namespace hami::cmd {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) {
  g_stop = true;
}

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "hami scheduler: %s: %s\n", what.c_str(), std::string(s.message()).c_str());
  return 1;
}

// Each open connection is a descriptor: let the listeners hold their max_connections (the soft
// limit is often 1024, the hard one far higher).
void RaiseFileLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int SchedulerMain(int argc, char** argv) {
  CLI::App app{
      "HAMi control plane: scheduler extender (/filter, /bind, /preempt) for the stock "
      "kube-scheduler, "
      "mutating "
      "admission webhook (/webhook), /healthz, /readyz and /metrics. Keeps upstream HAMi's "
      "annotations; "
      "all state is rebuilt from them on start."};
  std::string kubeconfig, http_bind = "127.0.0.1:8080", extender_bind = "127.0.0.1:9444", cert_file,
                          key_file, scheduler_name = "hami-scheduler";
  std::string node_policy = "binpack", gpu_policy = "spread", policy = "default",
              metrics_bind = ":9395";
  std::string device_config_file, log_level = "info", node_label_selector;
  std::string follow_lease;
  std::string lease_name = "hami-scheduler-extender",
              lease_namespace = GetEnvOr("POD_NAMESPACE", "kube-system");
  std::string identity = GetEnvOr("POD_NAME");
  bool leader_elect = false, force_overwrite_default = true;
  // Each GPU pod costs two API writes (decision patch + binding), a pod without devices one: 200
  // QPS leaves >= 100 pods/s, twice what kube-scheduler's own default client (50 QPS, one Scheduled
  // event per pod) dispatches (docs/benchmarks.md).
  int64_t reservation_ttl_s = 60;
  double lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;
  double kube_qps = 200;
  int kube_burst = 400, threads = 32;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file; default: in-cluster service account, then $KUBECONFIG, then "
                 "~/.kube/config");
  app.add_option("--http-bind,--http_bind", http_bind,
                 "ADDR:PORT of the webhook server (/webhook, /healthz, /readyz, /metrics); TLS "
                 "with --cert-file")
      ->capture_default_str();
  app.add_option(
         "--extender-bind", extender_bind,
         "ADDR:PORT of the extender (/filter, /bind, /preempt, /healthz), plain HTTP: keep it on "
         "loopback, for the "
         "kube-scheduler container of the same pod")
      ->capture_default_str();
  app.add_option("--cert-file,--cert_file", cert_file,
                 "TLS certificate (PEM); re-read when it changes. Plain HTTP when neither "
                 "--cert-file nor --key-file is given");
  app.add_option("--key-file,--key_file", key_file,
                 "TLS private key (PEM); re-read when it changes");
  app.add_option("--leader-elect", leader_elect,
                 "elect one active replica on a coordination.k8s.io Lease; followers answer "
                 "filter/bind with an error so kube-scheduler retries")
      ->capture_default_str();
  app.add_option("--leader-elect-resource-name", lease_name,
                 "name of the Lease used for leader election")
      ->capture_default_str();
  app.add_option("--leader-elect-resource-namespace", lease_namespace,
                 "namespace of the Lease (default $POD_NAMESPACE)")
      ->capture_default_str();
  app.add_option("--leader-elect-follow-lease", follow_lease,
                 "with --leader-elect: lead exactly when this pod's kube-scheduler holds the Lease "
                 "of this name (its "
                 "holderIdentity starts with our pod name), instead of electing on "
                 "--leader-elect-resource-name; for "
                 "kube-scheduler and the extender in one pod, so the scheduling kube-scheduler "
                 "always calls the leader");
  app.add_option("--leader-elect-lease-duration", lease_duration_s,
                 "seconds a Lease holds without renewal before another replica may take it")
      ->capture_default_str();
  app.add_option(
         "--leader-elect-renew-deadline", renew_deadline_s,
         "seconds a leader keeps deciding without a successful renewal (must be < lease duration)")
      ->capture_default_str();
  app.add_option("--leader-elect-retry-period", retry_period_s, "seconds between election attempts")
      ->capture_default_str();
  app.add_option(
         "--reservation-ttl", reservation_ttl_s,
         "seconds a /filter decision holds its devices when no /bind follows (docs/security.md)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
  app.add_option("--leader-elect-identity", identity,
                 "identity in the Lease (default $POD_NAME, else the host name)");
  app.add_option("--scheduler-name", scheduler_name, "schedulerName the webhook sets on GPU pods")
      ->capture_default_str();
  app.add_option("--force-overwrite-default-scheduler", force_overwrite_default,
                 "take over GPU pods that name default-scheduler")
      ->capture_default_str();
  std::vector<std::string> cpu_pod_namespaces;
  std::string cpu_pod_selector;
  app.add_option("--cpu-pods-namespaces", cpu_pod_namespaces,
                 "namespaces (comma list) whose pods without devices the webhook also hands to "
                 "--scheduler-name, so the policy places them as hami sim does (docs/install.md, "
                 "CPU-only pods on GPU nodes); default none")
      ->delimiter(',');
  app.add_option("--cpu-pods-selector", cpu_pod_selector,
                 "pod labels (k=v,...; all must match) that select pods without devices for "
                 "--scheduler-name as well, in any namespace; default none");
  webhook::DraConversionOptions dra;
  std::string dra_pod_selector;
  app.add_option("--dra-namespaces", dra.namespaces,
                 "namespaces (comma list, * = all) whose GPU pods the webhook converts into DRA "
                 "claims of --dra-device-class instead of handing them to --scheduler-name "
                 "(docs/dra.md, Webhook conversion); default none")
      ->delimiter(',');
  app.add_option("--dra-pod-selector", dra_pod_selector,
                 "pod labels (k=v,...; all must match) that select GPU pods for DRA conversion in "
                 "any namespace; default none");
  app.add_option("--dra-device-class", dra.device_class, "DeviceClass the converted claims request")
      ->capture_default_str();
  app.add_option("--dra-driver-name", dra.driver,
                 "DRA driver whose device attributes the converted selectors read, and whose "
                 "claims --dra-placement places")
      ->capture_default_str();
  int64_t dra_template_gc_grace_s = 3600;
  app.add_option("--dra-template-gc-grace-s", dra_template_gc_grace_s,
                 "with DRA conversion on: the leader deletes a ResourceClaimTemplate the webhook "
                 "made that no pod has named for this many seconds (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  bool dra_placement = false;
  app.add_option("--dra-placement", dra_placement,
                 "choose the node for pods with DRA claims of --dra-driver-name (docs/dra.md, "
                 "Placement): /filter keeps the nodes where the claims fit by stock DRA's first "
                 "fit, /prioritize ranks them by the default policy's score of the state first "
                 "fit leaves; watches ResourceSlices, ResourceClaims and DeviceClasses")
      ->capture_default_str();
  scheduler::UsageRuleOptions usage_rule;
  int usage_duty_budget_pct = usage_rule.duty_budget / 100;
  app.add_option("--usage-overcommit-pct", usage_rule.overcommit_pct,
                 "usage-aware placement (docs/utilization.md): 0 = off; 100..1000 = pods with a "
                 "trusted hami.io/usage-profile are packed by it and a card may book up to this % "
                 "of its memory")
      ->capture_default_str();
  app.add_option("--usage-namespaces", usage_rule.namespaces,
                 "namespaces (comma list; * = all) whose pods' hami.io/usage-profile is trusted; "
                 "elsewhere it is ignored (docs/security.md); default none")
      ->delimiter(',');
  app.add_option("--usage-contention-bp", usage_rule.contention_bp,
                 "usage rule: the most likely a minute of a card may be contended, basis points")
      ->capture_default_str();
  app.add_option("--usage-fleet-contention-bp", usage_rule.fleet_contention_bp,
                 "usage rule: past --usage-contention-bp a card still takes a profiled pod while "
                 "the mean over the cards stays within this, basis points (0 = off; "
                 "docs/usage-packing.md)")
      ->capture_default_str();
  app.add_option("--usage-card-contention-bp", usage_rule.card_contention_bp,
                 "usage rule: under --usage-fleet-contention-bp, the most one card may reach, "
                 "basis points")
      ->capture_default_str();
  app.add_option("--usage-duty-budget-pct", usage_duty_budget_pct,
                 "usage rule: co-located duty at or above this % is contention")
      ->capture_default_str();
  std::string usage_recommendations;
  int usage_recommendations_check_s = 10;
  std::vector<std::string> usage_apply_namespaces;
  app.add_option("--usage-recommendations", usage_recommendations,
                 "the webhook applies this file (hami recommend --format json) to the pods of the "
                 "workloads that opted in (docs/utilization.md); default none");
  app.add_option("--usage-recommendations-check-s", usage_recommendations_check_s,
                 "how often the --usage-recommendations file is checked for a change (a change "
                 "that does not load keeps the previous set)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--usage-apply-namespaces", usage_apply_namespaces,
                 "namespaces (comma list; * = all) whose workloads get their recommendation "
                 "(a pod opts in or out with hami.io/usage-apply); default none")
      ->delimiter(',');
  app.add_option("--node-scheduler-policy", node_policy,
                 "default node policy: binpack | spread (pod annotation "
                 "hami.io/node-scheduler-policy overrides)")
      ->check(CLI::IsMember({"binpack", "spread"}))
      ->capture_default_str();
  app.add_option("--gpu-scheduler-policy", gpu_policy,
                 "default GPU policy: binpack | spread | topology-aware | mutex | numa or a comma "
                 "chain (hami.io/gpu-scheduler-policy overrides)")
      ->capture_default_str();
  std::string policies_doc = "placement policy of the scheduler library:";
  for (const auto& row : scheduler::Policies())
    policies_doc += StrCat(" ", row.name, " (", row.doc, ");");
  app.add_option("--policy", policy, policies_doc)->capture_default_str();
  app.add_option(
         "--metrics-bind,--metrics-bind-address", metrics_bind,
         "ADDR:PORT of the plain-HTTP /metrics server; empty = serve /metrics on --http-bind only")
      ->capture_default_str();
  app.add_option(
      "--device-config-file,--device-config", device_config_file,
      "device-config.yaml (resource names, defaults, memoryFactor, gpuCorePolicy; vendor sections "
      "enable other vendors: docs/vendors.md); default: upstream's defaults, NVIDIA only");
  app.add_option("--node-label-selector", node_label_selector,
                 "only nodes matching this label selector (k=v,...)");
  app.add_option("--kube-qps", kube_qps, "API client requests per second (<= 0: unlimited)")
      ->capture_default_str();
  app.add_option("--kube-burst", kube_burst, "API client burst")->capture_default_str();
  app.add_option("--threads", threads, "HTTP worker threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error | off")
      ->capture_default_str();
  std::string scheduler_sa = GetEnvOr("POD_NAMESPACE", "kube-system") + ":hami-scheduler";
  std::vector<std::string> node_agent_sas = {GetEnvOr("POD_NAMESPACE", "kube-system") +
                                             ":hami-node-agent"};
  app.add_option("--scheduler-service-account", scheduler_sa,
                 "NAMESPACE:NAME of the service account this scheduler runs as: the only identity "
                 "the webhook lets "
                 "change scheduler-owned pod annotations on UPDATE (docs/security.md)")
      ->capture_default_str();
  app.add_option("--node-agent-service-account", node_agent_sas,
                 "NAMESPACE:NAME of the device plugins' service account(s): they may change only "
                 "the to-allocate records they consume and bind-phase, and call /refit for pods "
                 "on their own node with their pod's bound token (repeatable)")
      ->capture_default_str();
  int64_t region_group = -1;
  app.add_option("--region-group", region_group,
                 "gid the webhook adds to supplementalGroups of GPU pods; the device plugin's "
                 "--region-group "
                 "gives region directories to it, so any user of the pod can use them (-1: none)")
      ->check(CLI::Range(int64_t{-1}, int64_t{0xfffffffe}))
      ->capture_default_str();
  LogFlags log_flags;
  AddLogFlags(app, log_flags);
  NormalizeKlogArgs(argc, argv);
  CLI11_PARSE(app, argc, argv);

  if (Status s = ApplyLogFlags(log_flags, log_level); !s.ok())
    return Fail("--log-level/--log-format", s);
  auto cpu_pod_labels = webhook::ParseMatchLabels(cpu_pod_selector);
  if (!cpu_pod_labels.ok()) return Fail("--cpu-pods-selector", cpu_pod_labels.status());
  auto dra_labels = webhook::ParseMatchLabels(dra_pod_selector);
  if (!dra_labels.ok()) return Fail("--dra-pod-selector", dra_labels.status());
  dra.match_labels = std::move(*dra_labels);
  std::vector<std::string> dra_namespaces;
  for (const std::string& ns : dra.namespaces)
    if (!core::text::Trim(ns).empty()) dra_namespaces.emplace_back(core::text::Trim(ns));
  dra.namespaces = std::move(dra_namespaces);
  // Our own pods would wait for the scheduler they are part of when it restarts.
  for (const std::string& ns : cpu_pod_namespaces)
    if (const std::string own = GetEnvOr("POD_NAMESPACE");
        !own.empty() && core::text::Trim(ns) == own)
      return Fail("--cpu-pods-namespaces",
                  InvalidArgument("names ", own,
                                  ", the namespace hami-scheduler runs in: its own "
                                  "pods would wait for it when it restarts"));
  // One parse of device-config.yaml (vendors/config_file.h): the vendors it enables and the nvidia
  // knobs of the extender and the webhook. Without a file, NVIDIA with upstream's defaults. Every
  // component gets the set: a default install runs the same code as a mixed one.
  vendors::DeviceConfig dc;
  std::unique_ptr<vendors::VendorSet> loaded_set;
  if (!device_config_file.empty()) {
    auto loaded = vendors::LoadConfigFile(device_config_file, "--device-config-file");
    if (!loaded.ok()) return Fail("--device-config-file", loaded.status());
    dc = std::move(loaded->nvidia);
    loaded_set = std::make_unique<vendors::VendorSet>(std::move(loaded->vendors));
  }
  const vendors::VendorSet& vendor_set =
      loaded_set ? *loaded_set : vendors::VendorSet::NvidiaOnly();
  {
    std::string names;
    for (const auto& v : vendor_set.vendors())
      names += StrCat(names.empty() ? "" : ", ", v->common_word());
    spdlog::info("vendors enabled: {}", names);
  }
  scheduler::SchedulerOptions so;
  so.vendor_rules = &vendor_set;
  so.policy = policy;
  so.config.node_policy = node_policy;
  so.config.gpu_policy = gpu_policy;
  usage_rule.duty_budget = usage_duty_budget_pct * 100;
  if (Status s = scheduler::ValidateUsageRuleOptions(usage_rule); !s.ok())
    return Fail("--usage-*", s);
  so.usage = usage_rule;
  auto sched = scheduler::Scheduler::Create(so);
  if (!sched.ok()) return Fail("--policy/--gpu-scheduler-policy", sched.status());

  auto cfg = k8s::LoadDefaultConfig(kubeconfig);
  if (!cfg.ok()) return Fail("Kubernetes API configuration", cfg.status());
  cfg->qps = kube_qps;
  cfg->burst = kube_burst;
  cfg->user_agent = "hami-scheduler";
  auto client = k8s::Client::Create(*cfg);
  if (!client.ok()) return Fail("Kubernetes API client", client.status());
  // Events get a client of their own (same limits, its own rate limiter), as kube-scheduler's event
  // broadcaster does: an Event never waits for, or takes, a token that a decision write needs.
  auto event_client = k8s::Client::Create(*cfg);
  if (!event_client.ok()) return Fail("Kubernetes API client (events)", event_client.status());

  extender::StateOptions sto;
  extender::ExtenderOptions eo;
  sto.vendors = &vendor_set;
  sto.scheduler_name = scheduler_name;
  sto.reservation_ttl_s = reservation_ttl_s;
  k8s::Client* events = event_client->get();
  // Events are queued and posted by the recorder's thread: the informer thread that reports a
  // rejected decision, and the webhook that applies a recommendation, never wait for the API server
  // (a burst of forged annotations costs queue slots, dropped and counted when full, not a stalled
  // informer).
  k8s::EventRecorder event_recorder(*events);
  sto.on_rejected_decision = [&event_recorder, scheduler_name](const extender::Json& ref,
                                                               const std::string& reason,
                                                               const std::string& message) {
    k8s::EventSpec ev;
    ev.involved_object = ref;
    ev.type = "Warning";
    ev.reason = StrCat("Decision", reason);
    ev.message = message;
    ev.component = scheduler_name;
    event_recorder.Record(std::move(ev));
  };
  extender::ClusterState state(**sched, sto);
  extender::ControllerOptions co;
  co.leader_elect = leader_elect;
  co.node_label_selector = node_label_selector;
  if (identity.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    identity = host;
  }
  co.election.identity = StrCat(identity, "_", ::getpid());
  co.election.lease_name = lease_name;
  co.election.lease_namespace = lease_namespace;
  co.follow_lease = follow_lease;
  // The downward API's pod name and namespace (deploy/): the pod gets hami.io/scheduler-role.
  co.self_pod_namespace = GetEnvOr("POD_NAMESPACE");
  co.self_pod_name = GetEnvOr("POD_NAME");
  auto secs = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  co.election.lease_duration = secs(lease_duration_s);
  co.election.renew_deadline = secs(renew_deadline_s);
  co.election.retry_period = secs(retry_period_s);
  if (leader_elect) {
    if (Status s = k8s::ValidateLeaderElectionConfig(co.election); !s.ok())
      return Fail("--leader-elect-*", s);
  }
  extender::Controller controller(**client, state, co);

  eo.is_leader = [&controller] { return controller.IsLeader(); };
  eo.leader_name = [&controller] { return controller.Leader(); };
  eo.synced = [&controller] { return controller.Synced(); };
  eo.component = scheduler_name;
  eo.pod_lookup = [&controller](const std::string& ns, const std::string& name) {
    return controller.LookupPod(ns, name);
  };
  eo.pod_by_uid = [&controller](const std::string& uid) { return controller.LookupPodByUid(uid); };
  eo.pdbs = [&controller] { return controller.PodDisruptionBudgets(); };
  eo.event_client = event_client->get();
  extender::Extender ext(**sched, state, client->get(), eo);
  // DRA placement (extender/dra_hook.h): the node for pods with claims of our driver.
  std::unique_ptr<extender::DraHook> dra_hook;
  if (dra_placement) {
    extender::DraHookOptions dho;
    dho.driver = dra.driver;
    dho.vendors = &vendor_set;
    const scheduler::Scheduler& s = **sched;
    dho.node_resources = [&s](const std::string& node) {
      scheduler::dra::NodeResources r;
      if (auto n = s.cache().Snapshot(node))
        r = {n->info.cpu_milli, n->info.memory_mib, n->cpu_used, n->mem_used};
      return r;
    };
    dho.pod_by_uid = [&controller](const std::string& uid) {
      return controller.LookupPodByUid(uid);
    };
    dra_hook = std::make_unique<extender::DraHook>(**client, dho);
  }

  webhook::WebhookOptions wo;
  ConfigureWebhook(dc, &vendor_set, &wo);
  wo.scheduler_name = scheduler_name;
  wo.force_overwrite_default_scheduler = force_overwrite_default;
  for (const std::string& ns : cpu_pod_namespaces)
    if (!core::text::Trim(ns).empty()) wo.cpu_pods.namespaces.emplace_back(core::text::Trim(ns));
  wo.cpu_pods.match_labels = std::move(*cpu_pod_labels);
  auto scheduler_user = webhook::ServiceAccountUsername(scheduler_sa);
  if (!scheduler_user.ok()) return Fail("--scheduler-service-account", scheduler_user.status());
  wo.scheduler_users = {*scheduler_user};
  for (const std::string& sa : node_agent_sas) {
    auto user = webhook::ServiceAccountUsername(sa);
    if (!user.ok()) return Fail("--node-agent-service-account", user.status());
    wo.node_agent_users.push_back(*user);
  }
  wo.region_group = region_group;
  // Usage recommendations at admission (webhook/usage_apply.h): the scheduler's trust, the opt-in.
  wo.usage.trusted_namespaces = usage_rule.namespaces;
  for (const std::string& ns : usage_apply_namespaces)
    if (!core::text::Trim(ns).empty()) wo.usage.apply_namespaces.emplace_back(core::text::Trim(ns));
  // Re-read when the file changes (webhook/usage_reload.h); a change that does not load keeps the
  // previous set.
  std::unique_ptr<webhook::UsageRecommendationsFile> recs_file;
  if (!usage_recommendations.empty()) {
    auto recs = webhook::UsageRecommendationsFile::Open(usage_recommendations);
    if (!recs.ok()) return Fail("--usage-recommendations", recs.status());
    recs_file = *std::move(recs);
    spdlog::info("hami scheduler: {} usage recommendations from {} (re-read when it changes)",
                 recs_file->Current()->size(), usage_recommendations);
    wo.usage.current_recommendations = [f = recs_file.get()] { return f->Current(); };
  }
  wo.usage.record_event = [&event_recorder, scheduler_name](k8s::EventSpec e) {
    e.component = scheduler_name;
    event_recorder.Record(std::move(e));
  };
  wo.quota_check = [&state](const std::string& ns, const std::map<std::string, int64_t>& demand) {
    return state.CheckQuota(ns, demand);
  };
  webhook::K8sDraTemplateStore dra_templates(client->get());
  wo.dra = dra;
  wo.dra_templates = &dra_templates;
  webhook::K8sDraDeviceSizes dra_sizes(client->get(), dra.driver);
  wo.dra_sizes = &dra_sizes;
  webhook::DraTemplateGc dra_template_gc(client->get(), {.grace_s = dra_template_gc_grace_s}, [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  if (dra.Enabled() && dra_template_gc_grace_s > 0)
    dra_template_gc.Start(std::clamp<int64_t>(dra_template_gc_grace_s / 4, 1, 300),
                          [&controller] { return controller.IsLeader(); });
  webhook::Webhook wh(wo);

  // Two listeners (docs/security.md, "HTTP surfaces"): the extender only for kube-scheduler, the
  // webhook listener for the API server and scrapers. /filter, /bind and /preempt are not routed on
  // the latter.
  http::HttpServerOptions xo;
  xo.bind = extender_bind;
  xo.threads = threads;
  http::HttpServer extender_server(xo);
  http::HttpServerOptions ho;
  ho.bind = http_bind;
  ho.cert_file = cert_file;
  ho.key_file = key_file;
  ho.threads = threads;
  http::HttpServer server(ho);
  auto json = [](std::string body) {
    return http::HttpResponse{200, "application/json", std::move(body)};
  };
  auto metrics = [&](const http::HttpRequest&) {
    return http::HttpResponse{
        200, "text/plain; version=0.0.4",
        extender::RenderMetrics(**sched, state, &ext.counters()) +
            extender::RenderReplicaMetrics(controller.IsLeader(), controller.Synced()) +
            (recs_file ? recs_file->RenderMetrics() : std::string()) +
            BuildInfoMetric("scheduler")};
  };
  auto healthz = [](const http::HttpRequest&) {
    return http::HttpResponse{200, "text/plain", "ok"};
  };
  extender_server.Route("POST", "/filter", [&](const http::HttpRequest& r) {
    if (dra_hook)
      if (std::optional<std::string> ours = dra_hook->HandleFilter(r.body)) return json(*ours);
    return json(ext.HandleFilter(r.body));
  });
  // Scores only pods with DRA claims of our driver (--dra-placement); every other pod gets 0 on
  // every node, so a prioritizeVerb in the scheduler configuration changes nothing for them.
  extender_server.Route("POST", "/prioritize", [&](const http::HttpRequest& r) {
    if (dra_hook) return dra_hook->HandlePrioritize(r.body);
    return extender::ZeroPriorities(r.body);
  });
  extender_server.Route("POST", "/bind",
                        [&](const http::HttpRequest& r) { return json(ext.HandleBind(r.body)); });
  extender_server.Route("POST", "/preempt",
                        [&](const http::HttpRequest& r) { return ext.HandlePreempt(r.body); });
  extender_server.Route("GET", "/healthz", healthz);
  server.Route("POST", "/webhook",
               [&](const http::HttpRequest& r) { return json(wh.Handle(r.body)); });
  // NUMA refit (docs/upstream-contract.md, "NUMA refit"): device plugins call it over the Service,
  // so it is on this listener, and each caller is checked by TokenReview (extender/refit_auth.h):
  // a node agent's bound token, for pods on its own node only.
  auto refit_auth = extender::TokenReviewAuthenticator(client->get(), wo.node_agent_users);
  server.Route("POST", "/refit", [&](const http::HttpRequest& r) {
    return extender::ServeRefit(ext, *refit_auth, r);
  });
  server.Route("GET", "/healthz", healthz);
  server.Route("GET", "/readyz", [&](const http::HttpRequest&) {
    if (controller.Ready()) return http::HttpResponse{200, "text/plain", "ok"};
    return http::HttpResponse{
        503, "text/plain",
        controller.Synced() ? "waiting for a leader\n" : "informers not synced yet\n"};
  });
  server.Route("GET", "/metrics", metrics);
  std::unique_ptr<http::HttpServer> metrics_server;
  if (!metrics_bind.empty()) {
    http::HttpServerOptions mo;
    mo.bind = metrics_bind;
    mo.threads = 2;
    mo.max_body_bytes = 64u << 10;
    metrics_server = std::make_unique<http::HttpServer>(mo);
    metrics_server->Route("GET", "/metrics", metrics);
  }

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  RaiseFileLimit();
  controller.Start();
  if (dra_hook) dra_hook->Start();
  if (recs_file) recs_file->Start(std::chrono::seconds(usage_recommendations_check_s));
  if (Status s = extender_server.Start(); !s.ok()) return Fail("--extender-bind", s);
  if (Status s = server.Start(); !s.ok()) return Fail("--http-bind", s);
  if (metrics_server)
    if (Status s = metrics_server->Start(); !s.ok()) return Fail("--metrics-bind", s);
  spdlog::info(
      "hami scheduler: extender on {} (http), webhook on {} ({}), metrics on {}, leader election "
      "{}",
      extender_bind, http_bind, server.tls() ? "https" : "http",
      metrics_bind.empty() ? http_bind : metrics_bind, leader_elect ? "on" : "off");
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  spdlog::info("hami scheduler stopping");
  extender_server.Stop();
  server.Stop();
  if (metrics_server) metrics_server->Stop();
  if (recs_file) recs_file->Stop();
  if (dra_hook) dra_hook->Stop();
  dra_template_gc.Stop();
  controller.Stop();
  return 0;
}

}  // namespace hami::cmd
