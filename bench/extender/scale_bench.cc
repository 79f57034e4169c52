// bench/extender/scale_bench: the scheduler at cluster scale (docs/benchmarks.md, "scheduler at
// scale"). A fake API server holding N nodes x 8 GPUs and P pods of realistic size (about 8 KB of
// JSON each: managedFields, a last-applied copy, env, volumes, conditions) runs in one process; a
// full replica (informers + ClusterState + Extender behind the plain-HTTP extender listener, as
// kube-scheduler reaches it on loopback) runs in a forked child, so the child's RSS is the
// scheduler's alone. Measured in the child:
//  - ready: from the first list to every informer synced (Controller::WaitForSync);
//  - RSS when ready (VmRSS) and its peak so far (VmHWM), then both again after the filter run;
//  - /filter + /bind latency (p50/p99/max per verb) for F pending pods with every node name in the
//    request (nodeCacheCapable), from a client that behaves like kube-scheduler (keep-alive,
//    TCP_NODELAY, one pod at a time, at most one pod every --pace-ms: 20 ms = kube-scheduler's
//    own default client limit of 50 requests/s, one Scheduled Event per pod), for each GPU policy
//    (hami.io/gpu-scheduler-policy binpack and spread). The pending pods are created by another
//    client (as users and controllers do), so the replica's API rate limiter serves its own writes
//    only; the mean time of each stage of /filter (parse, decide, patch, encode) is printed.
// Then the node agents at the same scale, in a third process: the device plugin's list of one
// node's pods (field selector spec.nodeName, what it reads on every Allocate) and the monitor's
// pod informer (the same selector, whole objects), its sync time and the RSS it adds.
// Prints a markdown table. Usage:
//   scale_bench [--nodes 10000] [--pods 100000] [--pod-bytes 8192] [--filters 300]
//               [--pace-ms 20] [--events 0] [--policies binpack,spread]
// --policies: the GPU policies' phases, in that order (the second phase is the one the leader's
// node handshakes overlap at 10,000 nodes; spread,binpack swaps which policy meets them).
// Before the phases, "decide alone": the library's Schedule (what /filter's decide stage calls) for
// 300 pods of each policy in one thread, nothing reserved, timed by the wall clock and by the
// thread's CPU clock (a wait for a core does not advance it).
#include <httplib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "core/node_codec.h"
#include "extender/controller.h"
#include "extender/extender.h"
#include "extender/http_server.h"
#include "k8s/client.h"
#include "k8s/testing/fake_apiserver.h"
#include "scheduler/scheduler.h"
#include "vendors/vendor_set.h"

using namespace hami;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Args {
  int nodes = 10000;
  int pods = 100000;
  int pod_bytes = 8192;
  int filters = 300;
  int pace_ms = 20;
  int events = 0;  // 1: FilteringSucceed / BindingSucceed Events (the shipped default), posted as
                   // background requests of the replica's client
  std::vector<std::string> policies = {"binpack", "spread"};
};

Json Node(int n) {
  const std::string name = "node-" + std::to_string(n);
  std::vector<core::DeviceInfo> devs(8);
  for (int i = 0; i < 8; ++i) {
    devs[i].uuid = name + "-gpu" + std::to_string(i);
    devs[i].index = i;
    devs[i].count = 10;
    devs[i].devmem_mib = 81920;
    devs[i].type = "NVIDIA-A100-SXM4-80GB";
  }
  return Json{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name},
        {"labels", {{"kubernetes.io/hostname", name}}},
        {"managedFields", Json::array({{{"manager", "kubelet"}, {"operation", "Update"}}})},
        {"annotations", {{"hami.io/node-nvidia-register", core::EncodeNodeDevicesJson(devs)}}}}},
      {"status",
       {{"allocatable", {{"cpu", "128"}, {"memory", "1024Gi"}, {"nvidia.com/gpu", "80"}}},
        {"images", Json::array({{{"names", {"registry/app:v1"}}, {"sizeBytes", 1}}})}}}};
}

