#include "cmd/node_agent.h"

#include <cstdio>

#include "cmd/config_wiring.h"
#include "cmd/log_flags.h"
#include "k8s/config.h"
#include "spdlog/spdlog.h"
#include "vendors/config_file.h"

namespace hami::cmd {

std::optional<int> ParseDaemonFlags(CLI::App& app, int argc, char** argv, const char* prog) {
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  LogFlags log_flags;
  AddLogFlags(app, log_flags);
  NormalizeKlogArgs(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status s = ApplyLogFlags(log_flags, log_level); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", prog, std::string(s.message()).c_str());
    return 1;
  }
  return std::nullopt;
}

void AddLibvgpuFlags(CLI::App& app, deviceplugin::PluginConfig* cfg,
                     const std::string& region_help) {
  app.add_option("--libvgpu-path", cfg->libvgpu_host_path, "host path of libvgpu.so")
      ->capture_default_str();
  app.add_option("--ld-preload-path", cfg->ld_preload_host_path,
                 "host path of the ld.so.preload naming libvgpu (mounted at /etc/ld.so.preload)")
      ->capture_default_str();
  app.add_option("--region-root", cfg->region_root, region_help)->capture_default_str();
  app.add_option("--container-hook-dir", cfg->container_hook_dir,
                 "where containers see libvgpu.so and their region directory")
      ->capture_default_str();
}

Status ApplyDeviceConfig(const CLI::App& app, const std::string& path,
                         deviceplugin::PluginConfig* cfg) {
  if (!path.empty()) {
    HAMI_ASSIGN_OR_RETURN(const vendors::ConfigFile file,
                          vendors::LoadConfigFile(path, "--device-config-file"));
    ConfigureDevicePlugin(
        file.nvidia,
        [&app](std::string_view flag) {
          const CLI::Option* o = app.get_option_no_throw(std::string(flag));
          return o != nullptr && o->count() > 0;
        },
        cfg);
  }
  return deviceplugin::Validate(*cfg);
}

StatusOr<std::unique_ptr<k8s::Client>> ConnectKubernetes(const std::string& kubeconfig) {
  HAMI_ASSIGN_OR_RETURN(k8s::ClientConfig kcfg, k8s::LoadDefaultConfig(kubeconfig));
  return k8s::Client::Create(std::move(kcfg));
}

sigset_t BlockStopSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return sigs;
}

bool WaitForStop(const sigset_t& sigs) {
  timespec tick{1, 0};
  const int sig = sigtimedwait(&sigs, nullptr, &tick);
  if (sig != SIGINT && sig != SIGTERM) return false;
  spdlog::info("signal {}: stopping", sig);
  return true;
}

}  // namespace hami::cmd
