#include "deviceplugin/host_pid_broker.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/libc.h"
#include "common/log.h"
#include "deviceplugin/config.h"

namespace hami::deviceplugin {

namespace {

constexpr uint16_t kVersion = 1;
constexpr uint16_t kCommandHostPid = 1;
constexpr uint16_t kStatusOk = 0;
constexpr uint16_t kStatusInvalid = 1;
// A connection that does not send its request within this long is dropped: one slow or silent
// caller holds the others up at most this long.
constexpr int kRequestTimeoutMs = 1000;

void Put16(unsigned char* p, uint16_t v) {
  p[0] = static_cast<unsigned char>(v >> 8);
  p[1] = static_cast<unsigned char>(v);
}

uint16_t Get16(const unsigned char* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

}  // namespace

HostPidBroker::HostPidBroker(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
  thread_ = std::thread([this] { Serve(); });
}

HostPidBroker::~HostPidBroker() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  ::unlink(path_.c_str());
}

StatusOr<std::unique_ptr<HostPidBroker>> HostPidBroker::Start(const std::string& dir) {
  const std::string path = JoinPath(dir, kHostPidBrokerSocketName);
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return InvalidArgument("host PID broker: socket path ", path, " is longer than ",
                           sizeof(addr.sun_path) - 1, " bytes (unix socket limit)");
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Internal("host PID broker: cannot create ", dir, ": ", ec.message());
    ::chmod(dir.c_str(), 0711);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return FailedPrecondition(
          "host PID broker: ", path,
          " exists and is not a socket; remove it or choose another directory");
    ::unlink(path.c_str());  // a stale socket of an earlier run
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Internal("host PID broker: socket: ", ErrnoText(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    return Unavailable("host PID broker: cannot serve ", path, ": ", ErrnoText(err));
  }
  spdlog::info("host PID broker serving {}", path);
  return std::unique_ptr<HostPidBroker>(new HostPidBroker(path, fd));
}

void HostPidBroker::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    Answer(conn);
    ::close(conn);
  }
}

void HostPidBroker::Answer(int conn) {
  unsigned char req[8];
  size_t got = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestTimeoutMs);
  while (got < sizeof(req)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{conn, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    const ssize_t n = ::recv(conn, req + got, sizeof(req) - got, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    got += static_cast<size_t>(n);
  }
  // A request is exactly 8 bytes: more already sent makes it invalid (upstream's rule).
  char extra;
  const bool longer = ::recv(conn, &extra, 1, MSG_DONTWAIT | MSG_PEEK) > 0;
  unsigned char resp[12] = {'H', 'P', 'I', 'D'};
  Put16(resp + 4, kVersion);
  uint16_t status = kStatusInvalid;
  uint32_t pid = 0;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (!longer && std::memcmp(req, "HPID", 4) == 0 && Get16(req + 4) == kVersion &&
      Get16(req + 6) == kCommandHostPid &&
      ::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
    status = kStatusOk;
    pid = static_cast<uint32_t>(cred.pid);
  }
  Put16(resp + 6, status);
  for (int i = 0; i < 4; ++i) resp[8 + i] = static_cast<unsigned char>(pid >> (24 - 8 * i));
  (void)::send(conn, resp, sizeof(resp), MSG_NOSIGNAL | MSG_DONTWAIT);
  ++answered_;
}

}  // namespace hami::deviceplugin
