#pragma once
// The vendor configuration file (YAML, upstream device-config.yaml keys where they exist): one
// section per vendor (`nvidia:`, `cambricon:`, `hygon:`, `metax:`, `mthreads:`, `iluvatars:`,
// `enflame:`, `enflamevgcu:`, `kunlun:`, `amd:`, `awsneuron:`, `vastai:`, `biren:`, `intel:`,
// `remotegpu:`, `vnpus:` for Ascend). A section enables its vendor (unless it says `enabled:
// false`); NVIDIA is enabled without a section. Keys rename resources and set defaults; an empty
// value (`key:` or `key: ""`, as upstream's chart renders unset values) keeps the default. Upstream
// keys we do not use are accepted and logged once per section; any other key is an error naming it.
// Any other unknown top-level section is an error (vendors/config_file.h, the one reader of the
// file). A disabled vendor is never constructed.
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "vendors/vendor.h"

namespace YAML {
class Node;
}

namespace hami::vendors {

// Reads the optional string/integer/bool `key` of `section` into *out (absent, null or "" leaves
// *out unchanged); errors name section and key. `seen` collects the keys read so CheckKeys can
// reject unknown ones.
class SectionReader {
 public:
  SectionReader(const YAML::Node& section, std::string where);
  ~SectionReader();
  Status String(const char* key, std::string* out);
  Status Int(const char* key, int64_t* out);
  Status Bool(const char* key, bool* out);
  // The sub-node `key` (a copy), or an undefined node when absent.
  YAML::Node Child(const char* key);
  // Upstream keys that we knowingly do not use: CheckKeys accepts them (any value).
  void Ignore(std::initializer_list<const char*> keys);
  // Errors on the first key that was neither read nor ignored; logs the ignored keys present (one
  // line).
  Status CheckKeys() const;
  const std::string& where() const { return where_; }

 private:
  std::unique_ptr<YAML::Node> node_;
  std::string where_;
  std::vector<std::string> seen_;
  std::vector<std::string> ignored_;
};

// The enabled vendors of a configuration text (empty text: NVIDIA only, upstream defaults): the
// vendors of ParseConfigFile (vendors/config_file.h), which also checks sections and nvidia knobs.
StatusOr<std::vector<std::unique_ptr<Vendor>>> LoadVendors(std::string_view yaml_text);
// The enabled vendors of a parsed file's root (undefined or null: NVIDIA only), each section given
// to its registry row's factory; sections are not checked here (ParseConfigFile does).
StatusOr<std::vector<std::unique_ptr<Vendor>>> BuildVendors(const YAML::Node& root);
// Every registered vendor with its defaults (tests, the simulator).
std::vector<std::unique_ptr<Vendor>> AllVendorsWithDefaults();

}  // namespace hami::vendors

namespace hami::vendors {
// Upstream's resource-name keys (resourceCountName, resourceMemoryName,
// resourceMemoryPercentageName, resourceCoreName, resourcePriorityName) for names that exist.
Status ReadResourceKeys(SectionReader& r, ResourceNames* names);
struct Spec;
// The common factory of table-driven backends: `section`'s resource-name keys rename spec's
// resources, `ignored` upstream keys are accepted, other unknown keys fail, and one GenericVendor
// is built.
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeGeneric(
    Spec spec, const YAML::Node& section, const char* where,
    std::initializer_list<const char*> ignored = {});
// A factory result holding one vendor.
template <typename V, typename... Args>
std::vector<std::unique_ptr<Vendor>> One(Args&&... args) {
  std::vector<std::unique_ptr<Vendor>> v;
  v.push_back(std::make_unique<V>(std::forward<Args>(args)...));
  return v;
}
}  // namespace hami::vendors
