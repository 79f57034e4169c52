#pragma once
// Test helper: blocking TLS client calls on loopback, bounded by socket timeouts (no certificate
// verification: the tests check which certificate is served, not who signed it). Header-only;
// OpenSSL.
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "http/testing/raw_client.h"

namespace hami::http::testing {

// One request over TLS on a fresh connection; status 0 when nothing came back in `timeout`. `cn`
// (optional) gets the common name of the server's certificate, "handshake failed" when there was
// none. An empty request only does the handshake.
inline RawResponse TlsExchange(int port, const std::string& request,
                               std::chrono::milliseconds timeout, std::string* cn = nullptr) {
  RawResponse r;
  if (cn) *cn = "handshake failed";
  const int fd = ConnectLoopback(port);
  if (fd < 0) return r;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  const auto end = std::chrono::steady_clock::now() + timeout;
  if (SSL_connect(ssl) == 1) {
    if (cn) {
      X509* peer = SSL_get1_peer_certificate(ssl);
      char buf[256] = {0};
      if (peer)
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buf, sizeof buf);
      *cn = buf;
      X509_free(peer);
    }
    if (!request.empty()) {
      // Written in pieces, looking for an early answer in between (a server may answer and stop
      // reading before the body is complete); records without application data (session tickets)
      // do not count.
      std::string carry;
      char tmp[16384];
      size_t sent = 0;
      while (sent < request.size()) {
        const int n = SSL_write(ssl, request.data() + sent,
                                static_cast<int>(std::min<size_t>(request.size() - sent, 65536)));
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) continue;
        const int flags = ::fcntl(fd, F_GETFL);
        ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
        const int got = SSL_read(ssl, tmp, sizeof tmp);
        ::fcntl(fd, F_SETFL, flags);
        if (got > 0) {
          carry.append(tmp, static_cast<size_t>(got));
          break;
        }
        ERR_clear_error();
      }
      while (!TakeResponse(&carry, &r) && std::chrono::steady_clock::now() < end) {
        const int n = SSL_read(ssl, tmp, sizeof tmp);
        if (n <= 0) break;
        carry.append(tmp, static_cast<size_t>(n));
      }
      if (r.head.empty()) r.status = 0;
    }
    SSL_shutdown(ssl);
  }
  ERR_clear_error();
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  return r;
}

// The common name of the certificate a fresh handshake gets; "handshake failed" otherwise.
inline std::string PeerCommonName(int port) {
  std::string cn;
  TlsExchange(port, "", std::chrono::milliseconds(10000), &cn);
  return cn;
}

}  // namespace hami::http::testing
