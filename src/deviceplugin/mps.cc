#include "deviceplugin/mps.h"

#include <errno.h>
#include <signal.h>

#include <algorithm>
#include <fstream>

#include "core/text_util.h"
#include "deviceplugin/config.h"

namespace hami::deviceplugin {

std::string MpsPinnedMemLimit(const std::vector<core::ContainerDevice>& devices) {
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i)
    out += StrCat(i ? "," : "", i, "=", devices[i].usedmem_mib, "M");
  return out;
}

int MpsActiveThreadPercentage(const std::vector<core::ContainerDevice>& devices) {
  int pct = 0;
  for (const auto& d : devices)
    if (d.usedcores > 0) pct = pct == 0 ? d.usedcores : std::min(pct, d.usedcores);
  return std::min(pct, 100);
}

Status CheckMpsControlDaemon(const std::string& pipe_dir) {
  const std::string path = JoinPath(pipe_dir, kMpsControlPidFile);
  const std::string start = StrCat("; start it with CUDA_MPS_PIPE_DIRECTORY=", pipe_dir,
                                   " nvidia-cuda-mps-control -d (docs/install.md, MPS)");
  std::ifstream f(path);
  if (!f) return FailedPrecondition("MPS control daemon not running: no ", path, start);
  // A PID file holds one decimal number; read a bounded prefix so that a huge or endless file (a
  // hostile or broken host path) costs nothing. The buffer outlives the trimmed view of it.
  char buf[64];
  f.read(buf, sizeof buf);
  const std::string text(buf, static_cast<size_t>(f.gcount()));
  const std::string_view pid_text = core::text::Trim(text);
  int64_t pid = 0;
  if (pid_text.empty() || pid_text.size() > 10 ||
      !std::all_of(pid_text.begin(), pid_text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (pid = std::stoll(std::string(pid_text))) <= 0 || pid > 0x7fffffff)
    return FailedPrecondition("MPS control daemon: ", path, " does not hold a PID (",
                              core::text::Quote(std::string(pid_text.substr(0, 32))), ")", start);
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)
    return FailedPrecondition("MPS control daemon not running: PID ", pid, " of ", path,
                              " does not exist", start);
  return OkStatus();
}

}  // namespace hami::deviceplugin
