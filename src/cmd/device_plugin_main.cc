// `hami device-plugin`: the kubelet device plugin of the node agent. Flags and wiring only: GPU
// discovery (NVML via dlopen), per-node config, the gRPC plugin (deviceplugin/plugin.h), the
// Kubernetes side (pending pods from decision annotations, node registration annotations).
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "cmd/config_wiring.h"
#include "cmd/node_agent.h"
#include "cmd/subcommands.h"
#include "common/clock.h"
#include "common/libc.h"
#include "common/log.h"
#include "core/node_codec.h"
#include "deviceplugin/config.h"
#include "deviceplugin/host_pid_broker.h"
#include "deviceplugin/imex.h"
#include "deviceplugin/k8s_source.h"
#include "deviceplugin/node_devices.h"
#include "deviceplugin/plugin.h"
#include "deviceplugin/pod_resources.h"
#include "deviceplugin/static_mig.h"
#include "gpu/nvml_discovery.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "vendors/config_file.h"
#include "vendors/nvidia/annotations.h"

namespace hami::cmd {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "hami device-plugin: %s\n", std::string(s.message()).c_str());
  return 1;
}

bool EnvTrue(const char* name) {
  const std::string v = GetEnvOr(name);
  return v == "true" || v == "1";
}

}  // namespace

