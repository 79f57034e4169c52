#include "k8s/client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "common/mutex.h"
#include "common/rng.h"
#include "k8s/errors.h"
#include "k8s/json_prune.h"
#include "k8s/names.h"

namespace hami::k8s {
namespace {

std::once_flag g_curl_once;

std::string UrlEscape(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string QueryString(const ListOptions& o, bool watch, const std::string& cont) {
  std::string q;
  auto add = [&](std::string_view k, std::string_view v) {
    q += q.empty() ? "?" : "&";
    q += std::string(k) + "=" + UrlEscape(v);
  };
  if (watch) add("watch", "1");
  if (!o.label_selector.empty()) add("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) add("fieldSelector", o.field_selector);
  if (!o.resource_version.empty()) add("resourceVersion", o.resource_version);
  if (watch && o.allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  if (watch && o.timeout_seconds > 0) add("timeoutSeconds", std::to_string(o.timeout_seconds));
  if (!watch && o.limit > 0) add("limit", std::to_string(o.limit));
  if (!cont.empty()) add("continue", cont);
  return q;
}

// Merge patch (RFC 7386) that turns `from` into `to`.
Json CreateMergePatch(const Json& from, const Json& to) {
  if (!from.is_object() || !to.is_object()) return to;
  Json patch = Json::object();
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (!to.contains(it.key())) patch[it.key()] = nullptr;
  }
  for (auto it = to.begin(); it != to.end(); ++it) {
    auto f = from.find(it.key());
    if (f == from.end()) {
      patch[it.key()] = *it;
    } else if (*f != *it) {
      patch[it.key()] = (f->is_object() && it->is_object()) ? CreateMergePatch(*f, *it) : *it;
    }
  }
  return patch;
}

struct CurlSlist {
  curl_slist* list = nullptr;
  void Add(const std::string& h) { list = curl_slist_append(list, h.c_str()); }
  ~CurlSlist() { curl_slist_free_all(list); }
};

// A response body being read, up to a cap: past it the transfer is aborted (CURLE_WRITE_ERROR)
// and `over` set, so an endless body stops at the cap instead of at the request timeout.
struct CappedBody {
  std::string* out;
  size_t cap;
  bool over = false;
};

size_t AppendBody(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* b = static_cast<CappedBody*>(userdata);
  const size_t n = size * nmemb;
  if (n > b->cap - std::min(b->cap, b->out->size())) {
    b->over = true;
    return 0;
  }
  b->out->append(ptr, n);
  return n;
}

size_t CaptureRetryAfter(char* ptr, size_t size, size_t nmemb, void* userdata) {
  std::string_view h(ptr, size * nmemb);
  constexpr std::string_view kName = "retry-after:";
  if (h.size() > kName.size()) {
    std::string lower(h.substr(0, kName.size()));
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == kName) {
      // Delay-seconds only (RFC 9110 10.2.3); an HTTP-date, or anything else, is not honoured.
      int64_t seconds = 0;
      const std::string_view value = h.substr(kName.size());
      if (absl::SimpleAtoi(absl::string_view(value.data(), value.size()), &seconds) && seconds >= 0)
        *static_cast<int64_t*>(userdata) = seconds;
    }
  }
  return size * nmemb;
}

std::string ReadTokenFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && s.size() < (1 << 20)) s.append(buf, n);
  std::fclose(f);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string_view PatchContentType(PatchType type) {
  return type == PatchType::kJson    ? "application/json-patch+json"
         : type == PatchType::kMerge ? "application/merge-patch+json"
                                     : "application/strategic-merge-patch+json";
}

}  // namespace

std::string ResourcePath(const Resource& r, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  std::string p(r.api_prefix);
  if (r.namespaced && !ns.empty()) p += "/namespaces/" + UrlEscape(ns);
  p += "/";
  p += r.plural;
  if (!name.empty()) p += "/" + UrlEscape(name);
  if (!subresource.empty()) p += "/" + std::string(subresource);
  return p;
}

StatusOr<std::string> CheckedResourcePath(const Resource& r, std::string_view ns,
                                          std::string_view name, std::string_view subresource) {
  if (r.namespaced && !ns.empty())
    HAMI_RETURN_IF_ERROR(ValidateDns1123Label(ns, StrCat(r.kind, " namespace")));
  if (!name.empty()) HAMI_RETURN_IF_ERROR(ValidateDns1123Subdomain(name, StrCat(r.kind, " name")));
  if (name.empty() && !subresource.empty())
    return InvalidArgument(r.kind, " subresource \"", subresource, "\" needs an object name");
  for (char c : subresource)
    if (c < 'a' || c > 'z')
      return InvalidArgument(r.kind, " subresource \"", subresource, "\" is not a lowercase word");
  return ResourcePath(r, ns, name, subresource);
}

StatusOr<WatchEvent> ParseWatchEvent(std::string_view line) {
  auto j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return InvalidArgument("watch event is not valid JSON: ", std::string(line.substr(0, 120)));
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return InvalidArgument("watch event has no string \"type\"");
  }
  if (!j.contains("object") || !j["object"].is_object())
    return InvalidArgument("watch event has no \"object\"");
  const std::string& t = j["type"].get_ref<const std::string&>();
  WatchEvent ev;
  if (t == "ADDED")
    ev.type = WatchEvent::Type::kAdded;
  else if (t == "MODIFIED")
    ev.type = WatchEvent::Type::kModified;
  else if (t == "DELETED")
    ev.type = WatchEvent::Type::kDeleted;
  else if (t == "BOOKMARK")
    ev.type = WatchEvent::Type::kBookmark;
  else if (t == "ERROR")
    ev.type = WatchEvent::Type::kError;
  else
    return InvalidArgument("unknown watch event type \"", t, "\"");
  ev.object = std::move(j["object"]);
  return ev;
}

