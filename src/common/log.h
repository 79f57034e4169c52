#pragma once
// Logging for daemons and tools (spdlog). Not for libvgpu, which has its own tiny C logger.
#include <string_view>

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace hami::log {

// Sets the global level from a name: trace, debug, info, warn, error, off.
Status SetLevel(std::string_view level);

}  // namespace hami::log