// A running pod bound to a node: every fourth holds 10 GiB of one GPU by a decision, the rest
// only CPU. Padded to about `bytes` of JSON the way real pods are: managedFields, the
// last-applied copy, env.
Json RunningPod(int i, int nodes, int bytes) {
  const int n = i % nodes;
  const std::string node = "node-" + std::to_string(n);
  Json pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "run-" + std::to_string(i)},
        {"namespace", "ns-" + std::to_string(i % 50)},
        {"labels", {{"app", "app-" + std::to_string(i % 500)}}},
        {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                          {"kind", "ReplicaSet"},
                                          {"name", "rs-" + std::to_string(i % 500)},
                                          {"controller", true}}})}}},
      {"spec",
       {{"schedulerName", "hami-scheduler"},
        {"nodeName", node},
        {"containers",
         Json::array({{{"name", "main"},
                       {"image", "registry/app:v1"},
                       {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "128Mi"}}}}}}})}}},
      {"status", {{"phase", "Running"}, {"conditions", Json::array({{{"type", "Ready"}}})}}}};
  if (i % 4 == 0) {
    const int gpu = (i / nodes) % 8;
    pod["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "1"},
                                                           {"nvidia.com/gpumem", "10240"}};
    pod["metadata"]["annotations"] = {{"hami.io/vgpu-node", node},
                                      {"hami.io/bind-phase", "success"},
                                      {"hami.io/vgpu-devices-allocated",
                                       node + "-gpu" + std::to_string(gpu) + ",NVIDIA,10240,0:;"}};
  }
  Json spec_copy = pod["spec"];
  pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
      Json{{"spec", spec_copy}}.dump();
  // Env entries (and their managedFields entries) until the object reaches about `bytes`.
  const size_t base = pod.dump().size() + 120;
  const size_t per = 70;  // {"name":"ENV_k","value":"<24>"}, plus "f:ENV_k":{}
  Json env = Json::array();
  Json fields = Json::object();
  for (size_t k = 0; base + k * per < static_cast<size_t>(bytes); ++k) {
    env.push_back({{"name", "ENV_" + std::to_string(k)}, {"value", std::string(24, 'v')}});
    fields["f:ENV_" + std::to_string(k)] = Json::object();
  }
  pod["spec"]["containers"][0]["env"] = std::move(env);
  pod["metadata"]["managedFields"] = Json::array(
      {{{"manager", "kubectl"}, {"operation", "Update"}, {"fieldsV1", std::move(fields)}}});
  return pod;
}

