#include "http/server.h"

#include <openssl/ssl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <list>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/mutex.h"
#include "core/json_util.h"
#include "http/tls.h"

namespace hami::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

Status SplitHostPort(const std::string& bind, std::string* host, int* port) {
  const size_t colon = bind.rfind(':');
  if (colon == std::string::npos)
    return InvalidArgument("address \"", bind, "\" must be ADDR:PORT");
  std::string h = bind.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h.empty()) h = "0.0.0.0";
  const std::string p = bind.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument("address \"", bind, "\": port must be a number 0..65535");
  const int n = std::stoi(p);
  if (n > 65535) return InvalidArgument("address \"", bind, "\": port must be a number 0..65535");
  *host = h;
  *port = n;
  return OkStatus();
}

namespace {

int64_t FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  // mtime, size and inode: a rename-over (kubelet's atomic secret update) changes the inode.
  return (static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec) ^
         (static_cast<int64_t>(st.st_size) << 20) ^ static_cast<int64_t>(st.st_ino);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Where a connection is; only kEvictable ones may be closed to admit a new connection.
enum Phase : int { kEvictable = 0, kBusy = 1, kEvicting = 2, kClosing = 3 };

constexpr size_t kReadChunk = 16u << 10;
constexpr std::chrono::milliseconds kDrainTimeout{1000};
constexpr std::chrono::milliseconds kAcceptRetry{50};
constexpr int kListenBacklog = 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void Evict() = 0;     // posts a close onto the connection's loop
  virtual void CloseNow() = 0;  // only when no I/O thread runs (Stop)
  std::atomic<int> phase{kEvictable};
  std::atomic<int64_t> last_active_ns{NowNs()};
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opts;
  struct RouteEntry {
    std::string method, path;
    HttpHandler handler;
  };
  std::vector<RouteEntry> routes;
  int port = 0;
  bool started = false, stopped = false;

  // Every open connection (weak: a connection owns itself through its pending operations).
  Mutex reg_mu;
  std::list<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(reg_mu);

  std::atomic<int64_t> open{0}, accepted{0}, evicted{0}, refused{0}, timed_out{0}, rejected{0},
      handled{0};
  std::atomic<uint64_t> buffered{0};       // body bytes reserved by requests in flight
  std::atomic<int> inline_running{0};      // handlers running on an I/O thread now
  std::atomic<uint64_t> inline_starts{0};  // handlers started inline so far
  std::atomic<bool> closing{false};        // Stop() began: no new connection or request

  // TLS.
  std::unique_ptr<net::ssl::context> ssl_ctx;
  Mutex cert_mu;
  std::shared_ptr<CertPair> cert ABSL_GUARDED_BY(cert_mu);
  int64_t cert_stamp ABSL_GUARDED_BY(cert_mu) = 0;
  int64_t key_stamp ABSL_GUARDED_BY(cert_mu) = 0;
  std::atomic<int64_t> loads{0}, rejects{0};
  Mutex stop_mu;
  CondVar stop_cv;  // stopping
  bool stopping ABSL_GUARDED_BY(stop_mu) = false;
  std::thread watcher;

  // One event loop per I/O thread: every operation of a connection completes on the thread that
  // waited for it, with no wake-up of another thread. A loop shared by several threads woke a
  // second thread for most completions (docs/benchmarks.md: 19 context switches per /filter against
  // 7, without success Events). New connections go to the loops in turn. An inline handler holds
  // its loop's thread; once it has run for kRescueAfter the rescuer thread runs that loop until it
  // returns, so the loop's other connections wait at most about that long (each connection is a
  // strand: never two threads at once). Declared after everything a connection touches: destroyed
  // first.
  struct Loop {
    net::io_context ctx;
    net::executor_work_guard<net::io_context::executor_type> work{ctx.get_executor()};
    std::thread thread;
    std::atomic<int64_t> inline_since_ns{0};  // an inline handler runs on the loop's thread
    std::atomic<int> sessions{0};             // connections on this loop
  };
  std::vector<std::unique_ptr<Loop>> loops;
  std::atomic<size_t> next_loop{0};
  std::unique_ptr<tcp::acceptor> acceptor;  // on a strand of loops[0]
  std::unique_ptr<net::steady_timer> accept_retry;
  std::unique_ptr<net::thread_pool> pool;
  std::thread rescuer;  // only with inline_handlers > 0
  // The rescuer polls the loops every kRescueAfter / 2 while inline handlers run or started lately;
  // after kRescuerQuietPolls polls without either it sleeps on rescue_cv until the next inline
  // handler starts (an idle server costs no wake-ups). A handler start wakes it only then: the hot
  // path pays one atomic load otherwise.
  CondVar rescue_cv;  // on stop_mu: rescuer_asleep cleared, or stopping
  std::atomic<bool> rescuer_asleep{false};
  std::atomic<int64_t> rescuer_polls{0};

