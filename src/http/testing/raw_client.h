#pragma once
// Test helper: a bare TCP client on loopback for tests that must send what a well-behaved HTTP
// library would not (pipelined bursts, partial headers, byte-at-a-time drips, garbage). Every wait
// is bounded by the timeout given. Header-only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

namespace hami::http::testing {

// A connected socket to 127.0.0.1:port, or -1.
inline int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

inline bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Appends what arrives within `timeout` to *buf; false on timeout, EOF or error.
inline bool ReadSome(int fd, std::string* buf, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char tmp[16384];
  const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
  if (n <= 0) return false;
  buf->append(tmp, static_cast<size_t>(n));
  return true;
}

struct RawResponse {
  int status = 0;
  std::string head, body;
};

// Takes one whole response (the servers under test always send Content-Length; 100 Continue is
// skipped) off the front of *carry; false while it is incomplete.
inline bool TakeResponse(std::string* carry, RawResponse* out) {
  for (;;) {
    const size_t h = carry->find("\r\n\r\n");
    if (h == std::string::npos) return false;
    out->head = carry->substr(0, h);
    out->status = out->head.size() > 12 ? std::atoi(out->head.c_str() + 9) : 0;
    if (out->status == 100) {
      carry->erase(0, h + 4);
      continue;
    }
    std::string lower = out->head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t cl = lower.find("content-length:");
    const size_t len =
        cl == std::string::npos ? 0 : std::strtoul(out->head.c_str() + cl + 15, nullptr, 10);
    if (carry->size() < h + 4 + len) return false;
    out->body = carry->substr(h + 4, len);
    carry->erase(0, h + 4 + len);
    return true;
  }
}

// Reads one response from fd; *carry holds bytes read past it (the next pipelined response).
// False when it does not complete in `timeout`.
inline bool ReadResponse(int fd, std::string* carry, RawResponse* out,
                         std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (TakeResponse(carry, out)) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !ReadSome(fd, carry, left)) return false;
  }
}

// One response from fd when nothing else is expected after it; status 0 when none came in
// `timeout`.
inline RawResponse ReadOne(int fd, std::chrono::milliseconds timeout) {
  std::string carry;
  RawResponse r;
  if (!ReadResponse(fd, &carry, &r, timeout)) r.status = 0;
  return r;
}

// A loopback port nobody listens on right now (for programs that need ADDR:PORT up front).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// Closes with a reset (SO_LINGER 0): no TIME_WAIT left behind, so suites that open thousands of
// connections do not use up the ephemeral ports of the machine.
inline void ResetClose(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

// True when the peer closes (EOF or reset) within `timeout`; data that arrives first is dropped.
inline bool WaitClosed(int fd, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char tmp[4096];
    if (::recv(fd, tmp, sizeof tmp, 0) <= 0) return true;
  }
}

// One request on a fresh connection; status 0 when nothing came back in `timeout`.
inline RawResponse Exchange(int port, std::string_view request, std::chrono::milliseconds timeout) {
  RawResponse r;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return r;
  std::string carry;
  SendAll(fd, request);  // a server may answer (and stop reading) before the whole request is sent
  if (!ReadResponse(fd, &carry, &r, timeout)) r.status = 0;
  ::close(fd);
  return r;
}

}  // namespace hami::http::testing