Json PendingPod(int i, const std::string& policy) {
  const Json limits{
      {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}, {"nvidia.com/gpucores", "10"}};
  Json container{{"name", "c"}};
  container["resources"]["limits"] = limits;
  Json pod{{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", "new-" + policy + "-" + std::to_string(i)},
                     {"namespace", "bench"},
                     {"annotations", {{"hami.io/gpu-scheduler-policy", policy}}}};
  pod["spec"] = {{"schedulerName", "hami-scheduler"}, {"containers", Json::array({container})}};
  return pod;
}

// kB figures of /proc/self/status.
int64_t StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atoll(line.c_str() + std::strlen(key));
  return -1;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The scheduler replica (the forked child): `port` is the API server's; one byte is written to
// `ready_fd` once synced (the parent reads its own CPU then).
int Scheduler(const Args& a, int port, int ready_fd) {
  k8s::ClientConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  cfg.qps = 200;  // scheduler_main's shipped --kube-qps / --kube-burst
  cfg.burst = 400;
  auto client = std::move(*k8s::Client::Create(cfg));
  k8s::ClientConfig users_cfg;  // who creates the pending pods: not the replica's limiter
  users_cfg.server = cfg.server;
  users_cfg.qps = 0;
  auto users = std::move(*k8s::Client::Create(users_cfg));
  auto sched = std::move(*scheduler::Scheduler::Create({}));
  const extender::StateOptions state_opts;
  extender::ClusterState state(*sched, state_opts);
  const extender::ControllerOptions ctl_opts;
  const auto t0 = SteadyClock::now();
  extender::Controller ctl(*client, state, ctl_opts);
  ctl.Start();
  if (!ctl.WaitForSync(std::chrono::minutes(10))) {
    std::fprintf(stderr, "not synced after 10 minutes\n");
    return 1;
  }
  const double ready_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  const double cpu_s = CpuSeconds();
  const char one = 1;
  (void)!write(ready_fd, &one, 1);
  const int64_t rss_ready = StatusKb("VmRSS:"), hwm_ready = StatusKb("VmHWM:");
  std::printf(
      "| ready (%d nodes x 8 GPUs, %d pods of ~%d B, pages of 500) | %.1f s | RSS %lld MiB "
      "| peak %lld MiB | %zu pods charged, %.1f s of the scheduler's CPU |\n",
      a.nodes, a.pods, a.pod_bytes, ready_s, static_cast<long long>(rss_ready / 1024),
      static_cast<long long>(hwm_ready / 1024), state.pod_count(), cpu_s);
  std::printf("| informer stores, packed | pods %.1f MiB | nodes %.1f MiB | | |\n",
              static_cast<double>(ctl.pods().StoreBytes()) / (1 << 20),
              static_cast<double>(ctl.nodes().StoreBytes()) / (1 << 20));
  std::fflush(stdout);

  extender::ExtenderOptions eo;
  eo.success_events = a.events != 0;
  eo.pod_lookup = [&ctl](const std::string& ns, const std::string& name) {
    return ctl.LookupPod(ns, name);
  };
  extender::Extender ext(*sched, state, client.get(), eo);
  extender::HttpServerOptions ho;  // plain HTTP on loopback, as the extender listener ships
  extender::HttpServer server(ho);
  server.Route("POST", "/filter", [&](const extender::HttpRequest& r) {
    return extender::HttpResponse{200, "application/json", ext.HandleFilter(r.body)};
  });
  server.Route("POST", "/bind", [&](const extender::HttpRequest& r) {
    return extender::HttpResponse{200, "application/json", ext.HandleBind(r.body)};
  });
  if (!server.Start().ok()) return 1;
  httplib::Client http("127.0.0.1", server.port());
  http.set_keep_alive(true);
  http.set_tcp_nodelay(true);
  std::vector<std::string> names;
  for (int n = 0; n < a.nodes; ++n) names.push_back("node-" + std::to_string(n));
  // Decide alone: the same pods as the phases below, each decided over every node name, nothing
  // reserved (each call sees the same cluster). The wall clock includes waits for a core on this
  // shared box; the thread's CPU clock does not.
  for (const std::string& policy : a.policies) {
    std::vector<double> wall_us, cpu_us;
    std::string first;
    int decided = 0;
    for (int i = 0; i < a.filters; ++i) {
      auto req = vendors::VendorSet::NvidiaOnly().ParsePod(PendingPod(i, policy));
      if (!req.ok()) break;
      const double c0 = ThreadCpuUs();
      const auto w0 = SteadyClock::now();
      auto d = sched->Schedule(*req, &names, {});
      const auto w1 = SteadyClock::now();
      const double c1 = ThreadCpuUs();
      if (!d.ok() || d->node.empty()) continue;
      ++decided;
      if (first.empty()) first = d->node;
      wall_us.push_back(std::chrono::duration<double, std::micro>(w1 - w0).count());
      cpu_us.push_back(c1 - c0);
    }
    std::printf(
        "| decide alone, %s, %d NodeNames | %d decided (first: %s) | wall p50 %.0f / p99 %.0f us "
        "| CPU p50 %.0f / p99 %.0f us | max wall %.0f us |\n",
        policy.c_str(), a.nodes, decided, first.c_str(), Percentile(wall_us, 0.5),
        Percentile(wall_us, 0.99), Percentile(cpu_us, 0.5), Percentile(cpu_us, 0.99),
        Percentile(wall_us, 1.0));
  }
  std::fflush(stdout);
  for (const std::string& policy : a.policies) {
    std::vector<double> filter_us, bind_us;
    // Per pod: each /filter stage from the extender's counters, and what the client saw beyond
    // them (the transport, the HTTP server, the wait for a core).
    std::vector<double> parse_us, decide_us, patch_us, rest_us, wait_us;
    int failed = 0;
    const int64_t requests0 = client->requests_sent();
    const extender::ExtenderCounters& k = ext.counters();
    const int64_t parse0 = k.filter_parse_ns, decide0 = k.filter_library_ns,
                  patch0 = k.filter_patch_ns, encode0 = k.filter_encode_ns,
                  write0 = k.decision_write_ns;
    auto next = SteadyClock::now();
    for (int i = 0; i < a.filters; ++i) {
      std::this_thread::sleep_until(next);
      next = SteadyClock::now() + std::chrono::milliseconds(a.pace_ms);
      auto created = users->Create(k8s::kPods, "bench", PendingPod(i, policy));
      if (!created.ok()) {
        ++failed;
        continue;
      }
      // As kube-scheduler does: filter once the pod is in its (and our) informer.
      const std::string name = (*created)["metadata"]["name"];
      for (int w = 0; w < 2000 && !ctl.LookupPod("bench", name); ++w)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      extender::ExtenderArgs args;
      args.pod = *created;
      args.node_names = names;
      const std::string body = extender::ToJson(args).dump();
      const int64_t p0 = k.filter_parse_ns, d0 = k.filter_library_ns, q0 = k.filter_patch_ns,
                    e0 = k.filter_encode_ns;
      const auto f0 = SteadyClock::now();
      auto r = http.Post("/filter", body, "application/json");
      const auto f1 = SteadyClock::now();
      const double f_us = std::chrono::duration<double, std::micro>(f1 - f0).count();
      const double ps = static_cast<double>(k.filter_parse_ns - p0) / 1000,
                   ds = static_cast<double>(k.filter_library_ns - d0) / 1000,
                   qs = static_cast<double>(k.filter_patch_ns - q0) / 1000,
                   es = static_cast<double>(k.filter_encode_ns - e0) / 1000;
      auto res = r ? extender::ParseExtenderFilterResult(r->body)
                   : StatusOr<extender::ExtenderFilterResult>(Unavailable("transport"));
      if (!res.ok() || !res->error.empty() || !res->node_names || res->node_names->size() != 1) {
        ++failed;
        continue;
      }
      extender::ExtenderBindingArgs b{name, "bench", (*created)["metadata"]["uid"],
                                      (*res->node_names)[0]};
      const std::string bind_body = extender::ToJson(b).dump();
      const int64_t w0 = k.bind_wait_ns;
      const auto b0 = SteadyClock::now();
      auto br = http.Post("/bind", bind_body, "application/json");
      const auto b1 = SteadyClock::now();
      if (!br || br->body != R"({"Error":""})") {
        ++failed;
        continue;
      }
      filter_us.push_back(f_us);
      parse_us.push_back(ps);
      decide_us.push_back(ds);
      patch_us.push_back(qs);
      rest_us.push_back(f_us - ps - ds - qs - es);
      bind_us.push_back(std::chrono::duration<double, std::micro>(b1 - b0).count());
      wait_us.push_back(static_cast<double>(k.bind_wait_ns - w0) / 1000);
    }
    std::printf(
        "| /filter, %s, %d NodeNames | %zu (%d failed) | p50 %.0f us | p99 %.0f us | max "
        "%.0f us |\n",
        policy.c_str(), a.nodes, filter_us.size(), failed, Percentile(filter_us, 0.5),
        Percentile(filter_us, 0.99), Percentile(filter_us, 1.0));
    const double n = std::max<double>(1, static_cast<double>(filter_us.size()));
    auto mean_us = [n](int64_t ns) { return static_cast<double>(ns) / n / 1000; };
    std::printf(
        "| /filter stages, %s (mean) | parse %.0f us | decide %.0f us | patch %.0f us | "
        "encode %.0f us |\n",
        policy.c_str(), mean_us(k.filter_parse_ns - parse0), mean_us(k.filter_library_ns - decide0),
        mean_us(k.filter_patch_ns - patch0), mean_us(k.filter_encode_ns - encode0));
    auto p50_p99 = [](const std::vector<double>& v) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f / %.0f", Percentile(v, 0.5), Percentile(v, 0.99));
      return std::string(buf);
    };
    std::printf(
        "| /filter stages, %s: p50 / p99 | parse %s us | decide %s us | patch %s us | other "
        "(transport, queueing) %s us |\n",
        policy.c_str(), p50_p99(parse_us).c_str(), p50_p99(decide_us).c_str(),
        p50_p99(patch_us).c_str(), p50_p99(rest_us).c_str());
    std::printf("| /bind, %s | %zu | p50 %.0f us | p99 %.0f us | max %.0f us |\n", policy.c_str(),
                bind_us.size(), Percentile(bind_us, 0.5), Percentile(bind_us, 0.99),
                Percentile(bind_us, 1.0));
    // The decision patch off /filter's path: its write (mean, on the writer's threads) and what
    // /bind waited for it (it starts right after /filter's answer here, as kube-scheduler's bind
    // follows its reserve and permit phases).
    std::printf("| decision patch, %s | write mean %.0f us | /bind's wait p50 / p99 %s us | | |\n",
                policy.c_str(), mean_us(k.decision_write_ns - write0), p50_p99(wait_us).c_str());
    // Everything the replica sent meanwhile (decision patches, binds, housekeeping, events),
    // all through its one rate limiter.
    std::printf("| the replica's API requests, %s phase | %lld | | | |\n", policy.c_str(),
                static_cast<long long>(client->requests_sent() - requests0));
    std::fflush(stdout);
  }
  std::printf(
      "| after the filter runs | | RSS %lld MiB | peak %lld MiB | pod lists %lld, watches %lld |\n",
      static_cast<long long>(StatusKb("VmRSS:") / 1024),
      static_cast<long long>(StatusKb("VmHWM:") / 1024), static_cast<long long>(ctl.pods().lists()),
      static_cast<long long>(ctl.pods().watches()));
  server.Stop();
  ctl.Stop();
  return 0;
}