struct Client::Impl {
  ClientConfig cfg;
  ClientOptions opts;
  const Clock* clock;
  RateLimiter limiter;
  CURLSH* share = nullptr;
  // libcurl's shared DNS and TLS-session caches, one lock per kind (taken and released by curl).
  Mutex share_mu[CURL_LOCK_DATA_LAST];

  Mutex pool_mu;
  // Idle handles, each with its own kept-alive connections.
  std::vector<CURL*> pool ABSL_GUARDED_BY(pool_mu);

  Mutex rng_mu;
  Rng rng ABSL_GUARDED_BY(rng_mu);

  // The bearer token re-read from cfg.token_file (cfg.bearer_token when there is none).
  Mutex token_mu;
  std::string token ABSL_GUARDED_BY(token_mu);
  int64_t token_read_ns ABSL_GUARDED_BY(token_mu) = 0;

  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> retries{0};

  Impl(ClientConfig c, ClientOptions o)
      : cfg(std::move(c)),
        opts(std::move(o)),
        clock(opts.clock ? opts.clock : &RealClock::Get()),
        limiter(cfg.qps, cfg.burst, *clock),
        rng(opts.seed ? opts.seed
                      : static_cast<uint64_t>(clock->MonotonicNanos()) ^ 0x9e3779b97f4a7c15ULL),
        token(cfg.bearer_token) {
    InitUrl();
    if (!opts.sleep) {
      opts.sleep = [](int64_t ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); };
    }
    share = curl_share_init();
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(share, CURLSHOPT_USERDATA, this);
    // Lock and unlock come in separate callbacks: nothing for the analysis to pair.
    curl_share_setopt(
        share, CURLSHOPT_LOCKFUNC,
        +[](CURL*, curl_lock_data d, curl_lock_access, void* self)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { static_cast<Impl*>(self)->share_mu[d].lock(); });
    curl_share_setopt(
        share, CURLSHOPT_UNLOCKFUNC,
        +[](CURL*, curl_lock_data d, void* self)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { static_cast<Impl*>(self)->share_mu[d].unlock(); });
  }

  ~Impl() {
    for (CURL* h : pool) curl_easy_cleanup(h);
    curl_share_cleanup(share);
  }

  CURL* Acquire() {
    {
      MutexLock lock(pool_mu);
      if (!pool.empty()) {
        CURL* h = pool.back();
        pool.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  void Release(CURL* h) {
    MutexLock lock(pool_mu);
    pool.push_back(h);
  }

  std::string Token() {
    if (cfg.token_file.empty()) return cfg.bearer_token;
    MutexLock lock(token_mu);
    const int64_t now = clock->MonotonicNanos();
    if (token_read_ns == 0 || now - token_read_ns > 60'000'000'000LL) {
      std::string t = ReadTokenFile(cfg.token_file);
      if (!t.empty()) token = t;
      token_read_ns = now == 0 ? 1 : now;
    }
    return token;
  }

  // Common options of every request. `headers` must outlive the transfer.
  void Setup(CURL* h, std::string_view method, const std::string& url, CurlSlist& headers,
             std::string_view content_type, bool watch) {
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_SHARE, share);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(cfg.connect_timeout_ms));
    if (!watch) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(cfg.request_timeout_ms));
    curl_easy_setopt(h, CURLOPT_USERAGENT, cfg.user_agent.c_str());
    if (method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
    }
    headers.Add("Accept: application/json");
    if (!content_type.empty()) headers.Add(StrCat("Content-Type: ", content_type));
    const std::string tok = Token();
    if (!tok.empty()) headers.Add("Authorization: Bearer " + tok);
    if (!cfg.username.empty()) {
      curl_easy_setopt(h, CURLOPT_USERNAME, cfg.username.c_str());
      curl_easy_setopt(h, CURLOPT_PASSWORD, cfg.password.c_str());
    }
    if (cfg.insecure_skip_tls_verify) {
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (!cfg.ca_pem.empty()) {
      curl_blob blob{const_cast<char*>(cfg.ca_pem.data()), cfg.ca_pem.size(), CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (!cfg.client_cert_pem.empty()) {
      curl_blob cert{const_cast<char*>(cfg.client_cert_pem.data()), cfg.client_cert_pem.size(),
                     CURL_BLOB_NOCOPY};
      curl_blob key{const_cast<char*>(cfg.client_key_pem.data()), cfg.client_key_pem.size(),
                    CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
    if (!connect_to.empty()) {
      curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_list.list);
    }
  }
  CurlSlist connect_list;  // built once in InitUrl, read-only afterwards

  // With tls-server-name the URL names that host and CONNECT_TO maps it to the real address, so
  // the server certificate is checked against tls-server-name.
  std::string url_base;
  std::string connect_to;
  void InitUrl() {
    url_base = cfg.server;
    if (cfg.tls_server_name.empty()) return;
    const size_t scheme_end = cfg.server.find("://") + 3;
    std::string hostport = cfg.server.substr(scheme_end);
    hostport = hostport.substr(0, hostport.find('/'));
    std::string host = hostport, port = cfg.server.rfind("https", 0) == 0 ? "443" : "80";
    const size_t colon = hostport.rfind(':');
    if (colon != std::string::npos && hostport.find(']', colon) == std::string::npos) {
      host = hostport.substr(0, colon);
      port = hostport.substr(colon + 1);
    }
    url_base = cfg.server.substr(0, scheme_end) + cfg.tls_server_name + ":" + port;
    connect_to = StrCat(cfg.tls_server_name, ":", port, ":", host, ":", port);
    connect_list.Add(connect_to);
  }
  std::string Url(std::string_view path_and_query) const {
    return url_base + std::string(path_and_query);
  }

  struct Once {
    CURLcode curl = CURLE_OK;
    std::string curl_error;
    HttpReply reply;
    int64_t retry_after_s = 0;
    bool too_large = false;  // the body passed cfg.max_response_bytes and was cut off
  };

  Once PerformOnce(std::string_view method, std::string_view path, std::string_view body,
                   std::string_view content_type) {
    Once r;
    CURL* h = Acquire();
    CurlSlist headers;
    const std::string url = Url(path);
    Setup(h, method, url, headers, content_type, /*watch=*/false);
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    CappedBody capped{&r.reply.body,
                      static_cast<size_t>(std::max<int64_t>(cfg.max_response_bytes, 0))};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &AppendBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &capped);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &CaptureRetryAfter);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r.retry_after_s);
    r.curl = curl_easy_perform(h);
    r.too_large = capped.over;
    if (capped.over) r.reply.body = std::string();  // what was read is dropped at once
    ++requests;
    if (r.curl == CURLE_OK) {
      long code = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
      r.reply.code = static_cast<int>(code);
    } else {
      r.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(r.curl);
    }
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    Release(h);
    return r;
  }

  // Waits for the rate limiter: in a BackgroundRequests scope only for a token above half the
  // burst, asking again after each wait (requests on the scheduling path may take it meanwhile).
  void AwaitToken() {
    if (!BackgroundRequests::Active()) {
      if (int64_t wait = limiter.Reserve(); wait > 0) opts.sleep(wait);
      return;
    }
    const double keep = std::floor(static_cast<double>(cfg.burst) / 2);
    for (int64_t wait = limiter.TryReserveAbove(keep); wait > 0;
         wait = limiter.TryReserveAbove(keep))
      opts.sleep(wait);
  }

  StatusOr<HttpReply> Request(std::string_view method, std::string_view path, std::string_view body,
                              std::string_view content_type) {
    uint64_t seed;
    {
      MutexLock lock(rng_mu);
      seed = rng.Next();
    }
    Rng local(seed);
    Backoff backoff(opts.retry_backoff, local);
    for (int attempt = 0;; ++attempt) {
      AwaitToken();
      Once r = PerformOnce(method, path, body, content_type);
      if (r.too_large)  // not retried: the same request would bring the same body
        return ResourceExhausted(method, " ", path,
                                 ": the response body passed the client's cap of ",
                                 cfg.max_response_bytes, " bytes (max_response_bytes); cut off");
      const bool transport_error = r.curl != CURLE_OK;
      if (!transport_error && !IsRetryableHttpCode(r.reply.code)) return std::move(r.reply);
      if (attempt >= cfg.max_retries) {
        if (transport_error) {
          return Unavailable(method, " ", path, ": cannot reach the API server at ", cfg.server,
                             ": ", r.curl_error, " (after ", attempt + 1, " attempts)");
        }
        return std::move(r.reply);
      }
      int64_t delay = backoff.NextDelayNanos();
      if (r.retry_after_s > 0)
        delay = std::max<int64_t>(delay, std::min<int64_t>(r.retry_after_s, 60) * 1'000'000'000LL);
      SPDLOG_DEBUG("k8s: {} {} failed ({}), retry {} in {} ms", method, path,
                   transport_error ? r.curl_error : std::to_string(r.reply.code), attempt + 1,
                   delay / 1'000'000);
      ++retries;
      opts.sleep(delay);
    }
  }

  // The reply of a 2xx answer; any other is an error.
  StatusOr<HttpReply> RequestOk(std::string_view method, const std::string& path, const Json* body,
                                std::string_view content_type = "application/json") {
    std::string text = body ? body->dump() : std::string();
    HAMI_ASSIGN_OR_RETURN(HttpReply reply, Request(method, path, text, body ? content_type : ""));
    if (reply.code < 200 || reply.code > 299)
      return StatusFromHttp(reply.code, reply.body, StrCat(method, " ", path));
    return reply;
  }

  // `prune` (optional) rewrites the reply's text before it is parsed.
  StatusOr<Json> RequestJson(std::string_view method, const std::string& path, const Json* body,
                             std::string_view content_type = "application/json",
                             const Json::parser_callback_t& parse_callback = nullptr,
                             const std::function<std::string(std::string_view)>& prune = nullptr) {
    HAMI_ASSIGN_OR_RETURN(HttpReply reply, RequestOk(method, path, body, content_type));
    return ParseReply(method, path, std::move(reply), parse_callback, prune);
  }

  static StatusOr<Json> ParseReply(
      std::string_view method, const std::string& path, HttpReply reply,
      const Json::parser_callback_t& parse_callback = nullptr,
      const std::function<std::string(std::string_view)>& prune = nullptr) {
    if (reply.body.empty()) return Json::object();
    if (prune) reply.body = prune(reply.body);
    auto j = Json::parse(reply.body, parse_callback, /*allow_exceptions=*/false);
    if (j.is_discarded())
      return Internal(method, " ", path, ": reply is not JSON: ", reply.body.substr(0, 200));
    return j;
  }
};

namespace {
thread_local bool t_background = false;
}  // namespace

BackgroundRequests::BackgroundRequests() : outer_(t_background) {
  t_background = true;
}
BackgroundRequests::~BackgroundRequests() {
  t_background = outer_;
}
bool BackgroundRequests::Active() {
  return t_background;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<std::unique_ptr<Client>> Client::Create(ClientConfig config, ClientOptions options) {
  std::call_once(g_curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (config.server.empty())
    return InvalidArgument("k8s client: no API server address (ClientConfig.server)");
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return InvalidArgument("k8s client: server \"", config.server,
                           "\" must start with https:// or http://");
  }
  while (config.server.back() == '/') config.server.pop_back();
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return InvalidArgument("k8s client: a client certificate needs both certificate and key");
  }
  return std::unique_ptr<Client>(
      new Client(std::make_unique<Impl>(std::move(config), std::move(options))));
}

const ClientConfig& Client::config() const {
  return impl_->cfg;
}
int64_t Client::requests_sent() const {
  return impl_->requests.load();
}
int64_t Client::retries() const {
  return impl_->retries.load();
}

StatusOr<HttpReply> Client::Request(std::string_view method, std::string_view path_and_query,
                                    std::string_view body, std::string_view content_type) {
  return impl_->Request(method, path_and_query, body, content_type);
}

StatusOr<Json> Client::Get(const Resource& r, std::string_view ns, std::string_view name,
                           std::string_view subresource) {
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, name, subresource));
  return impl_->RequestJson("GET", path, nullptr);
}