  // Called by an inline handler once it holds its slot (inline_running counts it).
  void InlineStarted() {
    inline_starts.fetch_add(1);
    if (rescuer_asleep.load()) {
      MutexLock l(stop_mu);
      rescuer_asleep.store(false);
      rescue_cv.NotifyOne();
    }
  }

  bool Tls() const { return !opts.cert_file.empty() || !opts.key_file.empty(); }
  RequestLimits Limits() const { return {opts.max_header_bytes, opts.max_body_bytes}; }

  bool Reserve(uint64_t n) {
    uint64_t cur = buffered.load();
    do {
      if (cur + n > opts.max_buffered_body_bytes) return false;
    } while (!buffered.compare_exchange_weak(cur, cur + n));
    return true;
  }
  void Release(uint64_t n) { buffered.fetch_sub(n); }

  // Takes one of the inline_handlers slots (false: every slot is busy, the pool runs it).
  bool TryInline() {
    int cur = inline_running.load();
    do {
      if (cur >= opts.inline_handlers) return false;
    } while (!inline_running.compare_exchange_weak(cur, cur + 1));
    return true;
  }

  std::list<std::weak_ptr<SessionBase>>::iterator Register(std::weak_ptr<SessionBase> s) {
    MutexLock l(reg_mu);
    return sessions.insert(sessions.end(), std::move(s));
  }
  void Unregister(std::list<std::weak_ptr<SessionBase>>::iterator it) {
    MutexLock l(reg_mu);
    sessions.erase(it);
  }
  // Closes the connection that has been quiet the longest among those idle or reading a header.
  // Every reference taken under reg_mu is dropped after it is released: a connection that finished
  // on another I/O thread meanwhile may be left with ours as its last reference, and its destructor
  // unregisters itself (takes reg_mu). Dropping it under the lock deadlocked the acceptor.
  bool EvictOne() {
    std::vector<std::shared_ptr<SessionBase>> seen;  // destroyed after the lock below
    std::shared_ptr<SessionBase> victim;
    {
      MutexLock l(reg_mu);
      seen.reserve(sessions.size());
      int64_t oldest = INT64_MAX;
      for (auto& w : sessions) {
        auto s = w.lock();
        if (!s) continue;
        seen.push_back(s);
        if (s->phase.load() != kEvictable) continue;
        const int64_t t = s->last_active_ns.load();
        if (t < oldest) {
          oldest = t;
          victim = std::move(s);
        }
      }
      int expected = kEvictable;
      if (!victim || !victim->phase.compare_exchange_strong(expected, kEvicting)) return false;
    }
    evicted.fetch_add(1);
    victim->Evict();
    return true;
  }

  // The handler for (method, path): 404 when no route has the path, 405 when none has the method.
  const HttpHandler* Find(const std::string& method, const std::string& path, int* status) const {
    bool path_seen = false;
    for (const auto& r : routes) {
      if (r.path != path) continue;
      path_seen = true;
      if (r.method == method) return &r.handler;
    }
    *status = path_seen ? 405 : 404;
    return nullptr;
  }

  std::shared_ptr<CertPair> Current() {
    MutexLock l(cert_mu);
    return cert;
  }

