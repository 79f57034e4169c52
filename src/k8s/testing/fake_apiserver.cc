#include "k8s/testing/fake_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include "absl/strings/str_join.h"
#include "common/mutex.h"
#include "common/rng.h"
#include "k8s/label_selector.h"
#include "k8s/testing/dra_api.h"
#include "k8s/testing/fake_rbac.h"
#include "k8s/testing/selectors.h"

namespace hami::k8s::testing {
namespace {

using Json = nlohmann::json;

constexpr char kDraPrefix[] = "/apis/resource.k8s.io/v1";
constexpr char kDraApiVersion[] = "resource.k8s.io/v1";

struct ResDef {
  const char* prefix;
  const char* plural;
  const char* singular;
  const char* kind;
  bool namespaced;
  const char* short_name;
  const char* api_version;
  bool has_status;  // PUT/PATCH of the main resource leave status alone
};

const ResDef kResources[] = {
    {"/api/v1", "pods", "pod", "Pod", true, "po", "v1", true},
    {"/api/v1", "nodes", "node", "Node", false, "no", "v1", true},
    {"/api/v1", "events", "event", "Event", true, "ev", "v1", false},
    {"/api/v1", "namespaces", "namespace", "Namespace", false, "ns", "v1", true},
    {"/api/v1", "resourcequotas", "resourcequota", "ResourceQuota", true, "quota", "v1", true},
    {"/api/v1", "configmaps", "configmap", "ConfigMap", true, "cm", "v1", false},
    {"/apis/coordination.k8s.io/v1", "leases", "lease", "Lease", true, "", "coordination.k8s.io/v1",
     false},
    {"/apis/events.k8s.io/v1", "events", "event", "Event", true, "ev", "events.k8s.io/v1", false},
    {"/apis/policy/v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
     "pdb", "policy/v1", true},
    // resource.k8s.io/v1 (DRA), served from 1.34 (FakeApiServerOptions::kube_minor); writes go
    // through AdmitDraWrite (dra_api.h).
    {kDraPrefix, "resourceslices", "resourceslice", "ResourceSlice", false, "", kDraApiVersion,
     false},
    {kDraPrefix, "deviceclasses", "deviceclass", "DeviceClass", false, "", kDraApiVersion, false},
    {kDraPrefix, "resourceclaims", "resourceclaim", "ResourceClaim", true, "", kDraApiVersion,
     true},
    {kDraPrefix, "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", true,
     "", kDraApiVersion, false},
};
// API groups other than the core one, in discovery order.
const char* const kGroups[] = {"coordination.k8s.io", "events.k8s.io", "policy", "resource.k8s.io"};
constexpr int kDraFirstMinor = 34;  // resource.k8s.io/v1 is GA from 1.34

std::string ResId(const ResDef& d) {
  return std::string(d.prefix) + "/" + d.plural;
}

const ResDef* FindByPlural(const std::string& plural) {
  for (const auto& d : kResources) {
    if (plural == d.plural) return &d;
  }
  return nullptr;
}

const ResDef* FindByKind(const std::string& kind, const std::string& api_version) {
  for (const auto& d : kResources) {
    if (kind == d.kind && (api_version.empty() || api_version == d.api_version)) return &d;
  }
  return nullptr;
}

Json MakeStatus(int code, const std::string& reason, const std::string& message,
                Json details = nullptr) {
  Json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

std::string ReasonFor(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

std::string NowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string MetaStr(const Json& obj, const char* field) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  const Json& md = obj["metadata"];
  auto it = md.find(field);
  return it != md.end() && it->is_string() ? it->get<std::string>() : "";
}

// An HTTP-level failure carried out of the handlers.
struct ApiError {
  int code;
  Json status;
};
ApiError Err(int code, const std::string& message, Json details = nullptr) {
  return {code, MakeStatus(code, ReasonFor(code), message, std::move(details))};
}
ApiError Err(int code, const std::string& reason, const std::string& message, Json details) {
  return {code, MakeStatus(code, reason, message, std::move(details))};
}

struct Target {
  const ResDef* def = nullptr;
  std::string ns, name, sub;
  std::string verb;                 // the authorizer's verb (get, list, update, patch, ...)
  std::optional<RequestUser> user;  // who asks, when Authorize is on and a token was sent
};

struct LogEntry {
  int64_t rv;
  std::string resid;
  std::string type;  // ADDED / MODIFIED / DELETED
  Json obj;
  Json prev;  // null for ADDED
};

struct RuleState {
  std::string method;
  std::regex path;
  int code;
  int remaining;
  int retry_after_s;
};

}  // namespace

struct FakeApiServer::Impl {
  FakeApiServerOptions opts;
  std::unique_ptr<httplib::Server> svr;
  std::thread thread;
  int port = 0;
  bool tls = false;

  mutable Mutex mu;
  CondVar cv;  // a change logged, a partition healed, or stopping
  int64_t rv ABSL_GUARDED_BY(mu) = 1000;
  // Watches from an rv below this are too old.
  int64_t compacted_rv ABSL_GUARDED_BY(mu) = 1000;
  std::map<std::string, std::map<std::string, Json>> objects ABSL_GUARDED_BY(mu);
  std::deque<LogEntry> log ABSL_GUARDED_BY(mu);
  std::vector<RuleState> rules ABSL_GUARDED_BY(mu);
  int64_t drop_generation ABSL_GUARDED_BY(mu) = 0;
  int force_gone ABSL_GUARDED_BY(mu) = 0;
  int expire_continue ABSL_GUARDED_BY(mu) = 0;  // list requests with `continue` to answer 410
  struct EndlessRule {
    std::regex path;
    int remaining;
  };
  std::vector<EndlessRule> endless ABSL_GUARDED_BY(mu);
  std::shared_ptr<std::atomic<int64_t>> endless_bytes = std::make_shared<std::atomic<int64_t>>(0);
  std::chrono::milliseconds latency ABSL_GUARDED_BY(mu){0};
  // Authorization header -> cut off.
  std::map<std::string, bool> partitioned ABSL_GUARDED_BY(mu);
  // TokenReview: token -> status.user of a token that authenticates.
  std::map<std::string, Json> tokens ABSL_GUARDED_BY(mu);
  // Authorize: requests with a bearer token are held to this policy.
  std::optional<RbacPolicy> rbac ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  int open_watches ABSL_GUARDED_BY(mu) = 0;
  std::vector<RequestRecord> requests ABSL_GUARDED_BY(mu);
  Rng rng ABSL_GUARDED_BY(mu){42};

  explicit Impl(FakeApiServerOptions o)
      : opts(std::move(o)), gates(DraGatesFor(opts.kube_minor, opts.feature_gates)) {}
  const DraGates gates;  // of opts; fixed for the server's life

