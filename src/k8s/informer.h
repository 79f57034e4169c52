#pragma once
// Informer: keeps a local copy of one collection (optionally filtered by label/field selector) in
// sync with the API server by list + watch on its own thread, and tells handlers what changed.
//
// - Starts with a full List, then watches from the list's resourceVersion with bookmarks.
// - A watch that ends cleanly is resumed from the last seen resourceVersion; 410 Gone (too old)
//   re-lists after the relist backoff (capped exponential, jittered, as client-go's reflector), so
//   an API server or proxy that answers every watch with Expired is not flooded with lists; other
//   watch failures back off (capped exponential, jittered) and resume.
// - Lists are read in pages (InformerOptions::page_size) and each object passes
//   InformerOptions::transform before it is kept, so the store holds only what the consumer reads.
// - A re-list diffs against the store: objects that vanished while we were not watching are
//   reported as deletes, changed ones as updates, so handlers converge after any fault.
// - Resync (optional) re-delivers every stored object as an update(old == new) periodically.
// - Objects are stored packed (MessagePack, a fifth or less of a parsed DOM's heap) and unpacked
//   on every read (Get, Find, List): reads return equal, independent objects. A list's objects
//   are stored and delivered page by page as they are read.
// Handlers run on the informer thread, one at a time, after the store has been updated.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "k8s/client.h"

namespace hami::k8s {

struct InformerOptions {
  Resource resource = kPods;
  std::string namespace_name;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;                  // e.g. "spec.nodeName=node-1"
  std::chrono::milliseconds resync_period{0};  // 0 = no resync
  int64_t watch_timeout_seconds = 300;         // server ends each watch after this; we resume
  BackoffOptions backoff{100'000'000, 10'000'000'000, 2.0, 0.2};  // between failed watches
  // Between list rounds (a re-list after 410 Gone/Expired, or after a failed list), as client-go's
  // reflector: 0.8 s doubling to 30 s, each delay scaled by [0.5, 1.5]; reset when the previous
  // round started at least `relist_backoff_reset_ns` ago (its watch was healthy that long). The
  // first list of Start() does not wait.
  BackoffOptions relist_backoff{800'000'000, 30'000'000'000, 2.0, 0.5};
  int64_t relist_backoff_reset_ns = 120'000'000'000;
  uint64_t seed = 1;  // jitter of the backoffs
  // Lists are read in pages of this many objects (limit/continue; 0 = one page).
  int64_t page_size = 500;
  // Applied to every object (list items and watch events) before it is stored and handed to the
  // handlers, to keep only the fields the consumer reads (client-go's SetTransform). It must keep
  // metadata.name, .namespace and .resourceVersion.
  std::function<void(Json& obj)> transform;
  // Asked while a list page is parsed (Client::ListPages's `drop`): members it names are never
  // built. A cheaper first cut of what `transform` drops anyway, for the bulk of a large list.
  Client::FieldFilter drop_while_parsing;
  // Injected time: the clock the relist backoff's reset reads (default RealClock) and the wait
  // between rounds (default: a wait that Stop() interrupts). A test's `sleep` must return promptly.
  const Clock* clock = nullptr;
  std::function<void(int64_t nanos)> sleep;
};

struct InformerHandlers {
  std::function<void(const Json& obj)> on_add;
  std::function<void(const Json& old_obj, const Json& new_obj)> on_update;
  std::function<void(const Json& last_known)> on_delete;
};

class Informer {
 public:
  // `client` must outlive the informer.
  Informer(Client& client, InformerOptions opts);
  ~Informer();  // stops

  // Handlers must be added before Start().
  void AddHandlers(InformerHandlers handlers);
  void Start();
  // Stops the thread promptly (cancels an open watch) and waits for it. Idempotent.
  void Stop();

  // True once the first List has been stored and its adds delivered.
  bool HasSynced() const;
  // Waits until synced or timeout; returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // Store reads ("namespace/name", or "name" for cluster-scoped objects).
  std::optional<Json> Get(const std::string& key) const;
  // The stored object, unpacked, shared and immutable (null: not there).
  std::shared_ptr<const Json> Find(const std::string& key) const;
  std::vector<Json> List() const;
  size_t Size() const;
  // Bytes the store holds packed (keys, resourceVersions and objects; not the containers' own
  // overhead), for benchmarks and metrics.
  size_t StoreBytes() const;
  // resourceVersion of the last list, event or bookmark applied.
  std::string LastResourceVersion() const;

  // Counters (for tests and metrics).
  int64_t lists() const;
  int64_t watches() const;

  // "namespace/name" or "name".
  static std::string KeyOf(const Json& obj);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::k8s