namespace {
// A list page's continue token read from its text (empty: none, or not found by the scan).
std::string ContinueTokenOf(std::string_view page) {
  const auto md = TopLevelMember(page, "metadata");
  if (!md) return "";
  const Json j = Json::parse(*md, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return "";
  const auto c = j.find("continue");
  return c != j.end() && c->is_string() ? c->get<std::string>() : "";
}
}  // namespace

StatusOr<std::string> Client::ListPages(const Resource& r, std::string_view ns,
                                        const ListOptions& opts,
                                        const std::function<void(Json& page)>& on_page,
                                        const std::function<void()>& on_restart,
                                        const FieldFilter& drop) {
  HAMI_ASSIGN_OR_RETURN(const std::string base, CheckedResourcePath(r, ns, "", ""));
  // Members of the listed objects (the page's top-level object is depth 1, "items" 2, each item
  // 3) that `drop` names are discarded by the parser before they are built.
  // The same cut is made first on the text (PruneJson: the bulk of what is dropped is never lexed),
  // then by the parser for what that leaves (keys written with escapes).
  Json::parser_callback_t skip = nullptr;
  std::function<std::string(std::string_view)> prune = nullptr;
  if (drop) {
    skip = [&drop](int depth, Json::parse_event_t event, Json& parsed) {
      if (event != Json::parse_event_t::key || depth < 3 || !parsed.is_string()) return true;
      return !drop(depth - 2, parsed.get_ref<const std::string&>());
    };
    prune = [&drop](std::string_view text) {
      return PruneJson(text, [&drop](int depth, const std::string& key) {
        return depth >= 3 && drop(depth - 2, key);
      });
    };
  }
  constexpr int kMaxRestarts = 3;
  int restarts = 0;
  std::string cont;
  // The next page is asked for while this one is parsed and handed over, so that the server's time
  // and ours overlap instead of adding up: its continue token is read from the page's text before
  // the parse (TopLevelMember; the API server writes metadata before items). If the parsed page
  // names another token (or none), the early request is waited for and dropped.
  const bool background = BackgroundRequests::Active();
  auto fetch = [&](const std::string& token) {
    std::optional<BackgroundRequests> scope;
    if (background) scope.emplace();
    return impl_->RequestOk("GET", base + QueryString(opts, false, token), nullptr);
  };
  StatusOr<HttpReply> raw = fetch(cont);
  std::future<StatusOr<HttpReply>> ahead;  // waited for when dropped (its destructor)
  std::string ahead_cont;
  for (int page = 0; page < 1'000'000; ++page) {
    if (!raw.ok()) {
      // The continue token expired (the server compacted past the list's snapshot): start over,
      // as client-go's pager does, a bounded number of times.
      if (!cont.empty() && IsGone(raw.status()) && restarts < kMaxRestarts) {
        ++restarts;
        SPDLOG_INFO("k8s: list {}: continue token expired, restarting the list", base);
        cont.clear();
        if (on_restart) on_restart();
        raw = fetch(cont);
        continue;
      }
      return raw.status();
    }
    ahead_cont = ContinueTokenOf(raw->body);
    if (!ahead_cont.empty()) ahead = std::async(std::launch::async, fetch, ahead_cont);
    auto reply = Impl::ParseReply("GET", base, std::move(*raw), skip, prune);
    raw = Internal("consumed");
    if (!reply.ok()) return reply.status();
    Json& list = *reply;
    if (!list.is_object() || !list.contains("items") ||
        !(list["items"].is_array() || list["items"].is_null())) {
      return Internal("GET ", base, ": reply is not a list (no items array)");
    }
    if (list["items"].is_null()) list["items"] = Json::array();
    std::string next, rv;
    if (auto md = list.find("metadata"); md != list.end() && md->is_object()) {
      if (auto c = md->find("continue"); c != md->end() && c->is_string()) next = *c;
      if (auto v = md->find("resourceVersion"); v != md->end() && v->is_string()) rv = *v;
    }
    on_page(list);
    if (next.empty()) return rv;
    cont = std::move(next);
    raw = ahead.valid() && ahead_cont == cont ? ahead.get() : fetch(cont);
  }
  return Internal("GET ", base, ": more than a million pages");
}

StatusOr<Json> Client::List(const Resource& r, std::string_view ns, const ListOptions& opts) {
  Json result;
  HAMI_ASSIGN_OR_RETURN(const std::string rv, ListPages(
                                                  r, ns, opts,
                                                  [&](Json& page) {
                                                    if (result.is_null()) {
                                                      result = std::move(page);
                                                    } else {
                                                      for (auto& item : page["items"])
                                                        result["items"].push_back(std::move(item));
                                                    }
                                                  },
                                                  [&] { result = Json(); }));
  if (!result["metadata"].is_object()) result["metadata"] = Json::object();
  result["metadata"].erase("continue");
  result["metadata"]["resourceVersion"] = rv;
  return result;
}

Status Client::Watch(const Resource& r, std::string_view ns, const ListOptions& opts,
                     const std::function<bool(WatchEvent&)>& on_event,
                     const std::stop_token& stop) {
  Impl& im = *impl_;
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, "", ""));
  path += QueryString(opts, true, "");
  if (int64_t wait = im.limiter.Reserve(); wait > 0) im.opts.sleep(wait);
  const std::string what = StrCat("watch ", path);
  CURL* h = curl_easy_init();
  CURLM* multi = curl_multi_init();
  CurlSlist headers;
  im.Setup(h, "GET", im.Url(path), headers, "", /*watch=*/true);
  if (opts.timeout_seconds > 0)
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>((opts.timeout_seconds + 30) * 1000));

  struct State {
    CURL* h = nullptr;
    const std::function<bool(WatchEvent&)>* on_event = nullptr;
    std::string buf;
    int code = 0;
    bool stopped_by_handler = false;
    Status error;    // set by the handler path
    size_t cap = 0;  // the most one event may take (ClientConfig::max_response_bytes)
  } st;
  st.cap = static_cast<size_t>(std::max<int64_t>(im.cfg.max_response_bytes, 0));
  st.h = h;
  st.on_event = &on_event;
  auto write = +[](char* ptr, size_t size, size_t nmemb, void* ud) -> size_t {
    auto* s = static_cast<State*>(ud);
    const size_t n = size * nmemb;
    if (s->code == 0) {
      long code = 0;
      curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
      s->code = static_cast<int>(code);
    }
    s->buf.append(ptr, n);
    if (s->code != 200) return s->buf.size() > (1 << 20) ? 0 : n;
    size_t start = 0;
    for (size_t nl; (nl = s->buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(s->buf.data() + start, nl - start);
      if (line.empty() || line == "\r") continue;
      auto ev = ParseWatchEvent(line);
      if (!ev.ok()) {
        s->error = Internal("watch stream: ", std::string(ev.status().message()));
        return 0;
      }
      if (ev->type == WatchEvent::Type::kError) {
        const Json& o = ev->object;
        const int code =
            o.contains("code") && o["code"].is_number_integer() ? o["code"].get<int>() : 500;
        s->error = StatusFromHttp(code, o.dump(), "watch");
        return 0;
      }
      if (!(*s->on_event)(*ev)) {
        s->stopped_by_handler = true;
        return 0;
      }
    }
    s->buf.erase(0, start);
    if (s->buf.size() > s->cap) {
      s->error = ResourceExhausted("watch stream: a single event passed the client's cap of ",
                                   s->cap, " bytes (max_response_bytes); cut off");
      return 0;
    }
    return n;
  };
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_multi_add_handle(multi, h);
  ++im.requests;

  bool cancelled = false;
  {
    std::stop_callback wake(stop, [multi] { curl_multi_wakeup(multi); });
    int running = 1;
    while (running) {
      if (stop.stop_requested()) {
        cancelled = true;
        break;
      }
      if (curl_multi_perform(multi, &running) != CURLM_OK) break;
      if (!running) break;
      curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
    }
  }
  CURLcode result = CURLE_OK;
  int msgs = 0;
  while (CURLMsg* m = curl_multi_info_read(multi, &msgs)) {
    if (m->msg == CURLMSG_DONE) result = m->data.result;
  }
  if (st.code == 0) {
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    st.code = static_cast<int>(code);
  }
  std::string curl_err = errbuf[0] ? errbuf : curl_easy_strerror(result);
  curl_multi_remove_handle(multi, h);
  curl_easy_cleanup(h);
  curl_multi_cleanup(multi);

  if (cancelled || st.stopped_by_handler) return OkStatus();
  if (!st.error.ok()) return Annotate(st.error, what);
  if (st.code != 0 && st.code != 200) return StatusFromHttp(st.code, st.buf, what);
  if (result != CURLE_OK)
    return Unavailable(what, ": connection to ", im.cfg.server, " dropped: ", curl_err);
  return OkStatus();
}

