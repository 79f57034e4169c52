#include "sim/report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/libc.h"
#include "nlohmann/json.hpp"

namespace hami::sim {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {
std::vector<std::string> PolicyOrder(const std::vector<RunResult>& runs) {
  std::vector<std::string> order;
  for (const auto& r : runs)
    if (std::find(order.begin(), order.end(), r.policy) == order.end()) order.push_back(r.policy);
  return order;
}
double Round2(double x) {
  return std::round(x * 100) / 100;
}
}  // namespace

std::vector<PolicySummary> Summarize(const std::vector<RunResult>& runs) {
  std::vector<PolicySummary> out;
  for (const auto& p : PolicyOrder(runs)) {
    std::vector<double> a;
    for (const auto& r : runs)
      if (r.policy == p && r.curve.size() > 100) a.push_back(r.curve[100]);
    PolicySummary s;
    s.policy = p;
    s.seeds = static_cast<int>(a.size());
    if (!a.empty()) {
      s.a100_median = Median(a);
      double sum = 0;
      for (double x : a) sum += x;
      s.a100_mean = sum / static_cast<double>(a.size());
      s.a100_min = *std::min_element(a.begin(), a.end());
      s.a100_max = *std::max_element(a.begin(), a.end());
    }
    out.push_back(s);
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<double>>> MedianCurves(
    const std::vector<RunResult>& runs) {
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const auto& p : PolicyOrder(runs)) {
    std::vector<double> med(kCurveMax + 1, 0);
    for (int k = 0; k <= kCurveMax; ++k) {
      std::vector<double> v;
      for (const auto& r : runs)
        if (r.policy == p && static_cast<int>(r.curve.size()) > k) v.push_back(r.curve[k]);
      med[k] = Median(v);
    }
    out.emplace_back(p, std::move(med));
  }
  return out;
}

double PublishedA100(const std::string& policy) {
  static const std::map<std::string, double> kPublished = {
      {"random", 86.25},      {"dot-product", 90.56}, {"gpu-clustering", 91.58},
      {"gpu-packing", 91.81}, {"best-fit", 92.91},    {"fgd", 95.23}};
  auto it = kPublished.find(policy);
  return it == kPublished.end() ? -1 : it->second;
}

std::string ToJson(const TraceInfo& trace, const ClusterTotals& c,
                   const std::vector<RunResult>& runs) {
  using nlohmann::json;
  json j;
  j["trace"] = {{"nodes_file", trace.nodes_file},
                {"pods_file", trace.pods_file},
                {"pods", trace.pods},
                {"inflation", trace.inflation}};
  j["cluster"] = {{"nodes", c.nodes},
                  {"gpus", c.gpus},
                  {"milli_cpu", c.milli_cpu},
                  {"memory_mib", c.memory_mib}};
  json jr = json::array();
  for (const auto& r : runs) {
    json curve = json::array();
    for (size_t k = 0; k < r.curve.size(); ++k)
      curve.push_back(json::array({static_cast<int>(k), Round2(r.curve[k])}));
    jr.push_back({{"policy", r.policy},
                  {"seed", r.seed},
                  {"tasks_arrived", r.tasks_arrived},
                  {"tasks_scheduled", r.tasks_scheduled},
                  {"tasks_failed", r.tasks_failed},
                  {"curve", curve},
                  {"wall_seconds", r.wall_seconds}});
  }
  j["runs"] = jr;
  json js = json::array();
  for (const auto& s : Summarize(runs)) {
    js.push_back({{"policy", s.policy},
                  {"seeds", s.seeds},
                  {"a100_median", Round2(s.a100_median)},
                  {"a100_mean", Round2(s.a100_mean)},
                  {"a100_min", Round2(s.a100_min)},
                  {"a100_max", Round2(s.a100_max)}});
  }
  j["summary"] = js;
  return j.dump(1) + "\n";
}

std::string ToSvg(const std::vector<RunResult>& runs, const std::string& title) {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  const auto curves = MedianCurves(runs);
  // Plot area: x = arrived demand 0..130 %, y = unallocated 0..ymax %.
  // Below 100 % arrival the unallocated share is mostly demand not yet arrived; start at k = 75 (as
  // the paper's Fig. 9a does).
  const int k0 = 75;
  double ymax = 5;
  for (const auto& [p, c] : curves)
    for (int k = k0; k <= kCurveMax; ++k) ymax = std::max(ymax, 100.0 - c[k]);
  ymax = std::ceil(ymax / 10) * 10;
  const double W = 760, H = 460, L = 70, R = 170, T = 40, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  auto X = [&](double k) { return L + (k - k0) / (kCurveMax - k0) * pw; };
  auto Y = [&](double u) { return T + ph - u / ymax * ph; };
  std::string s;
  char buf[512];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    s += buf;
  };
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
      "%.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      W, H, W, H);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string esc;
  for (char ch : title)
    esc += ch == '<' ? std::string("&lt;") : ch == '&' ? std::string("&amp;") : std::string(1, ch);
  add("<text x=\"%.0f\" y=\"22\" font-size=\"14\">%s</text>\n", L, esc.c_str());
  for (int k = k0; k <= kCurveMax; k += 10) {
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", X(k), T, X(k),
        T + ph);
    add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", X(k), T + ph + 16, k);
  }
  for (double u = 0; u <= ymax + 1e-9; u += ymax / 5) {
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(u),
        L + pw, Y(u));
    add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", L - 6, Y(u) + 4, u);
  }
  add("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
      "stroke=\"black\"/>\n",
      L, T, pw, ph);
  add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">arrived GPU demand (%% of "
      "capacity)</text>\n",
      L + pw / 2, H - 16);
  add("<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">unallocated GPU "
      "%% (100 - A(k)), "
      "median over seeds</text>\n",
      T + ph / 2);
  int i = 0;
  for (const auto& [p, c] : curves) {
    const char* color = kColors[i % 10];
    s += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"";
    s += color;
    s += "\" points=\"";
    for (int k = k0; k <= kCurveMax; ++k)
      add("%.1f,%.1f ", X(k), Y(std::clamp(100.0 - c[k], 0.0, ymax)));
    s += "\"/>\n";
    const double ly = T + 14 + 18 * i;
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
        "stroke-width=\"2\"/>\n",
        L + pw + 12, ly - 4, L + pw + 36, ly - 4, color);
    add("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", L + pw + 42, ly, p.c_str());
    ++i;
  }
  s += "</svg>\n";
  return s;
}

