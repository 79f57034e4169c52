#include "k8s/testing/dra_api.h"

#include <cmath>
#include <optional>
#include <regex>
#include <set>

#include "common/status.h"

namespace hami::k8s::testing {
namespace {

using Json = nlohmann::json;

// Limits of resource.k8s.io/v1 (types.go constants).
constexpr size_t kMaxDevicesPerSlice = 128;
constexpr size_t kMaxDevicesWithTaintsOrCounters = 64;
constexpr size_t kMaxAttributesAndCapacities = 32;
constexpr size_t kMaxDriverName = 63;
constexpr size_t kMaxPoolName = 253;
constexpr size_t kMaxIdLength = 32;
constexpr size_t kMaxDomainLength = 63;
constexpr size_t kMaxAttributeValue = 64;
constexpr size_t kMaxRequests = 32;  // also constraints, config, selectors, results
constexpr size_t kMaxSubRequests = 8;
constexpr size_t kMaxValidValues = 10;
constexpr size_t kMaxReservedFor = 256;
constexpr size_t kMaxCelLength = 10 * 1024;
constexpr size_t kMaxOpaqueParameters = 10 * 1024;
constexpr size_t kMaxDeviceConditions = 8;
constexpr size_t kMaxDataSize = 10 * 1024;  // AllocatedDeviceStatus.data (a raw JSON object)

const std::regex& Subdomain() {
  static const std::regex r(R"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)");
  return r;
}
const std::regex& Label() {
  static const std::regex r(R"([a-z0-9]([-a-z0-9]*[a-z0-9])?)");
  return r;
}
const std::regex& CIdentifier() {
  static const std::regex r(R"([A-Za-z_][A-Za-z0-9_]*)");
  return r;
}
const std::regex& Semver() {
  static const std::regex r(
      R"((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?)");
  return r;
}
const std::regex& Uuid() {
  static const std::regex r(R"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})");
  return r;
}

// A resource.Quantity in base units (bytes, cores, ...); nullopt when it is not one. Exact enough
// for the comparisons validation makes (long double keeps 64 bits of mantissa).
std::optional<long double> ParseQuantity(const Json& v) {
  std::string s;
  if (v.is_string()) {
    s = v.get<std::string>();
  } else if (v.is_number_integer()) {
    return static_cast<long double>(v.get<int64_t>());
  } else {
    return std::nullopt;
  }
  static const std::regex kQty(
      R"(([+-]?)([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?)");
  std::smatch m;
  if (!std::regex_match(s, m, kQty)) return std::nullopt;
  long double x = std::strtold(m[2].str().c_str(), nullptr);
  const std::string suf = m[4].str();
  static const std::map<std::string, long double> kMul = {{"", 1},
                                                          {"n", 1e-9L},
                                                          {"u", 1e-6L},
                                                          {"m", 1e-3L},
                                                          {"k", 1e3L},
                                                          {"M", 1e6L},
                                                          {"G", 1e9L},
                                                          {"T", 1e12L},
                                                          {"P", 1e15L},
                                                          {"E", 1e18L},
                                                          {"Ki", 1024.0L},
                                                          {"Mi", 1048576.0L},
                                                          {"Gi", 1073741824.0L},
                                                          {"Ti", 1099511627776.0L},
                                                          {"Pi", 1125899906842624.0L},
                                                          {"Ei", 1152921504606846976.0L}};
  if (!suf.empty() && (suf[0] == 'e' || suf[0] == 'E')) {
    x *= std::pow(10.0L, std::strtold(suf.c_str() + 1, nullptr));
  } else {
    x *= kMul.at(suf);
  }
  return m[1].str() == "-" ? -x : x;
}

std::string Quote(const Json& v) {
  return v.is_string() ? StrCat("\"", v.get<std::string>(), "\"") : v.dump();
}

// The field errors of one write, worded as k8s.io/apimachinery's field.Error.
class Errors {
 public:
  void Required(const std::string& path, const std::string& detail = "") {
    Add(StrCat(path, ": Required value", detail.empty() ? "" : ": ", detail));
  }
  void Invalid(const std::string& path, const Json& value, const std::string& detail) {
    Add(StrCat(path, ": Invalid value: ", Quote(value), ": ", detail));
  }
  void TooMany(const std::string& path, size_t n, size_t max, const std::string& what = "items") {
    Add(StrCat(path, ": Too many: ", n, ": must have at most ", max, " ", what));
  }
  void TooLong(const std::string& path, size_t max) {
    Add(StrCat(path, ": Too long: may not be more than ", max, " bytes"));
  }
  void Duplicate(const std::string& path, const Json& value) {
    Add(StrCat(path, ": Duplicate value: ", Quote(value)));
  }
  void Forbidden(const std::string& path, const std::string& detail) {
    Add(StrCat(path, ": Forbidden: ", detail));
  }
  void NotSupported(const std::string& path, const Json& value, const std::string& supported) {
    Add(StrCat(path, ": Unsupported value: ", Quote(value), ": supported values: ", supported));
  }
  void Add(std::string e) { list_.push_back(std::move(e)); }
  std::vector<std::string> Take() { return std::move(list_); }