StatusOr<Json> Client::Create(const Resource& r, std::string_view ns, const Json& obj,
                              std::string_view subresource, std::string_view name) {
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, name, subresource));
  return impl_->RequestJson("POST", path, &obj);
}

StatusOr<Json> Client::Update(const Resource& r, std::string_view ns, const Json& obj,
                              std::string_view subresource) {
  std::string name;
  if (obj.contains("metadata") && obj["metadata"].contains("name") &&
      obj["metadata"]["name"].is_string()) {
    name = obj["metadata"]["name"];
  }
  if (name.empty()) return InvalidArgument("update ", r.plural, ": object has no metadata.name");
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, name, subresource));
  return impl_->RequestJson("PUT", path, &obj);
}

StatusOr<Json> Client::Patch(const Resource& r, std::string_view ns, std::string_view name,
                             PatchType type, const Json& patch, std::string_view subresource) {
  std::string_view ct = PatchContentType(type);
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, name, subresource));
  return impl_->RequestJson("PATCH", path, &patch, ct);
}

Status Client::PatchNoReply(const Resource& r, std::string_view ns, std::string_view name,
                            PatchType type, const Json& patch) {
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, name, ""));
  return impl_->RequestOk("PATCH", path, &patch, PatchContentType(type)).status();
}

Status Client::Delete(const Resource& r, std::string_view ns, std::string_view name) {
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(r, ns, name, ""));
  return impl_->RequestJson("DELETE", path, nullptr).status();
}

