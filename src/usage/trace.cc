#include "usage/trace.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace hami::usage {

namespace {

constexpr std::string_view kHeader = "minute,pod,duty_pct,mem_mib";

// Splits `line` at commas into at most `max` fields; false when there are more.
bool SplitFields(std::string_view line, std::vector<std::string_view>* out, size_t max) {
  out->clear();
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    if (out->size() == max) return false;
    out->push_back(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return true;
    start = comma + 1;
  }
}

bool ParseInt(std::string_view s, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

// "12.345" -> 1235 (hundredths of a percent, rounded half up); at most 6 decimals.
bool ParseDuty(std::string_view s, int32_t* out) {
  const size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  if (dot != std::string_view::npos && frac.empty()) return false;
  int64_t w = 0;
  if (!ParseInt(whole, 100, &w) || frac.size() > 6) return false;
  int64_t f = 0;
  for (size_t i = 0; i < 6; ++i) {
    const char c = i < frac.size() ? frac[i] : '0';
    if (c < '0' || c > '9') return false;
    f = f * 10 + (c - '0');
  }
  const int64_t v = w * 100 + (f + 5000) / 10000;
  if (v > kDutyFull) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c > ' ' && c < 127 && c != ',' && c != '"'; });
}

}  // namespace

StatusOr<UsageTrace> ParseUsageTrace(std::string_view text, std::string_view source,
                                     const Limits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_bytes)
    return InvalidArgument(source, ": ", text.size(), " bytes, more than the limit of ",
                           limits.max_bytes);
  UsageTrace t;
  std::unordered_map<std::string, int> pod_index, workload_index;
  bool header_seen = false, has_workload = false;
  int32_t prev_minute = -1;
  std::string prev_pod;
  int64_t rows = 0, line_no = 0;
  std::vector<std::string_view> f;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto err = [&](const auto&... what) {
      return InvalidArgument(source, ":", line_no, ": ", what...);
    };
    if (line.empty() || line.front() == '#') continue;
    if (!header_seen) {
      if (line == kHeader) {
        header_seen = true;
      } else if (line == StrCat(kHeader, ",workload")) {
        header_seen = has_workload = true;
      } else {
        return err("header must be '", kHeader, "' (optionally ',workload'), got '",
                   line.substr(0, 80), "'");
      }
      continue;
    }
    if (++rows > limits.max_rows) return err("more than ", limits.max_rows, " rows");
    const size_t want = has_workload ? 5 : 4;
    if (!SplitFields(line, &f, want) || f.size() != want)
      return err("want ", want, " comma-separated fields");
    int64_t minute = 0, mem = 0;
    int32_t duty = 0;
    if (!ParseInt(f[0], limits.max_minute, &minute))
      return err("minute '", f[0].substr(0, 20), "' is not an integer in 0..", limits.max_minute);
    if (!ValidName(f[1])) return err("pod name '", f[1].substr(0, 80), "' is empty or invalid");
    if (!ParseDuty(f[2], &duty))
      return err("duty_pct '", f[2].substr(0, 20), "' is not a number in 0..100");
    if (!ParseInt(f[3], limits.max_mem_mib, &mem))
      return err("mem_mib '", f[3].substr(0, 20), "' is not an integer in 0..", limits.max_mem_mib);
    const auto m = static_cast<int32_t>(minute);
    if (m < prev_minute || (m == prev_minute && f[1] <= prev_pod))
      return err("rows must be sorted by (minute, pod) without repeats: minute ", m, " pod ", f[1],
                 " after minute ", prev_minute, " pod ", prev_pod);
    prev_minute = m;
    prev_pod.assign(f[1]);
    std::string workload;
    if (has_workload) {
      if (!f[4].empty() && !ValidName(f[4]))
        return err("workload '", f[4].substr(0, 80), "' is invalid");
      workload = f[4].empty() ? prev_pod : std::string(f[4]);  // empty: a workload of its own
    }
    auto [it, added] = pod_index.try_emplace(prev_pod, static_cast<int>(t.pods.size()));
    if (added) {
      if (static_cast<int32_t>(t.pods.size()) >= limits.max_pods)
        return err("more than ", limits.max_pods, " pods");
      auto [w, wadded] = workload_index.try_emplace(workload, static_cast<int>(t.workloads.size()));
      if (wadded) t.workloads.push_back(workload);
      PodSeries s;
      s.name = prev_pod;
      s.workload = w->second;
      s.first = m;
      t.pods.push_back(std::move(s));
    }
    PodSeries& s = t.pods[it->second];
    if (!added) {
      if (s.last() != m - 1)
        return err("pod ", s.name, " has a hole: last seen at minute ", s.last(),
                   ", again at minute ", m, " (a pod back after a gap is a new pod)");
      if (has_workload && t.workloads[s.workload] != workload)
        return err("pod ", s.name, " changes workload from '", t.workloads[s.workload], "' to '",
                   workload, "'");
    }
    s.duty.push_back(duty);
    s.mem_mib.push_back(static_cast<int32_t>(std::min<int64_t>(mem, INT32_MAX)));
    t.minutes = m + 1;
  }
  if (!header_seen) return InvalidArgument(source, ": no header line '", kHeader, "'");
  if (t.workloads.empty()) t.workloads.emplace_back();
  return t;
}

StatusOr<UsageTrace> ReadUsageTrace(const std::string& path, const Limits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read usage trace ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParseUsageTrace(ss.str(), path, limits);
}

UsageTrace CutAfter(const UsageTrace& trace, int32_t minute) {
  UsageTrace out;
  out.workloads = trace.workloads;
  for (const auto& p : trace.pods) {
    if (p.first > minute) continue;
    PodSeries s = p;
    const size_t keep = static_cast<size_t>(std::min(p.last(), minute) - p.first + 1);
    s.duty.resize(keep);
    s.mem_mib.resize(keep);
    out.minutes = std::max(out.minutes, s.last() + 1);
    out.pods.push_back(std::move(s));
  }
  return out;
}

std::string FormatUsageTrace(const UsageTrace& trace) {
  const bool workload = trace.workloads.size() > 1;
  std::string out = "# hami-usage-trace v1; step_s=60\n";
  out += StrCat(kHeader, workload ? ",workload\n" : "\n");
  // Rows by (minute, pod name): walk the minutes with the pods alive in each, sorted by name.
  std::vector<int> by_name(trace.pods.size());
  for (size_t i = 0; i < by_name.size(); ++i) by_name[i] = static_cast<int>(i);
  std::sort(by_name.begin(), by_name.end(),
            [&](int a, int b) { return trace.pods[a].name < trace.pods[b].name; });
  char buf[64];
  for (int32_t m = 0; m < trace.minutes; ++m) {
    for (int i : by_name) {
      const PodSeries& p = trace.pods[i];
      if (!p.alive(m)) continue;
      const int32_t d = p.duty[m - p.first];
      std::snprintf(buf, sizeof buf, ",%d.%02d,%d", d / 100, d % 100, p.mem_mib[m - p.first]);
      out += StrCat(m, ",", p.name, buf);
      if (workload) out += StrCat(",", trace.workloads[p.workload]);
      out += '\n';
    }
  }
  return out;
}

}  // namespace hami::usage
