#include "cmd/log_flags.h"

#include <cstring>
#include <deque>

#include "common/log.h"
#include "monitor/exporter.h"

namespace hami::cmd {

void AddLogFlags(CLI::App& app, LogFlags& flags) {
  app.add_option(
         "-v,--v", flags.verbosity,
         "klog-style verbosity (upstream's -v=N): 4 = debug, 5+ = trace; raises --log-level")
      ->check(CLI::Range(0, 10));
  app.add_flag("--debug", flags.debug,
               "debug logging (upstream's --debug; same as --log-level=debug)");
  app.add_option("--log-format", flags.format, "text | json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

void NormalizeKlogArgs(int argc, char** argv) {
  static std::deque<std::string> rewritten;  // stable addresses
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "-v=", 3) == 0) {
      rewritten.push_back(std::string("-") + argv[i]);
      argv[i] = rewritten.back().data();
    }
  }
}

std::string EffectiveLevel(const LogFlags& flags, std::string_view log_level) {
  // spdlog's order: trace < debug < info < ...; the most verbose of the requests wins.
  auto rank = [](std::string_view l) {
    return static_cast<int>(spdlog::level::from_str(std::string(l)));
  };
  std::string level(log_level);
  auto raise = [&](std::string_view l) {
    if (rank(l) < rank(level)) level = std::string(l);
  };
  if (flags.debug) raise("debug");
  if (flags.verbosity >= 0) raise(log::LevelForVerbosity(flags.verbosity));
  return level;
}

Status ApplyLogFlags(const LogFlags& flags, std::string_view log_level) {
  if (Status s = log::SetLevel(log_level); !s.ok()) return s;  // an unknown --log-level is an error
  if (Status s = log::SetLevel(EffectiveLevel(flags, log_level)); !s.ok()) return s;
  return log::SetFormat(flags.format);
}

namespace {
std::string LabelValue(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}
}  // namespace

std::string BuildInfoMetric(std::string_view component) {
  const monitor::BuildInfo b = monitor::CurrentBuildInfo();
  return StrCat(
      "# HELP hami_build_info Build information of this hami-cpp binary.\n# TYPE hami_build_info "
      "gauge\n",
      "hami_build_info{component=\"", LabelValue(component), "\",version=\"", LabelValue(b.version),
      "\",revision=\"", LabelValue(b.revision), "\",build_date=\"", LabelValue(b.build_date),
      "\"} 1\n");
}

std::string VersionLine() {
  const monitor::BuildInfo b = monitor::CurrentBuildInfo();
  return StrCat("hami-cpp ", b.version, " (revision ", b.revision, ", built ", b.build_date, ", ",
                b.compiler, ", ", b.platform, ")");
}

}  // namespace hami::cmd
