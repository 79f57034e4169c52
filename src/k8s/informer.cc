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

// One stored object: packed in MessagePack (a trimmed pod is about 0.5 KB so, against 3-5 KB of
// heap as a parsed DOM: docs/benchmarks.md, "Scheduler at scale"), its resourceVersion beside it
// for the re-list's diff, and the list round that last saw it.
struct Packed {
  std::string rv;
  std::string bytes;
  uint64_t round = 0;
};

Packed Pack(const Json& obj, uint64_t round) {
  thread_local std::vector<uint8_t> scratch;
  scratch.clear();
  Json::to_msgpack(obj, scratch);
  // Exactly sized: the scratch's growth slack is not kept per object.
  return {RvOf(obj), std::string(scratch.begin(), scratch.end()), round};
}

// What Pack packed (MessagePack round-trips every JSON value and number type exactly).
std::shared_ptr<const Json> Unpack(const std::string& bytes) {
  return std::make_shared<const Json>(Json::from_msgpack(bytes, /*strict=*/true,
                                                         /*allow_exceptions=*/false));
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
  std::map<std::string, Packed> store ABSL_GUARDED_BY(mu);
  // The list round in progress or last done (the informer thread's own; a restart is a round).
  uint64_t round = 0;
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

  // Lists (in pages), storing and delivering each page's objects as it is read (so a large list is
  // never held parsed whole), then drops and reports as deleted what the list no longer holds.
  // Returns the list's resourceVersion. A list that fails half-way leaves the objects it already
  // delivered (newer than before) and reports no delete; the next round converges.
  StatusOr<std::string> Relist() {
    ++lists;
    ++round;
    ListOptions lo = BaseOptions();
    lo.limit = opts.page_size;
    HAMI_ASSIGN_OR_RETURN(
        const std::string rv,
        client.ListPages(
            opts.resource, opts.namespace_name, lo,
            [&](Json& page) {
              for (auto& item : page["items"]) {
                if (opts.transform) opts.transform(item);
                std::string key = KeyOf(item);
                if (!key.empty()) ApplyListed(std::move(key), item);
                item = Json();  // this object's DOM goes now, not with the page
              }
              page = Json();  // the page's untransformed rest goes now, not with the list
            },
            // A restarted list is a new snapshot: what only the abandoned one saw is not in it.
            [&] { ++round; }, opts.drop_while_parsing));
    std::vector<std::shared_ptr<const Json>> gone;
    {
      MutexLock l(mu);
      for (auto it = store.begin(); it != store.end();) {
        if (it->second.round == round) {
          ++it;
          continue;
        }
        gone.push_back(Unpack(it->second.bytes));
        it = store.erase(it);
      }
      last_rv = rv;
    }
    for (const auto& obj : gone) Delete(*obj);
    {
      MutexLock l(mu);
      synced = true;
    }
    cv.NotifyAll();
    return rv;
  }

  // One listed object: stored, then handed on as an add (new), an update (another
  // resourceVersion) or not at all (unchanged).
  void ApplyListed(std::string key, const Json& obj) {
    Packed packed = Pack(obj, round);
    bool existed = false, changed = false;
    std::string prev;  // the stored bytes, when the object changed
    {
      MutexLock l(mu);
      auto [it, inserted] = store.try_emplace(std::move(key));
      existed = !inserted;
      changed = existed && it->second.rv != packed.rv;
      if (changed) prev = std::move(it->second.bytes);
      it->second = std::move(packed);
    }
    if (!existed)
      Add(obj);
    else if (changed)
      Update(*Unpack(prev), obj);
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
    const Json& obj = ev.object;
    const bool deleted = ev.type == WatchEvent::Type::kDeleted;
    Packed packed;
    if (!deleted) packed = Pack(obj, round);
    bool existed = false;
    std::string prev;
    {
      MutexLock l(mu);
      auto it = store.find(key);
      existed = it != store.end();
      if (deleted) {
        if (existed) store.erase(it);
      } else if (existed) {
        prev = std::move(it->second.bytes);
        it->second = std::move(packed);
      } else {
        store.emplace(key, std::move(packed));
      }
      if (!rv.empty()) last_rv = rv;
    }
    if (deleted) {
      Delete(obj);
    } else if (existed) {
      Update(*Unpack(prev), obj);
    } else {
      Add(obj);
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
      std::vector<std::string> all;
      {
        MutexLock l(mu);
        all.reserve(store.size());
        for (auto& [k, v] : store) all.push_back(v.bytes);
      }
      for (const std::string& bytes : all) {
        const auto o = Unpack(bytes);
        Update(*o, *o);
      }
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
  auto obj = Find(key);
  if (obj == nullptr) return std::nullopt;
  return *obj;
}

std::shared_ptr<const Json> Informer::Find(const std::string& key) const {
  std::string bytes;
  {
    MutexLock l(impl_->mu);
    auto it = impl_->store.find(key);
    if (it == impl_->store.end()) return nullptr;
    bytes = it->second.bytes;
  }
  return Unpack(bytes);
}

std::vector<Json> Informer::List() const {
  std::vector<std::string> all;
  {
    MutexLock l(impl_->mu);
    all.reserve(impl_->store.size());
    for (auto& [k, v] : impl_->store) all.push_back(v.bytes);
  }
  std::vector<Json> out;
  out.reserve(all.size());
  for (const std::string& bytes : all)
    out.push_back(Json::from_msgpack(bytes, /*strict=*/true, /*allow_exceptions=*/false));
  return out;
}

size_t Informer::Size() const {
  MutexLock l(impl_->mu);
  return impl_->store.size();
}

size_t Informer::StoreBytes() const {
  MutexLock l(impl_->mu);
  size_t n = 0;
  for (const auto& [k, v] : impl_->store) n += k.size() + v.rv.size() + v.bytes.size();
  return n;
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
