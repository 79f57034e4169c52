#pragma once
// A control-plane replica (`hami scheduler` wired as in src/cmd/scheduler_main.cc) over a fake API
// server, plus a tiny stand-in for kube-scheduler that calls /webhook, /filter, /bind (and
// /preempt) over HTTP. Shared by the control-plane integration tests and bench/extender.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/pod_codec.h"
#include "extender/controller.h"
#include "extender/extender.h"
#include "extender/http_server.h"
#include "extender/metrics.h"
#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"
#include "scheduler/scheduler.h"
#include "webhook/webhook.h"

namespace hami::controlplane {

using Json = nlohmann::json;

// A Node object registering `gpus` devices "<name>-gpu<i>" (upstream JSON register annotation).
inline Json GpuNode(const std::string& name, int gpus, int64_t devmem = 16000, int split = 4) {
  Json devs = Json::array();
  for (int i = 0; i < gpus; ++i)
    devs.push_back({{"id", name + "-gpu" + std::to_string(i)},
                    {"index", i},
                    {"count", split},
                    {"devmem", devmem},
                    {"devcore", 100},
                    {"type", "NVIDIA-A100-SXM4-80GB"},
                    {"health", true},
                    {"mode", "hami-core"}});
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", name}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}},
              {"status", {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus * split)}}}}}};
}

struct ReplicaOptions {
  bool leader_elect = false;
  std::string identity = "replica-0";
  bool tls = false;
  int threads = 16;
  std::string follow_lease = "";   // ControllerOptions::follow_lease
  int64_t reservation_ttl_s = 60;  // StateOptions::reservation_ttl_s
  const Clock* clock = nullptr;    // state and extender (TTL); default the real clock
  std::string token = "";       // bearer token of the replica's client (FakeApiServer::Partition)
  std::string policy = "hami";  // SchedulerOptions::policy (hami scheduler --policy)
  std::string self_pod = "";    // ControllerOptions::self_pod_name (namespace hami-system)
  uint64_t seed = 1;            // SchedulerOptions::seed (randomized policies)
  scheduler::UsageRuleOptions usage = {};  // SchedulerOptions::usage (--usage-overcommit-pct, ...)
  // WebhookOptions::usage (--usage-recommendations, --usage-apply-namespaces); its trusted
  // namespaces are usage.namespaces, as in hami scheduler.
  webhook::UsageApplyOptions usage_apply = {};
};

