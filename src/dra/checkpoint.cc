#include "dra/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/libc.h"
#include "nlohmann/json.hpp"

namespace hami::dra {

namespace {

using Json = nlohmann::json;
constexpr int kVersion = 1;

Json EncodeUsage(const Usage& u) {
  return {{"memoryMiB", u.memory_mib}, {"cores", u.cores}};
}

}  // namespace

std::string EncodeCheckpoint(const Checkpoint& cp) {
  Json claims = Json::object();
  for (const auto& [uid, pc] : cp.claims) {
    Json shares = Json::array();
    for (const auto& s : pc.claim.shares)
      shares.push_back({{"request", s.request},
                        {"device", s.device},
                        {"shareID", s.share_id},
                        {"usage", EncodeUsage(s.usage)}});
    Json devices = Json::array();
    for (const auto& d : pc.devices)
      devices.push_back({{"requestNames", d.request_names},
                         {"pool", d.pool},
                         {"device", d.device},
                         {"cdiDeviceIDs", d.cdi_device_ids},
                         {"shareID", d.share_id}});
    claims[uid] = {
        {"state", pc.state == PrepareState::kCompleted ? "PrepareCompleted" : "PrepareStarted"},
        {"namespace", pc.claim.ref.namespace_},
        {"name", pc.claim.ref.name},
        {"shares", shares},
        {"devices", devices},
        {"files", pc.files},
        {"dirs", pc.dirs}};
  }
  return Json{{"version", kVersion}, {"bootID", cp.boot_id}, {"claims", claims}}.dump() + "\n";
}

StatusOr<Checkpoint> DecodeCheckpoint(std::string_view text) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("checkpoint: not a JSON object");
  if (j.value("version", 0) != kVersion)
    return InvalidArgument("checkpoint: version is not ", kVersion);
  try {
    Checkpoint cp;
    cp.boot_id = j.at("bootID").get<std::string>();
    for (const auto& [uid, e] : j.at("claims").items()) {
      PreparedClaim pc;
      const std::string state = e.at("state").get<std::string>();
      if (state != "PrepareCompleted" && state != "PrepareStarted")
        return InvalidArgument("checkpoint: claim ", uid, ": state '", state, "'");
      pc.state = state == "PrepareCompleted" ? PrepareState::kCompleted : PrepareState::kStarted;
      pc.claim.ref = {e.at("namespace").get<std::string>(), e.at("name").get<std::string>(), uid};
      for (const auto& s : e.at("shares"))
        pc.claim.shares.push_back(
            {s.at("request").get<std::string>(),
             s.at("device").get<std::string>(),
             s.at("shareID").get<std::string>(),
             {s.at("usage").at("memoryMiB").get<int64_t>(), s.at("usage").at("cores").get<int>()}});
      for (const auto& d : e.at("devices"))
        pc.devices.push_back({d.at("requestNames").get<std::vector<std::string>>(),
                              d.at("pool").get<std::string>(), d.at("device").get<std::string>(),
                              d.at("cdiDeviceIDs").get<std::vector<std::string>>(),
                              d.at("shareID").get<std::string>()});
      pc.files = e.at("files").get<std::vector<std::string>>();
      pc.dirs = e.at("dirs").get<std::vector<std::string>>();
      cp.claims.emplace(uid, std::move(pc));
    }
    return cp;
  } catch (const Json::exception& e) {
    return InvalidArgument("checkpoint: ", e.what());
  }
}

Status WriteFileAtomic(const std::string& path, std::string_view contents, unsigned mode) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("cannot create ", tmp, ": ", ErrnoText(errno));
  size_t done = 0;
  bool ok = true;
  while (ok && done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  const int err = errno;
  ok = ok && ::fchmod(fd, mode) == 0 && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    ::unlink(tmp.c_str());
    return Internal("cannot write ", path, ": ", ErrnoText(e));
  }
  return OkStatus();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0) return NotFound(path, " does not exist");
    return Internal("cannot read ", path);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ReadBootId(const std::string& path) {
  auto s = ReadWholeFile(path);
  if (!s.ok()) return "";
  std::string id = *s;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace hami::dra
