#include "vendors/config.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/log.h"
#include "vendors/config_file.h"
#include "vendors/generic.h"
#include "vendors/registry.h"
#include "yaml-cpp/yaml.h"

namespace hami::vendors {

SectionReader::SectionReader(const YAML::Node& section, std::string where)
    : node_(std::make_unique<YAML::Node>(section)), where_(std::move(where)) {}
SectionReader::~SectionReader() = default;

namespace {
template <typename T>
Status ReadScalar(const YAML::Node& node, const std::string& where, const char* key,
                  const char* kind, T* out, bool* found = nullptr) {
  if (!node.IsDefined() || !node.IsMap()) return OkStatus();
  const YAML::Node v = node[key];
  if (!v.IsDefined() || v.IsNull()) return OkStatus();
  if (v.IsScalar() && v.Scalar().empty()) return OkStatus();  // `key: ""`: the chart's unset value
  if (found) *found = true;
  if (!v.IsScalar()) return InvalidArgument(StrCat(where, ".", key, ": expected ", kind));
  try {
    *out = v.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(
        StrCat(where, ".", key, ": expected ", kind, ", got \"", v.Scalar(), "\""));
  }
  return OkStatus();
}
}  // namespace

Status SectionReader::String(const char* key, std::string* out) {
  seen_.push_back(key);
  return ReadScalar(*node_, where_, key, "a string", out);
}
Status SectionReader::Int(const char* key, int64_t* out) {
  seen_.push_back(key);
  HAMI_RETURN_IF_ERROR(ReadScalar(*node_, where_, key, "an integer", out));
  if (*out < 0) return InvalidArgument(StrCat(where_, ".", key, ": must be >= 0, got ", *out));
  return OkStatus();
}
Status SectionReader::Bool(const char* key, bool* out) {
  seen_.push_back(key);
  return ReadScalar(*node_, where_, key, "true or false", out);
}
YAML::Node SectionReader::Child(const char* key) {
  seen_.push_back(key);
  if (!node_->IsDefined() || !node_->IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return (*node_)[key];
}
void SectionReader::Ignore(std::initializer_list<const char*> keys) {
  ignored_.insert(ignored_.end(), keys.begin(), keys.end());
}
Status SectionReader::CheckKeys() const {
  if (!node_->IsDefined() || node_->IsNull()) return OkStatus();
  if (!node_->IsMap()) return InvalidArgument(StrCat(where_, ": expected a mapping"));
  std::string ignored;
  for (const auto& kv : *node_) {
    const std::string k = kv.first.Scalar();
    if (std::find(seen_.begin(), seen_.end(), k) != seen_.end()) continue;
    if (std::find(ignored_.begin(), ignored_.end(), k) == ignored_.end())
      return InvalidArgument(StrCat(where_, ".", k, ": unknown option"));
    ignored += StrCat(ignored.empty() ? "" : ", ", k);
  }
  if (!ignored.empty())
    spdlog::info("vendor config: {}: upstream keys not used by the scheduler, ignored: {}", where_,
                 ignored);
  return OkStatus();
}

Status ReadResourceKeys(SectionReader& r, ResourceNames* n) {
  bool enabled = true;
  HAMI_RETURN_IF_ERROR(r.Bool("enabled", &enabled));
  if (!n->count.empty()) HAMI_RETURN_IF_ERROR(r.String("resourceCountName", &n->count));
  if (!n->memory.empty()) HAMI_RETURN_IF_ERROR(r.String("resourceMemoryName", &n->memory));
  if (!n->memory_percentage.empty())
    HAMI_RETURN_IF_ERROR(r.String("resourceMemoryPercentageName", &n->memory_percentage));
  if (!n->cores.empty()) HAMI_RETURN_IF_ERROR(r.String("resourceCoreName", &n->cores));
  if (!n->priority.empty()) HAMI_RETURN_IF_ERROR(r.String("resourcePriorityName", &n->priority));
  return OkStatus();
}

StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeGeneric(
    Spec spec, const YAML::Node& section, const char* where,
    std::initializer_list<const char*> ignored) {
  SectionReader r(section, where);
  r.Ignore(ignored);
  HAMI_RETURN_IF_ERROR(ReadResourceKeys(r, &spec.resources));
  HAMI_RETURN_IF_ERROR(r.CheckKeys());
  return One<GenericVendor>(std::move(spec));
}

StatusOr<std::vector<std::unique_ptr<Vendor>>> LoadVendors(std::string_view yaml_text) {
  HAMI_ASSIGN_OR_RETURN(ConfigFile file, ParseConfigFile(yaml_text, "vendor config"));
  return std::move(file.vendors);
}

StatusOr<std::vector<std::unique_ptr<Vendor>>> BuildVendors(const YAML::Node& root) {
  std::vector<std::unique_ptr<Vendor>> out;
  for (const VendorRow& row : VendorRegistry()) {
    YAML::Node section(YAML::NodeType::Undefined);
    if (root.IsMap() && root[row.section].IsDefined()) section = root[row.section];
    bool enabled = row.enabled_by_default || section.IsDefined();
    if (section.IsMap() && section["enabled"].IsDefined() && !section["enabled"].IsNull() &&
        !(section["enabled"].IsScalar() && section["enabled"].Scalar().empty())) {
      try {
        enabled = section["enabled"].as<bool>();
      } catch (const YAML::Exception&) {
        return InvalidArgument(StrCat(row.section, ".enabled: expected true or false"));
      }
    }
    if (!enabled) continue;  // a disabled vendor is never built
    HAMI_ASSIGN_OR_RETURN(auto vendors, row.make(section));
    for (auto& v : vendors) out.push_back(std::move(v));
  }
  // Two backends claiming one device count or one Type would split a pod's request between them
  // (or decode one's decisions as the other's): refused at start, as upstream's v2.11 line does.
  std::map<std::string, const Vendor*> counts, words;
  for (const auto& v : out) {
    for (auto [seen, key, what] : {std::tuple{&counts, v->resources().count, "device count"},
                                   std::tuple{&words, v->common_word(), "Type keyword"}}) {
      if (key.empty()) continue;
      auto [it, fresh] = seen->emplace(key, v.get());
      if (!fresh)
        return InvalidArgument(StrCat("vendor config: ", key, " is the ", what, " of both ",
                                      it->second->name(), " (", it->second->common_word(), ") and ",
                                      v->name(), " (", v->common_word(),
                                      "); give each backend its own"));
    }
  }
  return out;
}

std::vector<std::unique_ptr<Vendor>> AllVendorsWithDefaults() {
  std::vector<std::unique_ptr<Vendor>> out;
  for (const VendorRow& row : VendorRegistry()) {
    auto vendors = row.make(YAML::Node(YAML::NodeType::Undefined));
    if (!vendors.ok()) continue;  // defaults always build; covered by config_test
    for (auto& v : *vendors) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace hami::vendors
