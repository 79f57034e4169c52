// fake-kubelet: the fake kubelet as a process, for tests written outside C++ (the rendered-manifest
// deployment test). It serves Registration on <plugin-dir>/kubelet.sock (and PodResources where
// asked), waits for one device plugin to register and report devices, then reads commands on stdin,
// one per line, and answers each with one JSON line on stdout:
//
//   devices                       {"devices":[{"id":..,"health":..},..]}
//   allocate NS POD CONTAINER N   kubelet's admission of one container with N devices: the plugin's
//                                 preference among the healthy devices not yet handed out, then
//                                 Allocate with it:
//                                 {"ids":[..],"envs":{..},"mounts":[{"container_path":..,
//                                 "host_path":..,"read_only":..}],"devices":[..]} or {"error":".."}
//
// Every wait is bounded (--timeout-s); EOF on stdin ends it.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "deviceplugin/testing/fake_kubelet.h"

namespace {

using Json = nlohmann::json;
using hami::deviceplugin::testing::FakeKubelet;

Json Error(const std::string& what) {
  return Json{{"error", what}};
}

Json AllocateOne(FakeKubelet& k, const std::string& ns, const std::string& pod,
                 const std::string& container, int n) {
  auto r = k.AdmitPreferred(ns, pod, container, n);
  if (!r.ok()) return Error(std::string(r.status().message()));
  if (r->response.container_responses_size() != 1)
    return Error("Allocate: not one container response");
  const auto& c = r->response.container_responses(0);
  Json out = {{"ids", r->ids},
              {"envs", Json::object()},
              {"mounts", Json::array()},
              {"devices", Json::array()}};
  for (const auto& [key, value] : c.envs()) out["envs"][key] = value;
  for (const auto& m : c.mounts())
    out["mounts"].push_back({{"container_path", m.container_path()},
                             {"host_path", m.host_path()},
                             {"read_only", m.read_only()}});
  for (const auto& d : c.devices())
    out["devices"].push_back({{"container_path", d.container_path()},
                              {"host_path", d.host_path()},
                              {"permissions", d.permissions()}});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Fake kubelet (hami-cpp test tool): Registration, PodResources, Allocate driven from stdin"};
  std::string plugin_dir, pod_resources;
  int timeout_s = 60;
  size_t min_devices = 1;
  app.add_option("--plugin-dir", plugin_dir,
                 "device plugin directory (kubelet.sock is served there)")
      ->required();
  app.add_option("--pod-resources-socket", pod_resources, "also serve PodResourcesLister here");
  app.add_option("--timeout-s", timeout_s, "bound of every wait")->check(CLI::Range(1, 600));
  app.add_option("--min-devices", min_devices, "devices to wait for before answering commands");
  CLI11_PARSE(app, argc, argv);

  FakeKubelet k(plugin_dir);
  if (auto s = k.Start(); !s.ok()) {
    std::cerr << "fake-kubelet: " << s.message() << "\n";
    return 1;
  }
  if (!pod_resources.empty())
    if (auto s = k.ServePodResources(pod_resources); !s.ok()) {
      std::cerr << "fake-kubelet: " << s.message() << "\n";
      return 1;
    }
  std::cout << Json{{"serving", k.KubeletSocketPath()}}.dump() << std::endl;
  const auto timeout = std::chrono::seconds(timeout_s);
  if (!k.WaitForRegistrations(1, timeout)) {
    std::cout << Error("no device plugin registered").dump() << std::endl;
    return 1;
  }
  if (!k.WaitForDevices([&](const auto& d) { return d.size() >= min_devices; }, timeout)) {
    std::cout << Error("the plugin reported fewer than " + std::to_string(min_devices) + " devices")
                     .dump()
              << std::endl;
    return 1;
  }
  const auto reg = k.Registrations().back();
  std::cout << Json{{"registered", reg.resource_name()},
                    {"endpoint", reg.endpoint()},
                    {"devices", k.Devices().size()}}
                   .dump()
            << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string cmd;
    words >> cmd;
    if (cmd == "devices") {
      Json out = {{"devices", Json::array()}};
      for (const auto& d : k.Devices())
        out["devices"].push_back({{"id", d.id()}, {"health", d.health()}});
      std::cout << out.dump() << std::endl;
    } else if (cmd == "allocate") {
      std::string ns, pod, container;
      int n = 0;
      if (!(words >> ns >> pod >> container >> n) || n < 1) {
        std::cout << Error("usage: allocate NS POD CONTAINER N").dump() << std::endl;
        continue;
      }
      std::cout << AllocateOne(k, ns, pod, container, n).dump() << std::endl;
    } else if (!cmd.empty()) {
      std::cout << Error("unknown command " + cmd).dump() << std::endl;
    }
  }
  k.Stop();
  return 0;
}
