#pragma once
// Logging for daemons and tools (spdlog). Not for libvgpu, which has its own tiny C logger.
#include <string_view>

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace hami::log {

// Sets the global level from a name: trace, debug, info, warn, error, off.
Status SetLevel(std::string_view level);

// Sets the line format of every logger: "text" (spdlog's default pattern) or "json" (one object per
// line: {"ts":"2026-12-01T13:00:00.123456Z","level":"info","logger":"...","msg":"..."}, UTC, the
// message JSON-escaped), for log collectors that parse lines.
Status SetFormat(std::string_view format);

// klog-style verbosity (upstream's -v=N) as a level name: >= 5 trace, 4 debug, else info.
std::string_view LevelForVerbosity(int v);

}  // namespace hami::log
