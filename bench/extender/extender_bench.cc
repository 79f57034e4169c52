// bench/extender: the control plane's speed (docs/benchmarks.md, section "extender").
//  1. /filter latency over HTTPS at 1k and 5k nodes (8 GPUs each, half full, nodeCacheCapable: the
//     request carries every node name, as kube-scheduler sends it), including the decision patch to
//     a fake API server. Each decided pod is released afterwards so the cluster stays half full.
//  2. Sustained pods/s of filter + bind end to end: a full replica (informers, webhook-less)
//  against
//     the fake API server, N client threads acting as kube-scheduler over HTTPS.
// Prints a markdown table. Usage: extender_bench [--quick] [--latency-only | --e2e-only |
// --codec-only]
// [--shipped-limits]
#include <httplib.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "extender/controller.h"
#include "extender/extender.h"
#include "extender/http_server.h"
#include "extender/testing/self_signed.h"
#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"
#include "scheduler/scheduler.h"

using namespace hami;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

Json GpuNode(const std::string& name, int gpus) {
  Json devs = Json::array();
  for (int i = 0; i < gpus; ++i)
    devs.push_back({{"id", name + "-gpu" + std::to_string(i)},
                    {"index", i},
                    {"count", 10},
                    {"devmem", 81920},
                    {"devcore", 100},
                    {"type", "NVIDIA-A100-SXM4-80GB"},
                    {"health", true}});
  return Json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", name}, {"annotations", {{"hami.io/node-nvidia-register", devs.dump()}}}}}};
}

Json PodObject(const std::string& name, int64_t mem, int cores) {
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "bench"}}},
      {"spec",
       {{"schedulerName", "hami-scheduler"},
        {"containers", Json::array({{{"name", "c"},
                                     {"resources",
                                      {{"limits",
                                        {{"nvidia.com/gpu", "1"},
                                         {"nvidia.com/gpumem", std::to_string(mem)},
                                         {"nvidia.com/gpucores", std::to_string(cores)}}}}}}})}}}};
}

struct Tls {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hami-bench-tls-" + std::to_string(::getpid()));
  std::string cert, key;
  Tls() {
    std::filesystem::create_directories(dir);
    cert = (dir / "tls.crt").string();
    key = (dir / "tls.key").string();
    extender::testing::WriteSelfSigned("bench", cert, key);
  }
  ~Tls() { std::filesystem::remove_all(dir); }
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// The API client's rate limit: off, or the shipped defaults (`--shipped-limits`: scheduler_main's
// --kube-qps 200 / --kube-burst 400), so the end-to-end row can show what a default install gets.
double g_qps = 0;
bool g_success_events = true;  // --no-success-events: like for like with builds before them

// User + system CPU of the whole process so far, in seconds: on a shared machine a steadier measure
// of work per pod than wall time (it does not count time spent waiting for a core).
double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}
int g_burst = 100;

std::unique_ptr<k8s::Client> MakeClient(const k8s::testing::FakeApiServer& api) {
  k8s::ClientConfig cfg;
  cfg.server = api.url();
  cfg.qps = g_qps;
  cfg.burst = g_burst;
  return std::move(*k8s::Client::Create(cfg));
}

// "Where the time goes" and codec rows, printed after the main table.
std::vector<std::string> stage_rows, codec_rows;