StatusOr<Json> Client::Mutate(const Resource& r, std::string_view ns, std::string_view name,
                              const std::function<Status(Json&)>& mutate,
                              const MutateOptions& opts) {
  Status last;
  for (int attempt = 0; attempt < std::max(1, opts.max_attempts); ++attempt) {
    HAMI_ASSIGN_OR_RETURN(Json current, Get(r, ns, name));
    Json desired = current;
    HAMI_RETURN_IF_ERROR(mutate(desired));
    if (desired == current) return current;
    const Json rv = current["metadata"].value("resourceVersion", "");
    StatusOr<Json> result;
    switch (opts.mode) {
      case MutateOptions::Mode::kUpdate:
        desired["metadata"]["resourceVersion"] = rv;
        result = Update(r, ns, desired, opts.subresource);
        break;
      case MutateOptions::Mode::kMerge: {
        Json patch = CreateMergePatch(current, desired);
        patch["metadata"]["resourceVersion"] = rv;
        result = Patch(r, ns, name, PatchType::kMerge, patch, opts.subresource);
        break;
      }
      case MutateOptions::Mode::kJson: {
        Json ops = Json::array();
        ops.push_back({{"op", "replace"}, {"path", "/metadata/resourceVersion"}, {"value", rv}});
        for (auto& op : Json::diff(current, desired)) ops.push_back(op);
        result = Patch(r, ns, name, PatchType::kJson, ops, opts.subresource);
        break;
      }
    }
    if (result.ok() || !IsConflict(result.status())) return result;
    last = result.status();
  }
  return Aborted("gave up after ", opts.max_attempts, " conflicting writes to ", r.plural, " ", ns,
                 ns.empty() ? "" : "/", name, ": ", std::string(last.message()));
}