  std::string NewUid() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    char buf[40];
    uint64_t a = rng.Next(), b = rng.Next();
    std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-a%03x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                  static_cast<unsigned>(b >> 52),
                  static_cast<unsigned long long>(b & 0xffffffffffffULL));
    return buf;
  }
  std::string RandomSuffix() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    static const char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
    std::string s;
    for (int i = 0; i < 5; ++i) s.push_back(kChars[rng.Uniform(sizeof(kChars) - 1)]);
    return s;
  }

  // Records a change (mu held): assigns the next resourceVersion and appends to the watch log.
  void RecordLocked(const ResDef& d, const std::string& type, Json& obj, Json prev)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    obj["metadata"]["resourceVersion"] = std::to_string(++rv);
    log.push_back({rv, ResId(d), type, obj, std::move(prev)});
    while (log.size() > opts.compaction_window) {
      compacted_rv = log.front().rv;
      log.pop_front();
    }
    cv.NotifyAll();
  }

  void FillNewLocked(const ResDef& d, Json& obj, const std::string& ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    obj["kind"] = d.kind;
    obj["apiVersion"] = d.api_version;
    Json& md = obj["metadata"];
    if (d.namespaced) md["namespace"] = ns;
    if (!md.contains("uid") || !md["uid"].is_string() || md["uid"].get<std::string>().empty())
      md["uid"] = NewUid();
    if (!md.contains("creationTimestamp") || md["creationTimestamp"].is_null())
      md["creationTimestamp"] = NowRfc3339();
    if (std::string(d.plural) == "pods") {
      if (!obj.contains("status") || !obj["status"].is_object()) obj["status"] = Json::object();
      if (!obj["status"].contains("phase")) obj["status"]["phase"] = "Pending";
      if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = Json::object();
      if (!obj["spec"].contains("schedulerName"))
        obj["spec"]["schedulerName"] = "default-scheduler";
    }
  }

  // ---------------- HTTP plumbing ----------------

  static void Reply(httplib::Response& res, int code, const Json& body) {
    res.status = code;
    res.set_content(body.dump(), "application/json");
  }

  static StatusOr<Target> ParsePath(const std::string& path) {
    for (const char* prefix : {"/api/v1", "/apis/coordination.k8s.io/v1", "/apis/events.k8s.io/v1",
                               "/apis/policy/v1", kDraPrefix}) {
      std::string p(prefix);
      if (path.rfind(p + "/", 0) != 0) continue;
      std::vector<std::string> seg;
      size_t start = p.size() + 1;
      while (start <= path.size()) {
        size_t slash = path.find('/', start);
        seg.push_back(
            path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
      Target t;
      size_t i = 0;
      if (seg.size() >= 3 && seg[0] == "namespaces") {
        t.ns = seg[1];
        i = 2;
      } else if (seg[0] == "namespaces") {
        i = 0;
      }
      for (const auto& d : kResources) {
        if (p == d.prefix && seg[i] == d.plural) t.def = &d;
      }
      if (!t.def) return NotFound("the server could not find the requested resource");
      // Namespaced resources also have an all-namespaces collection (/api/v1/pods) but no
      // objects outside a namespace; cluster-scoped ones never sit under /namespaces/{ns}/.
      const bool cluster_path = i == 0;
      if (!t.def->namespaced && !cluster_path)
        return NotFound("the server could not find the requested resource");
      if (t.def->namespaced && cluster_path && seg.size() > 1) {
        return NotFound("the server could not find the requested resource");
      }
      if (seg.size() > i + 1) t.name = seg[i + 1];
      if (seg.size() > i + 2) t.sub = seg[i + 2];
      if (seg.size() > i + 3 || (seg.size() > i + 1 && t.name.empty())) {
        return NotFound("the server could not find the requested resource");
      }
      // Only pods have pods/binding and pods/eviction; only kinds with a status subresource have
      // /status.
      const bool pods = std::string(t.def->plural) == "pods";
      const bool known_sub = t.sub.empty() || (t.sub == "status" && t.def->has_status) ||
                             (pods && (t.sub == "binding" || t.sub == "eviction"));
      if (!known_sub) return NotFound("the server could not find the requested resource");
      return t;
    }
    return NotFound("the server could not find the requested resource");
  }

  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res) {
    std::string query;
    for (const auto& [k, v] : req.params) query += (query.empty() ? "" : "&") + k + "=" + v;
    std::chrono::milliseconds delay;
    {
      MutexLock l(mu);
      requests.push_back({req.method, req.path, query, req.get_header_value("Content-Type"),
                          req.get_header_value("Authorization")});
      delay = latency;
      if (auto p = partitioned.find(req.get_header_value("Authorization"));
          p != partitioned.end() && p->second) {
        // Cut off: the request never arrives. Held until the cut heals (or the server stops), then
        // refused unapplied; a client that gives up first only sees its own timeout.
        cv.Wait(mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
          return stopping || !partitioned[req.get_header_value("Authorization")];
        });
        Reply(res, 503, MakeStatus(503, "ServiceUnavailable", "network partition (fake)"));
        return httplib::Server::HandlerResponse::Handled;
      }
      for (auto& e : endless) {
        if (e.remaining <= 0 || req.method != "GET" || !std::regex_search(req.path, e.path))
          continue;
        --e.remaining;
        // 200 and a body that never ends: a list whose items go on until the client hangs up.
        auto sent = endless_bytes;
        res.status = 200;
        res.set_chunked_content_provider(
            "application/json", [sent, first = true](size_t, httplib::DataSink& sink) mutable {
              static const std::string kItem = std::string(R"({"metadata":{"name":"x"}},)");
              std::string chunk = first ? R"({"kind":"PodList","metadata":{},"items":[)" : "";
              first = false;
              while (chunk.size() < (64 << 10)) chunk += kItem;
              if (!sink.write(chunk.data(), chunk.size())) return false;
              *sent += static_cast<int64_t>(chunk.size());
              return true;
            });
        return httplib::Server::HandlerResponse::Handled;
      }
      for (auto& r : rules) {
        if (r.remaining <= 0) continue;
        if (!r.method.empty() && r.method != req.method) continue;
        if (!std::regex_search(req.path, r.path)) continue;
        --r.remaining;
        Reply(res, r.code, MakeStatus(r.code, ReasonFor(r.code), "injected fault"));
        if (r.retry_after_s > 0) res.set_header("Retry-After", std::to_string(r.retry_after_s));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    return httplib::Server::HandlerResponse::Unhandled;
  }

  bool DraServed() const { return opts.kube_minor >= kDraFirstMinor; }

  static std::string VerbOf(const httplib::Request& req, const Target& t) {
    if (req.method == "GET") {
      const std::string w = req.get_param_value("watch");
      if (t.name.empty()) return w == "1" || w == "true" ? "watch" : "list";
      return "get";
    }
    if (req.method == "POST") return "create";
    if (req.method == "PUT") return "update";
    if (req.method == "PATCH") return "patch";
    return t.name.empty() ? "deletecollection" : "delete";
  }

  static RequestAttributes AttrsOf(const Target& t) {
    std::string group = t.def->prefix;
    group = group == "/api/v1" ? "" : group.substr(6, group.rfind('/') - 6);  // /apis/<g>/v1
    return {t.verb, group, t.def->plural, t.sub, t.def->namespaced ? t.ns : "", t.name};
  }

  // With Authorize on, a request with a bearer token is made as the token's user and must be
  // allowed by the policy (401 for an unknown token, 403 when no rule allows it). Requests
  // without a token stay unrestricted (the tests' own setup, as a cluster admin).
  std::optional<RequestUser> AuthorizeRequest(const httplib::Request& req, const Target& t) {
    const std::string auth = req.get_header_value("Authorization");
    MutexLock l(mu);
    if (!rbac || auth.empty()) return std::nullopt;
    auto it = auth.rfind("Bearer ", 0) == 0 ? tokens.find(auth.substr(7)) : tokens.end();
    if (it == tokens.end()) throw Err(401, "Unauthorized", "Unauthorized", nullptr);
    RequestUser user = RequestUser::FromJson(it->second);
    const RequestAttributes a = AttrsOf(t);
    if (!rbac->Allows(user, a)) {
      const std::string gr =
          a.api_group.empty() ? a.resource : StrCat(a.resource, ".", a.api_group);
      throw Err(403, "Forbidden",
                StrCat(gr, " \"", t.name, "\" is forbidden: ", ForbiddenMessage(user, a)),
                Json{{"name", t.name},
                     {"group", a.api_group},
                     {"kind", t.sub.empty() ? a.resource : a.resource + "/" + t.sub}});
    }
    return user;
  }

  // DRAResourceClaimGranularStatusAuthorization (resourceclaim.AuthorizedForDeviceStatus and
  // AuthorizedForBinding): the field errors of a claim status write by a user who lacks, for a
  // driver whose status.devices entries it changes, that driver's name on resourceclaims/driver
  // with associated-node:<verb> (a service account bound to the node the claim is allocated to) or
  // arbitrary-node:<verb>; or who changes allocation or reservedFor without resourceclaims/binding.
  std::vector<std::string> DeviceStatusErrorsLocked(const Target& t, const Json& next,
                                                    const Json& stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::string> errs;
    if (!gates.granular_status_authorization || !t.user || !rbac) return errs;
    const Json none = Json::object();
    const Json& next_status = next.contains("status") ? next["status"] : none;
    const Json& old_status = stored.contains("status") ? stored["status"] : none;
    // resourceclaim.AuthorizedForBinding: allocating or reserving is the scheduler's, cluster-wide.
    if (next_status.value("allocation", Json()) != old_status.value("allocation", Json()) ||
        next_status.value("reservedFor", Json()) != old_status.value("reservedFor", Json())) {
      const RequestAttributes a{t.verb, "resource.k8s.io", "resourceclaims", "binding", "", ""};
      if (!rbac->Allows(*t.user, a))
        errs.push_back(
            StrCat("status: Forbidden: changing status.allocation or status.reservedFor requires "
                   "resource=\"resourceclaims/binding\", verb=\"",
                   t.verb, "\" permission: resourceclaims.resource.k8s.io is forbidden: ",
                   ForbiddenMessage(*t.user, a)));
    }
    const std::vector<std::string> drivers = ModifiedDeviceStatusDrivers(next_status, old_status);
    if (drivers.empty()) return errs;
    const RequestUser& u = *t.user;
    const std::string node = AllocatedNodeName(next_status);
    auto nodes = u.extra.find("authentication.kubernetes.io/node-name");
    const bool associated = !node.empty() && u.name.rfind("system:serviceaccount:", 0) == 0 &&
                            nodes != u.extra.end() && nodes->second.size() == 1 &&
                            nodes->second[0] == node;
    std::vector<std::string> verbs;
    if (associated) verbs.push_back("associated-node:" + t.verb);
    verbs.push_back("arbitrary-node:" + t.verb);
    for (const auto& driver : drivers) {
      std::string first;
      bool allowed = false;
      for (const auto& v : verbs) {
        const RequestAttributes a{v, "resource.k8s.io", "resourceclaims", "driver", t.ns, driver};
        if (rbac->Allows(u, a)) {
          allowed = true;
          break;
        }
        if (first.empty())
          first = StrCat("resourceclaims.resource.k8s.io \"", driver,
                         "\" is forbidden: ", ForbiddenMessage(u, a));
      }
      if (!allowed)
        errs.push_back(
            StrCat("status.devices: Forbidden: changing status.devices requires "
                   "resource=\"resourceclaims/driver\", verb=\"[",
                   absl::StrJoin(verbs, " "), "]\" permission: ", first));
    }
    return errs;
  }

  template <typename F>
  void Guard(const httplib::Request& req, httplib::Response& res, F&& f) {
    auto t = ParsePath(req.path);
    if (t.ok() && !DraServed() && std::string(t->def->prefix) == kDraPrefix)
      t = NotFound("the server could not find the requested resource");
    if (!t.ok()) {
      Reply(res, 404, MakeStatus(404, "NotFound", std::string(t.status().message())));
      return;
    }
    try {
      t->verb = VerbOf(req, *t);
      t->user = AuthorizeRequest(req, *t);
      f(*t);
    } catch (const ApiError& e) {
      Reply(res, e.code, e.status);
    } catch (const std::exception& e) {
      Reply(res, 500, MakeStatus(500, "InternalError", e.what()));
    }
  }

  static Json ParseBody(const httplib::Request& req) {
    const std::string ct = req.get_header_value("Content-Type");
    if (ct.find("protobuf") != std::string::npos) {
      throw Err(415, "UnsupportedMediaType",
                "the fake API server speaks JSON only; protobuf bodies are not supported", nullptr);
    }
    auto j = Json::parse(req.body, nullptr, false);
    if (j.is_discarded())
      throw Err(400,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json");
    return j;
  }

  // ---------------- reads ----------------

  void HandleGet(const httplib::Request& req, httplib::Response& res) {
    Guard(req, res, [&](const Target& t) {
      const std::string watch = req.get_param_value("watch");
      if (t.name.empty() && (watch == "1" || watch == "true")) return Watch(req, res, t);
      if (t.name.empty()) return ListReply(req, res, t);
      MutexLock l(mu);
      auto& m = objects[ResId(*t.def)];
      auto it = m.find(Key(t.def->namespaced ? t.ns : "", t.name));
      if (it == m.end()) throw NotFoundErr(t);
      Reply(res, 200, it->second);
    });
  }

  static ApiError NotFoundErr(const Target& t) {
    return Err(404, "NotFound", StrCat(t.def->plural, " \"", t.name, "\" not found"),
               {{"name", t.name}, {"kind", t.def->plural}});
  }

  static std::pair<Selector, Selector> Selectors(const httplib::Request& req) {
    auto labels = Selector::ParseLabels(req.get_param_value("labelSelector"));
    if (!labels.ok()) throw Err(400, std::string(labels.status().message()));
    auto fields = Selector::ParseFields(req.get_param_value("fieldSelector"));
    if (!fields.ok()) throw Err(400, std::string(fields.status().message()));
    return {std::move(*labels), std::move(*fields)};
  }

  static bool InScope(const Target& t, const Json& obj) {
    return !t.def->namespaced || t.ns.empty() || MetaStr(obj, "namespace") == t.ns;
  }

  void ListReply(const httplib::Request& req, httplib::Response& res, const Target& t) {
    auto [labels, fields] = Selectors(req);
    int64_t limit = 0;
    if (req.has_param("limit")) limit = std::atoll(req.get_param_value("limit").c_str());
    const std::string cont = req.get_param_value("continue");
    if (!cont.empty()) {
      MutexLock l(mu);
      if (expire_continue > 0) {
        --expire_continue;
        throw Err(410, "Expired",
                  "The provided continue parameter is too old to display a consistent list "
                  "result. You can start a new list without the continue parameter.",
                  nullptr);
      }
    }
    Json items = Json::array();
    std::string next;
    int64_t remaining = 0;
    std::string list_rv;
    {
      MutexLock l(mu);
      list_rv = std::to_string(rv);
      auto& m = objects[ResId(*t.def)];
      for (auto it = cont.empty() ? m.begin() : m.upper_bound(cont); it != m.end(); ++it) {
        const Json& obj = it->second;
        if (!InScope(t, obj) || !labels.Matches(obj) || !fields.Matches(obj)) continue;
        if (limit > 0 && static_cast<int64_t>(items.size()) >= limit) {
          // One more is enough to say there is a next page; counting the rest would make a paged
          // list of n objects cost n^2 / limit (remainingItemCount is optional, and left out).
          remaining = 1;
          break;
        }
        Json item = obj;
        item.erase("kind");
        item.erase("apiVersion");
        items.push_back(std::move(item));
        next = it->first;
      }
    }
    Json list = {{"kind", std::string(t.def->kind) + "List"},
                 {"apiVersion", t.def->api_version},
                 {"metadata", {{"resourceVersion", list_rv}}},
                 {"items", std::move(items)}};
    if (remaining > 0) list["metadata"]["continue"] = next;
    Reply(res, 200, list);
  }

  // ---------------- watch ----------------

  struct WatchState {
    Target t;
    Selector labels, fields;
    int64_t cursor = 0;
    bool bookmarks = false;
    std::deque<std::string> pending;
    std::chrono::steady_clock::time_point deadline, last_write;
    int64_t drop_gen = 0;
    bool finished = false;
  };

  static std::string EventLine(const std::string& type, const Json& obj) {
    return Json{{"type", type}, {"object", obj}}.dump() + "\n";
  }

  static std::string GoneLine(int64_t asked, int64_t oldest) {
    return EventLine(
        "ERROR",
        MakeStatus(410, "Expired", StrCat("too old resource version: ", asked, " (", oldest, ")")));
  }

  void Watch(const httplib::Request& req, httplib::Response& res, const Target& t) {
    auto st = std::make_shared<WatchState>();
    st->t = t;
    std::tie(st->labels, st->fields) = Selectors(req);
    st->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    int64_t timeout = opts.default_watch_timeout_seconds;
    if (req.has_param("timeoutSeconds"))
      timeout = std::max<int64_t>(1, std::atoll(req.get_param_value("timeoutSeconds").c_str()));
    const auto now = std::chrono::steady_clock::now();
    st->deadline = now + std::chrono::seconds(timeout);
    st->last_write = now;
    const std::string rv_param = req.get_param_value("resourceVersion");
    {
      MutexLock l(mu);
      st->drop_gen = drop_generation;
      if (force_gone > 0) {
        --force_gone;
        st->pending.push_back(
            GoneLine(rv_param.empty() ? 0 : std::atoll(rv_param.c_str()), compacted_rv + 1));
        st->finished = true;
      } else if (rv_param.empty() || rv_param == "0") {
        // Start with the current state as synthetic ADDED events.
        for (const auto& [k, obj] : objects[ResId(*t.def)]) {
          if (InScope(t, obj) && st->labels.Matches(obj) && st->fields.Matches(obj)) {
            st->pending.push_back(EventLine("ADDED", obj));
          }
        }
        st->cursor = rv;
      } else {
        char* end = nullptr;
        const long long asked = std::strtoll(rv_param.c_str(), &end, 10);
        if (!end || *end != '\0')
          throw Err(400, StrCat("invalid resource version \"", rv_param, "\""));
        if (asked < compacted_rv) {
          st->pending.push_back(GoneLine(asked, compacted_rv + 1));
          st->finished = true;
        }
        st->cursor = asked;
      }
      ++open_watches;
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache, private");
    res.set_chunked_content_provider(
        "application/json", [this, st](size_t, httplib::DataSink& sink) { return Pump(*st, sink); },
        [this](bool) {
          MutexLock l(mu);
          --open_watches;
        });
  }

  // One step of a watch stream: wait for changes, write them. false = abort the connection.
  bool Pump(WatchState& st, httplib::DataSink& sink) {
    std::vector<std::string> out;
    bool done = false;
    {
      MutexLock l(mu);
      if (st.pending.empty() && !st.finished) {
        cv.WaitFor(mu, std::chrono::milliseconds(200), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
          return stopping || drop_generation != st.drop_gen ||
                 (!log.empty() && log.back().rv > st.cursor);
        });
      }
      if (drop_generation != st.drop_gen) return false;
      if (stopping) return false;
      while (!st.pending.empty()) {
        out.push_back(std::move(st.pending.front()));
        st.pending.pop_front();
      }
      if (st.finished) {
        done = true;
      } else if (st.cursor < compacted_rv) {
        out.push_back(GoneLine(st.cursor, compacted_rv + 1));
        done = true;
      } else {
        const std::string resid = ResId(*st.t.def);
        auto it = std::upper_bound(log.begin(), log.end(), st.cursor,
                                   [](int64_t v, const LogEntry& e) { return v < e.rv; });
        for (; it != log.end(); ++it) {
          const LogEntry& e = *it;
          if (e.resid != resid) continue;
          auto match = [&](const Json& o) {
            return !o.is_null() && InScope(st.t, o) && st.labels.Matches(o) && st.fields.Matches(o);
          };
          const bool now_in = e.type != "DELETED" && match(e.obj);
          const bool was_in = e.type == "DELETED" ? match(e.obj) : match(e.prev);
          if (e.type == "DELETED") {
            if (was_in) out.push_back(EventLine("DELETED", e.obj));
          } else if (now_in && was_in) {
            out.push_back(EventLine("MODIFIED", e.obj));
          } else if (now_in) {
            out.push_back(EventLine("ADDED", e.obj));
          } else if (was_in) {
            out.push_back(EventLine("DELETED", e.obj));
          }
        }
        st.cursor = std::max(st.cursor, rv);
      }
      const auto now = std::chrono::steady_clock::now();
      if (!done && st.bookmarks && now - st.last_write >= opts.bookmark_interval) {
        out.push_back(EventLine("BOOKMARK",
                                {{"kind", st.t.def->kind},
                                 {"apiVersion", st.t.def->api_version},
                                 {"metadata", {{"resourceVersion", std::to_string(st.cursor)}}}}));
      }
      if (now >= st.deadline) done = true;
      // A newline every second keeps detecting clients that went away (JSON streams skip it).
      if (out.empty() && !done && now - st.last_write >= std::chrono::seconds(1))
        out.push_back("\n");
      if (!out.empty()) st.last_write = now;
    }
    for (const auto& line : out) {
      if (!sink.write(line.data(), line.size())) return false;
    }
    if (done) sink.done();
    return true;
  }

  // ---------------- writes ----------------

  void HandlePost(const httplib::Request& req, httplib::Response& res) {
    Guard(req, res, [&](const Target& t) {
      Json body = ParseBody(req);
      if (t.sub == "binding" && std::string(t.def->plural) == "pods") return Bind(res, t, body);
      if (t.sub == "eviction" && std::string(t.def->plural) == "pods") return Evict(res, t, body);
      if (!t.name.empty())
        throw Err(405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource", nullptr);
      if (!body.is_object()) throw Err(400, "body must be a JSON object");
      MutexLock l(mu);
      Reply(res, 201, CreateLocked(*t.def, t.ns, std::move(body)));
    });
  }

  // What the API server checks on a core/v1 Event without eventTime (its legacy validation): a
  // DNS-subdomain name, the involved object's namespace equal to the event's, and the length limits
  // of reason, reportingComponent, reportingInstance (128) and message (1024).
  static void ValidateCoreEvent(const Json& ev, const std::string& ns, const std::string& name) {
    auto invalid = [&](const std::string& what) {
      throw Err(422, "Invalid", StrCat("Event \"", name, "\" is invalid: ", what),
                {{"kind", "Event"}, {"name", name}});
    };
    static const std::regex kSubdomain(
        R"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)");
    if (name.size() > 253 || !std::regex_match(name, kSubdomain))
      invalid("metadata.name: Invalid value: a DNS-1123 subdomain is required");
    const Json* io = ev.contains("involvedObject") ? &ev["involvedObject"] : nullptr;
    if (io == nullptr || !io->is_object()) invalid("involvedObject: Required value");
    const std::string io_ns = io->value("namespace", "");
    if (io_ns.empty() ? (ns != "default" && !ns.empty()) : io_ns != ns)
      invalid("involvedObject.namespace: Invalid value: does not match event.namespace");
    auto text = [&](const char* field) {
      const auto it = ev.find(field);
      return it != ev.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    for (const char* f : {"reason", "reportingComponent", "reportingInstance"})
      if (text(f).size() > 128) invalid(StrCat(f, ": Too long: may not be more than 128 bytes"));
    if (text("message").size() > 1024)
      invalid("message: Too long: may not be more than 1024 bytes");
  }

  Json CreateLocked(const ResDef& d, const std::string& path_ns, Json body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Json& md = body["metadata"];
    if (!md.is_object()) throw Err(400, "metadata must be an object");
    std::string ns = path_ns;
    const std::string body_ns = MetaStr(body, "namespace");
    if (d.namespaced) {
      if (ns.empty()) ns = body_ns.empty() ? "default" : body_ns;
      if (!body_ns.empty() && body_ns != ns) {
        throw Err(400,
                  "the namespace of the provided object does not match the namespace sent on the "
                  "request");
      }
    }
    std::string name = MetaStr(body, "name");
    if (name.empty()) {
      const std::string gen = MetaStr(body, "generateName");
      if (gen.empty()) {
        throw Err(422, "Invalid",
                  StrCat(d.kind,
                         " \"\" is invalid: metadata.name: Required value: name or generateName is "
                         "required"),
                  {{"kind", d.kind}});
      }
      name = gen + RandomSuffix();
      md["name"] = name;
    }
    if (std::string(d.plural) == "events" && std::string(d.prefix) == "/api/v1")
      ValidateCoreEvent(body, ns, name);
    AdmitLocked(d, name, body, nullptr, false);
    auto& m = objects[ResId(d)];
    const std::string key = Key(d.namespaced ? ns : "", name);
    if (m.count(key)) {
      throw Err(409, "AlreadyExists", StrCat(d.plural, " \"", name, "\" already exists"),
                {{"name", name}, {"kind", d.plural}});
    }
    FillNewLocked(d, body, ns);
    RecordLocked(d, "ADDED", body, nullptr);
    m[key] = body;
    return body;
  }

  void Bind(httplib::Response& res, const Target& t, const Json& binding) {
    std::string node;
    if (binding.is_object() && binding.contains("target") && binding["target"].is_object()) {
      node = binding["target"].value("name", "");
    }
    if (node.empty()) throw Err(400, "Binding.target.name: Required value");
    MutexLock l(mu);
    auto& m = objects[ResId(*t.def)];
    auto it = m.find(Key(t.ns, t.name));
    if (it == m.end()) throw NotFoundErr(t);
    Json& pod = it->second;
    const std::string bind_uid = MetaStr(binding, "uid");
    const std::string pod_uid = MetaStr(pod, "uid");
    const std::string what =
        StrCat("Operation cannot be fulfilled on pods/binding \"", t.name, "\": ");
    if (!bind_uid.empty() && bind_uid != pod_uid) {
      throw Err(409, "Conflict",
                what + StrCat("Precondition failed: UID in precondition: ", bind_uid,
                              ", UID in object meta: ", pod_uid),
                {{"name", t.name}, {"kind", "pods/binding"}});
    }
    if (pod.contains("metadata") && pod["metadata"].contains("deletionTimestamp") &&
        !pod["metadata"]["deletionTimestamp"].is_null()) {
      throw Err(409, "Conflict", what + "pod is being deleted, cannot be assigned to a host",
                {{"name", t.name}, {"kind", "pods/binding"}});
    }
    const std::string current = pod.contains("spec") ? pod["spec"].value("nodeName", "") : "";
    if (!current.empty()) {
      throw Err(409, "Conflict",
                what + StrCat("pod ", t.name, " is already assigned to node \"", current, "\""),
                {{"name", t.name}, {"kind", "pods/binding"}});
    }
    Json prev = pod;
    pod["spec"]["nodeName"] = node;
    if (binding["metadata"].contains("annotations") &&
        binding["metadata"]["annotations"].is_object()) {
      for (auto& [k, v] : binding["metadata"]["annotations"].items())
        pod["metadata"]["annotations"][k] = v;
    }
    Json& conds = pod["status"]["conditions"];
    if (!conds.is_array()) conds = Json::array();
    conds.push_back({{"type", "PodScheduled"},
                     {"status", "True"},
                     {"lastProbeTime", nullptr},
                     {"lastTransitionTime", NowRfc3339()}});
    RecordLocked(*t.def, "MODIFIED", pod, std::move(prev));
    Reply(res, 201,
          {{"kind", "Status"},
           {"apiVersion", "v1"},
           {"metadata", Json::object()},
           {"status", "Success"},
           {"code", 201}});
  }

  // POST pods/{name}/eviction (policy/v1 Eviction), as the API server's eviction REST does it:
  // a pod that is not running (Pending, Succeeded, Failed) or already terminating is deleted
  // without asking its PodDisruptionBudget; otherwise the PDBs of its namespace whose selector
  // matches its labels (a null or empty selector matches nothing here) decide: none -> deleted;
  // more than one -> 500; one whose status has not caught up with its generation, or that allows
  // no disruption -> 429 with a DisruptionBudget cause (nothing changes); else its
  // status.disruptionsAllowed drops by one, the pod is noted in status.disruptedPods, and the pod
  // is deleted. deleteOptions.preconditions.uid guards against evicting a re-created pod (409).
  // 201 with a Success Status when the pod is gone. Not modelled: unhealthyPodEvictionPolicy
  // (an unready pod is budgeted like a ready one), dry runs, grace periods.
  void Evict(httplib::Response& res, const Target& t, const Json& eviction) {
    if (!eviction.is_object()) throw Err(400, "body must be a JSON object");
    const std::string body_name = MetaStr(eviction, "name");
    if (!body_name.empty() && body_name != t.name)
      throw Err(400, "name in URL does not match name in Eviction object");
    MutexLock l(mu);
    auto& pods = objects[ResId(*t.def)];
    auto it = pods.find(Key(t.ns, t.name));
    if (it == pods.end()) throw NotFoundErr(t);
    const Json& pod = it->second;
    const Json* pre = nullptr;
    if (auto d = eviction.find("deleteOptions"); d != eviction.end() && d->is_object()) {
      if (auto p = d->find("preconditions"); p != d->end() && p->is_object()) pre = &*p;
    }
    if (pre != nullptr && pre->contains("uid") && (*pre)["uid"].is_string() &&
        (*pre)["uid"].get<std::string>() != MetaStr(pod, "uid")) {
      throw Err(
          409, "Conflict",
          StrCat("Operation cannot be fulfilled on Pod \"", t.name,
                 "\": Precondition failed: UID in precondition: ", (*pre)["uid"].get<std::string>(),
                 ", UID in object meta: ", MetaStr(pod, "uid")),
          {{"name", t.name}, {"kind", "Pod"}});
    }
    const std::string phase = pod.contains("status") ? pod["status"].value("phase", "") : "";
    const bool terminating = pod["metadata"].contains("deletionTimestamp") &&
                             !pod["metadata"]["deletionTimestamp"].is_null();
    const bool ignore_pdb =
        phase == "Pending" || phase == "Succeeded" || phase == "Failed" || terminating;
    if (!ignore_pdb) {
      const ResDef* pdb_def = FindByPlural("poddisruptionbudgets");
      auto& pdbs = objects[ResId(*pdb_def)];
      const Json labels = pod["metadata"].contains("labels") ? pod["metadata"]["labels"] : Json();
      std::vector<Json*> matching;
      for (auto& [key, pdb] : pdbs) {
        if (MetaStr(pdb, "namespace") != t.ns) continue;
        const Json sel = pdb.contains("spec") ? pdb["spec"].value("selector", Json()) : Json();
        if (!sel.is_object() || sel.empty()) continue;  // nil or empty: matches nothing
        const auto m = LabelSelectorMatches(sel, labels);
        if (m.ok() && *m) matching.push_back(&pdb);
      }
      if (matching.size() > 1) {
        throw Err(500, "InternalError",
                  "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                  "does not support.",
                  nullptr);
      }
      if (matching.size() == 1) {
        Json& pdb = *matching[0];
        const std::string pdb_name = MetaStr(pdb, "name");
        const Json st = pdb.contains("status") ? pdb["status"] : Json::object();
        auto budget_err = [&](const std::string& cause) {
          return Err(429, "TooManyRequests",
                     "Cannot evict pod as it would violate the pod's disruption budget.",
                     {{"causes", {{{"reason", "DisruptionBudget"}, {"message", cause}}}}});
        };
        const int64_t generation = pdb["metadata"].value("generation", int64_t{0});
        if (st.value("observedGeneration", int64_t{0}) < generation) {
          throw budget_err(StrCat("The disruption budget ", pdb_name,
                                  " is still being processed by the server."));
        }
        const int64_t allowed = st.value("disruptionsAllowed", int64_t{0});
        if (allowed < 0)
          throw Err(403, "Forbidden", "pdb disruptions allowed is negative", nullptr);
        if (allowed == 0) {
          throw budget_err(StrCat("The disruption budget ", pdb_name, " needs ",
                                  st.value("desiredHealthy", int64_t{0}), " healthy pods and has ",
                                  st.value("currentHealthy", int64_t{0}), " currently"));
        }
        Json prev = pdb;
        pdb["status"]["disruptionsAllowed"] = allowed - 1;
        pdb["status"]["disruptedPods"][t.name] = NowRfc3339();
        RecordLocked(*pdb_def, "MODIFIED", pdb, std::move(prev));
      }
    }
    Json gone = std::move(it->second);
    pods.erase(it);
    RecordLocked(*t.def, "DELETED", gone, nullptr);
    Reply(res, 201,
          {{"kind", "Status"},
           {"apiVersion", "v1"},
           {"metadata", Json::object()},
           {"status", "Success"}});
  }

  static ApiError ConflictErr(const Target& t) {
    return Err(409, "Conflict",
               StrCat("Operation cannot be fulfilled on ", t.def->plural, " \"", t.name,
                      "\": the object has been modified; please apply your changes to the latest "
                      "version and try again"),
               {{"name", t.name}, {"kind", t.def->plural}});
  }

  // What the real server's strategy does to a resource.k8s.io write (drop the fields of disabled
  // gates, validate); other kinds pass unchanged. Throws 422 Invalid with the field errors.
  void AdmitLocked(const ResDef& d, const std::string& name, Json& obj, const Json* old,
                   bool status_write, const Target* t = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (std::string(d.prefix) != kDraPrefix) return;
    std::vector<std::string> errs = AdmitDraWrite(d.plural, obj, old, status_write, gates);
    if (t != nullptr && old != nullptr && std::string(d.plural) == "resourceclaims")
      for (auto& e : DeviceStatusErrorsLocked(*t, obj, *old)) errs.push_back(std::move(e));
    if (errs.empty()) return;
    std::string list;
    Json causes = Json::array();
    for (const auto& e : errs) {
      list += StrCat(list.empty() ? "" : ", ", e);
      const size_t colon = e.find(": ");
      causes.push_back({{"reason", "FieldValueInvalid"},
                        {"message", e.substr(colon == std::string::npos ? 0 : colon + 2)},
                        {"field", e.substr(0, colon)}});
    }
    throw Err(422, "Invalid",
              StrCat(d.kind, ".resource.k8s.io \"", name,
                     "\" is invalid: ", errs.size() == 1 ? list : StrCat("[", list, "]")),
              {{"name", name}, {"group", "resource.k8s.io"}, {"kind", d.kind}, {"causes", causes}});
  }

  // Replaces the stored object with `next` (already validated), keeping identity fields.
  Json CommitLocked(const Target& t, Json& stored, Json next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (t.sub == "status") {
      Json merged = stored;
      merged["status"] = next.contains("status") ? next["status"] : Json::object();
      next = std::move(merged);
    } else if (t.def->has_status) {
      // The main resource never writes status (the real strategies copy the stored one).
      if (stored.contains("status")) {
        next["status"] = stored["status"];
      } else {
        next.erase("status");
      }
    }
    // As the real server's object-meta update validation: a write naming another uid is refused
    // (a pod re-created under the same name is never changed by a write meant for the old one).
    if (next["metadata"].is_object() && next["metadata"].contains("uid") &&
        next["metadata"]["uid"].is_string() &&
        !next["metadata"]["uid"].get<std::string>().empty() &&
        next["metadata"]["uid"] != stored["metadata"]["uid"]) {
      throw Err(422, "Invalid",
                StrCat(t.def->kind, " \"", t.name, "\" is invalid: metadata.uid: Invalid value: \"",
                       next["metadata"]["uid"].get<std::string>(), "\": field is immutable"),
                Json{{"name", t.name}, {"kind", t.def->plural}});
    }
    for (const char* f : {"name", "namespace", "uid", "creationTimestamp"}) {
      if (stored["metadata"].contains(f)) next["metadata"][f] = stored["metadata"][f];
    }
    next["kind"] = t.def->kind;
    next["apiVersion"] = t.def->api_version;
    AdmitLocked(*t.def, t.name, next, &stored, t.sub == "status", &t);
    next["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"];
    if (next == stored) return stored;  // no-op writes do not bump resourceVersion
    Json prev = stored;
    RecordLocked(*t.def, "MODIFIED", next, std::move(prev));
    stored = next;
    return stored;
  }

  void HandlePut(const httplib::Request& req, httplib::Response& res) {
    Guard(req, res, [&](const Target& t) {
      if (t.name.empty())
        throw Err(405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource", nullptr);
      Json body = ParseBody(req);
      if (!body.is_object() || !body["metadata"].is_object())
        throw Err(400, "body must be an object with metadata");
      if (MetaStr(body, "name") != t.name) {
        throw Err(400, StrCat("the name of the object (", MetaStr(body, "name"),
                              ") does not match the name on the URL (", t.name, ")"));
      }
      MutexLock l(mu);
      auto& m = objects[ResId(*t.def)];
      auto it = m.find(Key(t.def->namespaced ? t.ns : "", t.name));
      if (it == m.end()) throw NotFoundErr(t);
      const std::string want = MetaStr(body, "resourceVersion");
      if (!want.empty() && want != MetaStr(it->second, "resourceVersion")) throw ConflictErr(t);
      Reply(res, 200, CommitLocked(t, it->second, std::move(body)));
    });
  }

  void HandlePatch(const httplib::Request& req, httplib::Response& res) {
    Guard(req, res, [&](const Target& t) {
      if (t.name.empty())
        throw Err(405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource", nullptr);
      std::string ct = req.get_header_value("Content-Type");
      ct = ct.substr(0, ct.find(';'));
      Json patch = ParseBody(req);
      MutexLock l(mu);
      auto& m = objects[ResId(*t.def)];
      auto it = m.find(Key(t.def->namespaced ? t.ns : "", t.name));
      if (it == m.end()) throw NotFoundErr(t);
      Json next = it->second;
      if (ct == "application/json-patch+json") {
        if (!patch.is_array()) throw Err(400, "json patch must be an array of operations");
        try {
          next = next.patch(patch);
        } catch (const Json::exception& e) {
          throw Err(
              422, "Invalid",
              StrCat("the server rejected our request due to an error in our request: ", e.what()),
              nullptr);
        }
      } else if (ct == "application/merge-patch+json" ||
                 ct == "application/strategic-merge-patch+json") {
        if (!patch.is_object()) throw Err(400, "merge patch must be a JSON object");
        next.merge_patch(patch);
      } else {
        throw Err(
            415, "UnsupportedMediaType",
            StrCat(
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, "
                "application/strategic-merge-patch+json"),
            nullptr);
      }
      if (!next.is_object() || !next["metadata"].is_object())
        throw Err(422, "Invalid", "patched object has no metadata", nullptr);
      if (MetaStr(next, "resourceVersion") != MetaStr(it->second, "resourceVersion"))
        throw ConflictErr(t);
      Reply(res, 200, CommitLocked(t, it->second, std::move(next)));
    });
  }

  void HandleDelete(const httplib::Request& req, httplib::Response& res) {
    Guard(req, res, [&](const Target& t) {
      if (t.name.empty())
        throw Err(405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource", nullptr);
      MutexLock l(mu);
      auto& m = objects[ResId(*t.def)];
      auto it = m.find(Key(t.def->namespaced ? t.ns : "", t.name));
      if (it == m.end()) throw NotFoundErr(t);
      Json obj = std::move(it->second);
      m.erase(it);
      RecordLocked(*t.def, "DELETED", obj, nullptr);
      Reply(
          res, 200,
          {{"kind", "Status"},
           {"apiVersion", "v1"},
           {"metadata", Json::object()},
           {"status", "Success"},
           {"details", {{"name", t.name}, {"kind", t.def->plural}, {"uid", MetaStr(obj, "uid")}}}});
    });
  }

  // ---------------- discovery ----------------

  Json ResourceList(const std::string& prefix, const std::string& group_version) const {
    Json resources = Json::array();
    for (const auto& d : kResources) {
      if (prefix != d.prefix) continue;
      Json r = {{"name", d.plural},
                {"singularName", d.singular},
                {"namespaced", d.namespaced},
                {"kind", d.kind},
                {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}};
      if (*d.short_name) r["shortNames"] = {d.short_name};
      resources.push_back(r);
      if (d.has_status) {
        resources.push_back({{"name", std::string(d.plural) + "/status"},
                             {"singularName", ""},
                             {"namespaced", d.namespaced},
                             {"kind", d.kind},
                             {"verbs", {"get", "patch", "update"}}});
      }
      if (std::string(d.plural) == "pods") {
        resources.push_back({{"name", "pods/binding"},
                             {"singularName", ""},
                             {"namespaced", true},
                             {"kind", "Binding"},
                             {"verbs", {"create"}}});
        // kubectl drain looks for this entry (group policy, version v1) before it evicts.
        resources.push_back({{"name", "pods/eviction"},
                             {"singularName", ""},
                             {"namespaced", true},
                             {"group", "policy"},
                             {"version", "v1"},
                             {"kind", "Eviction"},
                             {"verbs", {"create"}}});
      }
    }
    return {{"kind", "APIResourceList"},
            {"apiVersion", "v1"},
            {"groupVersion", group_version},
            {"resources", resources}};
  }

  void InstallRoutes() {
    svr->set_pre_routing_handler(
        [this](const httplib::Request& q, httplib::Response& r) { return PreRoute(q, r); });
    svr->Get("/version", [this](const httplib::Request&, httplib::Response& res) {
      Reply(res, 200,
            {{"major", "1"},
             {"minor", std::to_string(opts.kube_minor)},
             {"gitVersion", StrCat("v1.", opts.kube_minor, ".0-hami-fake")},
             {"platform", "linux/amd64"},
             {"goVersion", "n/a"},
             {"compiler", "n/a"},
             {"buildDate", "2026-01-01T00:00:00Z"},
             {"gitCommit", "0"},
             {"gitTreeState", "clean"}});
    });
    svr->Get("/api", [this](const httplib::Request&, httplib::Response& res) {
      Reply(res, 200,
            {{"kind", "APIVersions"},
             {"versions", {"v1"}},
             {"serverAddressByClientCIDRs",
              {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", StrCat(opts.host, ":", port)}}}}});
    });
    svr->Get("/apis", [this](const httplib::Request&, httplib::Response& res) {
      Json groups = Json::array();
      for (const char* g : kGroups) {
        if (std::string(g) == "resource.k8s.io" && !DraServed()) continue;
        Json v = {{"groupVersion", std::string(g) + "/v1"}, {"version", "v1"}};
        groups.push_back({{"name", g}, {"versions", {v}}, {"preferredVersion", v}});
      }
      Reply(res, 200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}});
    });
    svr->Get("/api/v1", [this](const httplib::Request&, httplib::Response& res) {
      Reply(res, 200, ResourceList("/api/v1", "v1"));
    });
    for (const char* g : kGroups) {
      if (std::string(g) == "resource.k8s.io" && !DraServed()) continue;
      const std::string prefix = StrCat("/apis/", g, "/v1");
      const std::string gv = StrCat(g, "/v1");
      svr->Get(prefix, [this, prefix, gv](const httplib::Request&, httplib::Response& res) {
        Reply(res, 200, ResourceList(prefix, gv));
      });
    }
    // TokenReview (authentication.k8s.io/v1): a create that stores nothing; the status says whether
    // the token is one AddToken registered, and as whom.
    svr->Post("/apis/authentication.k8s.io/v1/tokenreviews",
              [this](const httplib::Request& q, httplib::Response& r) {
                auto body = Json::parse(q.body, nullptr, false);
                if (body.is_discarded() || !body.is_object() || !body.contains("spec") ||
                    !body["spec"].is_object() || !body["spec"].contains("token") ||
                    !body["spec"]["token"].is_string()) {
                  Reply(r, 400, MakeStatus(400, "BadRequest", "TokenReview: spec.token required"));
                  return;
                }
                Json status{{"authenticated", false}, {"error", "invalid bearer token"}};
                {
                  MutexLock l(mu);
                  auto it = tokens.find(body["spec"]["token"].get<std::string>());
                  if (it != tokens.end())
                    status = Json{{"authenticated", true}, {"user", it->second}};
                }
                body["status"] = status;
                body["metadata"] = Json{{"creationTimestamp", nullptr}};
                Reply(r, 201, body);
              });
    const std::string any = R"(/apis?/.+)";
    svr->Get(any, [this](const httplib::Request& q, httplib::Response& r) { HandleGet(q, r); });
    svr->Post(any, [this](const httplib::Request& q, httplib::Response& r) { HandlePost(q, r); });
    svr->Put(any, [this](const httplib::Request& q, httplib::Response& r) { HandlePut(q, r); });
    svr->Patch(any, [this](const httplib::Request& q, httplib::Response& r) { HandlePatch(q, r); });
    svr->Delete(any,
                [this](const httplib::Request& q, httplib::Response& r) { HandleDelete(q, r); });
    svr->set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty())
        Reply(res, res.status,
              MakeStatus(res.status, ReasonFor(res.status),
                         "the server could not find the requested resource"));
    });
  }
};

FakeApiServer::FakeApiServer(FakeApiServerOptions opts)
    : impl_(std::make_unique<Impl>(std::move(opts))) {}
FakeApiServer::~FakeApiServer() {
  Stop();
}

Status FakeApiServer::Start() {
  Impl& im = *impl_;
  if (im.svr) return FailedPrecondition("fake apiserver already started");
  if (!im.opts.tls_cert_file.empty() || !im.opts.tls_key_file.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        im.opts.tls_cert_file.c_str(), im.opts.tls_key_file.c_str(),
        im.opts.tls_client_ca_file.empty() ? nullptr : im.opts.tls_client_ca_file.c_str());
    if (!ssl->is_valid()) {
      return InvalidArgument("fake apiserver: cannot load TLS certificate ", im.opts.tls_cert_file,
                             " / key ", im.opts.tls_key_file);
    }
    im.svr = std::move(ssl);
    im.tls = true;
  } else {
    im.svr = std::make_unique<httplib::Server>();
  }
  const int threads = im.opts.threads;
  im.svr->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  im.svr->set_keep_alive_max_count(1'000'000);
  im.svr->set_keep_alive_timeout(1);
  im.svr->set_tcp_nodelay(true);
  im.svr->set_payload_max_length(64 << 20);
  im.InstallRoutes();
  if (im.opts.port == 0) {
    im.port = im.svr->bind_to_any_port(im.opts.host);
  } else {
    im.port = im.svr->bind_to_port(im.opts.host, im.opts.port) ? im.opts.port : -1;
  }
  if (im.port <= 0) {
    im.svr.reset();
    return Unavailable("fake apiserver: cannot listen on ", im.opts.host, ":", im.opts.port);
  }
  im.thread = std::thread([&im] { im.svr->listen_after_bind(); });
  while (!im.svr->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return OkStatus();
}

void FakeApiServer::Stop() {
  Impl& im = *impl_;
  if (!im.svr) return;
  {
    MutexLock l(im.mu);
    im.stopping = true;
  }
  im.cv.NotifyAll();
  im.svr->stop();
  if (im.thread.joinable()) im.thread.join();
  im.svr.reset();
  MutexLock l(im.mu);
  im.stopping = false;
}

int FakeApiServer::port() const {
  return impl_->port;
}
std::string FakeApiServer::url() const {
  return StrCat(impl_->tls ? "https://" : "http://", impl_->opts.host, ":", impl_->port);
}

StatusOr<nlohmann::json> FakeApiServer::Upsert(const std::string& plural, nlohmann::json obj) {
  const ResDef* d = FindByPlural(plural);
  if (!d) return InvalidArgument("fake apiserver: unknown resource \"", plural, "\"");
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object() ||
      MetaStr(obj, "name").empty()) {
    return InvalidArgument("fake apiserver: object needs metadata.name");
  }
  Impl& im = *impl_;
  MutexLock l(im.mu);
  std::string ns = d->namespaced ? MetaStr(obj, "namespace") : "";
  if (d->namespaced && ns.empty()) ns = "default";
  auto& m = im.objects[ResId(*d)];
  const std::string key = Key(ns, MetaStr(obj, "name"));
  auto it = m.find(key);
  Json prev = it == m.end() ? Json(nullptr) : it->second;
  if (!prev.is_null()) {
    obj["metadata"]["uid"] = prev["metadata"]["uid"];
    obj["metadata"]["creationTimestamp"] = prev["metadata"]["creationTimestamp"];
  }
  im.FillNewLocked(*d, obj, ns);
  const bool added = prev.is_null();
  im.RecordLocked(*d, added ? "ADDED" : "MODIFIED", obj, std::move(prev));
  m[key] = obj;
  return obj;
}

std::optional<nlohmann::json> FakeApiServer::Get(const std::string& plural, const std::string& ns,
                                                 const std::string& name) const {
  const ResDef* d = FindByPlural(plural);
  if (!d) return std::nullopt;
  MutexLock l(impl_->mu);
  auto rit = impl_->objects.find(ResId(*d));
  if (rit == impl_->objects.end()) return std::nullopt;
  auto it = rit->second.find(Key(d->namespaced ? (ns.empty() ? "default" : ns) : "", name));
  if (it == rit->second.end()) return std::nullopt;
  return it->second;
}

Status FakeApiServer::Delete(const std::string& plural, const std::string& ns,
                             const std::string& name) {
  const ResDef* d = FindByPlural(plural);
  if (!d) return InvalidArgument("fake apiserver: unknown resource \"", plural, "\"");
  Impl& im = *impl_;
  MutexLock l(im.mu);
  auto& m = im.objects[ResId(*d)];
  auto it = m.find(Key(d->namespaced ? (ns.empty() ? "default" : ns) : "", name));
  if (it == m.end()) return NotFound(plural, " \"", name, "\" not found");
  Json obj = std::move(it->second);
  m.erase(it);
  im.RecordLocked(*d, "DELETED", obj, nullptr);
  return OkStatus();
}

std::vector<nlohmann::json> FakeApiServer::List(const std::string& plural) const {
  std::vector<nlohmann::json> out;
  const ResDef* d = FindByPlural(plural);
  if (!d) return out;
  MutexLock l(impl_->mu);
  auto rit = impl_->objects.find(ResId(*d));
  if (rit == impl_->objects.end()) return out;
  for (const auto& [k, v] : rit->second) out.push_back(v);
  return out;
}

Status FakeApiServer::Seed(const nlohmann::json& objects) {
  if (objects.is_array()) {
    for (const auto& o : objects) HAMI_RETURN_IF_ERROR(Seed(o));
    return OkStatus();
  }
  if (!objects.is_object()) return InvalidArgument("seed: expected an object, a List or an array");
  const std::string kind = objects.value("kind", "");
  if (kind == "List" || (kind.size() > 4 && kind.substr(kind.size() - 4) == "List")) {
    if (!objects.contains("items") || !objects["items"].is_array())
      return InvalidArgument("seed: ", kind, " has no items array");
    const std::string item_kind = kind == "List" ? "" : kind.substr(0, kind.size() - 4);
    for (auto item : objects["items"]) {
      if (!item.contains("kind") && !item_kind.empty()) item["kind"] = item_kind;
      HAMI_RETURN_IF_ERROR(Seed(item));
    }
    return OkStatus();
  }
  const ResDef* d = FindByKind(kind, objects.value("apiVersion", ""));
  if (!d) d = FindByKind(kind, "");
  if (!d)
    return InvalidArgument(
        "seed: unsupported kind \"", kind,
        "\" (supported: Pod, Node, Event, Namespace, ResourceQuota, ConfigMap, Lease, "
        "PodDisruptionBudget)");
  return Upsert(d->plural, objects).status();
}

std::string FakeApiServer::CurrentResourceVersion() const {
  MutexLock l(impl_->mu);
  return std::to_string(impl_->rv);
}

void FakeApiServer::InjectErrors(const std::string& method, const std::string& path_regex,
                                 int http_code, int count, int retry_after_seconds) {
  MutexLock l(impl_->mu);
  impl_->rules.push_back({method, std::regex(path_regex), http_code, count, retry_after_seconds});
}

void FakeApiServer::DropWatches() {
  {
    MutexLock l(impl_->mu);
    ++impl_->drop_generation;
  }
  impl_->cv.NotifyAll();
}

void FakeApiServer::ForceGone(int count) {
  MutexLock l(impl_->mu);
  impl_->force_gone += count;
}

void FakeApiServer::ExpireContinueTokens(int count) {
  MutexLock l(impl_->mu);
  impl_->expire_continue += count;
}

void FakeApiServer::InjectEndlessBody(const std::string& path_regex, int count) {
  MutexLock l(impl_->mu);
  impl_->endless.push_back({std::regex(path_regex), count});
}

int64_t FakeApiServer::EndlessBytesSent() const {
  return impl_->endless_bytes->load();
}

void FakeApiServer::Compact() {
  {
    MutexLock l(impl_->mu);
    impl_->log.clear();
    impl_->compacted_rv = impl_->rv;
  }
  impl_->cv.NotifyAll();
}

void FakeApiServer::Partition(const std::string& authorization, bool cut) {
  {
    MutexLock l(impl_->mu);
    impl_->partitioned[authorization] = cut;
  }
  impl_->cv.NotifyAll();
}

void FakeApiServer::Authorize(const nlohmann::json& rbac_objects) {
  MutexLock l(impl_->mu);
  impl_->rbac.emplace(rbac_objects);
}

void FakeApiServer::AddToken(const std::string& token, nlohmann::json user) {
  MutexLock l(impl_->mu);
  impl_->tokens[token] = std::move(user);
}

void FakeApiServer::SetLatency(std::chrono::milliseconds latency) {
  MutexLock l(impl_->mu);
  impl_->latency = latency;
}

std::vector<FakeApiServer::RequestRecord> FakeApiServer::Requests() const {
  MutexLock l(impl_->mu);
  return impl_->requests;
}

int64_t FakeApiServer::CountRequests(const std::string& method,
                                     const std::string& path_regex) const {
  std::regex re(path_regex);
  MutexLock l(impl_->mu);
  int64_t n = 0;
  for (const auto& r : impl_->requests) {
    if ((method.empty() || r.method == method) && std::regex_search(r.path, re)) ++n;
  }
  return n;
}

int FakeApiServer::OpenWatches() const {
  MutexLock l(impl_->mu);
  return impl_->open_watches;
}

}  // namespace hami::k8s::testing