  // Reloads when either file changed; keeps the previous pair when the new one does not load.
  void MaybeReload(bool force) {
    const int64_t cs = FileStamp(opts.cert_file), ks = FileStamp(opts.key_file);
    {
      MutexLock l(cert_mu);
      if (!force && cs == cert_stamp && ks == key_stamp) return;
    }
    auto pair = LoadCertPair(opts.cert_file, opts.key_file);
    if (!pair.ok()) {
      MutexLock l(cert_mu);
      // Once per change of the files: a half-written pair becomes valid at its next change.
      cert_stamp = cs;
      key_stamp = ks;
      rejects.fetch_add(1);
      spdlog::error("TLS certificate not reloaded, the previous one keeps serving: {}",
                    std::string(pair.status().message()));
      return;
    }
    MutexLock l(cert_mu);
    cert = std::move(*pair);
    cert_stamp = cs;
    key_stamp = ks;
    loads.fetch_add(1);
    if (!force) spdlog::info("TLS certificate reloaded from {}", opts.cert_file);
  }

  // OpenSSL certificate callback: installs the current pair on each new connection.
  static int CertCallback(SSL* ssl, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    std::shared_ptr<CertPair> pair = self->Current();
    if (!pair) return 0;
    if (SSL_use_certificate(ssl, pair->leaf) != 1 || SSL_use_PrivateKey(ssl, pair->key) != 1)
      return 0;
    SSL_clear_chain_certs(ssl);
    for (X509* c : pair->chain) SSL_add1_chain_cert(ssl, c);
    return 1;
  }

  void DoAccept();
  void Admit(tcp::socket socket, Loop& loop);
  void Rescue();
};

namespace {
constexpr std::chrono::milliseconds kRescueAfter{20};
constexpr int kRescuerQuietPolls = 50;  // 0.5 s without inline handlers: the rescuer sleeps
// True on the rescuer thread: it never runs a handler inline (it must stay free for other loops).
thread_local bool t_rescuing = false;

// One connection. Stream is beast::tcp_stream (plain) or beast::ssl_stream<beast::tcp_stream>.
// Everything below runs on the connection's loop (one thread), except a handler on the worker pool.
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <class... Args>
  Session(HttpServer::Impl* srv, HttpServer::Impl::Loop* loop, Args&&... args)
      : srv_(srv), loop_(loop), stream_(std::forward<Args>(args)...) {
    srv_->open.fetch_add(1);
    loop_->sessions.fetch_add(1);
  }
  ~Session() override {
    if (reserved_) srv_->Release(reserved_);
    if (registered_) srv_->Unregister(reg_it_);
    srv_->open.fetch_sub(1);
    loop_->sessions.fetch_sub(1);
  }

  // On the acceptor's strand, before Run: an admitted connection can be evicted at once.
  void Enroll() {
    reg_it_ = srv_->Register(this->shared_from_this());
    registered_ = true;
  }

