#pragma once
// A fake Kubernetes API server that speaks the real wire format (HTTP + JSON) for the resources
// hami-cpp uses: pods (+ binding, status), nodes (+ status), events, leases, resourcequotas,
// namespaces, configmaps, poddisruptionbudgets (policy/v1), tokenreviews (AddToken), and DRA's
// resource.k8s.io/v1 resourceslices, deviceclasses (cluster-scoped), resourceclaims (+ status) and
// resourceclaimtemplates. Enough discovery (/api, /apis, /version) for kubectl get/annotate.
//
// Semantics kept from the real server:
// - one global, increasing resourceVersion; list replies carry it; items lack kind/apiVersion;
// - label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors (=, ==, !=) on any
//   dotted field path (metadata.name, spec.nodeName, status.phase, ...); limit/continue pagination;
// - watch: chunked stream, one JSON event per line, from a resourceVersion, with BOOKMARKs when
//   asked; an object leaving/entering a selector is DELETED/ADDED; events older than the
//   compaction window answer 410 Expired;
// - create (generateName), PUT (conditional on resourceVersion), merge / strategic-merge (treated
//   as merge) / JSON patch; a resourceVersion in the body or the patched result that is not current
//   gives 409 Conflict; pods/binding sets spec.nodeName, merges annotations, 409 if already bound;
// - errors are metav1.Status objects with the real reasons and messages;
// - resource.k8s.io/v1 writes over HTTP get the real strategy (dra_api.h): fields of feature gates
//   that are off in the configured version are dropped (allowMultipleAllocations, requestPolicy,
//   capacity requests, shareID, consumedCapacity without DRAConsumableCapacity), then validated
//   (422 Invalid with the field errors); a ResourceClaim's status is written only through /status.
//   Upsert/Seed bypass both, to let tests store what a buggy client could not.
//
// Fault injection: N error replies for a method + path regex, dropping open watches, forcing 410 on
// the next watches, added latency. Thread-safe; all methods may be called while serving.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::k8s::testing {

struct FakeApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                      // 0 = any free port
  size_t compaction_window = 10000;  // watch history kept; older resourceVersions get 410
  std::chrono::milliseconds bookmark_interval{1000};
  int64_t default_watch_timeout_seconds = 1800;
  int threads = 64;  // each open watch holds one
  // TLS: PEM file paths; both empty = plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // With TLS: require client certificates signed by this CA (PEM file); empty = no client auth.
  std::string tls_client_ca_file;
  // The emulated Kubernetes minor version (1.<kube_minor>): /version reports it, resource.k8s.io/v1
  // is served from 34, and the DRA feature gates take their defaults there (DRAConsumableCapacity
  // and the other beta DRA gates are on from 36).
  int kube_minor = 36;
  // Feature-gate overrides by name ("DRAConsumableCapacity": true, ...), as --feature-gates.
  std::map<std::string, bool> feature_gates;
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions opts = {});
  ~FakeApiServer();  // Stop()
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Binds and starts serving on a background thread.
  Status Start();
  void Stop();
  int port() const;
  std::string url() const;  // "http://127.0.0.1:<port>" (https when TLS)

  // --- object store (bypasses HTTP; changes are seen by watches) ---
  // Creates or replaces an object of a resource ("pods", "nodes", "leases", ...). Sets uid,
  // creationTimestamp and a new resourceVersion; returns the stored object.
  StatusOr<nlohmann::json> Upsert(const std::string& plural, nlohmann::json obj);
  std::optional<nlohmann::json> Get(const std::string& plural, const std::string& ns,
                                    const std::string& name) const;
  Status Delete(const std::string& plural, const std::string& ns, const std::string& name);
  std::vector<nlohmann::json> List(const std::string& plural) const;
  // Seeds from a v1 List / array / single object (kinds map to resources: Pod, Node, ...).
  Status Seed(const nlohmann::json& objects);
  std::string CurrentResourceVersion() const;

  // TokenReview (POST /apis/authentication.k8s.io/v1/tokenreviews): `token` authenticates as
  // `user` (status.user: username, uid, groups, extra). Other tokens are not authenticated.
  void AddToken(const std::string& token, nlohmann::json user);
  // Turns authorization on (off by default): from now on a request with a bearer token is made as
  // the user AddToken registered for it (401 for another token) and must be allowed by
  // `rbac_objects` (ClusterRoles, ClusterRoleBindings, Roles, RoleBindings as a List or array;
  // fake_rbac.h), or it gets 403. With the 1.36 gate DRAResourceClaimGranularStatusAuthorization
  // on, changing a driver's status.devices entries of a claim also needs resourceclaims/driver
  // (dra_api.h). Requests without a token stay unrestricted. Calling it again replaces the policy.
  void Authorize(const nlohmann::json& rbac_objects);

  // --- fault injection ---
  // The next `count` requests whose method matches (empty = any) and whose path (without query)
  // matches `path_regex` get `http_code` with a Status body.
  // A positive `retry_after_seconds` adds a Retry-After header (as the server does for 429).
  void InjectErrors(const std::string& method, const std::string& path_regex, int http_code,
                    int count, int retry_after_seconds = 0);
  // Ends every open watch abruptly (connection closed without the final chunk).
  void DropWatches();
  // The next `count` watch requests get 410 Expired (as an ERROR event on a 200 stream).
  void ForceGone(int count);
  // The next `count` list requests that carry a continue token get 410 Expired, as the real server
  // answers a token older than its compaction window.
  void ExpireContinueTokens(int count);
  // The next `count` GET requests whose path matches get 200 and a list body that never ends
  // (64 KiB chunks of items until the client hangs up); EndlessBytesSent() counts what went out.
  void InjectEndlessBody(const std::string& path_regex, int count);
  int64_t EndlessBytesSent() const;
  // Forgets the whole watch history: every resourceVersion before now becomes too old.
  void Compact();
  // Added before every reply.
  void SetLatency(std::chrono::milliseconds latency);
  // Network partition of one client, told by its Authorization header ("Bearer <token>"): while
  // cut, its requests are held unanswered and never applied; when the cut heals (or the server
  // stops) the held ones get 503. Other clients are served as usual.
  void Partition(const std::string& authorization, bool cut);

  // --- observation ---
  struct RequestRecord {
    std::string method, path, query, content_type, authorization;
  };
  std::vector<RequestRecord> Requests() const;
  // Number of requests matching method ("" = any) and a path regex.
  int64_t CountRequests(const std::string& method, const std::string& path_regex) const;
  int OpenWatches() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::k8s::testing