Status Client::Bind(std::string_view ns, std::string_view pod, std::string_view uid,
                    std::string_view node, const std::map<std::string, std::string>& annotations) {
  HAMI_RETURN_IF_ERROR(ValidateDns1123Subdomain(node, "Binding target node name"));
  if (!uid.empty()) HAMI_RETURN_IF_ERROR(ValidateUid(uid, "Binding uid"));
  Json b = {{"apiVersion", "v1"},
            {"kind", "Binding"},
            {"metadata", {{"name", pod}, {"namespace", ns}}},
            {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!uid.empty()) b["metadata"]["uid"] = uid;
  if (!annotations.empty()) b["metadata"]["annotations"] = annotations;
  // The reply (a Status object) is not read: 201 is the answer.
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(kPods, ns, pod, "binding"));
  return impl_->RequestOk("POST", path, &b).status();
}

namespace {
// The API server refuses an Event whose message is longer than 1024 bytes; cut at a UTF-8
// character boundary.
std::string EventMessage(const std::string& m) {
  constexpr size_t kLimit = 1024;
  if (m.size() <= kLimit) return m;
  size_t n = kLimit - 3;
  while (n > 0 && (static_cast<unsigned char>(m[n]) & 0xC0) == 0x80) --n;
  return m.substr(0, n) + "...";
}
}  // namespace

