// `hami dra-plugin`: the kubelet DRA plugin of the node agent (docs/dra.md). Flags and wiring only:
// the vendor's discovery (NVIDIA: NVML via dlopen; Ascend: a devices file; dra/vendor.h), the
// node's ResourceSlice kept published, the kubelet gRPC services (Registration, DRAPlugin
// v1/v1beta1) over the driver (claims, ledger, CDI, checkpoint).
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
#include "dra/health.h"
#include "dra/publisher.h"
#include "dra/server.h"
#include "dra/slice.h"
#include "dra/vendor.h"
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
  std::string vendor_name = "nvidia";
  dra::VendorOptions vendor_opts;
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
                 "DRA driver name (upstream HAMi-DRA's, so its DeviceClass and claims work; "
                 "--vendor ascend: ascend.project-hami.io)")
      ->capture_default_str();
  app.add_option("--registry-dir", server_opts.registry_dir,
                 "kubelet plugin registry: serves <dir>/<driver-name>-reg.sock")
      ->capture_default_str();
  app.add_option("--plugin-dir", server_opts.plugin_dir,
                 "dra.sock and checkpoint.json (default: /var/lib/kubelet/plugins/<driver-name>)");
  app.add_option("--cdi-root", cdi_root, "directory of the transient CDI specs")
      ->capture_default_str();
  app.add_option("--vendor", vendor_name,
                 "whose devices: nvidia (NVML, libvgpu) or ascend (--devices-file, HAMi's vNPU "
                 "core library); sets the default --driver-name")
      ->capture_default_str();
  app.add_option("--nvml-library", vendor_opts.nvml_library,
                 "NVML library to dlopen (normal library search)")
      ->capture_default_str();
  app.add_option("--devices-file", vendor_opts.devices_file,
                 "ascend: the node's NPUs as JSON in the registration format of HAMi's Ascend "
                 "device plugin ([{\"id\",\"index\",\"devmem\",\"type\",\"numa\"}]; index = "
                 "physical id)");
  app.add_option("--vnpu-core-dir", vendor_opts.vnpu_core_dir,
                 "ascend: host directory of HAMi's vNPU core library and its ld.so.preload; "
                 "per-claim directories default to <dir>/containers")
      ->capture_default_str();
  app.add_option("--vnpu-shared-region-dir", vendor_opts.vnpu_shared_region_dir,
                 "ascend: host directory of the per-NPU registries the claims on one NPU share")
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
  auto vendor = dra::MakeDraVendor(vendor_name, vendor_opts);
  if (!vendor.ok()) return Fail(Annotate(vendor.status(), "--vendor"));
  auto given = [&app](const char* flag) { return app.get_option(flag)->count() > 0; };
  if (!given("--driver-name")) server_opts.driver = std::string((*vendor)->default_driver());
  if (vendor_name == "ascend" && !given("--region-root"))
    cfg.region_root = deviceplugin::JoinPath(vendor_opts.vnpu_core_dir, "containers");
  server_opts.plugin_dir = dra::PluginDirOrDefault(server_opts.plugin_dir, server_opts.driver);

  auto found = (*vendor)->Discover(vendor_opts);
  if (!found.ok()) return Fail(found.status());
  const std::vector<gpu::GpuInfo> gpus = deviceplugin::FilterDevices(found->devices, cfg);
  auto devices = dra::DeviceCapacities(gpus, cfg.memory_scaling, vendor->get());
  if (!devices.ok()) return Fail(devices.status());
  dra::SliceOptions slice_opts;
  slice_opts.driver = server_opts.driver;
  slice_opts.node_name = node_name;
  slice_opts.memory_scaling = cfg.memory_scaling;
  slice_opts.vendor = vendor->get();
  const std::map<std::string, dra::GpuExtras>& extras = found->extras;
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
  driver_opts.vendor = vendor->get();
  if (driver_opts.boot_id.empty())
    spdlog::warn("cannot read the boot id from {}: a reboot will not be told from a restart",
                 boot_id_file);
  auto driver = dra::Driver::Create(driver_opts, *devices, &claims);
  if (!driver.ok()) return Fail(driver.status());
  // The health stream: NVML health events (Xid critical errors) mark the published devices; a GPU
  // marked unhealthy leaves the ResourceSlice until it is healthy again.
  std::vector<dra::HealthBoard::Device> health_devices;
  for (const auto& d : *devices) health_devices.push_back({d.name, d.uuid});
  dra::HealthBoard health(node_name, health_devices);
  (*driver)->SetHealthBoard(&health);  // a claim on an unhealthy GPU is refused
  dra::SlicePublisher publisher(client->get(), slice_opts, gpus, extras, &health);
  // Publish first, so the sharing mode is known before the first claim is prepared.
  auto reconcile = [&] {
    auto o = publisher.Reconcile();
    if (!o.ok()) {
      spdlog::warn("{}", std::string(o.status().message()));
      return;
    }
    (*driver)->SetShared(o->shared);
    if (size_t pending = (*driver)->RetryStatusWrites(); pending > 0)
      spdlog::warn("dra: the status of {} prepared claim(s) is still not written", pending);
    if (size_t changed = (*driver)->RefreshHealthStatus(); changed > 0)
      spdlog::info("dra: the Ready condition of {} prepared claim(s) follows their GPUs' health",
                   changed);
    if (o->action != dra::SlicePublisher::Action::kNone)
      spdlog::info("dra: resourceslice {} {} (generation {}, {} GPU(s), {})",
                   dra::SliceName(node_name, server_opts.driver),
                   o->action == dra::SlicePublisher::Action::kCreated ? "created" : "updated",
                   o->generation, gpus.size(), o->shared ? "shared" : "exclusive");
  };
  uint64_t published_health = 0;
  health.Snapshot(&published_health);
  reconcile();
  auto health_watch = found->discovery->WatchHealth([&health](const gpu::HealthEvent& ev) {
    if (health.Apply(ev))
      spdlog::log(ev.healthy ? spdlog::level::info : spdlog::level::err,
                  "dra: GPU {} is {} ({}); the kubelet's health stream says so and the "
                  "ResourceSlice {} it",
                  ev.uuid.empty() ? "(all)" : ev.uuid, ev.healthy ? "healthy" : "unhealthy",
                  ev.reason, ev.healthy ? "publishes" : "leaves out");
  });
  if (!health_watch.ok())
    spdlog::warn("dra: health checks disabled: {}", std::string(health_watch.status().message()));
  dra::DraServer server(server_opts, driver->get(), &health);
  if (Status s = server.Start(); !s.ok()) return Fail(s);
  spdlog::info("dra: serving {} on {} (registration {})", server_opts.driver, server.DraSocket(),
               server.RegistrationSocket());
  int64_t next = RealClock::Get().MonotonicNanos() + resync_s * 1'000'000'000LL;
  while (!WaitForStop(sigs)) {
    uint64_t health_version = 0;
    health.Snapshot(&health_version);
    // A health change is published at once (within WaitForStop's second), not at the next resync.
    if (RealClock::Get().MonotonicNanos() >= next || health_version != published_health) {
      published_health = health_version;
      reconcile();
      next = RealClock::Get().MonotonicNanos() + resync_s * 1'000'000'000LL;
    }
  }
  server.Stop();
  health.Shutdown();
  return 0;
}

}  // namespace hami::cmd
