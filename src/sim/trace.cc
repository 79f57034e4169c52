#include "sim/trace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

namespace hami::sim {

const std::vector<std::string>& KnownGpuModels() {
  static const std::vector<std::string> kModels = {"G1",   "G2",      "G3",      "T4",
                                                   "P100", "V100M16", "V100M32", "A10"};
  return kModels;
}

namespace {

// Limits that catch corrupt input without rejecting any plausible machine or task.
constexpr int64_t kMaxCpuMilli = 10'000'000;  // 10k cores
constexpr int64_t kMaxMemoryMib = 1LL << 30;  // 1 PiB
constexpr int kMaxGpus = 64;

struct Csv {
  std::string source;
  std::vector<std::string> header;
  std::map<std::string, int> column;
};

std::vector<std::string_view> SplitRow(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Calls row(line_number, fields) for each non-empty data line after the header.
template <typename F>
Status ForEachRow(std::string_view text, std::string_view source,
                  const std::vector<std::string>& required, Csv* csv, F&& row) {
  csv->source = std::string(source);
  size_t pos = 0;
  int line_no = 0;
  bool have_header = false;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    line = Trim(line);
    if (line.empty()) continue;
    auto fields = SplitRow(line);
    for (auto& f : fields) f = Trim(f);
    if (!have_header) {
      have_header = true;
      for (size_t i = 0; i < fields.size(); ++i) {
        csv->header.emplace_back(fields[i]);
        csv->column.emplace(std::string(fields[i]), static_cast<int>(i));
      }
      for (const auto& r : required)
        if (!csv->column.count(r))
          return InvalidArgument(source, ":", line_no, ": header lacks column '", r, "'");
      continue;
    }
    if (fields.size() != csv->header.size())
      return InvalidArgument(source, ":", line_no, ": ", fields.size(), " fields, header has ",
                             csv->header.size());
    HAMI_RETURN_IF_ERROR(row(line_no, fields));
  }
  if (!have_header) return InvalidArgument(source, ": empty file (no header)");
  return OkStatus();
}

StatusOr<int64_t> Int(const Csv& csv, int line, const std::vector<std::string_view>& f,
                      const char* name, int64_t max, bool allow_empty = false) {
  std::string_view v = f[csv.column.at(name)];
  if (v.empty()) {
    if (allow_empty) return 0;
    return InvalidArgument(csv.source, ":", line, ": field ", name, ": empty");
  }
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size())
    return InvalidArgument(csv.source, ":", line, ": field ", name, ": '", std::string(v),
                           "' is not an integer");
  if (out < 0)
    return InvalidArgument(csv.source, ":", line, ": field ", name, ": ", out, " is negative");
  if (out > max)
    return InvalidArgument(csv.source, ":", line, ": field ", name, ": ", out, " is above ", max);
  return out;
}

// The optional `vendor` column: one token (letters, digits, '-', '_', '.'); "nvidia" in any case =
// "".
StatusOr<std::string> VendorField(const Csv& csv, int line,
                                  const std::vector<std::string_view>& f) {
  auto it = csv.column.find("vendor");
  if (it == csv.column.end()) return std::string();
  std::string v(f[it->second]);
  for (char ch : v)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
      return InvalidArgument(csv.source, ":", line, ": field vendor: '", v,
                             "' is not a vendor name");
  std::string lower = v;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower == "nvidia" ? std::string() : v;
}

Status CheckModel(const Csv& csv, int line, const char* field, const std::string& model,
                  const std::string& vendor = "") {
  if (!vendor.empty()) {
    if (model.empty())
      return InvalidArgument(csv.source, ":", line, ": field ", field, ": empty model");
    return OkStatus();  // other vendors' model names are free text
  }
  const auto& known = KnownGpuModels();
  if (std::find(known.begin(), known.end(), model) != known.end()) return OkStatus();
  std::string list;
  for (const auto& m : known) list += (list.empty() ? "" : ", ") + m;
  return InvalidArgument(csv.source, ":", line, ": field ", field, ": unknown GPU model '", model,
                         "' (known: ", list, ")");
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path, ": cannot open the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Unavailable(path, ": read error");
  return ss.str();
}

}  // namespace

