#include "deviceplugin/imex.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "common/libc.h"
#include "deviceplugin/config.h"

namespace hami::deviceplugin {

namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "" when `path` is a character device (stat follows links, as the runtime does), else why not.
std::string NotACharDevice(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return StrCat(path, ": ", ErrnoText(errno));
  if (!S_ISCHR(st.st_mode)) return StrCat(path, " is not a character device");
  return "";
}

}  // namespace

StatusOr<std::vector<int>> ParseImexChannelIds(std::string_view text) {
  std::vector<int> ids;
  if (TrimBlanks(text).empty()) return ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view entry = TrimBlanks(text.substr(start, comma - start));
    if (entry.empty())
      return InvalidArgument("IMEX channel ids '", text, "': an empty entry between commas");
    int id = 0;
    const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), id);
    if (ec == std::errc::result_out_of_range)
      return InvalidArgument("IMEX channel id '", entry, "' is too large (at most 2147483647)");
    if (ec != std::errc() || end != entry.data() + entry.size())
      return InvalidArgument("IMEX channel id '", entry, "' is not a whole number");
    if (id < 0) return InvalidArgument("IMEX channel id ", id, " is negative");
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      return InvalidArgument("IMEX channel id ", id, " is given twice");
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

std::string ImexChannelPath(int id) {
  return StrCat(kImexChannelDir, "/channel", id);
}

StatusOr<std::vector<int>> ResolveImexChannels(const std::vector<int>& ids, bool required,
                                               const std::string& dev_root) {
  std::vector<int> found;
  for (const int id : ids) {
    const std::string path = ImexChannelPath(id);
    std::vector<std::string> looked;
    looked.push_back(dev_root.empty() || dev_root == "/" ? path
                                                         : JoinPath(dev_root, path.substr(1)));
    if (looked.front() != path) looked.push_back(path);
    std::string why;
    bool ok = false;
    for (const auto& p : looked) {
      const std::string not_char = NotACharDevice(p);
      if (not_char.empty()) {
        ok = true;
        break;
      }
      why += (why.empty() ? "" : "; ") + not_char;
    }
    if (ok) {
      found.push_back(id);
      continue;
    }
    if (required)
      return FailedPrecondition("requested IMEX channel channel", id, " does not exist (", why,
                                ") and --imex-required is set");
    spdlog::warn("IMEX channel channel{} is not handed to containers: {}", id, why);
  }
  return found;
}

}  // namespace hami::deviceplugin
