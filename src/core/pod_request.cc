#include "core/pod_request.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/mig.h"
#include "core/quantity.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::core {
namespace {

using nlohmann::json;

// The member `key` of `obj` when present and not null; an error when it has the wrong type.
StatusOr<const json*> Member(const json& obj, const char* key, json::value_t type,
                             std::string_view path) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  const bool ok =
      type == json::value_t::number_integer ? it->is_number_integer() : it->type() == type;
  if (!ok) {
    return InvalidArgument(path, key, ": expected JSON ", json(type).type_name(), ", got ",
                           it->type_name());
  }
  return &*it;
}

StatusOr<std::map<std::string, std::string>> StringMap(const json& obj, const char* key,
                                                       std::string_view path) {
  std::map<std::string, std::string> out;
  HAMI_ASSIGN_OR_RETURN(const json* m, Member(obj, key, json::value_t::object, path));
  if (m == nullptr) return out;
  for (const auto& [k, v] : m->items()) {
    if (!v.is_string()) {
      return InvalidArgument(path, key, "[", k, "]: expected a string value, got JSON ",
                             v.type_name());
    }
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

// Whether `m` (limits or requests) holds `name` with a value.
bool Has(const json* m, const std::string& name) {
  return m != nullptr && m->contains(name) && !(*m)[name].is_null();
}

// The quantity `name` of `m`; errors say where it is (`limits[nvidia.com/gpumem]: ...`).
StatusOr<std::optional<Quantity>> Get(const json* m, const char* where, const std::string& name) {
  if (!Has(m, name)) return std::optional<Quantity>();
  auto q = ParseQuantityJson((*m)[name]);
  if (!q.ok()) return Annotate(q.status(), StrCat(where, "[", name, "]"));
  return std::optional<Quantity>(*q);
}

StatusOr<ContainerRequest> ParseContainer(const json& c, ContainerKind kind,
                                          const std::map<std::string, std::string>& annotations,
                                          const PodDeviceReader* devices) {
  ContainerRequest out;
  out.kind = kind;
  if (!c.is_object()) return InvalidArgument("expected JSON object, got ", c.type_name());
  HAMI_ASSIGN_OR_RETURN(const json* name, Member(c, "name", json::value_t::string, ""));
  if (name != nullptr) out.name = name->get<std::string>();
  static const json kAbsent;
  const auto it = c.find("resources");
  const json& resources = it == c.end() ? kAbsent : *it;
  HAMI_ASSIGN_OR_RETURN(ContainerResources r, ContainerResources::Make(resources));
  HAMI_ASSIGN_OR_RETURN(std::optional<Quantity> cpu, r.RequestOrLimit("cpu"));
  if (cpu) {
    auto milli = QuantityToMilli(*cpu);
    if (!milli.ok()) return Annotate(milli.status(), "cpu");
    if (*milli < 0) return InvalidArgument("cpu: must not be negative, got ", FormatQuantity(*cpu));
    out.cpu_milli = *milli;
  }
  HAMI_ASSIGN_OR_RETURN(std::optional<Quantity> memory, r.RequestOrLimit("memory"));
  if (memory) {
    if (memory->IsNegative())
      return InvalidArgument("memory: must not be negative, got ", FormatQuantity(*memory));
    out.memory_mib = QuantityToMiB(*memory, Rounding::kUp);
  }
  if (devices != nullptr) {
    HAMI_ASSIGN_OR_RETURN(out.devices, devices->ContainerDevices(resources, annotations));
  }
  return out;
}

Status ParseContainerList(const json& spec, const char* key, bool init,
                          const std::map<std::string, std::string>& annotations,
                          const PodDeviceReader* devices, std::vector<ContainerRequest>* out) {
  HAMI_ASSIGN_OR_RETURN(const json* list, Member(spec, key, json::value_t::array, "spec."));
  if (list == nullptr) return OkStatus();
  for (size_t i = 0; i < list->size(); ++i) {
    const json& c = (*list)[i];
    ContainerKind kind = ContainerKind::kApp;
    if (init) {
      kind = ContainerKind::kInit;
      if (c.is_object()) {
        const auto rp = c.find("restartPolicy");
        if (rp != c.end() && rp->is_string() && rp->get<std::string>() == "Always")
          kind = ContainerKind::kSidecar;
      }
    }
    auto parsed = ParseContainer(c, kind, annotations, devices);
    if (!parsed.ok()) {
      std::string where = StrCat("spec.", key, "[", i, "]");
      if (c.is_object() && c.contains("name") && c["name"].is_string()) {
        where += StrCat(" \"", c["name"].get<std::string>(), "\"");
      }
      return Annotate(parsed.status(), where);
    }
    out->push_back(std::move(*parsed));
  }
  return OkStatus();
}

bool IsGpuPolicyKey(std::string_view k) {
  return k == kPolicyBinpack || k == kPolicySpread || k == kPolicyTopologyAware ||
         k == kPolicyMutex || k == kPolicyNuma;
}

}  // namespace

StatusOr<ContainerResources> ContainerResources::Make(const json& resources) {
  ContainerResources r;
  if (resources.is_null()) return r;
  if (!resources.is_object()) {
    return InvalidArgument("resources: expected JSON object, got ", resources.type_name());
  }
  HAMI_ASSIGN_OR_RETURN(r.limits_,
                        Member(resources, "limits", json::value_t::object, "resources."));
  HAMI_ASSIGN_OR_RETURN(r.requests_,
                        Member(resources, "requests", json::value_t::object, "resources."));
  return r;
}

StatusOr<std::optional<Quantity>> ContainerResources::LimitOrRequest(
    const std::string& name) const {
  HAMI_ASSIGN_OR_RETURN(auto q, Get(limits_, "limits", name));
  if (q) return q;
  return Get(requests_, "requests", name);
}

StatusOr<std::optional<Quantity>> ContainerResources::RequestOrLimit(
    const std::string& name) const {
  HAMI_ASSIGN_OR_RETURN(auto q, Get(requests_, "requests", name));
  if (q) return q;
  return Get(limits_, "limits", name);
}

StatusOr<std::vector<Quantity>> ContainerResources::Both(const std::string& name) const {
  std::vector<Quantity> out;
  for (const auto& [m, where] : {std::pair{limits_, "limits"}, std::pair{requests_, "requests"}}) {
    HAMI_ASSIGN_OR_RETURN(auto q, Get(m, where, name));
    if (q) out.push_back(*q);
  }
  return out;
}

bool ContainerResources::InLimits(const std::string& name) const {
  return Has(limits_, name);
}

std::vector<std::string> IgnoredAnnotations(const std::map<std::string, std::string>& annotations) {
  std::vector<std::string> out;
  if (auto it = annotations.find(kNodeSchedulerPolicy); it != annotations.end()) {
    if (auto p = ParseNodeSchedulerPolicy(it->second); !p.ok()) {
      out.push_back(
          StrCat(p.status().message(), "; the scheduler's configured node policy applies"));
    }
  }
  if (auto it = annotations.find(kGpuSchedulerPolicy); it != annotations.end()) {
    if (auto p = ParseGpuSchedulerPolicy(it->second); !p.ok()) {
      out.push_back(
          StrCat(p.status().message(), "; the scheduler's configured GPU policy applies"));
    }
  }
  return out;
}

StatusOr<std::string> ParseNodeSchedulerPolicy(std::string_view value) {
  const std::string_view v = text::Trim(value);
  if (v == kPolicyBinpack || v == kPolicySpread) return std::string(v);
  return InvalidArgument("annotation ", kNodeSchedulerPolicy, ": ", text::Quote(value),
                         " is not a node policy (expected binpack or spread)");
}

StatusOr<std::vector<std::string>> ParseGpuSchedulerPolicy(std::string_view value) {
  std::vector<std::string> keys;
  const auto fail = [&](auto... why) {
    return InvalidArgument(
        "annotation ", kGpuSchedulerPolicy, ": ", text::Quote(value), ": ", why...,
        " (expected a comma list of binpack, spread, topology-aware, mutex, numa, "
        "e.g. \"binpack,numa\", or one of \"fgd\", \"default\" alone)");
  };
  if (const std::string_view whole = text::Trim(value);
      whole == kPolicyFgd || whole == kPolicyDefault) {
    return std::vector<std::string>{std::string(whole)};
  }
  // Upstream's chain rule: every item a known key; repeats and binpack next to spread are allowed
  // (the chain is a list of sort keys: a later key only breaks the earlier ones' ties).
  for (std::string_view item : text::Split(value, ',')) {
    item = text::Trim(item);
    if (item.empty()) return fail("empty policy name");
    if (item == kPolicyFgd || item == kPolicyDefault)
      return fail("\"", item, "\" cannot be chained");
    if (!IsGpuPolicyKey(item)) return fail("unknown policy \"", item, "\"");
    keys.emplace_back(item);
  }
  return keys;
}

StatusOr<ScoringWeights> ParseScoringWeights(std::string_view value) {
  const auto fail = [&](auto... why) {
    return InvalidArgument(
        "annotation ", kDeviceScoringWeights, ": ", text::Quote(value), ": ", why...,
        " (expected \"slot=<int>,core=<int>,memory=<int>\", each >= 0, one > 0)");
  };
  std::map<std::string, int64_t> seen;
  for (std::string_view item : text::Split(value, ',')) {
    item = text::Trim(item);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail("item \"", item, "\" is not key=value");
    const std::string key(text::Trim(item.substr(0, eq)));
    const std::string_view num = text::Trim(item.substr(eq + 1));
    if (key != "slot" && key != "core" && key != "memory") return fail("unknown key \"", key, "\"");
    if (seen.count(key)) return fail("key \"", key, "\" given twice");
    const auto v = text::ParseInt(num);
    if (!v) return fail(key, "=\"", num, "\" is not an integer");
    if (*v < 0) return fail(key, " must be >= 0");
    if (*v > 1000000) return fail(key, " must be <= 1000000");
    seen[key] = *v;
  }
  for (const char* key : {"slot", "core", "memory"}) {
    if (!seen.count(key)) return fail("key \"", key, "\" is missing");
  }
  if (seen["slot"] == 0 && seen["core"] == 0 && seen["memory"] == 0)
    return fail("all weights are 0");
  ScoringWeights w;
  w.slot = static_cast<int>(seen["slot"]);
  w.core = static_cast<int>(seen["core"]);
  w.memory = static_cast<int>(seen["memory"]);
  return w;
}

StatusOr<PodRequest> ParsePodJson(const nlohmann::json& pod, const PodDeviceReader* devices) {
  try {
    if (!pod.is_object())
      return InvalidArgument("pod: expected JSON object, got ", pod.type_name());
    PodRequest out;
    HAMI_ASSIGN_OR_RETURN(const json* meta, Member(pod, "metadata", json::value_t::object, ""));
    if (meta != nullptr) {
      for (auto [key, field] : {std::pair{"uid", &out.uid}, std::pair{"namespace", &out.namespace_},
                                std::pair{"name", &out.name}}) {
        HAMI_ASSIGN_OR_RETURN(const json* v,
                              Member(*meta, key, json::value_t::string, "metadata."));
        if (v != nullptr) *field = v->get<std::string>();
      }
      HAMI_ASSIGN_OR_RETURN(out.labels, StringMap(*meta, "labels", "metadata."));
      HAMI_ASSIGN_OR_RETURN(out.annotations, StringMap(*meta, "annotations", "metadata."));
    }
    HAMI_ASSIGN_OR_RETURN(const json* spec, Member(pod, "spec", json::value_t::object, ""));
    if (spec != nullptr) {
      HAMI_RETURN_IF_ERROR(ParseContainerList(*spec, "initContainers", true, out.annotations,
                                              devices, &out.containers));
      HAMI_RETURN_IF_ERROR(ParseContainerList(*spec, "containers", false, out.annotations, devices,
                                              &out.containers));
    }
    if (devices != nullptr) {
      HAMI_ASSIGN_OR_RETURN(out.selectors, devices->Selectors(out.annotations));
    }
    // A policy annotation upstream does not recognise is ignored there (the configured policy
    // stands); so here. IgnoredAnnotations says which, for the webhook's warnings.
    if (auto it = out.annotations.find(kNodeSchedulerPolicy); it != out.annotations.end()) {
      if (auto p = ParseNodeSchedulerPolicy(it->second); p.ok()) out.node_policy = *p;
    }
    if (auto it = out.annotations.find(kGpuSchedulerPolicy); it != out.annotations.end()) {
      if (auto keys = ParseGpuSchedulerPolicy(it->second); keys.ok()) {
        for (size_t i = 0; i < keys->size(); ++i) out.gpu_policy += (i ? "," : "") + (*keys)[i];
      }
    }
    if (auto it = out.annotations.find(kDeviceScoringWeights); it != out.annotations.end()) {
      HAMI_ASSIGN_OR_RETURN(out.weights, ParseScoringWeights(it->second));
      out.has_weights = true;
    }
    return out;
  } catch (const json::exception& e) {
    // Defensive: every access above is type-checked; this keeps a missed case from escaping.
    return InvalidArgument("pod: malformed JSON object: ", e.what());
  }
}

CpuMemory EffectivePodRequest(const PodRequest& pod) {
  CpuMemory sidecars, apps, init_peak;
  for (const auto& c : pod.containers) {
    switch (c.kind) {
      case ContainerKind::kSidecar:
        sidecars.cpu_milli += c.cpu_milli;
        sidecars.memory_mib += c.memory_mib;
        break;
      case ContainerKind::kInit:
        init_peak.cpu_milli = std::max(init_peak.cpu_milli, sidecars.cpu_milli + c.cpu_milli);
        init_peak.memory_mib = std::max(init_peak.memory_mib, sidecars.memory_mib + c.memory_mib);
        break;
      case ContainerKind::kApp:
        apps.cpu_milli += c.cpu_milli;
        apps.memory_mib += c.memory_mib;
        break;
    }
  }
  return CpuMemory{std::max(init_peak.cpu_milli, apps.cpu_milli + sidecars.cpu_milli),
                   std::max(init_peak.memory_mib, apps.memory_mib + sidecars.memory_mib)};
}

std::vector<ContainerKind> ContainerKinds(const PodRequest& pod) {
  std::vector<ContainerKind> kinds;
  kinds.reserve(pod.containers.size());
  for (const auto& c : pod.containers) kinds.push_back(c.kind);
  return kinds;
}

namespace {
void AddUsage(DeviceUsage& into, const DeviceUsage& u) {
  into.used += u.used;
  into.usedmem_mib += u.usedmem_mib;
  into.usedcores += u.usedcores;
  into.mig_slices |= u.mig_slices;
}
void MaxUsage(DeviceUsage& into, const DeviceUsage& u) {
  into.used = std::max(into.used, u.used);
  into.usedmem_mib = std::max(into.usedmem_mib, u.usedmem_mib);
  into.usedcores = std::max(into.usedcores, u.usedcores);
  into.mig_slices |= u.mig_slices;
}
}  // namespace

std::map<std::string, DeviceUsage> EffectiveDeviceUsage(const std::vector<ContainerKind>& kinds,
                                                        const PodAllocation& allocation,
                                                        bool init_finished) {
  struct State {
    DeviceUsage sidecars;  // running sum of the sidecars declared so far
    DeviceUsage peak;      // peak during the init phase
    DeviceUsage apps;      // sum over app containers
  };
  // Align the entries with `kinds` (see the contract in the header).
  size_t end = allocation.containers.size();
  while (end > kinds.size() && allocation.containers[end - 1].empty()) --end;
  const size_t offset = end < kinds.size() ? kinds.size() - end : 0;

  std::map<std::string, State> states;
  for (size_t i = 0; i < end; ++i) {
    const size_t k = i + offset;
    const ContainerKind kind = k < kinds.size() ? kinds[k] : ContainerKind::kApp;
    // This container's usage per device (a MIG card may appear twice in one container).
    std::map<std::string, DeviceUsage> mine;
    for (const auto& d : allocation.containers[i]) {
      AddUsage(mine[d.uuid],
               DeviceUsage{1, d.usedmem_mib, d.usedcores,
                           d.mig_profile.empty() ? 0u : MigSliceMask(d.mig_placement)});
    }
    for (const auto& [uuid, u] : mine) {
      State& s = states[uuid];
      switch (kind) {
        case ContainerKind::kSidecar:
          AddUsage(s.sidecars, u);
          MaxUsage(s.peak, s.sidecars);
          break;
        case ContainerKind::kInit: {
          DeviceUsage running = s.sidecars;
          AddUsage(running, u);
          MaxUsage(s.peak, running);
          break;
        }
        case ContainerKind::kApp:
          AddUsage(s.apps, u);
          break;
      }
    }
  }
  std::map<std::string, DeviceUsage> out;
  for (const auto& [uuid, s] : states) {
    DeviceUsage steady = s.sidecars;
    AddUsage(steady, s.apps);
    if (!init_finished) MaxUsage(steady, s.peak);
    if (steady.used == 0 && steady.usedmem_mib == 0 && steady.usedcores == 0) continue;
    out[uuid] = steady;
  }
  return out;
}

std::map<std::string, DeviceTotals> DeviceTotalsByVendor(const std::vector<ContainerKind>& kinds,
                                                         const PodAllocation& allocation,
                                                         bool init_finished) {
  std::map<std::string, std::string> vendor_of;  // uuid -> vendor
  for (const auto& c : allocation.containers)
    for (const auto& d : c) vendor_of.emplace(d.uuid, d.vendor);
  std::map<std::string, DeviceTotals> out;
  for (const auto& [uuid, u] : EffectiveDeviceUsage(kinds, allocation, init_finished)) {
    DeviceTotals& t = out[vendor_of[uuid]];
    t.mem_mib += u.usedmem_mib;
    t.cores += u.usedcores;
  }
  return out;
}

std::map<std::string, DeviceTotals> RequestedDeviceTotalsByVendor(const PodRequest& pod) {
  // Each container's k-th device of a vendor is the pod's k-th device of that vendor.
  PodAllocation a;
  a.containers.reserve(pod.containers.size());
  for (const auto& c : pod.containers) {
    std::vector<ContainerDevice> devs;
    std::map<std::string, int> k;  // vendor -> next position
    for (const auto& d : c.devices)
      for (int n = 0; n < d.nums; ++n)
        devs.push_back({StrCat("pod-device-", d.vendor, "-", k[d.vendor]++), d.vendor, d.memreq_mib,
                        d.coresreq});
    a.containers.push_back(std::move(devs));
  }
  return DeviceTotalsByVendor(ContainerKinds(pod), a);
}

DeviceTotals RequestedDeviceTotals(const PodRequest& pod, std::string_view vendor) {
  const auto all = RequestedDeviceTotalsByVendor(pod);
  auto it = all.find(std::string(vendor));
  return it == all.end() ? DeviceTotals{} : it->second;
}

}  // namespace hami::core
