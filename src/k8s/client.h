#pragma once
// A minimal Kubernetes API client: get/list/watch, create/update/patch/delete, pods/binding,
// events, and read-modify-write with optimistic concurrency. Objects stay nlohmann::json at this
// layer.
//
// Thread-safe: one Client is shared by all threads; connections are pooled and kept alive.
// Every request passes the client-side rate limiter (qps/burst) and is retried with capped,
// jittered exponential backoff on 429 (honouring Retry-After), 500/502/503/504 and transport
// failures, up to ClientConfig::max_retries times. Errors come back as hami::Status (see
// k8s/errors.h).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/config.h"
#include "k8s/flow_control.h"

namespace hami::k8s {

using Json = nlohmann::json;

// A resource collection: where it lives and whether it is namespaced.
struct Resource {
  std::string_view api_prefix;  // "/api/v1" or "/apis/<group>/<version>"
  std::string_view plural;      // "pods"
  std::string_view kind;        // "Pod"
  bool namespaced;
};
inline constexpr Resource kPods{"/api/v1", "pods", "Pod", true};
inline constexpr Resource kNodes{"/api/v1", "nodes", "Node", false};
inline constexpr Resource kEvents{"/api/v1", "events", "Event", true};
inline constexpr Resource kNamespaces{"/api/v1", "namespaces", "Namespace", false};
inline constexpr Resource kResourceQuotas{"/api/v1", "resourcequotas", "ResourceQuota", true};
inline constexpr Resource kConfigMaps{"/api/v1", "configmaps", "ConfigMap", true};
inline constexpr Resource kLeases{"/apis/coordination.k8s.io/v1", "leases", "Lease", true};
inline constexpr Resource kPodDisruptionBudgets{"/apis/policy/v1", "poddisruptionbudgets",
                                                "PodDisruptionBudget", true};
// Dynamic Resource Allocation (resource.k8s.io/v1, GA since 1.34).
inline constexpr Resource kResourceSlices{"/apis/resource.k8s.io/v1", "resourceslices",
                                          "ResourceSlice", false};
inline constexpr Resource kResourceClaims{"/apis/resource.k8s.io/v1", "resourceclaims",
                                          "ResourceClaim", true};
inline constexpr Resource kResourceClaimTemplates{
    "/apis/resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", true};
inline constexpr Resource kDeviceClasses{"/apis/resource.k8s.io/v1", "deviceclasses", "DeviceClass",
                                         false};

// The URL path of a collection ("" namespace = all namespaces) or of one object (+ subresource).
std::string ResourcePath(const Resource& r, std::string_view ns, std::string_view name = "",
                         std::string_view subresource = "");
// The same after checking the pieces (k8s/names.h): namespace a DNS-1123 label, name a DNS-1123
// subdomain, subresource a lowercase word; InvalidArgument otherwise. Every verb of Client uses it,
// so no crafted name changes the URL a request goes to.
StatusOr<std::string> CheckedResourcePath(const Resource& r, std::string_view ns,
                                          std::string_view name = "",
                                          std::string_view subresource = "");

struct ListOptions {
  std::string label_selector;    // "app=x,tier!=db"
  std::string field_selector;    // "spec.nodeName=node-1"
  std::string resource_version;  // "" = most recent, "0" = any
  int64_t limit = 0;             // page size; List() follows `continue` itself
  // Watch only:
  bool allow_watch_bookmarks = true;
  int64_t timeout_seconds = 0;  // server-side watch timeout; 0 = server default
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type;
  Json object;
};
// Parses one watch line ({"type":..., "object":...}); errors name what is wrong.
StatusOr<WatchEvent> ParseWatchEvent(std::string_view line);

enum class PatchType { kMerge, kJson, kStrategicMerge };

struct MutateOptions {
  // How the change is sent: kJson = RFC 6902 diff, kMerge = RFC 7386 diff; both carry the read
  // resourceVersion, so a concurrent writer makes the server answer 409. kUpdate = PUT.
  enum class Mode { kJson, kMerge, kUpdate };
  Mode mode = Mode::kMerge;
  std::string subresource;  // e.g. "status"
  int max_attempts = 5;     // reads + writes before giving up on conflicts
};

// Everything a test may inject. Defaults are the real clock, real sleep and a random seed.
struct ClientOptions {
  const Clock* clock = nullptr;              // for the rate limiter; default RealClock
  std::function<void(int64_t nanos)> sleep;  // default: std::this_thread::sleep_for
  uint64_t seed = 0;                         // jitter; 0 = seeded from the clock
  BackoffOptions retry_backoff{};            // between retried requests
};

// Raw reply for callers that need the HTTP details.
struct HttpReply {
  int code = 0;
  std::string body;
};

struct EventSpec {
  Json involved_object;         // ObjectReference: kind, namespace, name, uid (apiVersion optional)
  std::string type = "Normal";  // "Normal" | "Warning"
  std::string reason;
  std::string message;
  std::string component = "hami-scheduler";
  std::string host;
};

// While one lives, the requests its thread sends through any Client are background work (the
// scheduler's node handshakes): they take the client's rate-limiter tokens only while more than
// half the burst stays in the bucket (RateLimiter::TryReserveAbove), so they never make a request
// on the scheduling path (a decision patch, a bind) wait behind them; they get what that path
// leaves of the qps. Scopes nest; watches are unaffected.
class BackgroundRequests {
 public:
  BackgroundRequests();
  ~BackgroundRequests();
  BackgroundRequests(const BackgroundRequests&) = delete;
  BackgroundRequests& operator=(const BackgroundRequests&) = delete;
  static bool Active();