  void Run() {
    deadline_ = Clock::now() + srv_->opts.header_timeout;
    if constexpr (kTls) {
      Lowest().expires_at(deadline_);
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Failed(ec);
                                self->StartRequest(/*first=*/true);
                              });
    } else {
      StartRequest(/*first=*/true);
    }
  }

  void Evict() override {
    net::post(stream_.get_executor(),
              [self = this->shared_from_this()] { self->Lowest().close(); });
  }
  void CloseNow() override { Lowest().close(); }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void Failed(const beast::error_code& ec) {
    if (ec == beast::error::timeout) srv_->timed_out.fetch_add(1);
    Lowest().close();
  }

  // Becomes evictable again (idle or reading a header); false when an eviction already claimed it.
  bool SetPhase(int from, int to) { return phase.compare_exchange_strong(from, to); }

  void StartRequest(bool first) {
    if (srv_->closing.load()) return Lowest().close();
    reader_ = std::make_unique<RequestReader>(srv_->Limits());
    if (!first && !SetPhase(kBusy, kEvictable)) return Lowest().close();
    in_header_ = buf_.size() > 0;
    // The first request of a connection and one whose bytes already arrived (pipelined) get the
    // header timeout; a keep-alive connection waits idle_timeout for the next request's first byte.
    if (!first)
      deadline_ = Clock::now() + (in_header_ ? srv_->opts.header_timeout : srv_->opts.idle_timeout);
    in_header_ = in_header_ || first;
    Parse();
  }

  void DoRead() {
    Lowest().expires_at(deadline_);
    stream_.async_read_some(
        buf_.prepare(kReadChunk),
        [self = this->shared_from_this()](beast::error_code ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(beast::error_code ec, size_t n) {
    if (ec == net::error::eof || ec == net::ssl::error::stream_truncated) {
      reader_->FeedEof();
      if (reader_->state() == RequestReader::State::kDone) return Dispatch(/*peer_closed=*/true);
      if (reader_->state() == RequestReader::State::kError)
        return Reject(reader_->error_status(), reader_->error_reason());
      return Lowest().close();
    }
    if (ec) return Failed(ec);
    buf_.commit(n);
    last_active_ns.store(NowNs());
    if (!in_header_) {  // the first byte after an idle wait: the header clock starts
      in_header_ = true;
      deadline_ = Clock::now() + srv_->opts.header_timeout;
    }
    Parse();
  }

  void Parse() {
    for (;;) {
      const auto data = buf_.data();
      const size_t used =
          reader_->Feed(std::string_view(static_cast<const char*>(data.data()), data.size()));
      buf_.consume(used);
      switch (reader_->state()) {
        case RequestReader::State::kNeedMore:
          return DoRead();
        case RequestReader::State::kError:
          return Reject(reader_->error_status(), reader_->error_reason());
        case RequestReader::State::kDone:
          return Dispatch(false);
        case RequestReader::State::kHeaderDone: {
          if (!SetPhase(kEvictable, kBusy)) return Lowest().close();
          const uint64_t want = reader_->body_reservation();
          if (want > 0) {
            if (!srv_->Reserve(want))
              return Reject(503, "too many request bodies in flight; retry");
            reserved_ = want;
          }
          deadline_ = Clock::now() + srv_->opts.body_timeout;
          reader_->AcceptBody();
          if (want > 0 && reader_->expects_continue() &&
              reader_->state() == RequestReader::State::kNeedMore && buf_.size() == 0) {
            Lowest().expires_at(deadline_);
            net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) return self->Failed(ec);
                               self->Parse();
                             });
            return;
          }
          continue;
        }
      }
    }
  }

  void Dispatch(bool peer_closed) {
    SetPhase(kEvictable, kBusy);
    const bool keep = reader_->keep_alive() && !peer_closed;
    const int version = reader_->version();
    auto req = std::make_shared<HttpRequest>(reader_->Take());
    const uint64_t reserved = reserved_;
    reserved_ = 0;  // released once the body is gone
    int status = 0;
    const HttpHandler* handler = srv_->Find(req->method, req->path, &status);
    if (handler == nullptr) {
      srv_->Release(reserved);
      return Reply(HttpResponse{status, "text/plain",
                                status == 404 ? "not found\n" : "method not allowed\n"},
                   version, keep);
    }
    srv_->handled.fetch_add(1);
    // A request on the only connection of its loop, while fewer than inline_handlers handlers run
    // inline (kube-scheduler's /filter calls: one scheduling cycle at a time, on a connection of
    // its own), is answered on this I/O thread: no hand-off to the pool and back. With other
    // connections on the loop it goes to the pool, so that their I/O never waits for it (inline
    // with 8 busy connections a loop cost 9 % of end-to-end pods/s; docs/benchmarks.md).
    if (!t_rescuing && loop_->sessions.load() == 1 && srv_->TryInline()) {
      loop_->inline_since_ns.store(NowNs());
      srv_->InlineStarted();
      HttpResponse resp = RunHandler(*srv_, *handler, *req, reserved);
      loop_->inline_since_ns.store(0);
      srv_->inline_running.fetch_sub(1);
      return Reply(std::move(resp), version, keep);
    }
    net::post(*srv_->pool,
              [self = this->shared_from_this(), srv = srv_, handler, req, reserved, version, keep] {
                HttpResponse resp = RunHandler(*srv, *handler, *req, reserved);
                net::post(self->stream_.get_executor(),
                          [self, resp = std::move(resp), version, keep]() mutable {
                            self->Reply(std::move(resp), version, keep);
                          });
              });
  }

  // Runs a route's handler (after the body's nesting check) and releases the request's body
  // reservation.
  static HttpResponse RunHandler(HttpServer::Impl& srv, const HttpHandler& handler,
                                 HttpRequest& req, uint64_t reserved) {
    HttpResponse resp;
    Status depth =
        srv.opts.max_json_depth > 0 && !req.body.empty()
            ? core::jsonutil::CheckDepth(req.body, "request body", srv.opts.max_json_depth)
            : OkStatus();
    if (!depth.ok()) {
      srv.rejected.fetch_add(1);
      resp = HttpResponse{400, "text/plain", std::string(depth.message()) + "\n"};
    } else {
      try {
        resp = handler(req);
      } catch (const std::exception& e) {
        spdlog::error("HTTP handler for {} {} threw: {}", req.method, req.path, e.what());
        resp = HttpResponse{500, "text/plain", "internal error\n"};
      }
    }
    req.body.clear();
    req.body.shrink_to_fit();
    srv.Release(reserved);
    return resp;
  }

  void Reject(int status, const std::string& reason) {
    srv_->rejected.fetch_add(1);
    phase.store(kClosing);
    Reply(HttpResponse{status, "text/plain", reason + "\n"}, reader_ ? reader_->version() : 11,
          /*keep=*/false);
  }

  void Reply(HttpResponse r, int version, bool keep) {
    res_ = std::make_unique<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(r.status), version == 10 ? 10 : 11);
    res_->set(bhttp::field::content_type, r.content_type);
    res_->body() = std::move(r.body);
    res_->keep_alive(keep);
    res_->prepare_payload();
    deadline_ = Clock::now() + srv_->opts.write_timeout;
    Lowest().expires_at(deadline_);
    bhttp::async_write(stream_, *res_,
                       [self = this->shared_from_this(), keep](beast::error_code ec, size_t) {
                         self->res_.reset();
                         if (ec) return self->Failed(ec);
                         if (!keep) return self->Finish();
                         self->StartRequest(/*first=*/false);
                       });
  }

  // After a final response: stop sending (plain: FIN), then read and drop what the client still
  // sends (a refused body) for a moment, so that closing does not reset the connection before the
  // client has read the response; TLS then says close_notify. Bounded by kDrainTimeout and the body
  // cap.
  void Finish() {
    phase.store(kClosing);
    Lowest().expires_after(kDrainTimeout);
    if constexpr (!kTls) {
      beast::error_code ec;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    }
    Drain();
  }

  void Drain() {
    buf_.clear();
    stream_.async_read_some(buf_.prepare(kReadChunk), [self = this->shared_from_this()](
                                                          beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (!ec && self->drained_ <= self->srv_->opts.max_body_bytes + kReadChunk)
        return self->Drain();
      if constexpr (kTls) {
        if (ec != beast::error::timeout) {
          self->stream_.async_shutdown([self](beast::error_code) { self->Lowest().close(); });
          return;
        }
      }
      self->Lowest().close();
    });
  }

  HttpServer::Impl* srv_;
  HttpServer::Impl::Loop* loop_;
  Stream stream_;
  beast::flat_buffer buf_;
  std::unique_ptr<RequestReader> reader_;
  std::unique_ptr<bhttp::response<bhttp::string_body>> res_;
  Clock::time_point deadline_;
  uint64_t reserved_ = 0;
  size_t drained_ = 0;
  bool in_header_ = false, registered_ = false;
  std::list<std::weak_ptr<SessionBase>>::iterator reg_it_;
};

}  // namespace