StatusOr<std::vector<TraceNode>> ParseNodesCsv(std::string_view text, std::string_view source) {
  std::vector<TraceNode> nodes;
  Csv csv;
  std::map<std::string, int> seen;
  HAMI_RETURN_IF_ERROR(ForEachRow(
      text, source, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, &csv,
      [&](int line, const std::vector<std::string_view>& f) -> Status {
        TraceNode n;
        n.name = std::string(f[csv.column.at("sn")]);
        if (n.name.empty()) return InvalidArgument(csv.source, ":", line, ": field sn: empty");
        if (auto [it, fresh] = seen.emplace(n.name, line); !fresh)
          return InvalidArgument(csv.source, ":", line, ": field sn: '", n.name, "' repeats line ",
                                 it->second);
        HAMI_ASSIGN_OR_RETURN(n.cpu_milli, Int(csv, line, f, "cpu_milli", kMaxCpuMilli));
        HAMI_ASSIGN_OR_RETURN(n.memory_mib, Int(csv, line, f, "memory_mib", kMaxMemoryMib));
        HAMI_ASSIGN_OR_RETURN(int64_t gpus, Int(csv, line, f, "gpu", kMaxGpus));
        n.gpus = static_cast<int>(gpus);
        n.model = std::string(f[csv.column.at("model")]);
        HAMI_ASSIGN_OR_RETURN(n.vendor, VendorField(csv, line, f));
        if (n.gpus > 0) HAMI_RETURN_IF_ERROR(CheckModel(csv, line, "model", n.model, n.vendor));
        nodes.push_back(std::move(n));
        return OkStatus();
      }));
  if (nodes.empty()) return InvalidArgument(source, ": no nodes");
  return nodes;
}

StatusOr<std::vector<TraceTask>> ParsePodsCsv(std::string_view text, std::string_view source) {
  std::vector<TraceTask> tasks;
  Csv csv;
  HAMI_RETURN_IF_ERROR(ForEachRow(
      text, source, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, &csv,
      [&](int line, const std::vector<std::string_view>& f) -> Status {
        TraceTask t;
        t.name = std::string(f[csv.column.at("name")]);
        if (t.name.empty()) return InvalidArgument(csv.source, ":", line, ": field name: empty");
        HAMI_ASSIGN_OR_RETURN(t.cpu_milli, Int(csv, line, f, "cpu_milli", kMaxCpuMilli));
        HAMI_ASSIGN_OR_RETURN(t.memory_mib, Int(csv, line, f, "memory_mib", kMaxMemoryMib));
        HAMI_ASSIGN_OR_RETURN(int64_t num, Int(csv, line, f, "num_gpu", kMaxGpus));
        HAMI_ASSIGN_OR_RETURN(int64_t milli,
                              Int(csv, line, f, "gpu_milli", 1000, /*allow_empty=*/num == 0));
        t.num_gpu = static_cast<int>(num);
        t.gpu_milli = static_cast<int>(milli);
        if (t.num_gpu > 0 && t.gpu_milli == 0)
          return InvalidArgument(csv.source, ":", line, ": field gpu_milli: 0 with num_gpu ",
                                 t.num_gpu, " (want 1..1000)");
        if (t.num_gpu > 1 && t.gpu_milli != 1000)
          return InvalidArgument(csv.source, ":", line, ": field gpu_milli: ", t.gpu_milli,
                                 " with num_gpu ", t.num_gpu,
                                 " (multi-GPU tasks take whole GPUs: want 1000)");
        if (t.num_gpu == 0) t.gpu_milli = 0;
        HAMI_ASSIGN_OR_RETURN(t.vendor, VendorField(csv, line, f));
        if (auto it = csv.column.find("gpu_spec"); it != csv.column.end()) {
          std::string_view spec = f[it->second];
          while (!spec.empty()) {
            size_t bar = spec.find('|');
            std::string m(Trim(spec.substr(0, bar)));
            spec = bar == std::string_view::npos ? std::string_view{} : spec.substr(bar + 1);
            if (m.empty()) continue;
            HAMI_RETURN_IF_ERROR(CheckModel(csv, line, "gpu_spec", m, t.vendor));
            if (std::find(t.gpu_spec.begin(), t.gpu_spec.end(), m) == t.gpu_spec.end())
              t.gpu_spec.push_back(m);
          }
        }
        tasks.push_back(std::move(t));
        return OkStatus();
      }));
  if (tasks.empty()) return InvalidArgument(source, ": no pods");
  return tasks;
}

StatusOr<std::vector<TraceNode>> ReadNodesCsv(const std::string& path) {
  HAMI_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseNodesCsv(text, path);
}

StatusOr<std::vector<TraceTask>> ReadPodsCsv(const std::string& path) {
  HAMI_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParsePodsCsv(text, path);
}

}  // namespace hami::sim