 private:
  std::vector<std::string> list_;
};

const Json* Field(const Json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}
std::string Str(const Json& obj, const char* name) {
  const Json* f = Field(obj, name);
  return f != nullptr && f->is_string() ? f->get<std::string>() : "";
}
bool True(const Json& obj, const char* name) {
  const Json* f = Field(obj, name);
  return f != nullptr && f->is_boolean() && f->get<bool>();
}
size_t Size(const Json* f) {
  return f != nullptr && (f->is_array() || f->is_object()) ? f->size() : 0;
}
// Iterates an array field that may be absent.
const Json& Items(const Json& obj, const char* name) {
  static const Json kEmpty = Json::array();
  const Json* f = Field(obj, name);
  return f != nullptr && f->is_array() ? *f : kEmpty;
}

void CheckSubdomain(Errors& e, const std::string& path, const std::string& v, size_t max = 253) {
  if (v.empty()) return e.Required(path);
  if (v.size() > max) return e.TooLong(path, max);
  if (!std::regex_match(v, Subdomain()))
    e.Invalid(path, v,
              "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
              "'-' or '.', and must start and end with an alphanumeric character");
}
void CheckLabel(Errors& e, const std::string& path, const std::string& v) {
  if (v.empty()) return e.Required(path);
  if (v.size() > 63) return e.TooLong(path, 63);
  if (!std::regex_match(v, Label()))
    e.Invalid(path, v,
              "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
              "'-', and must start and end with an alphanumeric character");
}
// An attribute or capacity name: a C identifier (at most 32) or <domain>/<C identifier>.
void CheckQualifiedName(Errors& e, const std::string& path, const std::string& name,
                        bool require_domain = false) {
  const size_t slash = name.find('/');
  std::string id = name;
  if (slash != std::string::npos) {
    const std::string domain = name.substr(0, slash);
    id = name.substr(slash + 1);
    if (domain.empty()) {
      e.Required(path, "the domain must not be empty");
    } else if (domain.size() > kMaxDomainLength) {
      e.TooLong(path, kMaxDomainLength);
    } else if (!std::regex_match(domain, Subdomain())) {
      e.Invalid(path, name, "the domain must be a DNS subdomain");
    }
  } else if (require_domain) {
    e.Required(path, "a fully qualified name must be domain and identifier separated by a slash");
  }
  if (id.empty()) return e.Required(path, "the identifier must not be empty");
  if (id.size() > kMaxIdLength) return e.TooLong(path, kMaxIdLength);
  if (!std::regex_match(id, CIdentifier()))
    e.Invalid(path, name,
              "a valid C identifier must start with alphabetic character or '_', followed by a "
              "string of alphanumeric characters or '_'");
}
std::optional<long double> CheckQuantity(Errors& e, const std::string& path, const Json* v) {
  if (v == nullptr) {
    e.Required(path);
    return std::nullopt;
  }
  auto q = ParseQuantity(*v);
  if (!q) e.Invalid(path, *v, "quantities must match the regular expression");
  return q;
}
void CheckSelectors(Errors& e, const std::string& path, const Json& owner) {
  const Json& sel = Items(owner, "selectors");
  if (sel.size() > kMaxRequests) e.TooMany(path, sel.size(), kMaxRequests);
  for (size_t i = 0; i < sel.size(); ++i) {
    const std::string p = StrCat(path, "[", i, "].cel.expression");
    const Json* cel = Field(sel[i], "cel");
    const std::string expr = cel != nullptr ? Str(*cel, "expression") : "";
    if (cel == nullptr) {
      e.Required(StrCat(path, "[", i, "].cel"));
    } else if (expr.empty()) {
      e.Required(p);
    } else if (expr.size() > kMaxCelLength) {
      e.TooLong(p, kMaxCelLength);
    }
  }
}
void CheckOpaque(Errors& e, const std::string& path, const Json& config) {
  const Json* opaque = Field(config, "opaque");
  if (opaque == nullptr) return e.Required(StrCat(path, ".opaque"));
  const std::string driver = Str(*opaque, "driver");
  CheckSubdomain(e, StrCat(path, ".opaque.driver"), driver, kMaxDriverName);
  const Json* params = Field(*opaque, "parameters");
  if (params == nullptr) return e.Required(StrCat(path, ".opaque.parameters"));
  if (params->dump().size() > kMaxOpaqueParameters)
    e.TooLong(StrCat(path, ".opaque.parameters"), kMaxOpaqueParameters);
}

// ---------------- dropping fields of disabled gates ----------------

// Removes `name` from every element of `arr` (an array field of `parent`).
void DropFromEach(Json& parent, const char* arr, const char* name) {
  if (!parent.is_object() || !parent.contains(arr) || !parent[arr].is_array()) return;
  for (Json& el : parent[arr])
    if (el.is_object()) el.erase(name);
}
bool AnyHas(const Json* parent, const char* arr, const char* name) {
  if (parent == nullptr) return false;
  for (const Json& el : Items(*parent, arr))
    if (Field(el, name) != nullptr) return true;
  return false;
}
const Json* Path(const Json* obj, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (obj == nullptr) return nullptr;
    obj = Field(*obj, n);
  }
  return obj;
}

bool SliceUsesRequestPolicy(const Json* spec) {
  if (spec == nullptr) return false;
  for (const Json& d : Items(*spec, "devices")) {
    const Json* cap = Field(d, "capacity");
    if (cap == nullptr || !cap->is_object()) continue;
    for (const auto& [k, c] : cap->items())
      if (Field(c, "requestPolicy") != nullptr) return true;
  }
  return false;
}

void DropSlice(Json& obj, const Json* old, const DraGates& g) {
  Json& spec = obj["spec"];
  if (!spec.is_object()) return;
  const Json* ospec = Path(old, {"spec"});
  if (!g.consumable_capacity) {
    if (!AnyHas(ospec, "devices", "allowMultipleAllocations"))
      DropFromEach(spec, "devices", "allowMultipleAllocations");
    if (!SliceUsesRequestPolicy(ospec) && spec.contains("devices") && spec["devices"].is_array()) {
      for (Json& d : spec["devices"]) {
        if (!d.is_object() || !d.contains("capacity") || !d["capacity"].is_object()) continue;
        for (auto& [k, c] : d["capacity"].items())
          if (c.is_object()) c.erase("requestPolicy");
      }
    }
  }
  if (!g.partitionable_devices) {
    if (ospec == nullptr || Field(*ospec, "sharedCounters") == nullptr)
      spec.erase("sharedCounters");
    if (ospec == nullptr || Field(*ospec, "perDeviceNodeSelection") == nullptr)
      spec.erase("perDeviceNodeSelection");
    for (const char* f : {"consumesCounters", "nodeName", "nodeSelector", "allNodes"})
      if (!AnyHas(ospec, "devices", f)) DropFromEach(spec, "devices", f);
  }
  if (!g.device_taints && !AnyHas(ospec, "devices", "taints"))
    DropFromEach(spec, "devices", "taints");
}

// spec.devices of a claim (or of a template's spec.spec).
bool ClaimSpecUsesCapacity(const Json* devices) {
  if (devices == nullptr) return false;
  for (const Json& r : Items(*devices, "requests")) {
    if (Path(&r, {"exactly", "capacity"}) != nullptr) return true;
    for (const Json& s : Items(r, "firstAvailable"))
      if (Field(s, "capacity") != nullptr) return true;
  }
  return AnyHas(devices, "constraints", "distinctAttribute");
}
bool ClaimSpecUsesFirstAvailable(const Json* devices) {
  if (devices == nullptr) return false;
  for (const Json& r : Items(*devices, "requests"))
    if (Field(r, "firstAvailable") != nullptr) return true;
  return false;
}
void DropClaimSpec(Json* devices, const Json* old_devices, const DraGates& g) {
  if (devices != nullptr && devices->is_object() && !g.prioritized_list &&
      !ClaimSpecUsesFirstAvailable(old_devices) && devices->contains("requests") &&
      (*devices)["requests"].is_array())
    for (Json& r : (*devices)["requests"])
      if (r.is_object()) r.erase("firstAvailable");
  if (devices == nullptr || !devices->is_object() || g.consumable_capacity ||
      ClaimSpecUsesCapacity(old_devices))
    return;
  if (devices->contains("requests") && (*devices)["requests"].is_array()) {
    for (Json& r : (*devices)["requests"]) {
      if (!r.is_object()) continue;
      if (r.contains("exactly") && r["exactly"].is_object()) r["exactly"].erase("capacity");
      DropFromEach(r, "firstAvailable", "capacity");
    }
  }
  DropFromEach(*devices, "constraints", "distinctAttribute");
}
Json* MutablePath(Json& obj, std::initializer_list<const char*> names) {
  Json* cur = &obj;
  for (const char* n : names) {
    if (!cur->is_object() || !cur->contains(n) || !(*cur)[n].is_object()) return nullptr;
    cur = &(*cur)[n];
  }
  return cur;
}

bool StatusUsesShares(const Json* status) {
  const Json* results = Path(status, {"allocation", "devices"});
  return AnyHas(results, "results", "shareID") || AnyHas(results, "results", "consumedCapacity") ||
         AnyHas(status, "devices", "shareID");
}
void DropClaimStatus(Json& obj, const Json* old, const DraGates& g) {
  if (g.consumable_capacity || StatusUsesShares(Path(old, {"status"}))) return;
  if (Json* devs = MutablePath(obj, {"status", "allocation", "devices"})) {
    DropFromEach(*devs, "results", "shareID");
    DropFromEach(*devs, "results", "consumedCapacity");
  }
  if (Json* st = MutablePath(obj, {"status"})) DropFromEach(*st, "devices", "shareID");
}

// ---------------- validation ----------------

void ValidateName(Errors& e, const Json& obj) {
  const Json* md = Field(obj, "metadata");
  CheckSubdomain(e, "metadata.name", md != nullptr ? Str(*md, "name") : "");
}

void ValidateRequestPolicy(Errors& e, const std::string& path, const Json& policy,
                           std::optional<long double> value) {
  std::optional<long double> def;
  if (const Json* d = Field(policy, "default")) def = CheckQuantity(e, path + ".default", d);
  const Json* values = Field(policy, "validValues");
  const Json* range = Field(policy, "validRange");
  if (values != nullptr && range != nullptr)
    e.Forbidden(path, "exactly one of `validValues` or `validRange` may be set");
  if (values != nullptr) {
    if (Size(values) > kMaxValidValues)
      e.TooMany(path + ".validValues", Size(values), kMaxValidValues);
    std::optional<long double> prev;
    bool has_default = !def.has_value();
    for (size_t i = 0; values->is_array() && i < values->size(); ++i) {
      auto q = CheckQuantity(e, StrCat(path, ".validValues[", i, "]"), &(*values)[i]);
      if (!q) continue;
      if (prev && *q <= *prev)
        e.Invalid(StrCat(path, ".validValues[", i, "]"), (*values)[i],
                  "values must be sorted in ascending order and unique");
      if (value && *q > *value)
        e.Invalid(StrCat(path, ".validValues[", i, "]"), (*values)[i],
                  "must not exceed the capacity value");
      has_default |= def && *q == *def;
      prev = q;
    }
    if (!has_default) e.Invalid(path + ".default", policy["default"], "must be one of validValues");
  }
  if (range != nullptr) {
    const std::string rp = path + ".validRange";
    auto min = CheckQuantity(e, rp + ".min", Field(*range, "min"));
    std::optional<long double> max, step;
    if (const Json* m = Field(*range, "max")) max = CheckQuantity(e, rp + ".max", m);
    if (const Json* s = Field(*range, "step")) step = CheckQuantity(e, rp + ".step", s);
    if (min && max && *min > *max)
      e.Invalid(rp + ".max", (*range)["max"], "must be greater than or equal to min");
    if (min && value && *min > *value)
      e.Invalid(rp + ".min", (*range)["min"], "must not exceed the capacity value");
    if (max && value && *max > *value)
      e.Invalid(rp + ".max", (*range)["max"], "must not exceed the capacity value");
    if (step && *step <= 0) e.Invalid(rp + ".step", (*range)["step"], "must be positive");
    if (def && min && *def < *min)
      e.Invalid(path + ".default", policy["default"], "must be within the validRange");
    if (def && max && *def > *max)
      e.Invalid(path + ".default", policy["default"], "must be within the validRange");
    if (step && *step > 0 && min) {
      auto multiple = [&](long double v) {
        const long double n = (v - *min) / *step;
        return std::fabs(n - std::round(n)) < 1e-9L;
      };
      if (def && !multiple(*def))
        e.Invalid(path + ".default", policy["default"], "must be min plus a multiple of step");
      if (max && !multiple(*max))
        e.Invalid(rp + ".max", (*range)["max"], "must be min plus a multiple of step");
      if (value && *min + *step > *value)
        e.Invalid(rp + ".step", (*range)["step"], "min + step must not exceed the capacity value");
    }
  }
  if (def && value && *def > *value)
    e.Invalid(path + ".default", policy["default"], "must not exceed the capacity value");
}

void ValidateDevice(Errors& e, const std::string& path, const Json& d) {
  CheckLabel(e, path + ".name", Str(d, "name"));
  const Json* attrs = Field(d, "attributes");
  const Json* caps = Field(d, "capacity");
  const size_t n = Size(attrs) + Size(caps);
  if (n > kMaxAttributesAndCapacities)
    e.TooMany(path, n, kMaxAttributesAndCapacities, "attributes and capacities combined");
  if (attrs != nullptr && attrs->is_object()) {
    for (const auto& [k, a] : attrs->items()) {
      const std::string ap = StrCat(path, ".attributes[", k, "]");
      CheckQualifiedName(e, ap, k);
      int kinds = 0;
      for (const char* f : {"int", "bool", "string", "version"}) kinds += Field(a, f) != nullptr;
      if (kinds == 0) e.Required(ap, "exactly one value must be specified");
      if (kinds > 1) e.Invalid(ap, a, "exactly one value must be specified");
      if (const Json* s = Field(a, "string");
          s != nullptr && s->is_string() && s->get<std::string>().size() > kMaxAttributeValue)
        e.TooLong(ap + ".string", kMaxAttributeValue);
      if (const Json* v = Field(a, "version"); v != nullptr) {
        const std::string ver = v->is_string() ? v->get<std::string>() : "";
        if (ver.size() > kMaxAttributeValue) {
          e.TooLong(ap + ".version", kMaxAttributeValue);
        } else if (!std::regex_match(ver, Semver())) {
          e.Invalid(ap + ".version", *v, "must be a string compatible with semver.org spec 2.0.0");
        }
      }
    }
  }
  const bool shared = True(d, "allowMultipleAllocations");
  if (caps != nullptr && caps->is_object()) {
    for (const auto& [k, c] : caps->items()) {
      const std::string cp = StrCat(path, ".capacity[", k, "]");
      CheckQualifiedName(e, cp, k);
      auto value = CheckQuantity(e, cp + ".value", Field(c, "value"));
      if (const Json* policy = Field(c, "requestPolicy")) {
        if (!shared)
          e.Forbidden(cp + ".requestPolicy", "allowed only when allowMultipleAllocations is true");
        ValidateRequestPolicy(e, cp + ".requestPolicy", *policy, value);
      }
    }
  }
  if (Size(Field(d, "taints")) > 16) e.TooMany(path + ".taints", Size(Field(d, "taints")), 16);
  if (Size(Field(d, "consumesCounters")) > 2)
    e.TooMany(path + ".consumesCounters", Size(Field(d, "consumesCounters")), 2);
}

void ValidateSlice(Errors& e, const Json& obj, const Json* old) {
  ValidateName(e, obj);
  const Json* spec = Field(obj, "spec");
  if (spec == nullptr) return e.Required("spec");
  const std::string driver = Str(*spec, "driver");
  CheckSubdomain(e, "spec.driver", driver, kMaxDriverName);
  const Json* pool = Field(*spec, "pool");
  if (pool == nullptr) {
    e.Required("spec.pool");
  } else {
    const std::string name = Str(*pool, "name");
    if (name.empty()) {
      e.Required("spec.pool.name");
    } else if (name.size() > kMaxPoolName) {
      e.TooLong("spec.pool.name", kMaxPoolName);
    } else {
      size_t start = 0;
      while (true) {
        const size_t slash = name.find('/', start);
        const std::string part = name.substr(start, slash - start);
        if (part.empty() || !std::regex_match(part, Subdomain())) {
          e.Invalid("spec.pool.name", name,
                    "must consist of DNS subdomains separated by slashes, each a lowercase RFC "
                    "1123 subdomain");
          break;
        }
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
    }
    const Json* gen = Field(*pool, "generation");
    if (gen != nullptr && (!gen->is_number_integer() || gen->get<int64_t>() < 0))
      e.Invalid("spec.pool.generation", *gen, "must be greater than or equal to 0");
    const Json* count = Field(*pool, "resourceSliceCount");
    if (count == nullptr) {
      e.Invalid("spec.pool.resourceSliceCount", 0, "must be greater than zero");
    } else if (!count->is_number_integer() || count->get<int64_t>() <= 0) {
      e.Invalid("spec.pool.resourceSliceCount", *count, "must be greater than zero");
    }
  }
  const std::string node = Str(*spec, "nodeName");
  const int set = !node.empty() + (Field(*spec, "nodeSelector") != nullptr) +
                  True(*spec, "allNodes") + True(*spec, "perDeviceNodeSelection");
  const char* kOneOf =
      "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
      "required";
  if (set == 0) e.Required("spec", kOneOf);
  if (set > 1) e.Invalid("spec", "{...}", StrCat(kOneOf, ", but multiple fields are set"));
  if (!node.empty()) CheckSubdomain(e, "spec.nodeName", node);
  if (const Json* sel = Field(*spec, "nodeSelector"))
    if (Size(Field(*sel, "nodeSelectorTerms")) != 1)
      e.Invalid("spec.nodeSelector.nodeSelectorTerms", Size(Field(*sel, "nodeSelectorTerms")),
                "must have exactly one node selector term");
  const Json& devices = Items(*spec, "devices");
  bool taints_or_counters = false;
  for (const Json& d : devices)
    taints_or_counters |= Field(d, "taints") != nullptr || Field(d, "consumesCounters") != nullptr;
  const size_t max = taints_or_counters ? kMaxDevicesWithTaintsOrCounters : kMaxDevicesPerSlice;
  if (devices.size() > max) e.TooMany("spec.devices", devices.size(), max);
  if (!devices.empty() && Size(Field(*spec, "sharedCounters")) > 0)
    e.Invalid("spec", "{...}", "only one of `devices` and `sharedCounters` can be set");
  std::set<std::string> names;
  for (size_t i = 0; i < devices.size() && i < max; ++i) {
    const std::string p = StrCat("spec.devices[", i, "]");
    ValidateDevice(e, p, devices[i]);
    const std::string name = Str(devices[i], "name");
    if (!name.empty() && !names.insert(name).second) e.Duplicate(p + ".name", name);
  }
  if (old != nullptr) {
    const Json* ospec = Field(*old, "spec");
    if (ospec == nullptr) return;
    if (Str(*ospec, "driver") != driver) e.Invalid("spec.driver", driver, "field is immutable");
    const std::string pool_name = pool != nullptr ? Str(*pool, "name") : "";
    const Json* opool = Field(*ospec, "pool");
    if (opool != nullptr && Str(*opool, "name") != pool_name)
      e.Invalid("spec.pool.name", pool_name, "field is immutable");
    if (Str(*ospec, "nodeName") != node) e.Invalid("spec.nodeName", node, "field is immutable");
  }
}

void ValidateDeviceClass(Errors& e, const Json& obj) {
  ValidateName(e, obj);
  const Json* spec = Field(obj, "spec");
  if (spec == nullptr) return;
  CheckSelectors(e, "spec.selectors", *spec);
  const Json& config = Items(*spec, "config");
  if (config.size() > kMaxRequests) e.TooMany("spec.config", config.size(), kMaxRequests);
  for (size_t i = 0; i < config.size(); ++i)
    CheckOpaque(e, StrCat("spec.config[", i, "]"), config[i]);
  const std::string ext = Str(*spec, "extendedResourceName");
  if (!ext.empty() && (ext.find('/') == std::string::npos || ext.rfind("kubernetes.io/", 0) == 0 ||
                       ext.rfind("requests.", 0) == 0))
    e.Invalid("spec.extendedResourceName", ext, "must be a valid extended resource name");
}

// One ExactDeviceRequest or DeviceSubRequest (the fields they share).
void ValidateExact(Errors& e, const std::string& path, const Json& r) {
  CheckSubdomain(e, path + ".deviceClassName", Str(r, "deviceClassName"));
  CheckSelectors(e, path + ".selectors", r);
  const std::string mode = Str(r, "allocationMode");
  const Json* count = Field(r, "count");
  if (mode.empty() || mode == "ExactCount") {
    if (count != nullptr && (!count->is_number_integer() || count->get<int64_t>() <= 0))
      e.Invalid(path + ".count", *count, "must be greater than zero");
  } else if (mode == "All") {
    if (count != nullptr && !(count->is_number_integer() && count->get<int64_t>() == 0))
      e.Invalid(path + ".count", *count, "must not be specified when allocationMode is 'All'");
  } else {
    e.NotSupported(path + ".allocationMode", mode, "\"All\", \"ExactCount\"");
  }
  if (const Json* cap = Field(r, "capacity")) {
    const Json* req = Field(*cap, "requests");
    if (req != nullptr && req->is_object()) {
      for (const auto& [k, q] : req->items()) {
        const std::string qp = StrCat(path, ".capacity.requests[", k, "]");
        CheckQualifiedName(e, qp, k);
        CheckQuantity(e, qp, &q);
      }
    }
  }
}

// ResourceClaimSpec at `path` ("spec" or "spec.spec"); returns the request names (with
// "<request>/<subrequest>" for subrequests).
std::set<std::string> ValidateClaimSpec(Errors& e, const std::string& path, const Json* spec) {
  std::set<std::string> names;
  const Json* devices = spec != nullptr ? Field(*spec, "devices") : nullptr;
  if (devices == nullptr) return names;
  const std::string dp = path + ".devices";
  const Json& requests = Items(*devices, "requests");
  if (requests.size() > kMaxRequests) e.TooMany(dp + ".requests", requests.size(), kMaxRequests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string rp = StrCat(dp, ".requests[", i, "]");
    const Json& r = requests[i];
    const std::string name = Str(r, "name");
    CheckLabel(e, rp + ".name", name);
    if (!name.empty() && !names.insert(name).second) e.Duplicate(rp + ".name", name);
    const Json* exactly = Field(r, "exactly");
    const Json* first = Field(r, "firstAvailable");
    if (exactly == nullptr && first == nullptr)
      e.Required(rp, "exactly one of `exactly` or `firstAvailable` is required");
    if (exactly != nullptr && first != nullptr)
      e.Invalid(rp, "{...}",
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields "
                "are set");
    if (exactly != nullptr) ValidateExact(e, rp + ".exactly", *exactly);
    if (first != nullptr) {
      const Json& subs = Items(r, "firstAvailable");
      if (subs.empty()) e.Required(rp + ".firstAvailable");
      if (subs.size() > kMaxSubRequests)
        e.TooMany(rp + ".firstAvailable", subs.size(), kMaxSubRequests);
      std::set<std::string> sub_names;
      for (size_t j = 0; j < subs.size(); ++j) {
        const std::string sp = StrCat(rp, ".firstAvailable[", j, "]");
        const std::string sub = Str(subs[j], "name");
        CheckLabel(e, sp + ".name", sub);
        if (!sub.empty() && !sub_names.insert(sub).second) e.Duplicate(sp + ".name", sub);
        ValidateExact(e, sp, subs[j]);
        names.insert(StrCat(name, "/", sub));
      }
    }
  }
  auto check_refs = [&](const std::string& p, const Json& owner) {
    const Json& refs = Items(owner, "requests");
    for (size_t j = 0; j < refs.size(); ++j) {
      const std::string ref = refs[j].is_string() ? refs[j].get<std::string>() : "";
      if (!names.count(ref))
        e.Invalid(StrCat(p, ".requests[", j, "]"), refs[j],
                  "must be the name of a request in the claim or the name of a request and a "
                  "subrequest separated by '/'");
    }
  };
  const Json& constraints = Items(*devices, "constraints");
  if (constraints.size() > kMaxRequests)
    e.TooMany(dp + ".constraints", constraints.size(), kMaxRequests);
  for (size_t i = 0; i < constraints.size(); ++i) {
    const std::string cp = StrCat(dp, ".constraints[", i, "]");
    check_refs(cp, constraints[i]);
    const std::string match = Str(constraints[i], "matchAttribute");
    const std::string distinct = Str(constraints[i], "distinctAttribute");
    if (match.empty() == distinct.empty())
      e.Required(cp, "exactly one of `matchAttribute` or `distinctAttribute` is required");
    if (!match.empty()) CheckQualifiedName(e, cp + ".matchAttribute", match, true);
    if (!distinct.empty()) CheckQualifiedName(e, cp + ".distinctAttribute", distinct, true);
  }
  const Json& config = Items(*devices, "config");
  if (config.size() > kMaxRequests) e.TooMany(dp + ".config", config.size(), kMaxRequests);
  for (size_t i = 0; i < config.size(); ++i) {
    const std::string cp = StrCat(dp, ".config[", i, "]");
    check_refs(cp, config[i]);
    CheckOpaque(e, cp, config[i]);
  }
  return names;
}

// metav1validation.ValidateConditions: type a qualified name (unique), status True/False/Unknown,
// lastTransitionTime and reason required, reason CamelCase-like, message at most 32768 bytes.
void ValidateConditions(Errors& e, const std::string& path, const Json& conditions) {
  static const std::regex kReason(R"([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)");
  std::set<std::string> types;
  for (size_t i = 0; i < conditions.size(); ++i) {
    const std::string p = StrCat(path, "[", i, "]");
    const Json& c = conditions[i];
    const std::string type = Str(c, "type");
    if (type.empty()) {
      e.Required(p + ".type");
    } else {
      // A Kubernetes qualified name: [<DNS subdomain>/]<name of at most 63 characters>.
      static const std::regex kQualified(
          R"(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?)"
          R"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)");
      if (!std::regex_match(type, kQualified))
        e.Invalid(p + ".type", type, "must be a qualified name");
      if (!types.insert(type).second) e.Duplicate(p + ".type", type);
    }
    const std::string status = Str(c, "status");
    if (status != "True" && status != "False" && status != "Unknown")
      e.NotSupported(p + ".status", status, "\"False\", \"True\", \"Unknown\"");
    if (Str(c, "lastTransitionTime").empty()) e.Required(p + ".lastTransitionTime", "must be set");
    const std::string reason = Str(c, "reason");
    if (reason.empty()) {
      e.Required(p + ".reason");
    } else if (reason.size() > 1024) {
      e.TooLong(p + ".reason", 1024);
    } else if (!std::regex_match(reason, kReason)) {
      e.Invalid(p + ".reason", reason,
                "a condition reason must start with alphabetic character, optionally followed by "
                "a string of alphanumeric characters or '_,:', and must end with an alphanumeric "
                "character or '_'");
    }
    if (Str(c, "message").size() > 32768) e.TooLong(p + ".message", 32768);
  }
}

void ValidateClaimStatus(Errors& e, const Json& obj, const Json* old,
                         const std::set<std::string>& requests) {
  const Json* status = Field(obj, "status");
  if (status == nullptr) return;
  const Json* alloc = Field(*status, "allocation");
  std::set<std::string> allocated;  // driver/pool/device/shareID
  if (alloc != nullptr) {
    const Json* devices = Field(*alloc, "devices");
    const Json& results = Items(devices != nullptr ? *devices : *alloc, "results");
    if (results.size() > kMaxRequests)
      e.TooMany("status.allocation.devices.results", results.size(), kMaxRequests);
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string rp = StrCat("status.allocation.devices.results[", i, "]");
      const Json& r = results[i];
      const std::string req = Str(r, "request");
      if (req.empty()) {
        e.Required(rp + ".request");
      } else if (!requests.count(req)) {
        e.Invalid(rp + ".request", req, "must be the name of a request in the claim");
      }
      CheckSubdomain(e, rp + ".driver", Str(r, "driver"), kMaxDriverName);
      if (Str(r, "pool").empty()) e.Required(rp + ".pool");
      CheckLabel(e, rp + ".device", Str(r, "device"));
      const std::string share = Str(r, "shareID");
      if (Field(r, "shareID") != nullptr && !std::regex_match(share, Uuid()))
        e.Invalid(rp + ".shareID", r["shareID"], "must be a lowercase UUID in 8-4-4-4-12 format");
      if (const Json* cc = Field(r, "consumedCapacity"); cc != nullptr && cc->is_object()) {
        for (const auto& [k, q] : cc->items()) {
          const std::string qp = StrCat(rp, ".consumedCapacity[", k, "]");
          CheckQualifiedName(e, qp, k);
          CheckQuantity(e, qp, &q);
        }
      }
      allocated.insert(
          StrCat(Str(r, "driver"), "/", Str(r, "pool"), "/", Str(r, "device"), "/", share));
    }
    const Json* old_alloc = Path(old, {"status", "allocation"});
    if (old_alloc != nullptr && *old_alloc != *alloc)
      e.Invalid("status.allocation", "{...}", "field is immutable");
  }
  const Json& reserved = Items(*status, "reservedFor");
  if (!reserved.empty() && alloc == nullptr)
    e.Forbidden("status.reservedFor", "may not be specified when `allocated` is not set");
  if (reserved.size() > kMaxReservedFor)
    e.TooMany("status.reservedFor", reserved.size(), kMaxReservedFor);
  std::set<std::string> uids;
  for (size_t i = 0; i < reserved.size(); ++i) {
    const std::string p = StrCat("status.reservedFor[", i, "]");
    for (const char* f : {"resource", "name", "uid"})
      if (Str(reserved[i], f).empty()) e.Required(StrCat(p, ".", f));
    const std::string uid = Str(reserved[i], "uid");
    if (!uid.empty() && !uids.insert(uid).second) e.Duplicate(p + ".uid", uid);
  }
  const Json& devices = Items(*status, "devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string p = StrCat("status.devices[", i, "]");
    const Json& d = devices[i];
    const std::string key = StrCat(Str(d, "driver"), "/", Str(d, "pool"), "/", Str(d, "device"),
                                   "/", Str(d, "shareID"));
    if (!allocated.count(key))
      e.Invalid(p, key, "must specify a device (and share) present in status.allocation");
    if (Size(Field(d, "conditions")) > kMaxDeviceConditions)
      e.TooMany(p + ".conditions", Size(Field(d, "conditions")), kMaxDeviceConditions);
    ValidateConditions(e, p + ".conditions", Items(d, "conditions"));
    if (const Json* data = Field(d, "data"); data != nullptr && data->dump().size() > kMaxDataSize)
      e.TooLong(p + ".data", kMaxDataSize);
  }
}

}  // namespace