 private:
  bool outer_;
};

class Client {
 public:
  static StatusOr<std::unique_ptr<Client>> Create(ClientConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientConfig& config() const;

  StatusOr<Json> Get(const Resource& r, std::string_view ns, std::string_view name,
                     std::string_view subresource = "");
  // Lists all pages. The reply is a <Kind>List whose metadata.resourceVersion starts a watch.
  StatusOr<Json> List(const Resource& r, std::string_view ns, const ListOptions& opts = {});
  // Lists in pages of opts.limit items (0: the server's choice), handing each page (a <Kind>List
  // with an "items" array) to `on_page` as it arrives, so a caller that keeps less than the page
  // holds one page at a time. A continue token the server no longer honours (410 Expired) restarts
  // the list from the first page (at most 3 times; then the 410 is returned): `on_restart` is
  // called first, so the caller can drop what it collected. Returns the list's resourceVersion.
  // `drop` (optional) is asked, while a page is parsed, about every member of the listed objects:
  // depth 1 = an object's own members (metadata, spec, ...), 2 = theirs, and so on; true discards
  // the member before it is built, so what a caller throws away anyway costs no allocations.
  using FieldFilter = std::function<bool(int depth, const std::string& key)>;
  StatusOr<std::string> ListPages(const Resource& r, std::string_view ns, const ListOptions& opts,
                                  const std::function<void(Json& page)>& on_page,
                                  const std::function<void()>& on_restart = {},
                                  const FieldFilter& drop = {});
  // Streams events to `on_event` until the server ends the stream (returns OK), `on_event` returns
  // false or `stop` is requested (OK), or an error: OutOfRange (IsGone) when the resourceVersion is
  // too old (HTTP 410 or an ERROR event with code 410), Unavailable when the connection drops.
  // Watches are not retried here; informers do that.
  Status Watch(const Resource& r, std::string_view ns, const ListOptions& opts,
               const std::function<bool(WatchEvent&)>& on_event, const std::stop_token& stop = {});

  StatusOr<Json> Create(const Resource& r, std::string_view ns, const Json& obj,
                        std::string_view subresource = "", std::string_view name = "");
  // PUT; obj.metadata.resourceVersion, when set, makes it conditional (409 when stale).
  StatusOr<Json> Update(const Resource& r, std::string_view ns, const Json& obj,
                        std::string_view subresource = "");
  StatusOr<Json> Patch(const Resource& r, std::string_view ns, std::string_view name,
                       PatchType type, const Json& patch, std::string_view subresource = "");
  // As Patch, for callers that only need to know it was applied: the reply (the whole object) is
  // not parsed.
  Status PatchNoReply(const Resource& r, std::string_view ns, std::string_view name, PatchType type,
                      const Json& patch);
  Status Delete(const Resource& r, std::string_view ns, std::string_view name);

  // Read-modify-write: reads the object, calls `mutate` on a copy, and writes the difference with
  // the read resourceVersion as precondition. On 409 it re-reads and calls `mutate` again.
  // `mutate` may return an error to abort; if it changes nothing no write is sent.
  StatusOr<Json> Mutate(const Resource& r, std::string_view ns, std::string_view name,
                        const std::function<Status(Json&)>& mutate, const MutateOptions& opts = {});

  // POST pods/{name}/binding. `uid` (optional) guards against binding a re-created pod;
  // `annotations` are merged into the pod by the API server.
  Status Bind(std::string_view ns, std::string_view pod, std::string_view uid,
              std::string_view node, const std::map<std::string, std::string>& annotations = {});

  // Creates a core/v1 Event about `spec.involved_object` in its namespace.
  Status CreateEvent(const EventSpec& spec);

  // One request (rate-limited and retried) for anything the helpers above do not cover.
  // `path_and_query` starts with "/". Non-2xx replies are returned, not turned into errors.
  StatusOr<HttpReply> Request(std::string_view method, std::string_view path_and_query,
                              std::string_view body = "", std::string_view content_type = "");

  // Counters for tests and metrics.
  int64_t requests_sent() const;
  int64_t retries() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Formats wall-clock time as metav1.Time ("2026-07-01T12:00:00Z") and MicroTime (6 digits).
std::string FormatTime(int64_t unix_seconds);
std::string FormatMicroTime(int64_t unix_micros);
// Parses either form back to Unix microseconds.
StatusOr<int64_t> ParseTimeMicros(std::string_view text);

}  // namespace hami::k8s
