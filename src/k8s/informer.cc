#include "k8s/informer.h"

#include <atomic>
#include <map>
#include <stop_token>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "k8s/errors.h"

namespace hami::k8s {

namespace {
std::string RvOf(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  return obj["metadata"].value("resourceVersion", "");
}
}  // namespace

std::string Informer::KeyOf(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const Json& md = obj["metadata"];
  std::string ns = md.value("namespace", "");
  std::string name = md.value("name", "");
  return ns.empty() ? name : ns + "/" + name;
}

struct Informer::Impl {
  Client& client;
  InformerOptions opts;

  mutable Mutex mu;
  mutable CondVar cv;  // synced or stopping
  std::map<std::string, std::shared_ptr<const Json>> store ABSL_GUARDED_BY(mu);
  std::string last_rv ABSL_GUARDED_BY(mu);
  bool synced ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;

  std::atomic<int64_t> lists{0};
  std::atomic<int64_t> watches{0};
  std::stop_source stop_source;
  std::thread thread;
  std::thread resync_thread;
  Mutex handler_mu;  // serialises handler calls between the watch and resync threads
  std::vector<InformerHandlers> handlers ABSL_GUARDED_BY(handler_mu);

  Impl(Client& c, InformerOptions o) : client(c), opts(std::move(o)) {}

  void Add(const Json& obj) {
    MutexLock l(handler_mu);
    for (auto& h : handlers)
      if (h.on_add) h.on_add(obj);
  }
  void Update(const Json& a, const Json& b) {
    MutexLock l(handler_mu);
    for (auto& h : handlers)
      if (h.on_update) h.on_update(a, b);
  }
  void Delete(const Json& obj) {
    MutexLock l(handler_mu);
    for (auto& h : handlers)
      if (h.on_delete) h.on_delete(obj);
  }

  ListOptions BaseOptions() const {
    ListOptions lo;
    lo.label_selector = opts.label_selector;
    lo.field_selector = opts.field_selector;
    return lo;
  }

  // Lists (in pages) and replaces the store, delivering the difference. Returns the list's
  // resourceVersion.
  StatusOr<std::string> Relist() {
    ++lists;
    ListOptions lo = BaseOptions();
    lo.limit = opts.page_size;
    std::map<std::string, std::shared_ptr<const Json>> fresh;
    HAMI_ASSIGN_OR_RETURN(
        const std::string rv,
        client.ListPages(
            opts.resource, opts.namespace_name, lo,
            [&](Json& page) {
              for (auto& item : page["items"]) {
                if (opts.transform) opts.transform(item);
                std::string key = KeyOf(item);
                if (!key.empty()) fresh[key] = std::make_shared<const Json>(std::move(item));
              }
              page = Json();  // the page's untransformed rest goes now, not with the list
            },
            [&] { fresh.clear(); }, opts.drop_while_parsing));
    std::map<std::string, std::shared_ptr<const Json>> old;
    {
      MutexLock l(mu);
      old.swap(store);
      store = fresh;
      last_rv = rv;
    }
    for (auto& [key, obj] : old) {
      if (!fresh.count(key)) Delete(*obj);
    }
    for (auto& [key, obj] : fresh) {
      auto it = old.find(key);
      if (it == old.end()) {
        Add(*obj);
      } else if (RvOf(*it->second) != RvOf(*obj)) {
        Update(*it->second, *obj);
      }
    }
    {
      MutexLock l(mu);
      synced = true;
    }
    cv.NotifyAll();
    return rv;
  }

  bool Apply(WatchEvent& ev) {
    const std::string rv = RvOf(ev.object);
    if (ev.type == WatchEvent::Type::kBookmark) {
      MutexLock l(mu);
      if (!rv.empty()) last_rv = rv;
      return true;
    }
    if (opts.transform) opts.transform(ev.object);
    const std::string key = KeyOf(ev.object);
    if (key.empty()) return true;
    auto obj = std::make_shared<const Json>(std::move(ev.object));
    std::shared_ptr<const Json> prev;
    {
      MutexLock l(mu);
      auto it = store.find(key);
      if (it != store.end()) prev = it->second;
      if (ev.type == WatchEvent::Type::kDeleted) {
        store.erase(key);
      } else {
        store[key] = obj;
      }
      if (!rv.empty()) last_rv = rv;
    }
    if (ev.type == WatchEvent::Type::kDeleted) {
      Delete(*obj);
    } else if (prev) {
      Update(*prev, *obj);
    } else {
      Add(*obj);
    }
    return true;
  }

  void Sleep(int64_t ns) {
    if (opts.sleep) {
      opts.sleep(ns);
      return;
    }
    MutexLock l(mu);
    cv.WaitFor(mu, std::chrono::nanoseconds(ns),
               [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping; });
  }

