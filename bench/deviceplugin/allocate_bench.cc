// Allocate latency of the device plugin as kubelet sees it: one AllocateRequest over the unix
// socket (gRPC v1beta1, persistent channel as kubelet keeps one), including finding the pending
// pod, building the environment, creating the container's region directory and recording the
// allocation. Variants: pending pods in memory; pending pods read from and written to the fake API
// server (List + GET + PATCH over HTTP, as in production); and the handler without gRPC.
//
// usage: deviceplugin_allocate_bench [iterations] [gpus]
#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/log.h"
#include "core/annotations.h"
#include "deviceplugin/k8s_source.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/proto/api.grpc.pb.h"
#include "deviceplugin/testing/builders.h"
#include "deviceplugin/testing/fake_kubelet.h"
#include "gpu/static_discovery.h"
#include "k8s/testing/fake_apiserver.h"
#include "vendors/nvidia/annotations.h"

using namespace hami;
using namespace hami::deviceplugin;
using Steady = std::chrono::steady_clock;

namespace {

struct Stats {
  double p50_us, p99_us, max_us, mean_us;
};

Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))];
  };
  return {at(0.50), at(0.99), us.back(), sum / us.size()};
}

void Report(const char* name, int n, const Stats& s) {
  std::printf("| %-44s | %6d | %8.0f | %8.0f | %8.0f | %8.0f |\n", name, n, s.p50_us, s.p99_us,
              s.max_us, s.mean_us);
}

std::string Uuid(int i) {
  return "GPU-bench000-0000-4000-8000-" + std::to_string(100000000000 + i);
}

v1beta1::AllocateRequest Request(const std::string& id) {
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids(id);
  return req;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int gpus = argc > 2 ? std::atoi(argv[2]) : 8;
  (void)log::SetLevel("warn");
  char tmpl[] = "/tmp/hdbXXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  PluginConfig cfg;
  cfg.plugin_dir = dir + "/dp";
  cfg.region_root = dir + "/regions";
  cfg.split_count = 10;
  std::vector<gpu::GpuInfo> devs;
  for (int i = 0; i < gpus; ++i)
    devs.push_back(gpu::MakeGpu(i, Uuid(i), "NVIDIA A100-SXM4-80GB", 81920));
  gpu::StaticDiscovery discovery(devs);

  std::printf(
      "| variant | allocs | p50 µs | p99 µs | max µs | mean µs |\n|---|---|---|---|---|---|\n");

  // 1. In-memory pending pods, over the unix socket.
  {
    MemoryPendingPodSource pending;
    testing::FakeKubelet kubelet(cfg.plugin_dir);
    if (!kubelet.Start().ok()) return 1;
    DevicePlugin plugin(cfg, &discovery, &pending, 1);
    if (!plugin.Start().ok() || !kubelet.WaitForRegistrations(1, std::chrono::seconds(10)))
      return 1;
    auto stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + plugin.SocketPath(), grpc::InsecureChannelCredentials()));
    std::vector<double> us;
    for (int i = 0; i < n + 50; ++i) {
      const int g = i % gpus;
      pending.AddPod(
          testing::MakePod("p" + std::to_string(i), {{testing::Dev(Uuid(g), 3000, 30)}}));
      v1beta1::AllocateResponse resp;
      grpc::ClientContext ctx;
      auto t0 = Steady::now();
      grpc::Status s = stub->Allocate(&ctx, Request(Uuid(g) + "-" + std::to_string(i % 10)), &resp);
      auto t1 = Steady::now();
      if (!s.ok()) {
        std::fprintf(stderr, "Allocate: %s\n", s.error_message().c_str());
        return 1;
      }
      if (i >= 50)
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());  // 50 warm-up
    }
    Report("unix socket, pending pods in memory", n, Summarize(us));

    // 1b. The same handler without gRPC (what the socket round trip adds).
    us.clear();
    for (int i = 0; i < n; ++i) {
      const int g = i % gpus;
      pending.AddPod(
          testing::MakePod("d" + std::to_string(i), {{testing::Dev(Uuid(g), 3000, 30)}}));
      auto t0 = Steady::now();
      auto r = plugin.Allocate(Request(Uuid(g) + "-0"));
      auto t1 = Steady::now();
      if (!r.ok()) return 1;
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    Report("handler only (no gRPC), pending pods in memory", n, Summarize(us));
  }

  // 2. Pending pods from the fake API server: List pods on the node, then GET + PATCH the pod.
  {
    k8s::testing::FakeApiServer api;
    if (!api.Start().ok()) return 1;
    k8s::ClientConfig kc;
    kc.server = api.url();
    kc.qps = 0;
    auto client = k8s::Client::Create(kc);
    if (!client.ok()) return 1;
    K8sPendingPodSource pending(client->get(), "node1");
    cfg.socket_name = "nvidia-gpu-k8s.sock";
    testing::FakeKubelet kubelet(cfg.plugin_dir);
    if (!kubelet.Start().ok()) return 1;
    DevicePlugin plugin(cfg, &discovery, &pending, 2);
    if (!plugin.Start().ok() || !kubelet.WaitForRegistrations(1, std::chrono::seconds(10)))
      return 1;
    auto stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + plugin.SocketPath(), grpc::InsecureChannelCredentials()));
    // Background pods on the node that are not waiting (already running), as on a busy node.
    for (int i = 0; i < 20; ++i) {
      nlohmann::json pod = {
          {"metadata", {{"name", "running-" + std::to_string(i)}, {"namespace", "ml"}}},
          {"spec", {{"nodeName", "node1"}, {"containers", {{{"name", "c"}}}}}},
          {"status", {{"phase", "Running"}}}};
      if (!api.Upsert("pods", pod).ok()) return 1;
    }
    const int nk = std::max(1, n / 4);
    std::vector<double> us;
    for (int i = 0; i < nk + 20; ++i) {
      const int g = i % gpus;
      const std::string name = "k" + std::to_string(i);
      nlohmann::json pod = {
          {"metadata",
           {{"name", name},
            {"namespace", "ml"},
            {"annotations",
             {{vendors::nvidia::kNvidiaDevicesToAllocate, Uuid(g) + ",NVIDIA,3000,30:;"},
              {core::kVgpuNode, "node1"},
              {core::kBindPhase, "allocating"}}}}},
          {"spec", {{"nodeName", "node1"}, {"containers", {{{"name", "main"}}}}}},
          {"status", {{"phase", "Pending"}}}};
      if (!api.Upsert("pods", pod).ok()) return 1;
      v1beta1::AllocateResponse resp;
      grpc::ClientContext ctx;
      auto t0 = Steady::now();
      grpc::Status s = stub->Allocate(&ctx, Request(Uuid(g) + "-1"), &resp);
      auto t1 = Steady::now();
      if (!s.ok()) {
        std::fprintf(stderr, "Allocate (k8s): %s\n", s.error_message().c_str());
        return 1;
      }
      // The allocated pod starts running (leaves the pending set), as kubelet would make it.
      auto stored = api.Get("pods", "ml", name);
      (*stored)["status"]["phase"] = "Running";
      if (!api.Upsert("pods", *stored).ok()) return 1;
      if (i >= 20) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    Report("unix socket, pending pods from fake API server", nk, Summarize(us));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
