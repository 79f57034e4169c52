#include "usage/recommend.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "nlohmann/json.hpp"

namespace hami::usage {

UsageProfile ArrivalProfile(const UsageTrace& trace, int workload, int32_t start, int32_t until,
                            int32_t arrival_min, const ProfileOptions& options, int q_pct) {
  std::vector<UsageProfile> first;
  for (const PodSeries& p : trace.pods) {
    // Only whole windows: a replica that left sooner, or whose window is not over, says little.
    if (p.workload != workload || p.first <= start || p.first + arrival_min > until ||
        p.last() < p.first + arrival_min - 1)
      continue;
    first.push_back(ProfileOf(p, std::min(until, p.first + arrival_min), options));
  }
  if (first.empty()) return UsageProfile{};
  return WorkloadProfile(first, q_pct);
}

UsageProfile NewReplicaProfile(const UsageProfile& mix, UsageProfile arrivals) {
  if (arrivals.minutes == 0) return mix;
  // The mix already takes a high quantile across the pods: arrivals may show a replica lighter,
  // never make it busier (one busy first hour, a start-up burst, is a small sample).
  if (arrivals.duty_all > mix.duty_all) return mix;
  // The scheduler takes a profile's peak as the model-load spike: the workload's, not the
  // arrivals' alone.
  arrivals.mem_peak = std::max(arrivals.mem_peak, mix.mem_peak);
  return arrivals;
}

Learned Learn(const UsageTrace& trace, int32_t until, const LearnOptions& options) {
  Learned l;
  const size_t n_work = trace.workloads.size();
  std::vector<std::vector<UsageProfile>> seen(n_work);
  l.own.resize(trace.pods.size());
  l.workloads.resize(n_work);
  for (size_t w = 0; w < n_work; ++w) l.workloads[w].name = trace.workloads[w];
  for (size_t i = 0; i < trace.pods.size(); ++i) {
    const PodSeries& p = trace.pods[i];
    WorkloadModel& wl = l.workloads[static_cast<size_t>(p.workload)];
    ++wl.pods;
    l.own[i] = ProfileOf(p, until, options.profile);
    if (l.own[i].minutes == 0) continue;
    ++wl.seen_pods;
    wl.peak_mib = std::max<int64_t>(wl.peak_mib, l.own[i].mem_peak);
    seen[static_cast<size_t>(p.workload)].push_back(l.own[i]);
  }
  for (size_t w = 0; w < n_work; ++w) {
    WorkloadModel& wl = l.workloads[w];
    wl.replica = WorkloadProfile(seen[w], options.workload_q_pct);
    if (options.arrival_min > 0 && !trace.pods.empty()) {
      int32_t start = trace.pods.front().first;
      for (const PodSeries& p : trace.pods) start = std::min(start, p.first);
      wl.replica = NewReplicaProfile(
          wl.replica, ArrivalProfile(trace, static_cast<int>(w), start, until, options.arrival_min,
                                     options.profile, options.workload_q_pct));
    }
    // Nothing seen: the whole card (a workload of its own on an exclusive GPU).
    wl.gpumem_mib = wl.peak_mib > 0 ? std::min(options.card_mib,
                                               RecommendGpumem(wl.peak_mib, options.margin_pct))
                                    : options.card_mib;
  }
  return l;
}

UsageTrace Window(const UsageTrace& trace, int32_t from, int32_t until) {
  UsageTrace out;
  out.workloads = trace.workloads;
  for (const PodSeries& p : trace.pods) {
    const int32_t a = std::max(from, p.first), b = std::min(until - 1, p.last());
    if (a > b) continue;
    PodSeries s;
    s.name = p.name;
    s.workload = p.workload;
    s.first = a;
    s.duty.assign(p.duty.begin() + (a - p.first), p.duty.begin() + (b - p.first + 1));
    s.mem_mib.assign(p.mem_mib.begin() + (a - p.first), p.mem_mib.begin() + (b - p.first + 1));
    out.minutes = std::max(out.minutes, b + 1);
    out.pods.push_back(std::move(s));
  }
  // Arrival order (first minute, then name), as the reader gives it.
  std::stable_sort(out.pods.begin(), out.pods.end(), [](const PodSeries& x, const PodSeries& y) {
    return x.first != y.first ? x.first < y.first : x.name < y.name;
  });
  return out;
}

UsageTrace WorkloadTrace(const UsageTrace& trace, int workload) {
  UsageTrace out;
  out.workloads = {trace.workloads[static_cast<size_t>(workload)]};
  for (const PodSeries& p : trace.pods) {
    if (p.workload != workload) continue;
    out.pods.push_back(p);
    out.pods.back().workload = 0;
    out.minutes = std::max(out.minutes, p.last() + 1);
  }
  return out;
}

// ---- The profile annotation ----

namespace {

void AppendGroup(const DutyHistogram& h, std::string* out) {
  int last = kDutyBins - 1;
  while (last >= 0 && h[static_cast<size_t>(last)] == 0) --last;
  for (int b = 0; b <= last; ++b) {
    if (b > 0) *out += ',';
    *out += std::to_string(h[static_cast<size_t>(b)]);
  }
}

// Splits at `sep`; more than `max` parts is an error (false).
bool Split(std::string_view s, char sep, size_t max, std::vector<std::string_view>* out) {
  out->clear();
  while (true) {
    if (out->size() == max) return false;
    const size_t at = s.find(sep);
    out->push_back(s.substr(0, at));
    if (at == std::string_view::npos) return true;
    s.remove_prefix(at + 1);
  }
}

bool Int(std::string_view s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty() || s.size() > 15) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

constexpr int64_t kMaxMib = int64_t{1} << 24;  // as the trace reader's bound

Status Group(std::string_view s, std::string_view what, DutyHistogram* h) {
  h->fill(0);
  if (s.empty()) return OkStatus();
  std::vector<std::string_view> v;
  if (!Split(s, ',', kDutyBins, &v))
    return InvalidArgument("usage profile: ", what, " has more than ", kDutyBins, " bins");
  int64_t sum = 0;
  for (size_t b = 0; b < v.size(); ++b) {
    int64_t x = 0;
    if (!Int(v[b], 0, 1000, &x))
      return InvalidArgument("usage profile: ", what, " bin ", b, " '", v[b].substr(0, 16),
                             "' is not a per-mille value 0..1000");
    (*h)[b] = static_cast<uint16_t>(x);
    sum += x;
  }
  // Each bin is rounded; 21 roundings (and one more averaging) stay within 1021.
  if (sum > 1000 + kDutyBins)
    return InvalidArgument("usage profile: ", what, " sums to ", sum, " per mille");
  return OkStatus();
}

}  // namespace

std::string FormatUsageProfile(const UsageProfile& p) {
  std::string out = StrCat("v1;n=", p.minutes, ";all=", p.mem_all, ",", p.duty_all,
                           ";peak=", p.mem_peak, ";mem=");
  for (int h = 0; h < kHourBuckets; ++h)
    out += StrCat(h ? "," : "", p.mem_mib[h] < 0 ? "-" : std::to_string(p.mem_mib[h]));
  out += ";duty=";
  for (int h = 0; h < kHourBuckets; ++h)
    out += StrCat(h ? "," : "", p.duty[h] < 0 ? "-" : std::to_string(p.duty[h]));
  out += ";hist=";
  for (int h = 0; h < kHourBuckets; ++h) {
    if (h) out += '/';
    AppendGroup(p.duty_hist[h], &out);
  }
  out += ";busy=";
  AppendGroup(p.duty_hist_busiest, &out);
  return out;
}

StatusOr<UsageProfile> ParseUsageProfile(std::string_view text) {
  if (text.size() > kMaxProfileText)
    return InvalidArgument("usage profile: ", text.size(), " bytes, more than ", kMaxProfileText);
  static constexpr std::string_view kKeys[] = {
      "v1", "n=", "all=", "peak=", "mem=", "duty=", "hist=", "busy="};
  constexpr size_t kFields = std::size(kKeys);
  std::vector<std::string_view> f;
  if (!Split(text, ';', kFields, &f) || f.size() != kFields)
    return InvalidArgument("usage profile: want ", kFields,
                           " ';'-separated fields starting with v1 (", kUsageProfileAnnotation,
                           ", docs/utilization.md)");
  for (size_t i = 0; i < kFields; ++i) {
    if (f[i].substr(0, kKeys[i].size()) != kKeys[i])
      return InvalidArgument("usage profile: field ", i + 1, " must start with '", kKeys[i],
                             "', got '", f[i].substr(0, 16), "'");
    f[i].remove_prefix(kKeys[i].size());
  }
  if (!f[0].empty()) return InvalidArgument("usage profile: unknown version 'v1", f[0], "'");
  UsageProfile p;
  int64_t x = 0, y = 0;
  if (!Int(f[1], 0, int64_t{1} << 40, &p.minutes))
    return InvalidArgument("usage profile: n (minutes observed) is not an integer");
  std::vector<std::string_view> v;
  if (!Split(f[2], ',', 2, &v) || v.size() != 2 || !Int(v[0], 0, kMaxMib, &x) ||
      !Int(v[1], 0, kDutyFull, &y))
    return InvalidArgument("usage profile: all must be <mem MiB>,<duty 0..", kDutyFull, ">");
  p.mem_all = static_cast<int32_t>(x);
  p.duty_all = static_cast<int32_t>(y);
  if (!Int(f[3], 0, kMaxMib, &x)) return InvalidArgument("usage profile: peak is not MiB");
  p.mem_peak = static_cast<int32_t>(x);
  auto hours = [&](std::string_view s, std::string_view what, int64_t hi,
                   std::array<int32_t, kHourBuckets>* out) -> Status {
    if (!Split(s, ',', kHourBuckets, &v) || v.size() != kHourBuckets)
      return InvalidArgument("usage profile: ", what, " wants ", kHourBuckets, " hour values");
    for (size_t h = 0; h < v.size(); ++h) {
      int64_t z = -1;
      if (v[h] != "-" && !Int(v[h], 0, hi, &z))
        return InvalidArgument("usage profile: ", what, " hour ", h, " '", v[h].substr(0, 16),
                               "' is not '-' or an integer 0..", hi);
      (*out)[h] = static_cast<int32_t>(z);
    }
    return OkStatus();
  };
  HAMI_RETURN_IF_ERROR(hours(f[4], "mem", kMaxMib, &p.mem_mib));
  HAMI_RETURN_IF_ERROR(hours(f[5], "duty", kDutyFull, &p.duty));
  std::vector<std::string_view> groups;
  if (!Split(f[6], '/', kHourBuckets, &groups) || groups.size() != kHourBuckets)
    return InvalidArgument("usage profile: hist wants ", kHourBuckets, " '/'-separated hours");
  for (int h = 0; h < kHourBuckets; ++h) {
    const std::string what = StrCat("hist hour ", h);
    HAMI_RETURN_IF_ERROR(Group(groups[static_cast<size_t>(h)], what, &p.duty_hist[h]));
    if ((p.mem_mib[h] < 0) != (p.duty[h] < 0))
      return InvalidArgument("usage profile: hour ", h, " is observed in one of mem/duty only");
    if (p.mem_mib[h] < 0 && !groups[static_cast<size_t>(h)].empty())
      return InvalidArgument("usage profile: hour ", h, " has a histogram but no observation");
  }
  HAMI_RETURN_IF_ERROR(Group(f[7], "busy", &p.duty_hist_busiest));
  if (p.minutes == 0 && p != UsageProfile{.mem_mib = p.mem_mib, .duty = p.duty})
    return InvalidArgument("usage profile: n=0 (nothing observed) with observations");
  return p;
}

// ---- Recommendations ----

StatusOr<Recommendation> Recommend(const UsageTrace& trace, const RecommendOptions& o) {
  if (o.learn.card_mib <= 0) return InvalidArgument("--gpu-memory-gib must be positive");
  if (o.window_min < 0) return InvalidArgument("--window-min must be >= 0");
  Recommendation r;
  r.card_mib = o.learn.card_mib;
  // A minute past the end of the trace is its end.
  r.until = o.until_min < 0 ? trace.minutes : std::min(o.until_min, trace.minutes);
  if (r.until <= 0) return InvalidArgument("--until-min must be > 0 (nothing to learn from)");
  r.from = o.window_min > 0 ? std::max(0, r.until - o.window_min) : 0;
  const UsageTrace window = Window(trace, r.from, r.until);
  if (window.pods.empty())
    return InvalidArgument("no pod has a row in minutes ", r.from, "..", r.until - 1,
                           " (the trace has minutes 0..", trace.minutes - 1, ")");
  Learned l = Learn(window, r.until, o.learn);
  // Learn counted the window's pods; the pods of the whole trace are what gets a recommendation.
  for (auto& m : l.workloads) m.pods = 0;
  for (const PodSeries& p : trace.pods) ++l.workloads[static_cast<size_t>(p.workload)].pods;
  for (auto& m : l.workloads) {
    WorkloadRecommendation w;
    w.profile = FormatUsageProfile(m.replica);
    w.model = std::move(m);
    if (trace.minutes > r.until) w.later_pods = w.later_oom_pods = 0;
    r.workloads.push_back(std::move(w));
  }
  for (const PodSeries& p : trace.pods) {
    WorkloadRecommendation& w = r.workloads[static_cast<size_t>(p.workload)];
    r.pods.push_back({p.name, p.workload, w.model.gpumem_mib, w.gpucores});
    if (p.last() < r.until) continue;
    ++w.later_pods;
    for (int32_t m = std::max(r.until, p.first); m <= p.last(); ++m)
      if (p.mem_mib[static_cast<size_t>(m - p.first)] > w.model.gpumem_mib) {
        ++w.later_oom_pods;
        break;
      }
  }
  return r;
}

namespace {

const WorkloadRecommendation* Find(const Recommendation& r, const std::string& name) {
  for (const auto& w : r.workloads)
    if (w.model.name == name) return &w;
  return nullptr;
}

}  // namespace

std::string RecommendJson(const Recommendation& r) {
  nlohmann::json work = nlohmann::json::object();
  for (const auto& w : r.workloads) {
    nlohmann::json j = {{"pods", w.model.pods},
                        {"observed_pods", w.model.seen_pods},
                        {"peak_mib", w.model.peak_mib},
                        {"gpumem_mib", w.model.gpumem_mib},
                        {"gpucores", w.gpucores},
                        {"window", {{"from_minute", r.from}, {"until_minute", r.until}}},
                        {"capacity_mib", r.card_mib},
                        {"profile", w.profile}};
    if (w.later_pods >= 0)
      j["after_window"] = {{"pods", w.later_pods}, {"oom_pods", w.later_oom_pods}};
    if (w.gpus_now >= 0) j["saving"] = {{"gpus_now", w.gpus_now}, {"gpus_after", w.gpus_after}};
    work[w.model.name] = std::move(j);
  }
  nlohmann::json pods = nlohmann::json::object();
  for (const auto& p : r.pods)
    pods[p.pod] = {{"workload", r.workloads[static_cast<size_t>(p.workload)].model.name},
                   {"gpumem_mib", p.gpumem_mib},
                   {"gpucores", p.gpucores}};
  nlohmann::json j = {{"workloads", std::move(work)}, {"pods", std::move(pods)}};
  return j.dump(1) + "\n";
}

std::string RecommendTable(const std::string& source, const Recommendation& r) {
  // `source` is a trace file's name, or the flag that read it ("--prometheus URL").
  std::string out =
      StrCat("hami recommend ", source.rfind("--", 0) == 0 ? "" : "--usage ", source,
             ": learned from minutes ", r.from, "..", r.until - 1, ", ", r.card_mib, " MiB GPUs\n");
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-24s %5s %9s %10s %8s %9s %10s %10s\n", "workload", "pods",
                "peak_mib", "gpumem_mib", "gpucores", "gpus_now", "gpus_after", "later_oom");
  out += buf;
  auto num = [](int64_t v) { return v < 0 ? std::string("-") : std::to_string(v); };
  for (const auto& w : r.workloads) {
    std::snprintf(buf, sizeof buf, "%-24s %5lld %9lld %10lld %8s %9s %10s %10s\n",
                  w.model.name.empty() ? "(all pods)" : w.model.name.substr(0, 24).c_str(),
                  static_cast<long long>(w.model.pods), static_cast<long long>(w.model.peak_mib),
                  static_cast<long long>(w.model.gpumem_mib),
                  w.gpucores > 0 ? std::to_string(w.gpucores).c_str() : "unset",
                  num(w.gpus_now).c_str(), num(w.gpus_after).c_str(),
                  w.later_pods < 0 ? "-" : StrCat(w.later_oom_pods, "/", w.later_pods).c_str());
    out += buf;
  }
  for (const auto& w : r.workloads)
    out += StrCat(kUsageProfileAnnotation, " (", w.model.name.empty() ? "(all pods)" : w.model.name,
                  "): ", w.profile, "\n");
  return out;
}