std::string ToTable(const std::vector<RunResult>& runs, bool default_trace) {
  const auto curves = MedianCurves(runs);
  const auto summary = Summarize(runs);
  std::string s;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-16s %5s %8s %8s %8s %8s %9s %8s\n", "policy", "seeds", "A(90)",
                "A(100)", "A(130)", "U(100)", "A100 min", "paper");
  s += buf;
  for (size_t i = 0; i < curves.size(); ++i) {
    const auto& [p, c] = curves[i];
    const double pub = default_trace ? PublishedA100(p) : -1;
    char paper[32] = "-";
    if (pub > 0) std::snprintf(paper, sizeof paper, "%.2f", pub);
    std::snprintf(buf, sizeof buf, "%-16s %5d %8.2f %8.2f %8.2f %8.2f %9.2f %8s\n", p.c_str(),
                  summary[i].seeds, c[90], summary[i].a100_median, c[130],
                  100 - summary[i].a100_median, summary[i].a100_min, paper);
    s += buf;
  }
  s += "A(k): GPU allocation ratio (%) when arrived GPU demand is k% of capacity (median over "
       "seeds);\n"
       "U(100) = 100 - A(100): unallocated GPU % at 100% arrival. paper: published median A(100) "
       "(FGD, ATC'23).\n";
  return s;
}