void FilterLatency(int nodes, int samples, const Tls& tls) {
  k8s::testing::FakeApiServer api;
  (void)api.Start();
  auto client = MakeClient(api);
  auto sched = std::move(*scheduler::Scheduler::Create({}));
  const extender::StateOptions
      state_opts;  // named: GCC 12 -O3 misreads a braced temporary (maybe-uninitialized)
  extender::ClusterState state(*sched, state_opts);
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) {
    names.push_back("node-" + std::to_string(n));
    state.OnNode(GpuNode(names.back(), 8));
    // Half full: GPUs 0..3 of every node carry a 40 GiB, 50 % share.
    for (int g = 0; g < 4; ++g) {
      core::PodAllocation a;
      a.node = names.back();
      a.containers = {
          {core::ContainerDevice{names.back() + "-gpu" + std::to_string(g), "NVIDIA", 40960, 50}}};
      (void)sched->AddPod("fill-" + std::to_string(n) + "-" + std::to_string(g), a);
    }
  }
  std::vector<Json> pods;
  for (int i = 0; i < 64; ++i)
    pods.push_back(*api.Upsert("pods", PodObject("lat-" + std::to_string(i), 8192, 20)));
  // The pod check reads the informer's copy in production (scheduler_main's pod_lookup); here the
  // pods never change, so their stored objects are that copy.
  std::map<std::string, std::shared_ptr<const Json>> by_name;
  for (const auto& p : pods)
    by_name[p["metadata"]["name"].get<std::string>()] = std::make_shared<const Json>(p);
  extender::ExtenderOptions eo;
  eo.success_events = g_success_events;
  auto event_client = MakeClient(api);  // as scheduler_main wires it: Events' own rate limiter
  eo.event_client = event_client.get();
  eo.pod_lookup = [&by_name](const std::string&,
                             const std::string& name) -> extender::ExtenderOptions::LivePodRef {
    auto it = by_name.find(name);
    if (it == by_name.end()) return nullptr;
    return it->second;
  };
  extender::Extender ext(*sched, state, client.get(), eo);
  extender::HttpServerOptions ho;
  ho.cert_file = tls.cert;
  ho.key_file = tls.key;
  extender::HttpServer server(ho);
  server.Route("POST", "/filter", [&](const extender::HttpRequest& r) {
    return extender::HttpResponse{200, "application/json", ext.HandleFilter(r.body)};
  });
  (void)server.Start();
  httplib::SSLClient http("127.0.0.1", server.port());
  http.enable_server_certificate_verification(false);
  http.set_keep_alive(true);
  http.set_tcp_nodelay(true);
  std::vector<double> us;
  // Stage sums (ns) at the end of the warm-up, to attribute the measured part.
  const auto& c = ext.counters();
  int64_t st0[4] = {};
  auto stages = [&](int64_t* v) {
    v[0] = c.filter_parse_ns.load();
    v[1] = c.filter_library_ns.load();
    v[2] = c.filter_patch_ns.load();
    v[3] = c.filter_encode_ns.load();
  };
  for (int i = 0; i < samples + 50; ++i) {
    if (i == 50) stages(st0);
    const Json& pod = pods[static_cast<size_t>(i) % pods.size()];
    extender::ExtenderArgs a;
    a.pod = pod;
    a.node_names = names;
    const std::string body = extender::ToJson(a).dump();
    const auto t0 = SteadyClock::now();
    auto r = http.Post("/filter", body, "application/json");
    const auto t1 = SteadyClock::now();
    if (!r || r->status != 200 || r->body.find("\"Error\":\"\"") == std::string::npos) {
      std::fprintf(stderr, "filter failed: %s\n", r ? r->body.substr(0, 300).c_str() : "transport");
      return;
    }
    const std::string uid = pod["metadata"]["uid"];
    state.Drop(uid);
    (void)sched->Unreserve(uid);
    if (i >= 50) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::printf(
      "| /filter over HTTPS, %d nodes x 8 GPUs, half full, NodeNames | %zu | %.0f us | %.0f us | "
      "%.0f us |\n",
      nodes, us.size(), Percentile(us, 0.5), Percentile(us, 0.99), Percentile(us, 1.0));
  int64_t st1[4];
  stages(st1);
  double mean = 0;
  for (double v : us) mean += v;
  mean /= static_cast<double>(us.size());
  double part[4], sum = 0;
  for (int k = 0; k < 4; ++k)
    sum += part[k] = static_cast<double>(st1[k] - st0[k]) / 1e3 / static_cast<double>(us.size());
  stage_rows.push_back(
      StrCat("| ", nodes, " nodes | ", static_cast<int>(mean), " us | ", static_cast<int>(part[0]),
             " us | ", static_cast<int>(part[1]), " us | ", static_cast<int>(part[2]), " us | ",
             static_cast<int>(part[3]), " us | ", static_cast<int>(mean - sum), " us |"));
  server.Stop();
}