DraGates DraGatesFor(int minor, const std::map<std::string, bool>& overrides) {
  DraGates g;
  g.consumable_capacity = g.partitionable_devices = g.device_taints = g.extended_resource =
      g.granular_status_authorization = minor >= 36;
  auto set = [&](const char* name, bool& field) {
    if (auto it = overrides.find(name); it != overrides.end()) field = it->second;
  };
  set("DRAConsumableCapacity", g.consumable_capacity);
  set("DRAPartitionableDevices", g.partitionable_devices);
  set("DRADeviceTaints", g.device_taints);
  set("DRAExtendedResource", g.extended_resource);
  g.prioritized_list = minor >= 34;
  set("DRAPrioritizedList", g.prioritized_list);
  set("DRAResourceClaimGranularStatusAuthorization", g.granular_status_authorization);
  return g;
}

bool IsDraResource(const std::string& plural) {
  return plural == "resourceslices" || plural == "deviceclasses" || plural == "resourceclaims" ||
         plural == "resourceclaimtemplates";
}

std::vector<std::string> AdmitDraWrite(const std::string& plural, Json& obj, const Json* old,
                                       bool status_write, const DraGates& gates) {
  Errors e;
  if (plural == "resourceslices") {
    DropSlice(obj, old, gates);
    ValidateSlice(e, obj, old);
  } else if (plural == "deviceclasses") {
    if (Json* spec = MutablePath(obj, {"spec"});
        spec != nullptr && !gates.extended_resource &&
        Path(old, {"spec", "extendedResourceName"}) == nullptr)
      spec->erase("extendedResourceName");
    ValidateDeviceClass(e, obj);
  } else if (plural == "resourceclaims") {
    if (old == nullptr) obj.erase("status");  // a create never sets status
    DropClaimSpec(MutablePath(obj, {"spec", "devices"}), Path(old, {"spec", "devices"}), gates);
    DropClaimStatus(obj, old, gates);
    ValidateName(e, obj);
    const Json* spec = Field(obj, "spec");
    const std::set<std::string> names = ValidateClaimSpec(e, "spec", spec);
    if (old != nullptr && !status_write && Path(old, {"spec"}) != nullptr &&
        (spec == nullptr || *spec != *Path(old, {"spec"})))
      e.Invalid("spec", "{...}", "field is immutable");
    ValidateClaimStatus(e, obj, old, names);
  } else if (plural == "resourceclaimtemplates") {
    DropClaimSpec(MutablePath(obj, {"spec", "spec", "devices"}),
                  Path(old, {"spec", "spec", "devices"}), gates);
    ValidateName(e, obj);
    const Json* spec = Field(obj, "spec");
    if (spec == nullptr) {
      e.Required("spec");
    } else {
      ValidateClaimSpec(e, "spec.spec", Field(*spec, "spec"));
    }
    if (old != nullptr && Path(old, {"spec"}) != nullptr &&
        (spec == nullptr || *spec != *Path(old, {"spec"})))
      e.Invalid("spec", "{...}", "field is immutable");
  }
  return e.Take();
}

