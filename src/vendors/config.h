#pragma once
// The vendor configuration file (YAML, upstream device-config.yaml keys where they exist): one
// section per vendor (`nvidia:`, `cambricon:`, `hygon:`, `metax:`, `mthreads:`, `iluvatars:`,
// `enflame:`, `kunlun:`, `amd:`, `vnpus:` for Ascend). A section enables its vendor (unless it says
// `enabled: false`); NVIDIA is enabled without a section. Keys rename resources and set defaults; an
// unknown key in a section is an error naming it. A disabled vendor is never constructed.
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

// Reads the optional string/integer/bool `key` of `section` into *out; errors name section and key.
// `seen` collects the keys read so CheckKeys can reject unknown ones.
class SectionReader {
 public:
  SectionReader(const YAML::Node& section, std::string where);
  ~SectionReader();
  Status String(const char* key, std::string* out);
  Status Int(const char* key, int64_t* out);
  Status Bool(const char* key, bool* out);
  // The sub-node `key` (a copy), or an undefined node when absent.
  YAML::Node Child(const char* key);
  // Errors on the first key that was not read.
  Status CheckKeys() const;
  const std::string& where() const { return where_; }

 private:
  std::unique_ptr<YAML::Node> node_;
  std::string where_;
  std::vector<std::string> seen_;
};

// The enabled vendors of a configuration text (empty text: NVIDIA only, upstream defaults).
StatusOr<std::vector<std::unique_ptr<Vendor>>> LoadVendors(std::string_view yaml_text);
// Every registered vendor with its defaults (tests, the simulator).
std::vector<std::unique_ptr<Vendor>> AllVendorsWithDefaults();

}  // namespace hami::vendors

namespace hami::vendors {
// Upstream's resource-name keys (resourceCountName, resourceMemoryName,
// resourceMemoryPercentageName, resourceCoreName, resourcePriorityName) for names that exist.
Status ReadResourceKeys(SectionReader& r, ResourceNames* names);
struct Spec;
// The common factory of table-driven backends: `section`'s resource-name keys rename spec's
// resources, unknown keys fail, and one GenericVendor is built.
StatusOr<std::vector<std::unique_ptr<Vendor>>> MakeGeneric(Spec spec, const YAML::Node& section, const char* where);
// A factory result holding one vendor.
template <typename V, typename... Args>
std::vector<std::unique_ptr<Vendor>> One(Args&&... args) {
  std::vector<std::unique_ptr<Vendor>> v;
  v.push_back(std::make_unique<V>(std::forward<Args>(args)...));
  return v;
}
}  // namespace hami::vendors
