// `hami dra-plugin`: the kubelet DRA plugin of the node agent (docs/dra.md). Flags and wiring only:
// GPU discovery (NVML via dlopen), the node's ResourceSlice kept published, the kubelet gRPC
// services (Registration, DRAPlugin v1/v1beta1) over the driver (claims, ledger, CDI, checkpoint).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "cmd/node_agent.h"
#include "cmd/subcommands.h"
#include "common/clock.h"
#include "common/libc.h"
#include "deviceplugin/config.h"
#include "deviceplugin/node_devices.h"
#include "dra/checkpoint.h"
#include "dra/driver.h"
#include "dra/gpu_extras.h"
#include "dra/health.h"
#include "dra/publisher.h"
#include "dra/server.h"
#include "dra/slice.h"
#include "gpu/nvml_discovery.h"
#include "spdlog/spdlog.h"

namespace hami::cmd {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "hami dra-plugin: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int DraPluginMain(int argc, char** argv) {
  deviceplugin::PluginConfig cfg;  // libvgpu paths and the device knobs of device-config.yaml
  dra::ServerOptions server_opts;
  std::string kubeconfig, node_name, device_config_file;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string cdi_root = "/var/run/cdi";
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
  int resync_s = 10;
  bool dry_run = false;

  CLI::App app{
      "Kubelet DRA plugin: publishes each GPU of the node once in a ResourceSlice whose devices "
      "claims share by consumable capacity (memory, cores), and prepares each claim allocated "
      "here with a CDI spec that arms libvgpu with exactly what the claim consumed."};
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig FILE (default: in-cluster, then $KUBECONFIG, ~/.kube/config)");
  app.add_option("--node-name", node_name, "this node's name (default: env NODE_NAME)");
  app.add_option("--driver-name", server_opts.driver,
                 "DRA driver name (upstream HAMi-DRA's, so its DeviceClass and claims work)")
      ->capture_default_str();
  app.add_option("--registry-dir", server_opts.registry_dir,
                 "kubelet plugin registry: serves <dir>/<driver-name>-reg.sock")
      ->capture_default_str();
  app.add_option("--plugin-dir", server_opts.plugin_dir,
                 "dra.sock and checkpoint.json (default: /var/lib/kubelet/plugins/<driver-name>)");
  app.add_option("--cdi-root", cdi_root, "directory of the transient CDI specs")
      ->capture_default_str();
  app.add_option("--nvml-library", nvml_library, "NVML library to dlopen (normal library search)")
      ->capture_default_str();
  app.add_option("--device-config-file,--device-config", device_config_file,
                 "device-config.yaml shared with the scheduler: its nvidia section's knobs "
                 "(deviceMemoryScaling, filters, libvgpu settings) apply");
  AddLibvgpuFlags(app, &cfg,
                  "host directory of per-claim region directories (<root>/<claimUID>_dra/)");
  app.add_option("--boot-id-file", boot_id_file,
                 "the kernel's boot id: a checkpoint of another boot is dropped")
      ->capture_default_str();
  app.add_option("--resync-interval", resync_s, "seconds between ResourceSlice reconciles")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_flag("--dry-run", dry_run, "print the ResourceSlice this node would publish, then exit");
  if (auto exit_code = ParseDaemonFlags(app, argc, argv, "hami dra-plugin")) return *exit_code;
  if (node_name.empty()) node_name = GetEnvOr("NODE_NAME");
  if (node_name.empty()) return Fail(InvalidArgument("--node-name (or env NODE_NAME) is required"));
  if (Status s = ApplyDeviceConfig(app, device_config_file, &cfg); !s.ok()) return Fail(s);
  server_opts.plugin_dir = dra::PluginDirOrDefault(server_opts.plugin_dir, server_opts.driver);

