#pragma once
// Wiring shared by the node agent's mains (hami dra-plugin, hami device-plugin): the log flags, the
// libvgpu path flags, device-config.yaml over the flags, the Kubernetes client and stop signals.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "deviceplugin/config.h"
#include "k8s/client.h"

namespace hami::cmd {

// Adds --log-level and the klog-style log flags, parses the command line and applies the logging
// choice. nullopt: go on; otherwise the exit code (--help, a parse error, a bad log flag, the error
// printed as "<prog>: <message>").
std::optional<int> ParseDaemonFlags(CLI::App& app, int argc, char** argv, const char* prog);

// --libvgpu-path, --ld-preload-path, --region-root (`region_help` says how regions are named),
// --container-hook-dir.
void AddLibvgpuFlags(CLI::App& app, deviceplugin::PluginConfig* cfg,
                     const std::string& region_help);
// device-config.yaml's nvidia section under the flags the command line gave (flag > file >
// default), then Validate.
Status ApplyDeviceConfig(const CLI::App& app, const std::string& path,
                         deviceplugin::PluginConfig* cfg);
// The client of --kubeconfig (empty: in-cluster, then $KUBECONFIG, ~/.kube/config).
StatusOr<std::unique_ptr<k8s::Client>> ConnectKubernetes(const std::string& kubeconfig);
// Blocks SIGINT and SIGTERM in this thread (call before any thread starts) and returns them, for
// WaitForStop.
sigset_t BlockStopSignals();
// Waits up to one second; true when SIGINT or SIGTERM arrived.
bool WaitForStop(const sigset_t& sigs);

}  // namespace hami::cmd
