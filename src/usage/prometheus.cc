#include "usage/prometheus.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

namespace hami::usage {

namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxWindowS = int64_t{7} * 24 * 3600;
constexpr int64_t kDay = int64_t{24} * 3600;

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// RFC 1123 label: a namespace.
bool ValidLabel(std::string_view s) {
  return !s.empty() && s.size() <= 63 && IsLowerAlnum(s.front()) && IsLowerAlnum(s.back()) &&
         std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// RFC 1123 subdomain: a pod name.
bool ValidSubdomain(std::string_view s) {
  return !s.empty() && s.size() <= 253 && IsLowerAlnum(s.front()) && IsLowerAlnum(s.back()) &&
         std::all_of(s.begin(), s.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-' || c == '.'; });
}

// The characters Kubernetes generates name suffixes and pod-template-hashes from
// (k8s.io/apimachinery/pkg/util/rand: no vowels, no 0, 1, 3).
bool Generated(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::string_view("bcdfghjklmnpqrstvwxz2456789").find(c) != std::string_view::npos;
  });
}

// At most 80 characters of `s` for a message, control bytes as '?' (an answer may be anything).
std::string Short(const std::string& s) {
  std::string out = s.size() > 80 ? s.substr(0, 80) + "..." : s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < ' ' || c == 127) c = '?';
  return out;
}

// A Prometheus sample value: a decimal (or exponent) number text, finite and >= 0.
std::optional<double> SampleValue(const Json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 40) return std::nullopt;
  if (!std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
      }))
    return std::nullopt;  // NaN, Inf and anything else
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(d) || d < 0) return std::nullopt;
  return d;
}

}  // namespace

StatusOr<std::string> PromQuery(PromRead read, std::string_view namespace_, int64_t step_s) {
  if (!namespace_.empty() && !ValidLabel(namespace_))
    return InvalidArgument("namespace '", Short(std::string(namespace_)),
                           "' is not a Kubernetes namespace name (lower-case letters, digits, "
                           "'-', at most 63)");
  if (step_s < 2 || step_s > 3600) return InvalidArgument("step ", step_s, " s is not in 2..3600");
  const std::string matcher =
      namespace_.empty() ? std::string() : StrCat("{namespace=\"", namespace_, "\"}");
  const std::string range = StrCat("[", step_s - 1, "s]");
  if (read == PromRead::kMemory)
    return StrCat("sum by (namespace, pod) (max_over_time(", kPromMemoryMetric, matcher, range,
                  "))");
  return StrCat("sum by (namespace, pod) (avg_over_time(", kPromDutyMetric, matcher, range, "))");
}

StatusOr<std::string> PromRangeUrl(std::string_view base, const std::string& query,
                                   const PromWindow& w) {
  if (!(base.rfind("http://", 0) == 0 || base.rfind("https://", 0) == 0) ||
      base.find_first_of(" ?#\"\n\r\t") != std::string_view::npos)
    return InvalidArgument("Prometheus URL '", Short(std::string(base)),
                           "' is not http(s)://host[:port][/path]");
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  if (w.end_s <= w.start_s || w.end_s - w.start_s > kMaxWindowS)
    return InvalidArgument("window of ", w.end_s - w.start_s,
                           " s: it must be more than 0 and at most 7 days");
  std::string q;
  for (unsigned char c : query) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      q += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      q += buf;
    }
  }
  return StrCat(base, "/api/v1/query_range?query=", q, "&start=", w.start_s, "&end=", w.end_s,
                "&step=", w.step_s);
}