  gpu::NvmlOptions nvml_opts;
  nvml_opts.library = nvml_library;
  auto nvml = gpu::NvmlDiscovery::Open(nvml_opts);
  if (!nvml.ok()) return Fail(nvml.status());
  auto listed = (*nvml)->ListDevices();
  if (!listed.ok()) return Fail(listed.status());
  const std::vector<gpu::GpuInfo> gpus = deviceplugin::FilterDevices(*listed, cfg);
  auto devices = dra::DeviceCapacities(gpus, cfg.memory_scaling);
  if (!devices.ok()) return Fail(devices.status());
  dra::SliceOptions slice_opts;
  slice_opts.driver = server_opts.driver;
  slice_opts.node_name = node_name;
  slice_opts.memory_scaling = cfg.memory_scaling;
  // driverVersion, cudaComputeCapability, architecture, pcieRoot.
  const std::map<std::string, dra::GpuExtras> extras = dra::ReadGpuExtras(nvml_library, gpus);
  if (dry_run) {
    slice_opts.node_uid = "<the Node's uid>";
    auto slice = dra::BuildResourceSlice(gpus, extras, slice_opts);
    if (!slice.ok()) return Fail(slice.status());
    std::printf("%s\n", slice->dump(2).c_str());
    return 0;
  }

  auto client = ConnectKubernetes(kubeconfig);
  if (!client.ok()) return Fail(client.status());
  const sigset_t sigs = BlockStopSignals();  // before any thread starts

  dra::K8sClaimSource claims(client->get());
  dra::DriverOptions driver_opts;
  driver_opts.driver = server_opts.driver;
  driver_opts.node_name = node_name;
  driver_opts.plugin_dir = server_opts.plugin_dir;
  driver_opts.cdi_root = cdi_root;
  driver_opts.boot_id = dra::ReadBootId(boot_id_file);
  driver_opts.vgpu = cfg;
  if (driver_opts.boot_id.empty())
    spdlog::warn("cannot read the boot id from {}: a reboot will not be told from a restart",
                 boot_id_file);
  auto driver = dra::Driver::Create(driver_opts, *devices, &claims);
  if (!driver.ok()) return Fail(driver.status());
  dra::SlicePublisher publisher(client->get(), slice_opts, gpus, extras);
  // Publish first, so the sharing mode is known before the first claim is prepared.
  auto reconcile = [&] {
    auto o = publisher.Reconcile();
    if (!o.ok()) {
      spdlog::warn("{}", std::string(o.status().message()));
      return;
    }
    (*driver)->SetShared(o->shared);
    if (o->action != dra::SlicePublisher::Action::kNone)
      spdlog::info("dra: resourceslice {} {} (generation {}, {} GPU(s), {})",
                   dra::SliceName(node_name, server_opts.driver),
                   o->action == dra::SlicePublisher::Action::kCreated ? "created" : "updated",
                   o->generation, gpus.size(), o->shared ? "shared" : "exclusive");
  };
  reconcile();
  // The health stream: NVML health events (Xid critical errors) mark the published devices.
  std::vector<dra::HealthBoard::Device> health_devices;
  for (const auto& d : *devices) health_devices.push_back({d.name, d.uuid});
  dra::HealthBoard health(node_name, health_devices);
  auto health_watch = (*nvml)->WatchHealth([&health](const gpu::HealthEvent& ev) {
    if (health.Apply(ev))
      spdlog::log(ev.healthy ? spdlog::level::info : spdlog::level::err,
                  "dra: GPU {} is {} ({}); the kubelet's health stream says so",
                  ev.uuid.empty() ? "(all)" : ev.uuid, ev.healthy ? "healthy" : "unhealthy",
                  ev.reason);
  });
  if (!health_watch.ok())
    spdlog::warn("dra: health checks disabled: {}", std::string(health_watch.status().message()));
  dra::DraServer server(server_opts, driver->get(), &health);
  if (Status s = server.Start(); !s.ok()) return Fail(s);
  spdlog::info("dra: serving {} on {} (registration {})", server_opts.driver, server.DraSocket(),
               server.RegistrationSocket());
  int64_t next = RealClock::Get().MonotonicNanos() + resync_s * 1'000'000'000LL;
  while (!WaitForStop(sigs)) {
    if (RealClock::Get().MonotonicNanos() >= next) {
      reconcile();
      next = RealClock::Get().MonotonicNanos() + resync_s * 1'000'000'000LL;
    }
  }
  server.Stop();
  health.Shutdown();
  return 0;
}

}  // namespace hami::cmd