// The extender's own request/reply work at 5k nodes, old way against new way (median of `reps`):
// ExtenderArgs through nlohmann's DOM vs the scanning parser, and a reply with 5000 FailedNodes
// (the unschedulable case) through ToJson().dump() vs SerializeFilterResult.
void CodecCosts(int nodes, int reps) {
  extender::ExtenderArgs a;
  a.pod = PodObject("codec", 8192, 20);
  a.pod["metadata"]["uid"] = "uid-codec";
  a.node_names.emplace();
  extender::ExtenderFilterResult r;
  r.node_names.emplace();
  for (int n = 0; n < nodes; ++n) {
    a.node_names->push_back("node-" + std::to_string(n));
    r.failed_nodes["node-" + std::to_string(n)] = "8/8 CardInsufficientMemory";
  }
  const std::string body = extender::ToJson(a).dump();
  auto median = [&](auto&& f) {
    std::vector<double> us;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = SteadyClock::now();
      f();
      us.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
    }
    return Percentile(us, 0.5);
  };
  size_t sink = 0;
  const double dom =
      median([&] { sink += extender::ParseExtenderArgsDom(body)->node_names->size(); });
  const double fast =
      median([&] { sink += extender::ParseExtenderArgs(body)->node_names->size(); });
  // The same request without its NodeNames: what the pod alone costs of the parse above.
  extender::ExtenderArgs pod_only = a;
  pod_only.node_names.reset();
  const std::string pod_body = extender::ToJson(pod_only).dump();
  const double pod_dom =
      median([&] { sink += extender::ParseExtenderArgsDom(pod_body)->pod.size(); });
  const double pod_fast =
      median([&] { sink += extender::ParseExtenderArgs(pod_body)->pod.size(); });
  const double dump = median([&] { sink += extender::ToJson(r).dump().size(); });
  const double direct = median([&] { sink += extender::SerializeFilterResult(r).size(); });
  codec_rows.push_back(StrCat("| ExtenderArgs parse, ", nodes, " NodeNames (", body.size() / 1024,
                              " KiB) | ", static_cast<int>(dom), " us | ", static_cast<int>(fast),
                              " us |"));
  codec_rows.push_back(StrCat("| ExtenderArgs parse, the ", pod_body.size() / 1024,
                              " KiB pod alone (part of the row above) | ",
                              static_cast<int>(pod_dom), " us | ", static_cast<int>(pod_fast),
                              " us |"));
  codec_rows.push_back(StrCat("| ExtenderFilterResult encode, ", nodes, " FailedNodes | ",
                              static_cast<int>(dump), " us | ", static_cast<int>(direct), " us |"));
  if (sink == 0) std::fprintf(stderr, "unexpected\n");
}