void HttpServer::Impl::DoAccept() {
  // The connection's socket lives on the next loop in turn.
  Loop& loop = *loops[next_loop.fetch_add(1) % loops.size()];
  acceptor->async_accept(net::make_strand(loop.ctx),
                         [this, &loop](beast::error_code ec, tcp::socket socket) {
                           if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
                           if (ec) {
                             // Out of descriptors (EMFILE/ENFILE) or a transient error: wait a
                             // little instead of spinning.
                             spdlog::warn("HTTP accept on {} failed: {}", opts.bind, ec.message());
                             accept_retry->expires_after(kAcceptRetry);
                             accept_retry->async_wait([this](beast::error_code e) {
                               if (!e) DoAccept();
                             });
                             return;
                           }
                           Admit(std::move(socket), loop);
                           DoAccept();
                         });
}

void HttpServer::Impl::Admit(tcp::socket socket, Loop& loop) {
  beast::error_code ec;
  if (closing.load()) return (void)socket.close(ec);
  socket.set_option(tcp::no_delay(true), ec);
  if (static_cast<size_t>(open.load()) >= opts.max_connections && !EvictOne()) {
    refused.fetch_add(1);
    if (!Tls()) {
      static constexpr std::string_view kBusyReply =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
          "Connection: close\r\n\r\ntoo many connections\n";
      socket.non_blocking(true, ec);
      socket.write_some(net::buffer(kBusyReply.data(), kBusyReply.size()), ec);
    }
    socket.close(ec);
    return;
  }
  accepted.fetch_add(1);
  // Admit runs on the acceptor's strand; the connection starts on its own.
  const auto ex = socket.get_executor();
  auto start = [&ex](auto session) {
    session->Enroll();
    net::post(ex, [session] { session->Run(); });
  };
  if (Tls()) {
    start(std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        this, &loop, std::move(socket), *ssl_ctx));
  } else {
    start(std::make_shared<Session<beast::tcp_stream>>(this, &loop, std::move(socket)));
  }
}