int DevicePluginMain(int argc, char** argv) {
  deviceplugin::PluginConfig cfg;
  std::string kubeconfig, node_name, config_file, device_config_file;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string pod_resources_socket = deviceplugin::kDefaultPodResourcesSocket;
  bool fail_on_init_error = false, dry_run = false;
  bool topology_score = EnvTrue("ENABLE_TOPOLOGY_SCORE");
  int register_interval_s = 30;
  uint64_t seed = 0;

  CLI::App app{
      "Kubelet device plugin (API v1beta1) for GPUs shared through libvgpu: advertises each GPU as "
      "split-count replicas, answers Allocate with the libvgpu environment and mounts of the pod's "
      "scheduling decision, and keeps the node's hami.io/node-nvidia-register annotation current."};
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig FILE (default: in-cluster, then $KUBECONFIG, ~/.kube/config)");
  app.add_option("--node-name", node_name, "this node's name (default: env NODE_NAME)");
  // NUMA refit (docs/upstream-contract.md, "NUMA refit"): upstream's environment names as defaults.
  std::string refit_endpoint = GetEnvOr("HAMI_SCHEDULER_ENDPOINT");
  std::string refit_ca_file = GetEnvOr("HAMI_SCHEDULER_CA_FILE");
  app.add_option("--numa-refit-endpoint", refit_endpoint,
                 "https:// base URL of the scheduler's /refit (env HAMI_SCHEDULER_ENDPOINT); empty "
                 "= the NUMA refit is off and a hami.io/numa-alignment mismatch is only logged");
  app.add_option("--numa-refit-ca-file", refit_ca_file,
                 "PEM bundle the scheduler's certificate must chain to (env "
                 "HAMI_SCHEDULER_CA_FILE); empty = the system CAs");
  app.add_option("--plugin-dir", cfg.plugin_dir,
                 "kubelet device plugin directory (kubelet.sock, our socket)")
      ->capture_default_str();
  app.add_option("--socket-name", cfg.socket_name, "our socket's file name in --plugin-dir")
      ->capture_default_str();
  app.add_option("--resource-name", cfg.resource_name, "extended resource advertised to kubelet")
      ->capture_default_str();
  app.add_option(
         "--scheduler-name", cfg.scheduler_name,
         "schedulerName of the pods whose device decisions arm containers (others are refused)")
      ->capture_default_str();
  app.add_option("--region-group", cfg.region_group,
                 "gid of region directories (mode 0770) for pods holding it in supplementalGroups; "
                 "set the same "
                 "value as the scheduler's --region-group (-1: none)")
      ->capture_default_str();
  app.add_option("--split-count", cfg.split_count,
                 "replicas per GPU: the most containers that may share one GPU")
      ->envname("DEVICE_SPLIT_COUNT")
      ->capture_default_str();
  app.add_option(
         "--device-memory-scaling", cfg.memory_scaling,
         "registered memory = physical x this; > 1 oversubscribes (CUDA_OVERSUBSCRIBE=true)")
      ->capture_default_str();
  app.add_option("--device-cores-scaling", cfg.core_scaling, "registered cores = 100 x this")
      ->capture_default_str();
  app.add_option("--libcuda-log-level", cfg.libcuda_log_level,
                 "LIBCUDA_LOG_LEVEL for containers (empty: not set)");
  app.add_flag("--enable-numa-topology", cfg.enable_numa_topology,
               "report each replica's NUMA node to kubelet");
  app.add_flag("--report-node-capacity", cfg.report_node_capacity,
               "write the healthy GPUs' summed gpumem and gpucores into the Node's "
               "status.capacity and .allocatable (node config: reportnodecapacity)")
      ->envname("REPORT_NODE_CAPACITY");
  app.add_option("--device-list-strategy", cfg.device_list_strategy,
                 "how Allocate names the GPUs to the container runtime: envvar "
                 "(NVIDIA_VISIBLE_DEVICES), volume-mounts, cdi-annotations, cdi-cri, or several "
                 "comma separated (docs/install.md#cdi)")
      ->envname("DEVICE_LIST_STRATEGY")
      ->capture_default_str();
  app.add_option("--device-id-strategy", cfg.device_id_strategy,
                 "GPUs in the device list by uuid or by NVML index")
      ->envname("DEVICE_ID_STRATEGY")
      ->capture_default_str();
  app.add_option("--cdi-annotation-prefix", cfg.cdi_annotation_prefix,
                 "key prefix of the cdi-annotations strategy's container annotation")
      ->envname("CDI_ANNOTATION_PREFIX")
      ->capture_default_str();
  app.add_option("--cdi-kind", cfg.cdi_kind,
                 "CDI kind (<vendor>/<class>) of the node's CDI spec naming the GPUs by index and "
                 "UUID (nvidia-ctk cdi generate's default)")
      ->capture_default_str();
  std::string imex_channel_ids, imex_dev_root = "/";
  bool imex_required = false;
  app.add_option("--imex-channel-ids", imex_channel_ids,
                 "IMEX channels handed to every GPU container, comma separated (e.g. 0): "
                 "NVIDIA_IMEX_CHANNELS, mounts or CDI devices under the device list strategy; a "
                 "channel whose device node is missing at start is left out with a warning")
      ->envname("IMEX_CHANNEL_IDS");
  app.add_flag("--imex-required", imex_required,
               "fail at start when a channel of --imex-channel-ids is missing")
      ->envname("IMEX_REQUIRED");
  app.add_option("--imex-dev-root", imex_dev_root,
                 "where this process sees the host's /dev for --imex-channel-ids (the channels "
                 "are looked for at <root>/dev/nvidia-caps-imex-channels/channel<N>, then under "
                 "/dev)")
      ->capture_default_str();
  app.add_option("--mig-strategy", cfg.mig_strategy,
                 "static MIG (MIG devices made beforehand): none, single (every MIG device as "
                 "--resource-name), mixed (nvidia.com/mig-<profile>); GPUs with MIG off stay "
                 "shared (docs/install.md)")
      ->envname("MIG_STRATEGY")
      ->capture_default_str();
  app.add_option("--config", config_file,
                 "per-node config JSON ({\"nodeconfig\":[{\"name\":...}]}, upstream format), "
                 "applied over the flags");
  app.add_option("--device-config-file,--device-config", device_config_file,
                 "device-config.yaml shared with the scheduler: its nvidia section's knobs are the "
                 "defaults of the flags above (flag > file > default; docs/install.md), and its "
                 "gpuCorePolicy is GPU_CORE_UTILIZATION_POLICY (no flag: one source with the "
                 "webhook)");
  app.add_option("--libvgpu-path", cfg.libvgpu_host_path,
                 "host path of libvgpu.so mounted into containers")
      ->capture_default_str();
  app.add_option("--ld-preload-path", cfg.ld_preload_host_path,
                 "host file mounted as the container's /etc/ld.so.preload")
      ->capture_default_str();
  app.add_option(
         "--region-root", cfg.region_root,
         "host directory of per-container region directories (<root>/<podUID>_<container>/)")
      ->capture_default_str();
  app.add_option("--container-hook-dir", cfg.container_hook_dir,
                 "where containers see libvgpu.so and their region directory")
      ->capture_default_str();
  app.add_option("--lock-dir", cfg.lock_dir, "host directory mounted at /tmp/vgpulock")
      ->capture_default_str();
  app.add_option("--mps-pipe-dir", cfg.mps_pipe_dir,
                 "operating mode mps: host pipe directory of the node's MPS control daemon (its "
                 "CUDA_MPS_PIPE_DIRECTORY), mounted into MPS containers at the same path")
      ->capture_default_str();
  app.add_option("--mps-shm-dir", cfg.mps_shm_dir,
                 "operating mode mps: host directory the MPS server uses as /dev/shm, mounted at "
                 "the containers' /dev/shm (empty: not mounted)")
      ->capture_default_str();
  app.add_option("--host-pid-broker-dir", cfg.host_pid_broker_dir,
                 "serve upstream's host PID broker (<dir>/broker.sock) and mount <dir> read-only "
                 "into GPU containers at /tmp/vgpulock/hostpid, so that libvgpu learns its host "
                 "PIDs; needs the host PID namespace (empty: off)");
  app.add_option(
         "--pod-resources-socket", pod_resources_socket,
         "kubelet PodResources socket, to tell apart pods waiting for the same number of devices "
         "(empty: not used)")
      ->capture_default_str();
  app.add_option("--nvml-library", nvml_library, "NVML library to dlopen (normal library search)")
      ->capture_default_str();
  app.add_flag("--fail-on-init-error", fail_on_init_error,
               "exit when NVML cannot be loaded (default: run with no GPUs)");
  app.add_flag("--enable-topology-score", topology_score,
               "also write hami.io/node-nvidia-score (default: env ENABLE_TOPOLOGY_SCORE)");
  app.add_option("--register-interval", register_interval_s,
                 "seconds between node annotation refreshes")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of region file names (0: from the clock)");
  app.add_flag("--dry-run", dry_run, "print the node annotations this node would get, then exit");
  if (std::optional<int> rc = ParseDaemonFlags(app, argc, argv, "hami device-plugin")) return *rc;
  if (node_name.empty()) {
    node_name = GetEnvOr("NODE_NAME");
  }
  if (node_name.empty() && !dry_run)
    return Fail(InvalidArgument("--node-name (or env NODE_NAME) is required"));
  // device-config.yaml under the flags (flag > file > default); the node's entry of --config
  // over both. GPU_CORE_UTILIZATION_POLICY comes from the file only (the webhook's one source).
  if (!device_config_file.empty()) {
    auto file = vendors::LoadConfigFile(device_config_file, "--device-config-file");
    if (!file.ok()) return Fail(file.status());
    ConfigureDevicePlugin(
        file->nvidia,
        [&app](std::string_view flag) {
          const CLI::Option* o = app.get_option_no_throw(std::string(flag));
          if (o == nullptr) return false;
          if (o->count() > 0) return true;
          const std::string env = o->get_envname();
          return !env.empty() && GetEnv(env.c_str()).has_value();
        },
        &cfg);
  }
  if (!config_file.empty()) {
    // An entry chosen by nodelabelselector needs the Node's labels: read once, only then (a dry
    // run reads none, so only an empty selector matches there).
    deviceplugin::NodeLabelsFn node_labels;
    if (!dry_run) {
      node_labels = [&]() -> StatusOr<nlohmann::json> {
        auto kc = k8s::LoadDefaultConfig(kubeconfig);
        if (!kc.ok()) return kc.status();
        auto c = k8s::Client::Create(*kc);
        if (!c.ok()) return c.status();
        auto node = (*c)->Get(k8s::kNodes, "", node_name);
        if (!node.ok())
          return Annotate(node.status(),
                          StrCat("reading node ", node_name,
                                 "'s labels for the nodelabelselector of ", config_file));
        return node->value(nlohmann::json::json_pointer("/metadata/labels"),
                           nlohmann::json::object());
      };
    }
    if (Status s = deviceplugin::ApplyNodeConfigFile(config_file, node_name, &cfg, node_labels);
        !s.ok())
      return Fail(s);
  }
  if (Status s = deviceplugin::Validate(cfg); !s.ok()) return Fail(s);
  {
    auto ids = deviceplugin::ParseImexChannelIds(imex_channel_ids);
    if (!ids.ok()) return Fail(Annotate(ids.status(), "--imex-channel-ids (IMEX_CHANNEL_IDS)"));
    auto channels = deviceplugin::ResolveImexChannels(*ids, imex_required, imex_dev_root);
    if (!channels.ok()) return Fail(channels.status());
    cfg.imex_channels = *std::move(channels);
  }

  std::unique_ptr<gpu::DeviceDiscovery> discovery;
  gpu::MigControl* mig = nullptr;  // NVML's, when it loaded (operating mode mig)
  gpu::NvmlOptions nvml_opts;
  nvml_opts.library = nvml_library;
  if (auto nvml = gpu::NvmlDiscovery::Open(nvml_opts); nvml.ok()) {
    mig = nvml->get();
    discovery = std::move(*nvml);
  } else if (fail_on_init_error) {
    return Fail(nvml.status());
  } else {
    spdlog::warn("{}; advertising no GPUs", std::string(nvml.status().message()));
    discovery = std::make_unique<gpu::NullDiscovery>();
  }

  // Static MIG strategies: the MIG devices made beforehand, read once (a new layout needs a
  // restart, as NVIDIA's plugin).
  std::vector<deviceplugin::StaticMigResource> static_mig;
  if (cfg.mig_strategy != "none") {
    auto gpus = discovery->ListDevices();
    if (!gpus.ok()) return Fail(gpus.status());
    const std::vector<gpu::GpuInfo> kept = deviceplugin::FilterDevices(*gpus, cfg);
    if (mig != nullptr) {
      auto res = deviceplugin::BuildStaticMigResources(kept, *mig, cfg);
      if (!res.ok()) return Fail(res.status());
      static_mig = std::move(*res);
    } else if (!kept.empty()) {
      return Fail(FailedPrecondition("--mig-strategy ", cfg.mig_strategy,
                                     ": NVML without the MIG API cannot list MIG devices"));
    }
  }

  if (dry_run) {
    auto gpus = discovery->ListDevices();
    if (!gpus.ok()) return Fail(gpus.status());
    std::vector<gpu::GpuInfo> shared = *gpus;  // under a static MIG strategy, MIG GPUs are not
    if (cfg.mig_strategy != "none")
      std::erase_if(shared, [](const gpu::GpuInfo& g) { return g.mig_enabled; });
    std::printf(
        "%s: %s\n", vendors::nvidia::kNodeNvidiaRegister,
        core::EncodeNodeDevicesJson(deviceplugin::BuildNodeDevices(shared, {}, cfg)).c_str());
    if (topology_score) {
      auto links = discovery->Topology();
      if (!links.ok()) return Fail(links.status());
      std::printf(
          "%s: %s\n", vendors::nvidia::kNodeNvidiaScore,
          core::EncodeLinkScores(deviceplugin::BuildLinkScores(*gpus, *links, cfg)).c_str());
    }
    for (const auto& r : static_mig) {
      std::string ids;
      for (const auto& d : r.devices) ids += (ids.empty() ? "" : ",") + d.uuid;
      std::printf("%s (%s): %s\n", r.resource_name.c_str(), r.socket_name.c_str(), ids.c_str());
    }
    return 0;
  }

  auto kcfg = k8s::LoadDefaultConfig(kubeconfig);
  if (!kcfg.ok()) return Fail(kcfg.status());
  auto client = k8s::Client::Create(*kcfg);
  if (!client.ok()) return Fail(client.status());

  // Signals are taken synchronously below; block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  deviceplugin::K8sPendingPodSource pending(client->get(), node_name, cfg.scheduler_name,
                                            cfg.region_group);
  if (seed == 0)
    seed = static_cast<uint64_t>(RealClock::Get().MonotonicNanos()) ^
           static_cast<uint64_t>(::getpid());
  deviceplugin::DevicePlugin plugin(cfg, discovery.get(), &pending, seed);
  plugin.SetMigControl(mig);
  std::unique_ptr<deviceplugin::PodResourcesView> pod_resources;
  if (!pod_resources_socket.empty()) {
    pod_resources =
        std::make_unique<deviceplugin::PodResourcesView>(pod_resources_socket, cfg.resource_name);
    plugin.SetKubeletPodView(pod_resources.get());
  }
  // Before the plugin: a container armed to ask the broker must find it.
  std::unique_ptr<deviceplugin::HostPidBroker> broker;
  if (!cfg.host_pid_broker_dir.empty()) {
    auto b = deviceplugin::HostPidBroker::Start(cfg.host_pid_broker_dir);
    if (!b.ok()) return Fail(b.status());
    broker = std::move(*b);
  }
  // single: the MIG devices are --resource-name, served by the main plugin; mixed: one plugin per
  // nvidia.com/mig-<profile>, each on its own socket.
  std::vector<std::unique_ptr<deviceplugin::DevicePlugin>> mig_plugins;
  for (auto& r : static_mig) {
    if (r.resource_name == cfg.resource_name) {
      plugin.ServeStaticMig(std::move(r.devices), /*with_shared_gpus=*/true);
      continue;
    }
    deviceplugin::PluginConfig c = cfg;
    c.resource_name = r.resource_name;
    c.socket_name = r.socket_name;
    c.enable_preferred_allocation = false;  // kubelet's own choice: no decision to steer to
    auto p = std::make_unique<deviceplugin::DevicePlugin>(c, discovery.get(), &pending,
                                                          seed + mig_plugins.size() + 1);
    p->ServeStaticMig(std::move(r.devices), /*with_shared_gpus=*/false);
    mig_plugins.push_back(std::move(p));
  }
  std::unique_ptr<deviceplugin::RefitClient> refit;
  if (!refit_endpoint.empty()) {
    deviceplugin::SchedulerRefitOptions ro;
    ro.endpoint = refit_endpoint;
    if (!refit_ca_file.empty()) {
      std::ifstream in(refit_ca_file);
      std::stringstream pem;
      pem << in.rdbuf();
      if (!in) return Fail(InvalidArgument("--numa-refit-ca-file: cannot read ", refit_ca_file));
      ro.ca_pem = pem.str();
    }
    if (EnvTrue("HAMI_SCHEDULER_TLS_INSECURE"))
      spdlog::warn(
          "HAMI_SCHEDULER_TLS_INSECURE is ignored: the refit sends this pod's service-account "
          "token, so the scheduler's certificate is always verified (set --numa-refit-ca-file)");
    auto client_or = deviceplugin::NewSchedulerRefitClient(ro);
    if (!client_or.ok()) return Fail(client_or.status());
    refit = std::move(*client_or);
    plugin.SetRefitClient(refit.get(), node_name);
    spdlog::info("NUMA refit on: {}", refit_endpoint);
  }
  if (Status s = plugin.Start(); !s.ok()) return Fail(s);
  for (auto& p : mig_plugins)
    if (Status s = p->Start(); !s.ok()) return Fail(s);
  deviceplugin::NodeRegistrar registrar(
      client->get(), node_name, [&] { return plugin.NodeAnnotations(topology_score); },
      &RealClock::Get(), [&] { return deviceplugin::NodeCapacity(plugin.NodeDevices(), cfg); });

  // Node annotations: refreshed every --register-interval, at once when device health changes,
  // and 5 s after a failed write (upstream's rhythm). MIG reclaim runs on the same interval.
  int64_t next_sync = 0;
  int64_t next_reclaim = 0;
  bool last_failed = false;
  while (true) {
    const int64_t now = RealClock::Get().MonotonicNanos();
    if (now >= next_reclaim) {
      if (auto reclaimed = plugin.ReclaimMigInstances(); !reclaimed.ok())
        spdlog::warn("{}", std::string(reclaimed.status().message()));
      next_reclaim = now + register_interval_s * 1'000'000'000LL;
    }
    if (now >= next_sync || (!last_failed && registrar.Changed())) {
      Status s = registrar.SyncOnce();
      if (!s.ok()) spdlog::warn("{}", std::string(s.message()));
      last_failed = !s.ok();
      next_sync = now + (s.ok() ? register_interval_s : 5) * 1'000'000'000LL;
    }
    timespec tick{1, 0};
    int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("signal {}: stopping", sig);
      break;
    }
  }
  for (auto& p : mig_plugins) p->Stop();
  plugin.Stop();
  return 0;
}

}  // namespace hami::cmd