void EndToEnd(int nodes, int pods, int threads, const Tls& tls) {
  k8s::testing::FakeApiServer api;
  (void)api.Start();
  for (int n = 0; n < nodes; ++n)
    (void)api.Upsert("nodes", GpuNode("node-" + std::to_string(n), 8));
  std::vector<Json> objs;
  for (int i = 0; i < pods; ++i)
    objs.push_back(*api.Upsert("pods", PodObject("e2e-" + std::to_string(i), 2048, 5)));
  auto client = MakeClient(api);
  auto sched = std::move(*scheduler::Scheduler::Create({}));
  const extender::StateOptions
      state_opts;  // named: GCC 12 -O3 misreads a braced temporary (maybe-uninitialized)
  extender::ClusterState state(*sched, state_opts);
  const extender::ControllerOptions ctl_opts;
  extender::Controller ctl(*client, state, ctl_opts);
  ctl.Start();
  ctl.WaitForSync(std::chrono::seconds(60));
  extender::ExtenderOptions
      eo;  // as scheduler_main wires it: the pod check reads the informer's copy
  eo.success_events = g_success_events;
  auto event_client = MakeClient(api);  // as scheduler_main wires it: Events' own rate limiter
  eo.event_client = event_client.get();
  eo.pod_lookup = [&ctl](const std::string& ns, const std::string& name) {
    return ctl.LookupPod(ns, name);
  };
  extender::Extender ext(*sched, state, client.get(), eo);
  extender::HttpServerOptions ho;
  ho.cert_file = tls.cert;
  ho.key_file = tls.key;
  ho.threads = threads * 2;
  extender::HttpServer server(ho);
  server.Route("POST", "/filter", [&](const extender::HttpRequest& r) {
    return extender::HttpResponse{200, "application/json", ext.HandleFilter(r.body)};
  });
  server.Route("POST", "/bind", [&](const extender::HttpRequest& r) {
    return extender::HttpResponse{200, "application/json", ext.HandleBind(r.body)};
  });
  (void)server.Start();
  std::vector<std::string> names;
  for (int n = 0; n < nodes; ++n) names.push_back("node-" + std::to_string(n));
  std::atomic<int> next{0}, ok{0}, failed{0};
  std::mutex err_mu;
  std::map<std::string, int> errors;  // what failed, by message (the first 200 characters)
  auto record = [&](const std::string& what) {
    failed++;
    std::lock_guard<std::mutex> l(err_mu);
    errors[what.substr(0, 200)]++;
  };
  auto worker = [&] {
    httplib::SSLClient http("127.0.0.1", server.port());
    http.enable_server_certificate_verification(false);
    http.set_keep_alive(true);
    http.set_tcp_nodelay(true);
    for (int i; (i = next.fetch_add(1)) < pods;) {
      extender::ExtenderArgs a;
      a.pod = objs[static_cast<size_t>(i)];
      a.node_names = names;
      auto r = http.Post("/filter", extender::ToJson(a).dump(), "application/json");
      auto res = r ? extender::ParseExtenderFilterResult(r->body)
                   : StatusOr<extender::ExtenderFilterResult>(Unavailable("transport"));
      if (!res.ok() || !res->error.empty() || !res->node_names || res->node_names->size() != 1) {
        record(!res.ok()             ? "filter: " + std::string(res.status().message())
               : !res->error.empty() ? "filter: " + res->error
                                     : "filter: no node fits");
        continue;
      }
      extender::ExtenderBindingArgs b{a.pod["metadata"]["name"], "bench", a.pod["metadata"]["uid"],
                                      (*res->node_names)[0]};
      auto br = http.Post("/bind", extender::ToJson(b).dump(), "application/json");
      if (br && br->body == R"({"Error":""})")
        ok++;
      else
        record("bind: " +
               (br ? br->body : std::string("transport: ") + httplib::to_string(br.error())));
    }
  };
  const auto t0 = SteadyClock::now();
  const double cpu0 = ProcessCpuSeconds();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(worker);
  for (auto& t : ts) t.join();
  const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  const double cpu = ProcessCpuSeconds() - cpu0;
  std::printf(
      "| filter + bind end to end over HTTPS, %d nodes x 8 GPUs, %d client threads, API client "
      "%s%s "
      "| %d pods (%d failed) | %.0f pods/s | %.0f us CPU/pod | |\n",
      nodes, threads, g_qps > 0 ? "qps 200 / burst 400 (shipped)" : "unlimited",
      g_success_events ? "" : ", no success Events", ok.load(), failed.load(), ok.load() / secs,
      ok.load() > 0 ? cpu * 1e6 / ok.load() : 0.0);
  for (const auto& [what, n] : errors) std::fprintf(stderr, "  %d x %s\n", n, what.c_str());
  if (g_success_events)
    std::fprintf(stderr, "  success Events dropped (queue full while the run was on): %lld\n",
                 static_cast<long long>(ext.counters().events_dropped.load()));
  server.Stop();
  ctl.Stop();
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, latency = true, e2e = true, codec = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--latency-only") == 0)
      e2e = false;
    else if (std::strcmp(argv[i], "--e2e-only") == 0)
      latency = codec = false;
    else if (std::strcmp(argv[i], "--codec-only") == 0)
      latency = e2e = false;
    else if (std::strcmp(argv[i], "--shipped-limits") == 0) {
      g_qps = 200;
      g_burst = 400;
    } else if (std::strcmp(argv[i], "--no-success-events") == 0) {
      g_success_events = false;
    } else {
      std::fprintf(stderr,
                   "usage: extender_bench [--quick] [--latency-only | --e2e-only | --codec-only] "
                   "[--shipped-limits] "
                   "[--no-success-events]\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  Tls tls;
  std::printf("| benchmark | samples | p50 | p99 | max |\n|---|---|---|---|---|\n");
  if (latency) {
    FilterLatency(1000, quick ? 100 : 1000, tls);
    FilterLatency(5000, quick ? 100 : 1000, tls);
  }
  if (e2e) EndToEnd(quick ? 20 : 100, quick ? 500 : 5000, 16, tls);
  if (codec) {
    CodecCosts(5000, quick ? 20 : 200);
    CodecCosts(10000, quick ? 20 : 200);
  }
  if (!codec_rows.empty()) {
    std::printf(
        "\nThe extender's request/reply codecs (median per call):\n\n"
        "| work | nlohmann DOM | direct |\n|---|---|---|\n");
    for (const auto& r : codec_rows) std::printf("%s\n", r.c_str());
  }
  if (!stage_rows.empty()) {
    std::printf(
        "\nWhere a /filter's time goes (means per call; \"rest\" = TLS + HTTP + pod parse + "
        "bookkeeping):\n\n"
        "| cluster | total | ExtenderArgs parse | scheduler library | decision patch | reply "
        "encode | rest |\n"
        "|---|---|---|---|---|---|---|\n");
    for (const auto& r : stage_rows) std::printf("%s\n", r.c_str());
  }
  return 0;
}