void HttpServer::Impl::Rescue() {
  t_rescuing = true;
  MutexLock l(stop_mu);
  uint64_t seen = inline_starts.load();
  int quiet = 0;
  while (!stopping) {
    if (quiet >= kRescuerQuietPolls) {
      // Sequentially consistent with InlineStarted: either the check below sees a handler that
      // took its slot after the last poll, or that handler sees the flag and wakes us (under
      // stop_mu, which we hold until the wait releases it, so the notification is not lost).
      rescuer_asleep.store(true);
      if (inline_running.load() == 0 && inline_starts.load() == seen)
        rescue_cv.Wait(stop_mu, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(stop_mu) {
          return stopping || !rescuer_asleep.load();
        });
      rescuer_asleep.store(false);
      quiet = 0;
    } else {
      rescue_cv.WaitFor(stop_mu, kRescueAfter / 2);
    }
    if (stopping) break;
    rescuer_polls.fetch_add(1);
    const uint64_t starts = inline_starts.load();
    quiet = (starts == seen && inline_running.load() == 0) ? quiet + 1 : 0;
    seen = starts;
    l.Unlock();
    for (auto& loop : loops) {
      const int64_t since = loop->inline_since_ns.load();
      if (since == 0 || NowNs() - since < std::chrono::nanoseconds(kRescueAfter).count()) continue;
      // Run the loop's other work until that handler returns (or the server stops).
      while (loop->inline_since_ns.load() == since && !closing.load())
        loop->ctx.run_one_for(kRescueAfter);
    }
    l.Lock();
  }
}

HttpServer::HttpServer(HttpServerOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
}

HttpServer::~HttpServer() {
  Stop();
}

bool HttpServer::tls() const {
  return impl_->Tls();
}
int HttpServer::port() const {
  return impl_->port;
}
int64_t HttpServer::cert_loads() const {
  return impl_->loads.load();
}
int64_t HttpServer::cert_rejects() const {
  return impl_->rejects.load();
}

HttpServerStats HttpServer::stats() const {
  HttpServerStats s;
  s.accepted = impl_->accepted.load();
  s.evicted = impl_->evicted.load();
  s.refused = impl_->refused.load();
  s.timed_out = impl_->timed_out.load();
  s.rejected = impl_->rejected.load();
  s.handled = impl_->handled.load();
  s.open = impl_->open.load();
  s.buffered_body_bytes = static_cast<int64_t>(impl_->buffered.load());
  s.rescuer_polls = impl_->rescuer_polls.load();
  return s;
}

void HttpServer::Route(const std::string& method, const std::string& path, HttpHandler handler) {
  impl_->routes.push_back({method, path, std::move(handler)});
}

