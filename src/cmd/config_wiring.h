#pragma once
// How device-config.yaml (the one reader: vendors/config_file.h) reaches each binary. The mains
// and config_effect_test use these functions, so the test sees what a deployment gets.
// Precedence (docs/install.md#device-configyaml-options): a flag given on the command line (or
// its environment variable) > the file > the built-in default; for the device plugin, a node's
// entry in the node config (config.json, applied after these) overrides both.
#include <functional>
#include <string_view>

#include "deviceplugin/config.h"
#include "vendors/config_file.h"
#include "webhook/webhook.h"

namespace hami::cmd {

// hami scheduler, extender side: nothing here. Every vendor's resource names and defaulting,
// NVIDIA's included, come with the vendor set the same file enabled (StateOptions::vendors). hami
// scheduler, admission webhook: core policy, runtime class, overwriteEnv, and `vendors`, the set
// the same file enabled (not owned; resource names and defaulting).
void ConfigureWebhook(const vendors::DeviceConfig& file, const vendors::VendorSet* vendors,
                      webhook::WebhookOptions* webhook);
// hami device-plugin: `flag_given(name)` says whether the command line named the flag (or set its
// environment variable). gpuCorePolicy has no flag: the file is its one source, shared with the
// webhook.
void ConfigureDevicePlugin(const vendors::DeviceConfig& file,
                           const std::function<bool(std::string_view flag)>& flag_given,
                           deviceplugin::PluginConfig* plugin);

}  // namespace hami::cmd