// The node agents (the third process): the device plugin's list of one node's pods and the
// monitor's pod informer (K8sPodDirectory's options: pods of one node, whole objects).
int NodeAgents(const Args& a, int port) {
  k8s::ClientConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  auto client = std::move(*k8s::Client::Create(cfg));
  const int samples = std::min(a.nodes, 20);
  std::vector<double> list_ms;
  size_t pods_seen = 0;
  for (int s = 0; s < samples; ++s) {
    k8s::ListOptions lo;
    lo.field_selector = "spec.nodeName=node-" + std::to_string(s * (a.nodes / samples));
    const auto t0 = SteadyClock::now();
    auto list = client->List(k8s::kPods, "", lo);
    list_ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    if (list.ok()) pods_seen += (*list)["items"].size();
  }
  std::printf(
      "| device plugin: one node's pods (field selector), %d nodes | %zu pods each | p50 %.1f ms "
      "| max %.1f ms | |\n",
      samples, pods_seen / std::max(1, samples), Percentile(list_ms, 0.5),
      Percentile(list_ms, 1.0));
  const int64_t rss0 = StatusKb("VmRSS:");
  const double cpu0 = CpuSeconds();
  k8s::InformerOptions io;
  io.resource = k8s::kPods;
  io.field_selector = "spec.nodeName=node-0";
  k8s::Informer inf(*client, io);
  const auto t0 = SteadyClock::now();
  inf.Start();
  const bool synced = inf.WaitForSync(std::chrono::minutes(5));
  std::printf(
      "| monitor: pod informer of one node | %s in %.0f ms, %zu pods | RSS +%lld KiB | "
      "%.2f s CPU | |\n",
      synced ? "synced" : "NOT synced",
      std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count(), inf.Size(),
      static_cast<long long>(StatusKb("VmRSS:") - rss0), CpuSeconds() - cpu0);
  std::fflush(stdout);
  inf.Stop();
  return synced ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--policies") == 0) {
      a.policies.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string p; std::getline(ss, p, ',');)
        if (!p.empty()) a.policies.push_back(p);
    } else if (std::strcmp(argv[i], "--nodes") == 0)
      a.nodes = v;
    else if (std::strcmp(argv[i], "--pods") == 0)
      a.pods = v;
    else if (std::strcmp(argv[i], "--pod-bytes") == 0)
      a.pod_bytes = v;
    else if (std::strcmp(argv[i], "--filters") == 0)
      a.filters = v;
    else if (std::strcmp(argv[i], "--pace-ms") == 0)
      a.pace_ms = v;
    else if (std::strcmp(argv[i], "--events") == 0)
      a.events = v;
    else {
      std::fprintf(stderr,
                   "usage: scale_bench [--nodes N] [--pods P] [--pod-bytes B] [--filters F] "
                   "[--pace-ms MS] [--events 0|1] [--policies binpack,spread]\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::err);
  // Fork first, while there are no threads: each child waits for the port, then is the scheduler
  // (or, once the scheduler is done, the node agents).
  int fds[2], ready[2], agent_fds[2];
  if (pipe(fds) != 0 || pipe(ready) != 0 || pipe(agent_fds) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[1]);
    close(ready[0]);
    int port = 0;
    if (read(fds[0], &port, sizeof port) != sizeof port) return 1;
    return Scheduler(a, port, ready[1]);
  }
  const pid_t agents = fork();
  if (agents == 0) {
    close(agent_fds[1]);
    int port = 0;
    if (read(agent_fds[0], &port, sizeof port) != sizeof port) return 1;
    return NodeAgents(a, port);
  }
  close(fds[0]);
  close(ready[1]);
  close(agent_fds[0]);
  k8s::testing::FakeApiServerOptions o;
  o.compaction_window = 1000;
  k8s::testing::FakeApiServer api(o);
  if (!api.Start().ok()) return 1;
  const auto s0 = SteadyClock::now();
  for (int n = 0; n < a.nodes; ++n) (void)api.Upsert("nodes", Node(n));
  size_t bytes = 0;
  for (int i = 0; i < a.pods; ++i) {
    Json p = RunningPod(i, a.nodes, a.pod_bytes);
    if (i < 100) bytes += p.dump().size();
    (void)api.Upsert("pods", std::move(p));
  }
  std::printf("| benchmark | samples / time | | | |\n|---|---|---|---|---|\n");
  std::printf(
      "| API server seeded (%d nodes, %d pods, %zu B per pod on average) | %.0f s | | | |\n",
      a.nodes, a.pods, bytes / std::max(1, std::min(a.pods, 100)),
      std::chrono::duration<double>(SteadyClock::now() - s0).count());
  std::fflush(stdout);
  const int port = api.port();
  const double api_cpu0 = CpuSeconds();
  if (write(fds[1], &port, sizeof port) != sizeof port) return 1;
  char one = 0;
  if (read(ready[0], &one, 1) == 1) {
    std::printf("| the fake API server's CPU serving the lists until ready | %.1f s | | | |\n",
                CpuSeconds() - api_cpu0);
    std::fflush(stdout);
  }
  int status = 0;
  waitpid(child, &status, 0);
  int agent_status = 0;
  if (write(agent_fds[1], &port, sizeof port) != sizeof port) return 1;
  waitpid(agents, &agent_status, 0);
  api.Stop();
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && WIFEXITED(agent_status) &&
                  WEXITSTATUS(agent_status) == 0;
  return ok ? 0 : 1;
}