namespace {

// The data.result list of a query_range answer (every check but the series').
StatusOr<Json> MatrixResult(std::string_view body, const PromLimits& limits) {
  if (body.size() > limits.max_bytes)
    return InvalidArgument("Prometheus answer of more than ", limits.max_bytes, " bytes");
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("Prometheus answer is not a JSON object (starts '",
                           Short(std::string(body.substr(0, 60))), "')");
  const Json status = j.value("status", Json());
  if (status == "error")
    return InvalidArgument("Prometheus: ", Short(j.value("errorType", Json("")).dump()), ": ",
                           Short(j.value("error", Json("")).dump()));
  if (status != "success") return InvalidArgument("Prometheus answer: status is not \"success\"");
  const Json data = j.value("data", Json());
  if (!data.is_object() || data.value("resultType", Json()) != "matrix")
    return InvalidArgument("Prometheus answer: data.resultType is not \"matrix\"");
  const Json result = data.value("result", Json());
  if (!result.is_array()) return InvalidArgument("Prometheus answer: data.result is not a list");
  if (result.size() > limits.max_series)
    return InvalidArgument("Prometheus answer: ", result.size(), " series, more than ",
                           limits.max_series);
  return result;
}

}  // namespace

StatusOr<std::vector<PromSeries>> ParsePromMatrix(std::string_view body, const PromLimits& limits) {
  HAMI_ASSIGN_OR_RETURN(const Json result, MatrixResult(body, limits));
  std::vector<PromSeries> out;
  int64_t points = 0;
  for (size_t i = 0; i < result.size(); ++i) {
    const Json& r = result[i];
    const std::string where = StrCat("Prometheus answer: series ", i);
    if (!r.is_object()) return InvalidArgument(where, " is not an object");
    const Json metric = r.value("metric", Json());
    const Json values = r.value("values", Json());
    if (!metric.is_object() || !values.is_array())
      return InvalidArgument(where, " lacks metric or values");
    PromSeries s;
    for (auto [key, field] : {std::pair{"namespace", &s.namespace_}, std::pair{"pod", &s.pod}}) {
      const Json v = metric.value(key, Json());
      if (!v.is_string()) return InvalidArgument(where, " has no ", key, " label");
      *field = v.get<std::string>();
    }
    if (!ValidLabel(s.namespace_) || !ValidSubdomain(s.pod))
      return InvalidArgument(where, ": namespace '", Short(s.namespace_), "' or pod '",
                             Short(s.pod), "' is not a valid name");
    points += static_cast<int64_t>(values.size());
    if (points > limits.max_points)
      return InvalidArgument("Prometheus answer: more than ", limits.max_points, " points");
    for (size_t k = 0; k < values.size(); ++k) {
      const Json& p = values[k];
      const std::string at = StrCat(where, " (", s.namespace_, "/", s.pod, ") point ", k);
      if (!p.is_array() || p.size() != 2 || !p[0].is_number())
        return InvalidArgument(at, " is not [time, \"value\"]");
      const double t = p[0].get<double>();
      if (!std::isfinite(t) || t < 0 || t > 1e11) return InvalidArgument(at, ": bad time");
      const std::optional<double> v = SampleValue(p[1]);
      if (!v) return InvalidArgument(at, ": value ", Short(p[1].dump()), " is not a number >= 0");
      const auto ts = static_cast<int64_t>(std::llround(t));
      if (!s.points.empty() && ts <= s.points.back().first)
        return InvalidArgument(at, ": time does not increase");
      s.points.emplace_back(ts, *v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string PromWorkloadOf(std::string_view ns, std::string_view pod) {
  std::string_view name = pod;
  const size_t last = name.rfind('-');
  if (last != std::string_view::npos && last > 0) {
    const std::string_view suffix = name.substr(last + 1);
    const std::string_view rest = name.substr(0, last);
    const size_t prev = rest.rfind('-');
    const std::string_view hash =
        prev == std::string_view::npos ? std::string_view() : rest.substr(prev + 1);
    if (suffix.size() == 5 && Generated(suffix) && hash.size() >= 6 && hash.size() <= 10 &&
        Generated(hash) && prev > 0) {
      name = rest.substr(0, prev);  // Deployment: <name>-<hash>-<suffix>
    } else if (!suffix.empty() && suffix.size() <= 9 &&
               std::all_of(suffix.begin(), suffix.end(),
                           [](char c) { return c >= '0' && c <= '9'; })) {
      name = rest;  // StatefulSet: <name>-<ordinal>
    }
  }
  return StrCat(ns, "/", name);
}

StatusOr<std::string> PromOwnerQuery(PromOwnerRead read, std::string_view namespace_,
                                     int64_t range_s) {
  if (!namespace_.empty() && !ValidLabel(namespace_))
    return InvalidArgument("namespace '", Short(std::string(namespace_)),
                           "' is not a Kubernetes namespace name (lower-case letters, digits, "
                           "'-', at most 63)");
  if (range_s < 1 || range_s > kMaxWindowS)
    return InvalidArgument("range ", range_s, " s is not in 1..", kMaxWindowS);
  const bool pod = read == PromOwnerRead::kPod;
  const std::string matcher =
      namespace_.empty() ? std::string() : StrCat("{namespace=\"", namespace_, "\"}");
  return StrCat("max by (namespace, ", pod ? "pod" : "replicaset",
                ", owner_kind, owner_name, owner_is_controller) (max_over_time(",
                pod ? kPromPodOwnerMetric : kPromReplicaSetOwnerMetric, matcher, "[", range_s,
                "s]))");
}

StatusOr<std::vector<PromOwnerRow>> ParsePromOwners(std::string_view body, PromOwnerRead read,
                                                    const PromLimits& limits) {
  HAMI_ASSIGN_OR_RETURN(const Json result, MatrixResult(body, limits));
  const char* object = read == PromOwnerRead::kPod ? "pod" : "replicaset";
  std::vector<PromOwnerRow> out;
  for (size_t i = 0; i < result.size(); ++i) {
    const Json& r = result[i];
    const std::string where = StrCat("Prometheus answer: owner series ", i);
    const Json metric = r.is_object() ? r.value("metric", Json()) : Json();
    if (!metric.is_object()) return InvalidArgument(where, " has no metric");
    PromOwnerRow row;
    std::string controller;
    for (auto [key, field] :
         {std::pair{"namespace", &row.namespace_}, std::pair{object, &row.object},
          std::pair{"owner_kind", &row.owner_kind}, std::pair{"owner_name", &row.owner_name},
          std::pair{"owner_is_controller", &controller}}) {
      const Json v = metric.value(key, Json());
      if (!v.is_string()) return InvalidArgument(where, " has no ", key, " label");
      *field = v.get<std::string>();
    }
    const bool none = row.owner_kind == "<none>";
    const bool kind_ok = !row.owner_kind.empty() && row.owner_kind.size() <= 63 &&
                         std::all_of(row.owner_kind.begin(), row.owner_kind.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c));
                         });
    if (!ValidLabel(row.namespace_) || !ValidSubdomain(row.object) || (!none && !kind_ok) ||
        (!none && !ValidSubdomain(row.owner_name)))
      return InvalidArgument(where, ": ", Short(row.namespace_), "/", Short(row.object),
                             " owned by ", Short(row.owner_kind), " '", Short(row.owner_name),
                             "' is not a valid name");
    row.controller = !none && controller == "true";
    out.push_back(std::move(row));
  }
  return out;
}

PromWorkloads PromWorkloadsOf(const std::vector<PromOwnerRow>& pods,
                              const std::vector<PromOwnerRow>& replicasets) {
  // "<ns>/<replicaset>" -> its controller's name, or "" when it has none.
  std::map<std::string, std::string> rs_controller;
  for (const PromOwnerRow& r : replicasets) {
    std::string& c = rs_controller[StrCat(r.namespace_, "/", r.object)];
    if (r.controller && (c.empty() || r.owner_name < c)) c = r.owner_name;
  }
  // "<ns>/<pod>" -> (kind, name) of its controller; the least one when rows disagree.
  std::map<std::string, std::pair<std::string, std::string>> controller;
  for (const PromOwnerRow& r : pods) {
    auto& c = controller[StrCat(r.namespace_, "/", r.object)];
    if (r.controller && (c.first.empty() || std::pair(r.owner_kind, r.owner_name) < c))
      c = {r.owner_kind, r.owner_name};
  }
  PromWorkloads out;
  for (const auto& [pod, owner] : controller) {
    const std::string ns = pod.substr(0, pod.find('/'));
    const auto& [kind, name] = owner;
    std::string workload = kind.empty() ? pod.substr(ns.size() + 1) : name;
    if (kind == "ReplicaSet") {
      if (auto rs = rs_controller.find(StrCat(ns, "/", name)); rs != rs_controller.end()) {
        if (!rs->second.empty()) workload = rs->second;
      } else if (const size_t dash = name.rfind('-');
                 dash != std::string::npos && dash > 0 && name.size() - dash - 1 >= 6 &&
                 name.size() - dash - 1 <= 10 && Generated(name.substr(dash + 1))) {
        workload = name.substr(0, dash);  // <deployment>-<pod-template-hash>
      }
    }
    out[pod] = StrCat(ns, "/", workload);
  }
  return out;
}

StatusOr<UsageTrace> TraceFromProm(const std::vector<PromSeries>& memory,
                                   const std::vector<PromSeries>& duty, const PromWindow& w,
                                   int32_t* first_minute, const PromWorkloads* workloads) {
  if (w.step_s != 60) return InvalidArgument("step must be 60 s (one trace minute)");
  if (w.end_s <= w.start_s || w.end_s - w.start_s > kMaxWindowS)
    return InvalidArgument("window must be more than 0 and at most 7 days");
  const int64_t base = w.start_s / kDay * kDay;
  struct Minute {
    std::optional<int64_t> mem;
    std::optional<int32_t> duty;
  };
  std::map<std::string, std::map<int32_t, Minute>> pods;  // "<ns>/<pod>" -> minute -> values
  auto minute_of = [&](int64_t ts) -> std::optional<int32_t> {
    if (ts < w.start_s || ts > w.end_s) return std::nullopt;
    return static_cast<int32_t>((ts - base) / 60);
  };
  for (const PromSeries& s : memory)
    for (const auto& [ts, v] : s.points)
      if (auto m = minute_of(ts))
        pods[StrCat(s.namespace_, "/", s.pod)][*m].mem =
            static_cast<int64_t>(std::ceil(std::min(v, 1e15) / 1048576.0 - 1e-9));
  for (const PromSeries& s : duty)
    for (const auto& [ts, v] : s.points)
      if (auto m = minute_of(ts))
        pods[StrCat(s.namespace_, "/", s.pod)][*m].duty =
            static_cast<int32_t>(std::llround(std::min(v, 100.0) * 100));
  // Rows by (minute, pod) as the trace format wants them.
  std::map<std::pair<int32_t, std::string>, std::pair<int64_t, int32_t>> rows;
  for (const auto& [pod, minutes] : pods) {
    std::optional<int64_t> mem;
    std::optional<int32_t> d;
    for (const auto& [m, v] : minutes) {  // the first known values fill the leading steps
      if (!mem && v.mem) mem = v.mem;
      if (!d && v.duty) d = v.duty;
    }
    auto it = minutes.begin();
    for (int32_t m = minutes.begin()->first; m <= minutes.rbegin()->first; ++m) {
      if (it != minutes.end() && it->first == m) {
        if (it->second.mem) mem = it->second.mem;
        if (it->second.duty) d = it->second.duty;
        ++it;
      }
      rows[{m, pod}] = {mem.value_or(0), d.value_or(0)};
    }
  }
  std::string text = "minute,pod,duty_pct,mem_mib,workload\n";
  for (const auto& [key, v] : rows) {
    const std::string& pod = key.second;
    const size_t slash = pod.find('/');
    char duty_text[16];
    std::snprintf(duty_text, sizeof duty_text, "%d.%02d", v.second / 100, v.second % 100);
    std::string workload;
    if (workloads != nullptr)
      if (auto it = workloads->find(pod); it != workloads->end()) workload = it->second;
    if (workload.empty()) workload = PromWorkloadOf(pod.substr(0, slash), pod.substr(slash + 1));
    text += StrCat(key.first, ",", pod, ",", duty_text, ",", v.first, ",", workload, "\n");
  }
  *first_minute = static_cast<int32_t>((w.start_s - base) / 60);
  return ParseUsageTrace(text, "prometheus");
}

}  // namespace hami::usage
