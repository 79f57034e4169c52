#include "extender/http_server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/log.h"

namespace hami::extender {
namespace {

// One loaded certificate chain + key. Freed when the last handshake using it is done.
struct CertPair {
  X509* leaf = nullptr;
  std::vector<X509*> chain;
  EVP_PKEY* key = nullptr;
  ~CertPair() {
    if (leaf) X509_free(leaf);
    for (X509* c : chain) X509_free(c);
    if (key) EVP_PKEY_free(key);
  }
};

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

StatusOr<std::shared_ptr<CertPair>> LoadPair(const std::string& cert_file, const std::string& key_file) {
  HAMI_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(cert_file));
  HAMI_ASSIGN_OR_RETURN(std::string key_pem, ReadFile(key_file));
  auto pair = std::make_shared<CertPair>();
  BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  pair->leaf = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  while (pair->leaf) {
    X509* c = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    if (!c) break;
    pair->chain.push_back(c);
  }
  BIO_free(cb);
  ERR_clear_error();
  if (!pair->leaf) return InvalidArgument(cert_file, ": no PEM certificate found");
  BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  pair->key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  ERR_clear_error();
  if (!pair->key) return InvalidArgument(key_file, ": no PEM private key found");
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    ERR_clear_error();
    return InvalidArgument(key_file, ": the private key does not match the certificate in ", cert_file);
  }
  return pair;
}

int64_t MtimeNanos(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  // mtime, size and inode: a rename-over (kubelet's atomic secret update) changes the inode.
  return (static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec) ^
         (static_cast<int64_t>(st.st_size) << 20) ^ static_cast<int64_t>(st.st_ino);
}

}  // namespace

Status SplitHostPort(const std::string& bind, std::string* host, int* port) {
  const size_t colon = bind.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("address \"", bind, "\" must be ADDR:PORT");
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

constexpr int kListenBacklog = 1024;

struct HttpServer::Impl {
  HttpServerOptions opts;
  std::atomic<int> listen_fd{-1};
  std::unique_ptr<httplib::Server> server;
  std::thread thread, watcher;
  int port = 0;
  std::atomic<int64_t> loads{0};

  std::mutex cert_mu;
  std::shared_ptr<CertPair> cert;  // guarded by cert_mu
  int64_t cert_mtime = 0, key_mtime = 0;

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;

  std::shared_ptr<CertPair> Current() {
    std::lock_guard<std::mutex> l(cert_mu);
    return cert;
  }

  // Reloads when either file changed; keeps the previous pair when the new one is incomplete.
  void MaybeReload(bool force) {
    const int64_t cm = MtimeNanos(opts.cert_file), km = MtimeNanos(opts.key_file);
    if (!force && cm == cert_mtime && km == key_mtime) return;
    auto pair = LoadPair(opts.cert_file, opts.key_file);
    if (!pair.ok()) {
      spdlog::warn("TLS certificate not reloaded: {}", std::string(pair.status().message()));
      return;
    }
    std::lock_guard<std::mutex> l(cert_mu);
    cert = std::move(*pair);
    cert_mtime = cm;
    key_mtime = km;
    loads.fetch_add(1);
    if (!force) spdlog::info("TLS certificate reloaded from {}", opts.cert_file);
  }

  // OpenSSL certificate callback: installs the current pair on each new connection.
  static int CertCallback(SSL* ssl, void* arg) {
    auto* self = static_cast<Impl*>(arg);
    std::shared_ptr<CertPair> pair = self->Current();
    if (!pair) return 0;
    if (SSL_use_certificate(ssl, pair->leaf) != 1 || SSL_use_PrivateKey(ssl, pair->key) != 1) return 0;
    SSL_clear_chain_certs(ssl);
    for (X509* c : pair->chain) SSL_add1_chain_cert(ssl, c);
    return 1;
  }
};

HttpServer::HttpServer(HttpServerOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  Impl* impl = impl_.get();
  if (tls()) {
    impl_->server = std::make_unique<httplib::SSLServer>([impl](SSL_CTX& ctx) {
      SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
      SSL_CTX_set_cert_cb(&ctx, &Impl::CertCallback, impl);
      return true;
    });
  } else {
    impl_->server = std::make_unique<httplib::Server>();
  }
  const int threads = impl_->opts.threads;
  impl_->server->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  impl_->server->set_payload_max_length(impl_->opts.max_body_bytes);
  impl_->server->set_keep_alive_max_count(1000000);
  impl_->server->set_tcp_nodelay(true);
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of kube-scheduler or API-server
  // connections overflows it (connections stall or fail). Remember the listening socket so Start()
  // can raise the backlog; keep the library's default SO_REUSEADDR.
  impl_->server->set_socket_options([impl](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    impl->listen_fd = sock;
  });
}

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::tls() const { return !impl_->opts.cert_file.empty() || !impl_->opts.key_file.empty(); }
int HttpServer::port() const { return impl_->port; }
int64_t HttpServer::cert_loads() const { return impl_->loads.load(); }

void HttpServer::Route(const std::string& method, const std::string& path, HttpHandler handler) {
  auto fn = [handler = std::move(handler), method](const httplib::Request& req, httplib::Response& res) {
    HttpRequest r{method, req.path, req.body};
    HttpResponse out = handler(r);
    res.status = out.status;
    res.set_content(out.body, out.content_type.c_str());
  };
  if (method == "GET") impl_->server->Get(path, fn);
  else impl_->server->Post(path, fn);
}

Status HttpServer::Start() {
  std::string host;
  int port = 0;
  HAMI_RETURN_IF_ERROR(SplitHostPort(impl_->opts.bind, &host, &port));
  if (tls()) {
    if (impl_->opts.cert_file.empty() || impl_->opts.key_file.empty())
      return InvalidArgument("--cert-file and --key-file must be given together");
    auto pair = LoadPair(impl_->opts.cert_file, impl_->opts.key_file);
    if (!pair.ok()) return pair.status();
    impl_->MaybeReload(/*force=*/true);
    if (!impl_->server->is_valid()) return Internal("cannot create the TLS context");
  }
  if (port == 0) {
    impl_->port = impl_->server->bind_to_any_port(host);
  } else {
    impl_->port = impl_->server->bind_to_port(host, port) ? port : -1;
  }
  if (impl_->port <= 0) return Unavailable("cannot listen on ", impl_->opts.bind, " (address in use or not local?)");
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, kListenBacklog);
  impl_->thread = std::thread([this] { impl_->server->listen_after_bind(); });
  if (tls()) {
    impl_->watcher = std::thread([this] {
      std::unique_lock<std::mutex> l(impl_->stop_mu);
      while (!impl_->stopping) {
        impl_->stop_cv.wait_for(l, impl_->opts.reload_interval);
        if (impl_->stopping) break;
        l.unlock();
        impl_->MaybeReload(false);
        l.lock();
      }
    });
  }
  return OkStatus();
}

void HttpServer::Stop() {
  {
    std::lock_guard<std::mutex> l(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->server) impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (impl_->watcher.joinable()) impl_->watcher.join();
}

}  // namespace hami::extender