std::string ToVendorTable(const std::vector<RunResult>& runs) {
  std::vector<std::string> vendors, policies;
  for (const auto& r : runs) {
    if (std::find(policies.begin(), policies.end(), r.policy) == policies.end())
      policies.push_back(r.policy);
    for (const auto& [v, c] : r.by_vendor)
      if (std::find(vendors.begin(), vendors.end(), v) == vendors.end()) vendors.push_back(v);
  }
  if (vendors.size() < 2) return "";
  std::sort(vendors.begin(), vendors.end());
  std::string s =
      StrCat("placed % of task events per vendor (median over seeds)\n", std::string(16, ' '));
  char buf[64];
  for (const auto& v : vendors) {
    std::snprintf(buf, sizeof buf, " %11s", v.c_str());
    s += buf;
  }
  s += "\n";
  for (const auto& p : policies) {
    std::snprintf(buf, sizeof buf, "%-16s", p.c_str());
    s += buf;
    for (const auto& v : vendors) {
      std::vector<double> pct;
      for (const auto& r : runs) {
        auto it = r.by_vendor.find(v);
        if (r.policy == p && it != r.by_vendor.end() && it->second.arrived > 0)
          pct.push_back(100.0 * static_cast<double>(it->second.scheduled) /
                        static_cast<double>(it->second.arrived));
      }
      if (pct.empty())
        std::snprintf(buf, sizeof buf, " %11s", "-");
      else
        std::snprintf(buf, sizeof buf, " %11.2f", Median(pct));
      s += buf;
    }
    s += "\n";
  }
  return s;
}

std::string ToPlacementsCsv(const std::vector<RunResult>& runs,
                            const std::vector<TraceTask>& tasks) {
  std::string out =
      "policy,seed,event,task,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,node,devices\n";
  for (const RunResult& r : runs) {
    for (size_t i = 0; i < r.placements.size(); ++i) {
      const TaskPlacement& p = r.placements[i];
      const TraceTask& t = tasks.at(p.task);
      std::string spec, devices;
      for (const auto& m : t.gpu_spec) spec += (spec.empty() ? "" : "|") + m;
      for (const auto& container : p.allocation.containers)
        for (const core::ContainerDevice& d : container)
          devices += StrCat(devices.empty() ? "" : "|", d.index, ":", d.usedmem_mib / kMibPerMilli);
      out += StrCat(r.policy, ",", r.seed, ",", i, ",", p.task, ",", t.name, ",", t.cpu_milli, ",",
                    t.memory_mib, ",", t.num_gpu, ",", t.gpu_milli, ",", spec, ",", p.node, ",",
                    devices, "\n");
    }
  }
  return out;
}

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Unavailable(path, ": cannot open for writing");
  out << content;
  out.close();
  if (!out) return Unavailable(path, ": write failed");
  return OkStatus();
}

StatusOr<std::string> FindBundledTrace(const std::string& name) {
  namespace fs = std::filesystem;
  std::vector<fs::path> tried;
  auto try_dir = [&](const fs::path& dir) -> bool {
    fs::path p = dir / name;
    tried.push_back(p);
    std::error_code ec;
    return fs::is_regular_file(p, ec);
  };
  if (const std::string env = GetEnvOr("HAMI_DATA_DIR"); !env.empty()) {
    if (try_dir(env)) return (fs::path(env) / name).string();
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path()) {
      if (try_dir(d / "data" / "openb")) return (d / "data" / "openb" / name).string();
      if (try_dir(d / "share" / "hami" / "openb"))
        return (d / "share" / "hami" / "openb" / name).string();
    }
  }
#ifdef HAMI_SOURCE_DIR
  if (try_dir(fs::path(HAMI_SOURCE_DIR) / "data" / "openb"))
    return (fs::path(HAMI_SOURCE_DIR) / "data" / "openb" / name).string();
#endif
  std::string list;
  for (const auto& p : tried) list += "\n  " + p.string();
  return NotFound("bundled trace ", name,
                  " not found (set HAMI_DATA_DIR or pass --nodes/--pods); tried:", list);
}

}  // namespace hami::sim
