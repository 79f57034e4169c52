#include "sim/usage_plot.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

namespace hami::sim {

std::vector<UsageMinute> UsageSeries(const usage::UsageTrace& trace,
                                     const usage::Placement& placement, int32_t warmup_min) {
  std::vector<UsageMinute> out;
  const int32_t from = std::max<int32_t>(0, warmup_min);
  if (trace.minutes <= from) return out;
  out.resize(static_cast<size_t>(trace.minutes - from));
  for (size_t i = 0; i < out.size(); ++i) out[i].minute = from + static_cast<int32_t>(i);
  std::map<int, int64_t> duty;  // GPU -> sum of duty in the minute
  for (int32_t m = from; m < trace.minutes; ++m) {
    UsageMinute& u = out[static_cast<size_t>(m - from)];
    duty.clear();
    for (size_t p = 0; p < trace.pods.size() && p < placement.size(); ++p) {
      const usage::PodSeries& pod = trace.pods[p];
      if (!pod.alive(m)) continue;
      ++u.pods;
      const usage::Segment* on = nullptr;
      for (const usage::Segment& s : placement[p])
        if (s.from_minute <= m) on = &s;
      if (on == nullptr) continue;
      duty[on->gpu] += pod.duty[static_cast<size_t>(m - pod.first)];
    }
    u.gpus = static_cast<int64_t>(duty.size());
    for (const auto& [gpu, d] : duty) {
      u.util_cp += std::min<int64_t>(d, usage::kDutyFull);
      u.contended += d > usage::kDutyFull;
    }
  }
  return out;
}

namespace {

constexpr int kWidth = 900, kLeft = 60, kRight = 20, kPanel = 170, kGap = 40, kTop = 40;

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string UsagePlotSvg(const std::vector<UsageMinute>& series, const std::string& title) {
  const int height = kTop + 3 * (kPanel + kGap);
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
                    "\" height=\"" + std::to_string(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  std::string escaped;
  for (char c : title) {
    if (c == '<')
      escaped += "&lt;";
    else if (c == '>')
      escaped += "&gt;";
    else if (c == '&')
      escaped += "&amp;";
    else
      escaped += c;
  }
  svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"20\" font-size=\"13\">" + escaped +
         "</text>\n";
  if (series.empty()) return svg + "</svg>\n";
  const double x0 = kLeft, x1 = kWidth - kRight;
  const double first = series.front().minute,
               last = std::max(first + 1, 1.0 * series.back().minute);
  auto x_of = [&](double minute) { return x0 + (minute - first) * (x1 - x0) / (last - first); };
  int64_t most = 1;
  for (const UsageMinute& u : series) most = std::max({most, u.pods, u.gpus});
  struct Line {
    const char* color;
    const char* dash;
    std::function<double(const UsageMinute&)> value;
  };
  struct Panel {
    const char* label;
    double top;  // the value at the top of the axis
    std::vector<std::pair<const char*, Line>> lines;
  };
  auto pct = [](int64_t num, int64_t den) {
    return den > 0 ? 100.0 * static_cast<double>(num) / static_cast<double>(den) : 0.0;
  };
  const std::vector<Panel> panels = {
      {"GPUs in use",
       static_cast<double>(most),
       {{"placement",
         {"#1f77b4", "", [](const UsageMinute& u) { return static_cast<double>(u.gpus); }}},
        {"whole cards",
         {"#7f7f7f", "4 3", [](const UsageMinute& u) { return static_cast<double>(u.pods); }}}}},
      {"utilization, % of the GPUs in use",
       100,
       {{"sum of duty, at most 100 % a GPU",
         {"#2ca02c", "",
          [&](const UsageMinute& u) { return pct(u.util_cp, u.gpus * usage::kDutyFull); }}}}},
      {"contended GPUs, % of the GPUs in use",
       std::max(1.0,
                [&] {
                  double m = 0;
                  for (const UsageMinute& u : series) m = std::max(m, pct(u.contended, u.gpus));
                  return m;
                }()),
       {{"sum of duty over 100 %",
         {"#d62728", "", [&](const UsageMinute& u) { return pct(u.contended, u.gpus); }}}}},
  };
  for (size_t k = 0; k < panels.size(); ++k) {
    const Panel& p = panels[k];
    const double y0 = kTop + static_cast<double>(k) * (kPanel + kGap) + 15, y1 = y0 + kPanel;
    auto y_of = [&](double v) { return y1 - v * (y1 - y0) / p.top; };
    svg += "<text x=\"" + Fixed(x0) + "\" y=\"" + Fixed(y0 - 5) + "\">" + p.label + "</text>\n";
    svg += "<rect x=\"" + Fixed(x0) + "\" y=\"" + Fixed(y0) + "\" width=\"" + Fixed(x1 - x0) +
           "\" height=\"" + Fixed(y1 - y0) + "\" fill=\"none\" stroke=\"#ccc\"/>\n";
    svg += "<text x=\"" + Fixed(x0 - 5) + "\" y=\"" + Fixed(y0 + 4) + "\" text-anchor=\"end\">" +
           Fixed(p.top) + "</text>\n";
    svg +=
        "<text x=\"" + Fixed(x0 - 5) + "\" y=\"" + Fixed(y1) + "\" text-anchor=\"end\">0</text>\n";
    // Hours of the trace along the bottom of each panel.
    for (int32_t h = (series.front().minute + 59) / 60; h * 60 <= series.back().minute; h += 2)
      svg += "<text x=\"" + Fixed(x_of(h * 60.0)) + "\" y=\"" + Fixed(y1 + 13) +
             "\" text-anchor=\"middle\">" + std::to_string(h) + "h</text>\n";
    double legend = x1;
    for (const auto& [name, line] : p.lines) {
      svg += "<polyline fill=\"none\" stroke=\"" + std::string(line.color) + "\"";
      if (*line.dash) svg += " stroke-dasharray=\"" + std::string(line.dash) + "\"";
      svg += " points=\"";
      for (size_t i = 0; i < series.size(); ++i) {
        if (i) svg += ' ';
        svg += Fixed(x_of(series[i].minute)) + "," + Fixed(y_of(line.value(series[i])));
      }
      svg += "\"/>\n";
      svg += "<text x=\"" + Fixed(legend) + "\" y=\"" + Fixed(y0 - 5) +
             "\" text-anchor=\"end\" fill=\"" + line.color + "\">" + name + "</text>\n";
      legend -= 150;
    }
  }
  return svg + "</svg>\n";
}

}  // namespace hami::sim
