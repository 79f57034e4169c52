#include "sim/trace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include "core/annotations.h"
#include "fakes/mig_model.h"
#include "vendors/nvidia/mig.h"

namespace hami::sim {

const std::vector<std::string>& KnownGpuModels() {
  static const std::vector<std::string> kModels = {"G1",   "G2",      "G3",      "T4",
                                                   "P100", "V100M16", "V100M32", "A10"};
  return kModels;
}

namespace {

// What a node's device plugin registers for a GPU of `model` in MIG mode: the profiles NVML
// reports on it (the fake driver's table), read as NvmlDiscovery reads them (driver order, the
// "+me" media variants left out, every possible placement), through the plugin's registration rule.
std::vector<core::MigProfile> RegisteredProfilesOf(const fakegpu::MigModel& model) {
  std::vector<vendors::nvidia::DriverMigProfile> reported;
  for (const fakegpu::GiProfile& p : std::span(model.profiles, static_cast<size_t>(model.count))) {
    if (fakegpu::IsMediaExtension(p)) continue;
    vendors::nvidia::DriverMigProfile& r = reported.emplace_back();
    r.name = p.name;
    r.slices = static_cast<int>(p.slices);
    r.sms = static_cast<int>(p.sms);
    r.memory_mib = static_cast<int64_t>(p.memory_mib);
    for (const fakegpu::GiPlacement& at : fakegpu::PossiblePlacements(p))
      r.placements.push_back({static_cast<int>(at.start), static_cast<int>(at.size)});
  }
  return vendors::nvidia::RegisteredMigProfiles(reported);
}

}  // namespace

const std::vector<SimMigProfileSet>& SimMigProfileSets() {
  static const std::vector<SimMigProfileSet> kSets = [] {
    std::vector<SimMigProfileSet> sets;
    for (const fakegpu::MigModel& m : fakegpu::MigModels())
      sets.push_back({m.name, static_cast<int64_t>(m.memory_mib), RegisteredProfilesOf(m)});
    return sets;
  }();
  return kSets;
}

const SimMigProfileSet* FindSimMigProfileSet(std::string_view name) {
  for (const SimMigProfileSet& s : SimMigProfileSets())
    if (s.name == name) return &s;
  return nullptr;
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

// A '|'-separated list: blanks around items trimmed, empty items and repeats dropped, order kept.
std::vector<std::string> BarList(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    const size_t bar = v.find('|');
    std::string item(Trim(v.substr(0, bar)));
    v = bar == std::string_view::npos ? std::string_view{} : v.substr(bar + 1);
    if (!item.empty() && std::find(out.begin(), out.end(), item) == out.end())
      out.push_back(std::move(item));
  }
  return out;
}

// The optional `mig` column of a node with `gpus` GPUs: "<set>" (every GPU) or "<set>:<k>" (GPUs
// 0..k-1, 1 <= k <= gpus).
Status MigField(const Csv& csv, int line, const std::vector<std::string_view>& f, TraceNode* n) {
  auto it = csv.column.find("mig");
  if (it == csv.column.end() || f[it->second].empty()) return OkStatus();
  std::string_view v = f[it->second];
  const size_t colon = v.find(':');
  const std::string set(v.substr(0, colon));
  if (FindSimMigProfileSet(set) == nullptr) {
    std::string known;
    for (const SimMigProfileSet& s : SimMigProfileSets())
      known += StrCat(known.empty() ? "" : ", ", s.name);
    return InvalidArgument(csv.source, ":", line, ": field mig: unknown MIG profile set '", set,
                           "' (known: ", known, ")");
  }
  int64_t k = n->gpus;
  if (colon != std::string_view::npos) {
    const std::string_view count = v.substr(colon + 1);
    auto [p, ec] = std::from_chars(count.data(), count.data() + count.size(), k);
    if (ec != std::errc() || p != count.data() + count.size() || k < 1 || k > n->gpus)
      return InvalidArgument(csv.source, ":", line, ": field mig: '", std::string(count),
                             "' is not a GPU count in 1..", n->gpus);
  }
  if (n->gpus == 0)
    return InvalidArgument(csv.source, ":", line, ": field mig: the node has no GPUs");
  if (!n->vendor.empty())
    return InvalidArgument(csv.source, ":", line, ": field mig: MIG is NVIDIA's; the node's ",
                           "vendor is ", n->vendor);
  n->mig = set;
  n->mig_gpus = static_cast<int>(k);
  return OkStatus();
}

// The optional `mode` column: the operating mode of the node's GPUs, hami-core (also empty) or mps
// (the device plugin's `operatingmode: mps`; a MIG node's mode is given by its `mig` column).
Status ModeField(const Csv& csv, int line, const std::vector<std::string_view>& f, TraceNode* n) {
  auto it = csv.column.find("mode");
  if (it == csv.column.end()) return OkStatus();
  const std::string_view v = f[it->second];
  if (v.empty() || v == core::kModeHamiCore) return OkStatus();
  if (v != core::kModeMps)
    return InvalidArgument(csv.source, ":", line, ": field mode: '", std::string(v),
                           "' is not hami-core or mps");
  if (n->gpus == 0)
    return InvalidArgument(csv.source, ":", line, ": field mode: the node has no GPUs");
  if (!n->vendor.empty())
    return InvalidArgument(csv.source, ":", line, ": field mode: MPS is NVIDIA's; the node's ",
                           "vendor is ", n->vendor);
  if (!n->mig.empty())
    return InvalidArgument(csv.source, ":", line, ": field mode: mps and the MIG set ", n->mig,
                           " exclude each other (a node has one operating mode)");
  n->mps = true;
  return OkStatus();
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
        HAMI_RETURN_IF_ERROR(MigField(csv, line, f, &n));
        HAMI_RETURN_IF_ERROR(ModeField(csv, line, f, &n));
        // A MIG node's model is free text (MIG GPUs are not among openb's models).
        if (n.gpus > 0 && n.mig.empty())
          HAMI_RETURN_IF_ERROR(CheckModel(csv, line, "model", n.model, n.vendor));
        if (!n.mig.empty() && n.model.empty())
          return InvalidArgument(csv.source, ":", line, ": field model: empty model");
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
          t.gpu_spec = BarList(f[it->second]);
          for (const std::string& m : t.gpu_spec)
            HAMI_RETURN_IF_ERROR(CheckModel(csv, line, "gpu_spec", m, t.vendor));
        }
        if (auto it = csv.column.find("vgpu_mode"); it != csv.column.end()) {
          t.vgpu_mode = std::string(f[it->second]);
          if (!t.vgpu_mode.empty() && t.vgpu_mode != core::kModeHamiCore &&
              t.vgpu_mode != core::kModeMig && t.vgpu_mode != core::kModeMps)
            return InvalidArgument(csv.source, ":", line, ": field vgpu_mode: '", t.vgpu_mode,
                                   "' is not hami-core, mig or mps");
        }
        if (auto it = csv.column.find("mig_profile_preference"); it != csv.column.end())
          t.mig_profile_preference = BarList(f[it->second]);
        if (!t.vendor.empty() && (!t.vgpu_mode.empty() || !t.mig_profile_preference.empty()))
          return InvalidArgument(csv.source, ":", line, ": fields vgpu_mode and ",
                                 "mig_profile_preference are NVIDIA's; the task's vendor is ",
                                 t.vendor);
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
