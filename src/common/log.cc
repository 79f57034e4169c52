#include "common/log.h"

#include <string>

namespace hami::log {

Status SetLevel(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    return InvalidArgument("unknown log level '", level,
                           "' (expected trace, debug, info, warn, error or off)");
  }
  spdlog::set_level(lvl);
  return OkStatus();
}

}  // namespace hami::log
