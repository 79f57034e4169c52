#include "common/log.h"

#include <memory>
#include <string>

#include "spdlog/pattern_formatter.h"

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

namespace {

// %* in the JSON pattern: the message payload as the inside of a JSON string.
class JsonMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    auto put = [&dest](std::string_view s) { dest.append(s.data(), s.data() + s.size()); };
    for (char ch : std::string_view(msg.payload.data(), msg.payload.size())) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"':
          put("\\\"");
          break;
        case '\\':
          put("\\\\");
          break;
        case '\n':
          put("\\n");
          break;
        case '\r':
          put("\\r");
          break;
        case '\t':
          put("\\t");
          break;
        default:
          if (c < 0x20) {
            const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
            dest.append(esc, esc + sizeof esc);
          } else {
            dest.push_back(ch);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessage>();
  }
};

}  // namespace

Status SetFormat(std::string_view format) {
  if (format == "text") {
    spdlog::set_formatter(std::make_unique<spdlog::pattern_formatter>());
    return OkStatus();
  }
  if (format != "json")
    return InvalidArgument("unknown log format '", format, "' (expected text or json)");
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  f->add_flag<JsonMessage>('*').set_pattern(
      R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
  spdlog::set_formatter(std::move(f));
  return OkStatus();
}

std::string_view LevelForVerbosity(int v) {
  if (v >= 5) return "trace";
  if (v == 4) return "debug";
  return "info";
}

}  // namespace hami::log