Status HttpServer::Start() {
  Impl& im = *impl_;
  if (im.started) return FailedPrecondition("HTTP server on ", im.opts.bind, " already started");
  std::string host;
  int port = 0;
  HAMI_RETURN_IF_ERROR(SplitHostPort(im.opts.bind, &host, &port));
  if (im.opts.threads < 1 || im.opts.io_threads < 1 || im.opts.max_connections < 1)
    return InvalidArgument(
        "HTTP server: threads, io_threads and max_connections must be at least 1");
  if (im.opts.inline_handlers < 0)
    return InvalidArgument("HTTP server: inline_handlers must not be negative");
  if (im.Tls()) {
    if (im.opts.cert_file.empty() || im.opts.key_file.empty())
      return InvalidArgument("--cert-file and --key-file must be given together");
    auto pair = LoadCertPair(im.opts.cert_file, im.opts.key_file);
    if (!pair.ok()) return pair.status();
    im.ssl_ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
    HAMI_RETURN_IF_ERROR(ConfigureServerContext(im.ssl_ctx->native_handle()));
    SSL_CTX_set_cert_cb(im.ssl_ctx->native_handle(), &Impl::CertCallback, &im);
    {
      MutexLock l(im.cert_mu);
      im.cert = std::move(*pair);
      im.cert_stamp = FileStamp(im.opts.cert_file);
      im.key_stamp = FileStamp(im.opts.key_file);
    }
    im.loads.fetch_add(1);
  }
  beast::error_code ec;
  const auto addr = net::ip::make_address(host, ec);
  if (ec) return InvalidArgument("address \"", im.opts.bind, "\": ", host, " is not an IP address");
  const tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  for (int i = 0; i < im.opts.io_threads; ++i) im.loops.push_back(std::make_unique<Impl::Loop>());
  im.acceptor = std::make_unique<tcp::acceptor>(net::make_strand(im.loops[0]->ctx));
  im.accept_retry = std::make_unique<net::steady_timer>(im.acceptor->get_executor());
  tcp::acceptor& acc = *im.acceptor;
  acc.open(ep.protocol(), ec);
  if (!ec) acc.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(kListenBacklog, ec);
  if (ec) return Unavailable("cannot listen on ", im.opts.bind, ": ", ec.message());
  im.port = acc.local_endpoint().port();
  im.started = true;
  im.pool = std::make_unique<net::thread_pool>(static_cast<size_t>(im.opts.threads));
  im.DoAccept();
  for (auto& loop : im.loops) loop->thread = std::thread([l = loop.get()] { l->ctx.run(); });
  if (im.opts.inline_handlers > 0) im.rescuer = std::thread([&im] { im.Rescue(); });
  if (im.Tls()) {
    im.watcher = std::thread([&im] {
      MutexLock l(im.stop_mu);
      while (!im.stopping) {
        im.stop_cv.WaitFor(im.stop_mu, im.opts.reload_interval);
        if (im.stopping) break;
        l.Unlock();
        im.MaybeReload(false);
        l.Lock();
      }
    });
  }
  return OkStatus();
}

void HttpServer::Stop() {
  Impl& im = *impl_;
  if (!im.started || im.stopped) return;
  im.stopped = true;
  {
    MutexLock l(im.stop_mu);
    im.stopping = true;
  }
  im.stop_cv.NotifyAll();
  im.rescue_cv.NotifyAll();
  if (im.watcher.joinable()) im.watcher.join();
  // Close the listener and every connection on their own loops, let running handlers finish, then
  // let the I/O threads run out of work (bounded: whatever is left is cut off by stop()).
  im.closing = true;
  if (im.rescuer.joinable()) im.rescuer.join();  // leaves a loop it helps once closing is set
  net::post(im.acceptor->get_executor(), [&im] {
    beast::error_code ec;
    im.acceptor->close(ec);
    im.accept_retry->cancel();
  });
  auto live = [&im] {
    std::vector<std::shared_ptr<SessionBase>> out;
    MutexLock l(im.reg_mu);
    for (auto& w : im.sessions)
      if (auto s = w.lock()) out.push_back(std::move(s));
    return out;
  };
  for (auto& s : live()) s->Evict();
  im.pool->stop();
  im.pool->join();
  for (auto& loop : im.loops) loop->work.reset();
  auto all_stopped = [&im] {
    return std::all_of(im.loops.begin(), im.loops.end(),
                       [](const auto& l) { return l->ctx.stopped(); });
  };
  for (int i = 0; i < 200 && !all_stopped(); ++i) {
    for (auto& s : live()) s->Evict();  // a connection admitted meanwhile
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& loop : im.loops) loop->ctx.stop();
  for (auto& loop : im.loops) loop->thread.join();
  for (auto& s : live()) s->CloseNow();  // no I/O thread runs now
}

}  // namespace hami::http