Status Client::CreateEvent(const EventSpec& spec) {
  const Json& obj = spec.involved_object;
  std::string ns = obj.value("namespace", "");
  if (ns.empty()) ns = "default";
  const int64_t now_s = impl_->clock->UnixSeconds();
  uint64_t suffix;
  {
    MutexLock lock(impl_->rng_mu);
    suffix = impl_->rng.Next();
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(suffix));
  Json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", StrCat(obj.value("name", "object"), ".", hex)}, {"namespace", ns}}},
      {"involvedObject", obj},
      {"reason", spec.reason},
      {"message", EventMessage(spec.message)},
      {"type", spec.type},
      {"source", {{"component", spec.component}}},
      {"reportingComponent", spec.component},
      {"firstTimestamp", FormatTime(now_s)},
      {"lastTimestamp", FormatTime(now_s)},
      {"count", 1}};
  if (!spec.host.empty()) {
    ev["source"]["host"] = spec.host;
    ev["reportingInstance"] = spec.host;
  }
  HAMI_ASSIGN_OR_RETURN(std::string path, CheckedResourcePath(kEvents, ns, "", ""));
  return impl_->RequestOk("POST", path, &ev).status();  // the created Event is not read
}

std::string FormatTime(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatMicroTime(int64_t unix_micros) {
  int64_t secs = unix_micros / 1'000'000;
  int64_t micros = unix_micros % 1'000'000;
  if (micros < 0) {
    micros += 1'000'000;
    --secs;
  }
  std::string s = FormatTime(secs);
  s.pop_back();  // 'Z'
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lldZ", static_cast<long long>(micros));
  return s + frac;
}

StatusOr<int64_t> ParseTimeMicros(std::string_view text) {
  std::string s(text);
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return InvalidArgument("time \"", s, "\" is not RFC 3339 (2006-01-02T15:04:05Z)");
  int64_t micros = 0;
  if (*rest == '.') {
    ++rest;
    int digits = 0;
    while (*rest >= '0' && *rest <= '9') {
      if (digits < 6) {
        micros = micros * 10 + (*rest - '0');
        ++digits;
      }
      ++rest;
    }
    while (digits++ < 6) micros *= 10;
  }
  if (std::string_view(rest) != "Z")
    return InvalidArgument("time \"", s, "\" must be UTC (end in Z)");
  return static_cast<int64_t>(timegm(&tm)) * 1'000'000 + micros;
}

}  // namespace hami::k8s