  void Run(const std::stop_token& stop) {
    Rng rng(opts.seed);
    Backoff backoff(opts.backoff, rng);
    Backoff relist_backoff(opts.relist_backoff, rng);
    const Clock& clock = opts.clock ? *opts.clock : RealClock::Get();
    bool need_list = true;
    bool first_round = true;
    int64_t round_started = 0;
    while (!stop.stop_requested()) {
      if (need_list) {
        // Every round but the first waits its turn, so a server that answers each watch with
        // Expired (or fails each list) sees lists at a falling rate, not a storm.
        if (!first_round) {
          if (clock.MonotonicNanos() - round_started >= opts.relist_backoff_reset_ns)
            relist_backoff.Reset();
          Sleep(relist_backoff.NextDelayNanos());
          if (stop.stop_requested()) break;
        }
        first_round = false;
        round_started = clock.MonotonicNanos();
        auto rv = Relist();
        if (!rv.ok()) {
          SPDLOG_WARN("informer {}: list failed: {}", opts.resource.plural,
                      std::string(rv.status().message()));
          continue;
        }
        need_list = false;
      }
      ListOptions lo = BaseOptions();
      {
        MutexLock l(mu);
        lo.resource_version = last_rv;
      }
      lo.allow_watch_bookmarks = true;
      lo.timeout_seconds = opts.watch_timeout_seconds;
      ++watches;
      bool got_event = false;
      Status s = client.Watch(
          opts.resource, opts.namespace_name, lo,
          [&](WatchEvent& ev) {
            got_event = true;
            return Apply(ev);
          },
          stop);
      if (stop.stop_requested()) break;
      if (s.ok()) {
        backoff.Reset();
        continue;  // server closed the watch normally: resume from last_rv
      }
      if (got_event) backoff.Reset();
      if (IsGone(s)) {
        SPDLOG_INFO("informer {}: {}; re-listing", opts.resource.plural, std::string(s.message()));
        need_list = true;
        continue;
      }
      SPDLOG_WARN("informer {}: watch failed: {}", opts.resource.plural, std::string(s.message()));
      Sleep(backoff.NextDelayNanos());
    }
  }

  void Resync() {
    while (true) {
      {
        MutexLock l(mu);
        if (cv.WaitFor(mu, opts.resync_period,
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping; }))
          return;
        if (!synced) continue;
      }
      std::vector<std::shared_ptr<const Json>> all;
      {
        MutexLock l(mu);
        for (auto& [k, v] : store) all.push_back(v);
      }
      for (auto& o : all) Update(*o, *o);
    }
  }
};

Informer::Informer(Client& client, InformerOptions opts)
    : impl_(std::make_unique<Impl>(client, std::move(opts))) {}

Informer::~Informer() {
  Stop();
}

void Informer::AddHandlers(InformerHandlers handlers) {
  MutexLock l(impl_->handler_mu);
  impl_->handlers.push_back(std::move(handlers));
}

void Informer::Start() {
  if (impl_->thread.joinable()) return;
  impl_->thread = std::thread([this] { impl_->Run(impl_->stop_source.get_token()); });
  if (impl_->opts.resync_period.count() > 0)
    impl_->resync_thread = std::thread([this] { impl_->Resync(); });
}

void Informer::Stop() {
  {
    MutexLock l(impl_->mu);
    impl_->stopping = true;
  }
  impl_->stop_source.request_stop();
  impl_->cv.NotifyAll();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (impl_->resync_thread.joinable()) impl_->resync_thread.join();
}

bool Informer::HasSynced() const {
  MutexLock l(impl_->mu);
  return impl_->synced;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  MutexLock l(impl_->mu);
  return impl_->cv.WaitFor(impl_->mu, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu) {
    return impl_->synced || impl_->stopping;
  }) && impl_->synced;
}

std::optional<Json> Informer::Get(const std::string& key) const {
  MutexLock l(impl_->mu);
  auto it = impl_->store.find(key);
  if (it == impl_->store.end()) return std::nullopt;
  return *it->second;
}

std::shared_ptr<const Json> Informer::Find(const std::string& key) const {
  MutexLock l(impl_->mu);
  auto it = impl_->store.find(key);
  return it == impl_->store.end() ? nullptr : it->second;
}

std::vector<Json> Informer::List() const {
  MutexLock l(impl_->mu);
  std::vector<Json> out;
  out.reserve(impl_->store.size());
  for (auto& [k, v] : impl_->store) out.push_back(*v);
  return out;
}

size_t Informer::Size() const {
  MutexLock l(impl_->mu);
  return impl_->store.size();
}

std::string Informer::LastResourceVersion() const {
  MutexLock l(impl_->mu);
  return impl_->last_rv;
}

int64_t Informer::lists() const {
  return impl_->lists.load();
}
int64_t Informer::watches() const {
  return impl_->watches.load();
}

}  // namespace hami::k8s
