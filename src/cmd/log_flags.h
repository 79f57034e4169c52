#pragma once
// Logging flags shared by the daemons (scheduler, device-plugin, monitor): upstream's klog-style
// -v=N and --debug, and --log-format text|json, on top of each command's own --log-level.
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "common/status.h"

namespace hami::cmd {

struct LogFlags {
  int verbosity = -1;  // -v=N; -1 = not given
  bool debug = false;  // --debug
  std::string format = "text";
};

// Adds -v/--v, --debug and --log-format to `app`.
void AddLogFlags(CLI::App& app, LogFlags& flags);

// Rewrites klog's "-v=N" (which CLI11 does not take for a one-letter option) to "--v=N", in place.
// The replacement strings live as long as the process.
void NormalizeKlogArgs(int argc, char** argv);

// The level to use: --debug or -v=N raise --log-level (never lower it); then applies level and
// format.
std::string EffectiveLevel(const LogFlags& flags, std::string_view log_level);
Status ApplyLogFlags(const LogFlags& flags, std::string_view log_level);

// hami_build_info{component,version,revision} 1, in the Prometheus text format, for /metrics.
std::string BuildInfoMetric(std::string_view component);
// "hami-cpp <version> (revision <rev>, built <date>)".
std::string VersionLine();

}  // namespace hami::cmd