std::vector<std::string> ModifiedDeviceStatusDrivers(const Json& new_status,
                                                     const Json& old_status) {
  auto key = [](const Json& d) {
    return StrCat(Str(d, "driver"), "/", Str(d, "pool"), "/", Str(d, "device"), "/",
                  Str(d, "shareID"));
  };
  std::map<std::string, const Json*> old_by_key;
  for (const auto& d : Items(old_status, "devices")) old_by_key[key(d)] = &d;
  std::set<std::string> drivers;
  for (const auto& d : Items(new_status, "devices")) {
    auto it = old_by_key.find(key(d));
    if (it == old_by_key.end() || *it->second != d) drivers.insert(Str(d, "driver"));
    if (it != old_by_key.end()) old_by_key.erase(it);
  }
  for (const auto& [k, d] : old_by_key) drivers.insert(Str(*d, "driver"));
  return {drivers.begin(), drivers.end()};
}

std::string AllocatedNodeName(const Json& status) {
  const Json* terms = Path(&status, {"allocation", "nodeSelector", "nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array() || terms->size() != 1) return "";
  const Json& term = (*terms)[0];
  if (Size(Field(term, "matchExpressions")) != 0 || Size(Field(term, "matchFields")) != 1)
    return "";
  const Json& f = term["matchFields"][0];
  const Json& values = Items(f, "values");
  if (Str(f, "key") != "metadata.name" || Str(f, "operator") != "In" || values.size() != 1 ||
      !values[0].is_string())
    return "";
  return values[0].get<std::string>();
}

}  // namespace hami::k8s::testing