StatusOr<std::string> RecommendPatch(const Recommendation& r, const std::string& workload,
                                     const std::string& container) {
  const WorkloadRecommendation* w = nullptr;
  if (workload.empty() && r.workloads.size() == 1) {
    w = &r.workloads[0];
  } else {
    w = Find(r, workload);
    if (w == nullptr || workload.empty()) {
      std::string names;
      for (const auto& x : r.workloads) names += StrCat(names.empty() ? "" : ", ", x.model.name);
      return InvalidArgument("--format patch is for one workload: name it with --workload (",
                             workload.empty() ? "the trace has several" : "unknown: " + workload,
                             "; the trace's: ", names.substr(0, 400), ")");
    }
  }
  const std::string gpumem = std::to_string(w->model.gpumem_mib);
  nlohmann::json j;
  if (!container.empty()) {
    j = {{"spec",
          {{"template",
            {{"metadata", {{"annotations", {{std::string(kUsageProfileAnnotation), w->profile}}}}},
             {"spec",
              {{"containers",
                nlohmann::json::array(
                    {{{"name", container},
                      {"resources", {{"limits", {{"nvidia.com/gpumem", gpumem}}}}}}})}}}}}}}};
  } else {
    // JSON pointer: '/' in a key is written "~1".
    j = nlohmann::json::array(
        {{{"op", "add"},
          {"path", "/spec/template/metadata/annotations/hami.io~1usage-profile"},
          {"value", w->profile}},
         {{"op", "add"},
          {"path", "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpumem"},
          {"value", gpumem}}});
  }
  return j.dump() + "\n";
}

}  // namespace hami::usage