class Replica {
 public:
  Replica(k8s::testing::FakeApiServer& api, ReplicaOptions o = {}) {
    k8s::ClientConfig cfg;
    cfg.server = api.url();
    cfg.bearer_token = o.token;
    cfg.qps = 0;  // no client-side limit against the fake
    cfg.max_retries = 4;
    k8s::ClientOptions copts;
    copts.retry_backoff = {1'000'000, 20'000'000, 2.0, 0.2};
    client = std::move(*k8s::Client::Create(cfg, copts));
    scheduler::SchedulerOptions sched_opts;
    sched_opts.policy = o.policy;
    sched_opts.seed = o.seed;
    sched_opts.usage = o.usage;
    sched = std::move(*scheduler::Scheduler::Create(sched_opts));
    extender::StateOptions so;
    so.reservation_ttl_s = o.reservation_ttl_s;
    so.clock = o.clock;
    so.on_rejected_decision = [this](const Json& ref, const std::string& reason,
                                     const std::string& message) {
      k8s::EventSpec ev;
      ev.involved_object = ref;
      ev.type = "Warning";
      ev.reason = "Decision" + reason;
      ev.message = message;
      (void)client->CreateEvent(ev);
    };
    state = std::make_unique<extender::ClusterState>(*sched, so);
    extender::ControllerOptions co;
    co.leader_elect = o.leader_elect;
    co.election.identity = o.identity;
    co.election.lease_namespace = "hami-system";
    co.election.lease_duration = std::chrono::milliseconds(1500);
    co.election.renew_deadline = std::chrono::milliseconds(1000);
    co.election.retry_period = std::chrono::milliseconds(100);
    co.watch_timeout_seconds = 30;
    co.follow_lease = o.follow_lease;
    if (!o.self_pod.empty()) co.self_pod_namespace = "hami-system", co.self_pod_name = o.self_pod;
    controller = std::make_unique<extender::Controller>(*client, *state, co);
    extender::ExtenderOptions eo;
    eo.is_leader = [this] { return controller->IsLeader(); };
    eo.leader_name = [this] { return controller->Leader(); };
    eo.clock = o.clock;
    eo.pod_lookup = [this](const std::string& ns, const std::string& name) {
      return controller->LookupPod(ns, name);
    };
    eo.pod_by_uid = [this](const std::string& uid) { return controller->LookupPodByUid(uid); };
    eo.pdbs = [this] { return controller->PodDisruptionBudgets(); };
    ext = std::make_unique<extender::Extender>(*sched, *state, client.get(), eo);
    webhook::WebhookOptions wo;
    wo.usage = o.usage_apply;
    wo.usage.trusted_namespaces = o.usage.namespaces;  // as hami scheduler's --usage-namespaces
    wo.quota_check = [this](const std::string& ns, const std::map<std::string, int64_t>& d) {
      return state->CheckQuota(ns, d);
    };
    wh = std::make_unique<webhook::Webhook>(wo);
    extender::HttpServerOptions ho;
    ho.threads = o.threads;
    server = std::make_unique<extender::HttpServer>(ho);
    auto json = [](std::string b) {
      return extender::HttpResponse{200, "application/json", std::move(b)};
    };
    server->Route("POST", "/filter", [this, json](const extender::HttpRequest& r) {
      return json(ext->HandleFilter(r.body));
    });
    server->Route("POST", "/bind", [this, json](const extender::HttpRequest& r) {
      return json(ext->HandleBind(r.body));
    });
    server->Route("POST", "/preempt",
                  [this](const extender::HttpRequest& r) { return ext->HandlePreempt(r.body); });
    server->Route("POST", "/webhook", [this, json](const extender::HttpRequest& r) {
      return json(wh->Handle(r.body));
    });
    server->Route("GET", "/readyz", [this](const extender::HttpRequest&) {
      return extender::HttpResponse{controller->Ready() ? 200 : 503, "text/plain", ""};
    });
    server->Route("GET", "/metrics", [this](const extender::HttpRequest&) {
      return extender::HttpResponse{200, "text/plain",
                                    extender::RenderMetrics(*sched, *state, &ext->counters())};
    });
    controller->Start();
    (void)server->Start();
  }
  ~Replica() {
    server->Stop();
    controller->Stop();
  }
  int port() const { return server->port(); }

  std::unique_ptr<k8s::Client> client;
  std::unique_ptr<scheduler::Scheduler> sched;
  std::unique_ptr<extender::ClusterState> state;
  std::unique_ptr<extender::Controller> controller;
  std::unique_ptr<extender::Extender> ext;
  std::unique_ptr<webhook::Webhook> wh;
  std::unique_ptr<extender::HttpServer> server;
};

// Polls `cond` until it holds or `timeout` passes (no timing is asserted; this only bounds a wait).
template <typename F>
bool WaitFor(F&& cond, std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// Runs f(worker, i) for every i in [0, n) on `workers` threads (each i once, in no fixed order),
// and collects what f reports as an error (non-empty string).
template <typename F>
std::vector<std::string> ParallelFor(int workers, int n, F&& f) {
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (int i; (i = next.fetch_add(1)) < n;) {
        std::string err = f(w, i);
        if (err.empty()) continue;
        std::lock_guard<std::mutex> l(mu);
        errors.push_back(std::move(err));
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// A replica started on `api` once its informers have synced and its cache holds `nodes` nodes.
inline std::unique_ptr<Replica> StartSynced(k8s::testing::FakeApiServer& api, size_t nodes,
                                            ReplicaOptions o = {}) {
  auto r = std::make_unique<Replica>(api, o);
  EXPECT_TRUE(r->controller->WaitForSync(std::chrono::seconds(20)));
  EXPECT_TRUE(WaitFor([&] { return r->sched->cache().node_count() == nodes; }));
  return r;
}

// What kube-scheduler does for one pod: /filter with the candidate names, then /bind to the one
// node.
struct KubeScheduler {
  explicit KubeScheduler(int port) : http("127.0.0.1", port) {
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);
  }

  // Runs the webhook on `pod` and returns the mutated pod (or the denial message in *denied).
  Json Admit(const Json& pod, const std::string& ns, std::string* denied = nullptr) {
    Json review{{"apiVersion", "admission.k8s.io/v1"},
                {"kind", "AdmissionReview"},
                {"request",
                 {{"uid", "req-1"},
                  {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                  {"namespace", ns},
                  {"operation", "CREATE"},
                  {"object", pod}}}};
    auto r = http.Post("/webhook", review.dump(), "application/json");
    if (!r || r->status != 200) {
      if (denied)
        *denied = r ? StrCat("webhook: HTTP ", r->status)
                    : StrCat("webhook: ", httplib::to_string(r.error()));
      return nullptr;
    }
    auto resp = webhook::ParseAdmissionResponse(r->body);
    if (!resp.ok()) {
      if (denied) *denied = std::string(resp.status().message());
      return nullptr;
    }
    if (!resp->allowed) {
      if (denied) *denied = resp->message;
      return nullptr;
    }
    return resp->patch ? pod.patch(*resp->patch) : pod;
  }

  // Returns the chosen node ("" when none fits or on error; *error gets Error).
  std::string Filter(const Json& pod, const std::vector<std::string>& nodes,
                     std::string* error = nullptr, extender::ExtenderFilterResult* out = nullptr) {
    extender::ExtenderArgs a;
    a.pod = pod;
    a.node_names = nodes;
    auto r = http.Post("/filter", extender::ToJson(a).dump(), "application/json");
    if (!r || r->status != 200) {
      if (error)
        *error = r ? StrCat("filter: HTTP ", r->status)
                   : StrCat("filter: ", httplib::to_string(r.error()));
      return "";
    }
    auto res = extender::ParseExtenderFilterResult(r->body);
    if (!res.ok()) return "";
    if (error) *error = res->error;
    if (out) *out = *res;
    if (!res->error.empty() || !res->node_names || res->node_names->size() != 1) return "";
    return (*res->node_names)[0];
  }

  std::string Bind(const Json& pod, const std::string& node) {
    extender::ExtenderBindingArgs b{pod["metadata"]["name"], pod["metadata"]["namespace"],
                                    pod["metadata"]["uid"], node};
    auto r = http.Post("/bind", extender::ToJson(b).dump(), "application/json");
    if (!r || r->status != 200)
      return r ? StrCat("bind: HTTP ", r->status) : StrCat("bind: ", httplib::to_string(r.error()));
    auto res = extender::ParseExtenderBindingResult(r->body);
    return res.ok() ? res->error : "bad reply";
  }

  httplib::Client http;
};

// Per-device totals computed from the decision annotations on the API server's pods: the ground
// truth the oversubscription checks use.
struct DeviceTotals {
  int tasks = 0;
  int64_t mem = 0;
  int cores = 0;
  bool exclusive = false;
};
inline std::map<std::string, DeviceTotals> TotalsFromAnnotations(
    const k8s::testing::FakeApiServer& api) {
  std::map<std::string, DeviceTotals> out;
  for (const auto& pod : api.List("pods")) {
    auto held = extender::HeldAllocation(pod);
    if (!held) continue;
    for (const auto& [uuid, u] : core::EffectiveDeviceUsage(extender::KindsOfPodJson(pod), *held)) {
      auto& t = out[uuid];
      t.tasks += u.used;
      t.mem += u.usedmem_mib;
      t.cores += u.usedcores;
      t.exclusive = t.exclusive || u.usedcores >= 100;
    }
  }
  return out;
}

}  // namespace hami::controlplane
