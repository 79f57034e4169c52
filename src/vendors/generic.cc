#include "vendors/generic.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/time/time.h"
#include "core/annotations.h"
#include "core/node_codec.h"
#include "core/pod_codec.h"
#include "core/quantity.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::vendors {
using scheduler::Reason;
namespace {

constexpr int64_t kMaxCount = 1024;
constexpr int64_t kMaxValue = std::numeric_limits<int32_t>::max();

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool ContainsFold(std::string_view hay, std::string_view needle) {
  return Lower(hay).find(Lower(needle)) != std::string::npos;
}

std::vector<std::string> ListAnnotation(const std::map<std::string, std::string>& a,
                                        const std::string& key) {
  if (key.empty()) return {};
  auto it = a.find(key);
  if (it == a.end()) return {};
  return core::text::SplitList(it->second);
}

}  // namespace

std::string Refusal::ToString() const {
  const char* name = scheduler::ReasonName(reason);
  return detail.empty() ? std::string(name) : StrCat(name, ": ", detail);
}

StatusOr<Refusal> ParseRefusal(std::string_view text) {
  const size_t colon = text.find(": ");
  const std::string_view name = text.substr(0, colon);
  const std::optional<scheduler::Reason> reason = scheduler::ParseReason(name);
  if (!reason)
    return InvalidArgument(
        StrCat("refusal ", core::text::Quote(text), ": unknown reason ", core::text::Quote(name)));
  Refusal r;
  r.reason = *reason;
  if (colon != std::string_view::npos) r.detail = std::string(text.substr(colon + 2));
  return r;
}

namespace {
constexpr const char kHandshakeTimeFormat[] = "%Y-%m-%d %H:%M:%S";
std::string HandshakeTime(int64_t now_unix) {
  return absl::FormatTime(kHandshakeTimeFormat, absl::FromUnixSeconds(now_unix),
                          absl::UTCTimeZone());
}
}  // namespace

HandshakeDecision CheckHandshake(std::string_view value, int64_t now_unix,
                                 int64_t allocatable_count, int64_t timeout_s) {
  constexpr std::string_view kRequesting = "Requesting";
  const size_t at = value.find(kRequesting);
  if (at != std::string_view::npos) {
    std::string_view rest = value.substr(at + kRequesting.size());
    if (!rest.empty() && rest.front() == '_') rest.remove_prefix(1);
    absl::Time t;
    std::string err;
    // An unreadable request is neither renewed nor taken as proof of a dead node (upstream).
    if (!absl::ParseTime(kHandshakeTimeFormat, std::string(rest), absl::UTCTimeZone(), &t, &err))
      return {Handshake::kHealthy, ""};
    if (now_unix - absl::ToUnixSeconds(t) > timeout_s && allocatable_count == 0)
      return {Handshake::kUnhealthy, ""};
    return {Handshake::kHealthy, ""};
  }
  if (value.find("Deleted") != std::string_view::npos) return {Handshake::kCleanedUp, ""};
  return {Handshake::kWriteRequest, StrCat("Requesting_", HandshakeTime(now_unix))};
}

std::string HandshakeCleanupValue(int64_t now_unix) {
  return StrCat("Deleted_", HandshakeTime(now_unix));
}

std::string FitResult::Summary(int examined) const {
  std::map<std::string, int> tally;
  for (const auto& r : refusals) ++tally[scheduler::ReasonName(r.reason)];
  std::string out;
  for (const auto& [reason, n] : tally) {
    if (!out.empty()) out += ", ";
    out += StrCat(n, "/", examined, " ", reason);
  }
  return out;
}

StatusOr<std::optional<int64_t>> ReadResource(const nlohmann::json& resources,
                                              const std::string& name) {
  if (name.empty() || !resources.is_object()) return std::optional<int64_t>();
  for (const char* part : {"limits", "requests"}) {
    auto p = resources.find(part);
    if (p == resources.end() || p->is_null()) continue;
    if (!p->is_object()) return InvalidArgument(StrCat("resources.", part, ": must be an object"));
    auto v = p->find(name);
    if (v == p->end()) continue;
    HAMI_ASSIGN_OR_RETURN(core::Quantity q, core::ParseQuantityJson(*v));
    auto n = core::QuantityToExactInt(q);
    if (!n.ok())
      return InvalidArgument(StrCat(part, ".", name, ": ", std::string(n.status().message())));
    if (*n < 0 || *n > kMaxValue)
      return InvalidArgument(StrCat(part, ".", name, ": ", *n, " must be in 0..", kMaxValue));
    return std::optional<int64_t>(*n);
  }
  return std::optional<int64_t>();
}

std::string LastContainerIndices(const core::PodAllocation& a) {
  std::string out;
  for (const auto& c : a.containers) {
    if (c.empty()) continue;
    out.clear();
    for (const auto& d : c) out += StrCat(out.empty() ? "" : ",", d.index);
  }
  return out;
}

const Template* SmallestTemplate(const std::vector<Template>& templates, int64_t mem_mib) {
  const Template* best = nullptr;
  for (const auto& t : templates)
    if (t.memory_mib >= mem_mib && (!best || t.memory_mib < best->memory_mib)) best = &t;
  return best;
}

std::vector<QuotaKey> GenericVendor::QuotaKeys() const {
  std::vector<QuotaKey> out = Vendor::QuotaKeys();
  for (QuotaKey& k : out)
    if (k.memory) k.unit = spec_.memory_unit_mib;
  return out;
}

StatusOr<std::optional<core::DeviceRequest>> GenericVendor::ParseRequest(
    const nlohmann::json& resources, const std::map<std::string, std::string>&) const {
  const ResourceNames& n = spec_.resources;
  HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
  HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
  HAMI_ASSIGN_OR_RETURN(auto pct, ReadResource(resources, n.memory_percentage));
  HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
  HAMI_ASSIGN_OR_RETURN(auto prio, ReadResource(resources, n.priority));
  if (!count) {
    if (!mem && !pct && !cores) return std::optional<core::DeviceRequest>();
    count = 1;  // defaultGPUNum
  }
  if (*count == 0) return std::optional<core::DeviceRequest>();
  if (*count > kMaxCount)
    return InvalidArgument(StrCat(n.count, ": ", *count, " exceeds ", kMaxCount));
  core::DeviceRequest r;
  r.vendor = spec_.common_word;
  r.nums = static_cast<int>(*count);
  if (prio) r.priority = static_cast<int>(*prio);
  if (spec_.rules.whole_device_only) {
    r.mem_percentage = 100;
    r.coresreq = 100;
    return std::optional<core::DeviceRequest>(r);
  }
  if (spec_.rules.slots_only) {
    r.mem_percentage = 100;  // upstream's request shape; Grant books nothing of it
    return std::optional<core::DeviceRequest>(r);
  }
  if (mem && *mem > 0) {
    if (*mem > kMaxValue / spec_.memory_unit_mib)
      return InvalidArgument(StrCat(n.memory, ": ", *mem, " units exceed the int32 MiB range"));
    r.memreq_mib = *mem * spec_.memory_unit_mib;
  } else if (pct && *pct > 0) {
    r.mem_percentage = static_cast<int>(std::min<int64_t>(*pct, 100));
  } else {
    r.mem_percentage = 100;
  }
  if (cores) {
    // Units -> percent, rounded up so a request never gets less than it asked for.
    r.coresreq = static_cast<int>(
        std::min<int64_t>((*cores * 100 + spec_.core_units - 1) / spec_.core_units, 100));
  } else if ((!mem || *mem == 0) && (!pct || *pct == 0 || *pct >= 100)) {
    r.coresreq = 100;  // a bare count is a whole exclusive device
  }
  return std::optional<core::DeviceRequest>(r);
}

StatusOr<Mutation> GenericVendor::Mutate(
    const nlohmann::json& resources, const std::map<std::string, std::string>& annotations) const {
  Mutation m;
  const ResourceNames& n = spec_.resources;
  HAMI_ASSIGN_OR_RETURN(auto count, ReadResource(resources, n.count));
  HAMI_ASSIGN_OR_RETURN(auto mem, ReadResource(resources, n.memory));
  HAMI_ASSIGN_OR_RETURN(auto pct, ReadResource(resources, n.memory_percentage));
  HAMI_ASSIGN_OR_RETURN(auto cores, ReadResource(resources, n.cores));
  if (!count && !mem && !pct && !cores) return m;
  if (spec_.refuse_cores_above_whole && cores && *cores > spec_.core_units)
    m.denials.push_back(StrCat(n.cores, "=", *cores, ": more than a whole ", spec_.common_word,
                               " (", spec_.core_units, ")"));
  if (!count) m.add_limits[n.count] = 1;
  const int64_t nums = count.value_or(1);
  if (nums == 0) return m;
  if (!spec_.rules.whole_device_only && !cores && !n.cores.empty() && (!mem || *mem == 0) &&
      (!pct || *pct == 0 || *pct >= 100))
    m.add_limits[n.cores] = spec_.core_units;
  const int maxd = spec_.rules.max_devices_per_container;
  if (maxd > 0 && nums > maxd && mem && *mem > 0)
    m.denials.push_back(StrCat(n.count, "=", nums, " with ", n.memory, ": ", spec_.common_word,
                               " cannot split memory across more than ", maxd,
                               " device(s); request whole devices (drop ", n.memory,
                               ") or ask for ", maxd));
  if (!spec_.rules.allowed_counts.empty() &&
      std::find(spec_.rules.allowed_counts.begin(), spec_.rules.allowed_counts.end(), nums) ==
          spec_.rules.allowed_counts.end()) {
    std::string allowed;
    for (int c : spec_.rules.allowed_counts) allowed += StrCat(allowed.empty() ? "" : ", ", c);
    m.denials.push_back(StrCat(n.count, "=", nums, ": ", spec_.common_word, " allows only ",
                               allowed, " devices per container"));
  }
  if (!spec_.rules.templates.empty() && mem && *mem > 0 &&
      !SmallestTemplate(spec_.rules.templates, *mem * spec_.memory_unit_mib)) {
    int64_t largest = 0;
    for (const auto& t : spec_.rules.templates) largest = std::max(largest, t.memory_mib);
    m.denials.push_back(StrCat(n.memory, "=", *mem, ": larger than the largest ", spec_.common_word,
                               " template (", largest,
                               " MiB); ask for at most that or a whole device"));
  }
  return m;
}

StatusOr<core::DeviceSelectors> GenericVendor::ParseSelectors(
    const std::map<std::string, std::string>& a) const {
  core::DeviceSelectors s;
  s.use_types = ListAnnotation(a, spec_.keys.use_type);
  s.nouse_types = ListAnnotation(a, spec_.keys.nouse_type);
  s.use_uuids = ListAnnotation(a, spec_.keys.use_uuid);
  s.nouse_uuids = ListAnnotation(a, spec_.keys.nouse_uuid);
  return s;
}

StatusOr<std::vector<core::DeviceInfo>> GenericVendor::DecodeNode(const NodeView& node) const {
  if (spec_.registration != Registration::kCapacity) {
    auto it = node.annotations.find(spec_.keys.node_register);
    if (it == node.annotations.end()) return std::vector<core::DeviceInfo>();
    auto devs = core::DecodeNodeDevices(it->second, spec_.common_word);
    if (!devs.ok())
      return InvalidArgument(
          StrCat(spec_.keys.node_register, ": ", std::string(devs.status().message())));
    if (spec_.rules.slots_only)
      for (auto& d : *devs) d.devcore = 100;  // as upstream: books no cores, 100 for the score
    return devs;
  }
  auto it = node.capacity.find(spec_.capacity_resource);
  if (it == node.capacity.end() || it->second <= 0) return std::vector<core::DeviceInfo>();
  const int64_t cap = it->second, per = spec_.capacity_per_device;
  const int64_t n = (cap + per - 1) / per;  // upstream: for i*per < cap
  if (n > kMaxCount)
    return InvalidArgument(StrCat("capacity ", spec_.capacity_resource, "=", cap, ": more than ",
                                  kMaxCount, " devices of ", per));
  int64_t mem = spec_.capacity_device_memory_mib;
  if (!spec_.resources.memory.empty()) {
    auto m = node.capacity.find(spec_.resources.memory);
    if (m != node.capacity.end()) {
      if (m->second < 0 || m->second > kMaxValue)
        return InvalidArgument(
            StrCat("capacity ", spec_.resources.memory, "=", m->second, ": out of range"));
      mem = m->second * spec_.memory_unit_mib * per / cap;
      if (mem > kMaxValue)
        return InvalidArgument(StrCat("capacity ", spec_.resources.memory, "=", m->second,
                                      ": more than ", kMaxValue, " MiB per device"));
    }
  }
  std::vector<core::DeviceInfo> out;
  for (int64_t i = 0; i < n; ++i) {
    core::DeviceInfo d;
    d.uuid = spec_.capacity_id_infix.empty() ? StrCat(spec_.common_word, "-", i)
                                             : StrCat(node.name, spec_.capacity_id_infix, i);
    d.index = static_cast<int>(i);
    d.count = spec_.capacity_slots;
    d.devmem_mib = mem;
    d.devcore = spec_.capacity_devcore;
    d.type = spec_.model.empty() ? spec_.common_word : spec_.model;
    d.vendor = spec_.common_word;
    d.health = true;
    out.push_back(d);
  }
  return out;
}

Status GenericVendor::EncodeNode(const std::vector<core::DeviceInfo>& devices,
                                 NodeView* node) const {
  switch (spec_.registration) {
    case Registration::kJson:
      node->annotations[spec_.keys.node_register] = core::EncodeNodeDevicesJson(devices);
      return OkStatus();
    case Registration::kCsv: {
      HAMI_ASSIGN_OR_RETURN(node->annotations[spec_.keys.node_register],
                            core::EncodeNodeDevicesCsv(devices));
      return OkStatus();
    }
    case Registration::kCapacity: {
      int64_t mem = 0;
      for (const auto& d : devices) mem += d.devmem_mib;
      node->capacity[spec_.capacity_resource] =
          static_cast<int64_t>(devices.size()) * spec_.capacity_per_device;
      // Exact when every device has the same memory in whole units (what Decode rebuilds).
      if (!spec_.resources.memory.empty())
        node->capacity[spec_.resources.memory] = mem / spec_.memory_unit_mib;
      return OkStatus();
    }
  }
  return OkStatus();
}

int64_t GenericVendor::ResolveMemory(const core::DeviceRequest& r, const core::DeviceInfo& d) {
  return r.memreq_mib > 0 ? r.memreq_mib : d.devmem_mib * r.mem_percentage / 100;
}

bool GenericVendor::UsesTemplate(const core::DeviceRequest& r, const core::DeviceInfo& d) const {
  // Whole-device requests and devices in hami-core (soft split) mode take no template.
  return !spec_.rules.templates.empty() && !spec_.rules.whole_device_only &&
         d.mode != core::kModeHamiCore && !(r.memreq_mib == 0 && r.mem_percentage >= 100);
}

core::ContainerDevice GenericVendor::Grant(const core::DeviceRequest& r,
                                           const core::DeviceInfo& d) const {
  core::ContainerDevice g;
  g.uuid = d.uuid;
  g.vendor = spec_.common_word;
  g.index = d.index;
  if (spec_.rules.whole_device_only) {
    g.usedmem_mib = d.devmem_mib;
    g.usedcores = d.devcore;
    return g;
  }
  if (spec_.rules.slots_only) return g;
  g.usedmem_mib = ResolveMemory(r, d);
  g.usedcores = r.coresreq;
  if (UsesTemplate(r, d)) {
    if (const Template* t = SmallestTemplate(spec_.rules.templates, g.usedmem_mib)) {
      g.usedmem_mib = t->memory_mib;
      g.usedcores = std::max(g.usedcores, t->cores);
    }
  }
  return g;
}

std::optional<Refusal> GenericVendor::CheckDevice(const core::DeviceRequest& r,
                                                  const core::DeviceInfo& d,
                                                  const core::DeviceUsage& u,
                                                  const core::DeviceSelectors& s) const {
  auto refuse = [&](scheduler::Reason reason, const std::string& detail, bool never) {
    return std::optional<Refusal>(Refusal{reason, StrCat(d.uuid, ": ", detail), never});
  };
  if (d.vendor != spec_.common_word)
    return refuse(Reason::kCardTypeMismatch, StrCat("vendor ", d.vendor), true);
  if (!d.health) return refuse(Reason::kCardNotHealth, "unhealthy", false);
  if (!s.use_types.empty() && std::none_of(s.use_types.begin(), s.use_types.end(),
                                           [&](const auto& t) { return ContainsFold(d.type, t); }))
    return refuse(Reason::kCardTypeMismatch, StrCat("type ", d.type, " not in use list"), true);
  for (const auto& t : s.nouse_types)
    if (ContainsFold(d.type, t))
      return refuse(Reason::kCardTypeMismatch, StrCat("type ", d.type, " excluded"), true);
  if (!s.use_uuids.empty() &&
      std::find(s.use_uuids.begin(), s.use_uuids.end(), d.uuid) == s.use_uuids.end())
    return refuse(Reason::kCardUuidMismatch, "not in use list", true);
  if (std::find(s.nouse_uuids.begin(), s.nouse_uuids.end(), d.uuid) != s.nouse_uuids.end())
    return refuse(Reason::kCardUuidMismatch, "excluded", true);
  if (u.used >= d.count)
    return refuse(Reason::kCardTimeSlicingExhausted, StrCat(u.used, "/", d.count, " slots used"),
                  d.count <= 0);
  if (spec_.rules.whole_device_only && (u.used > 0 || u.usedmem_mib > 0 || u.usedcores > 0))
    return refuse(Reason::kExclusiveDeviceAllocateConflict, "whole device already in use", false);
  const int64_t want = ResolveMemory(r, d);
  if (UsesTemplate(r, d) && !SmallestTemplate(spec_.rules.templates, want))
    return refuse(Reason::kCardInsufficientMemory, StrCat("no template holds ", want, " MiB"),
                  true);
  const core::ContainerDevice g = Grant(r, d);
  if (g.usedmem_mib > d.devmem_mib)
    return refuse(Reason::kCardInsufficientMemory,
                  StrCat("needs ", g.usedmem_mib, " MiB of ", d.devmem_mib), true);
  if (d.devmem_mib - u.usedmem_mib < g.usedmem_mib)
    return refuse(Reason::kCardInsufficientMemory,
                  StrCat("needs ", g.usedmem_mib, " MiB, ", d.devmem_mib - u.usedmem_mib, " free"),
                  false);
  if (g.usedcores > d.devcore)
    return refuse(Reason::kCardInsufficientCore,
                  StrCat("needs ", g.usedcores, " cores of ", d.devcore), true);
  if (d.devcore - u.usedcores < g.usedcores)
    return refuse(Reason::kCardInsufficientCore,
                  StrCat("needs ", g.usedcores, " cores, ", d.devcore - u.usedcores, " free"),
                  false);
  if (r.coresreq >= 100 && u.used > 0)
    return refuse(Reason::kExclusiveDeviceAllocateConflict, "exclusive request on a shared device",
                  false);
  if (g.usedcores == 0 && u.usedcores >= d.devcore)
    return refuse(Reason::kCardComputeUnitsExhausted, "all cores in use", false);
  return std::nullopt;
}

std::vector<int> GenericVendor::ChooseSet(const core::DeviceRequest& r,
                                          std::span<const core::DeviceInfo>,
                                          const std::vector<int>& candidates) const {
  if (static_cast<int>(candidates.size()) < r.nums) return {};
  if (spec_.rules.slots_only)  // upstream walks the devices from the last one
    return std::vector<int>(candidates.end() - r.nums, candidates.end());
  return std::vector<int>(candidates.begin(), candidates.begin() + r.nums);
}

std::optional<Refusal> GenericVendor::CheckCount(const core::DeviceRequest& r,
                                                 const core::DeviceSelectors& s) const {
  const int maxd = spec_.rules.max_devices_per_container;
  // The single-device rule belongs to hard (template) splits; hami-core soft split lifts it.
  if (maxd > 0 && r.nums > maxd && !spec_.rules.whole_device_only && r.mem_percentage != 100 &&
      s.vgpu_mode != core::kModeHamiCore)
    return Refusal{Reason::kNodeInsufficientDevice,
                   StrCat(r.nums, " devices with partial memory; at most ", maxd), true};
  const auto& ac = spec_.rules.allowed_counts;
  if (!ac.empty() && std::find(ac.begin(), ac.end(), r.nums) == ac.end())
    return Refusal{Reason::kNodeInsufficientDevice,
                   StrCat(r.nums, " devices is not an allowed count"), true};
  return std::nullopt;
}

FitResult GenericVendor::Fit(const core::DeviceRequest& r,
                             std::span<const core::DeviceInfo> devices,
                             std::span<const core::DeviceUsage> usage,
                             const core::DeviceSelectors& s, const NodeView&) const {
  FitResult res;
  int mine = 0;
  for (const auto& d : devices) mine += d.vendor == spec_.common_word;
  if (auto count = CheckCount(r, s)) {
    res.refusals.push_back(*count);
    return res;
  }
  if (mine < r.nums) {
    res.refusals.push_back({Reason::kNodeInsufficientDevice,
                            StrCat(mine, " ", spec_.common_word, " devices, need ", r.nums), true});
    return res;
  }
  std::vector<int> candidates;
  bool all_never = true;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].vendor != spec_.common_word) continue;
    const core::DeviceUsage u = i < usage.size() ? usage[i] : core::DeviceUsage{};
    if (auto ref = CheckDevice(r, devices[i], u, s)) {
      all_never = all_never && ref->never;
      res.refusals.push_back(*ref);
    } else {
      candidates.push_back(static_cast<int>(i));
    }
  }
  // Order by (index, uuid) so the choice does not depend on the order devices are listed in.
  std::sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return std::tie(devices[a].index, devices[a].uuid) <
           std::tie(devices[b].index, devices[b].uuid);
  });
  const std::vector<int> chosen = ChooseSet(r, devices, candidates);
  if (chosen.empty()) {
    if (static_cast<int>(candidates.size()) >= r.nums)
      res.refusals.push_back(
          {Reason::kNumaNotFit,
           StrCat(candidates.size(), " devices fit but no allowed group of ", r.nums), false});
    else
      res.refusals.push_back(
          {Reason::kNodeInsufficientDevice,
           StrCat(candidates.size(), " of ", mine, " devices fit, need ", r.nums),
           all_never && candidates.empty()});
    return res;
  }
  for (int i : chosen) res.devices.push_back(Grant(r, devices[i]));
  return res;
}

int GenericVendor::ScoreNode(std::span<const core::DeviceInfo>, std::span<const int>,
                             const NodeView&) const {
  return 0;
}

StatusOr<std::map<std::string, std::string>> GenericVendor::EncodeDecision(
    const core::PodAllocation& a, int64_t now_unix) const {
  for (const auto& c : a.containers)
    for (const auto& d : c)
      if (d.vendor != spec_.common_word)
        return InvalidArgument(StrCat(spec_.name, " decision: device ", d.uuid, " has type ",
                                      d.vendor, ", expected ", spec_.common_word));
  HAMI_ASSIGN_OR_RETURN(std::string text, core::EncodePodDevices(a));
  std::map<std::string, std::string> out;
  if (!spec_.keys.to_allocate.empty()) out[spec_.keys.to_allocate] = text;
  if (!spec_.keys.allocated.empty()) out[spec_.keys.allocated] = text;
  HAMI_RETURN_IF_ERROR(AddDecisionExtras(a, now_unix, &out));
  return out;
}

StatusOr<core::PodAllocation> GenericVendor::DecodeDecision(
    const std::map<std::string, std::string>& a) const {
  auto it = a.find(spec_.keys.allocated);
  if (it == a.end()) return core::PodAllocation{};
  auto alloc = core::DecodePodDevices(it->second);
  if (!alloc.ok())
    return InvalidArgument(
        StrCat(spec_.keys.allocated, ": ", std::string(alloc.status().message())));
  for (auto& c : alloc->containers)
    std::erase_if(c, [&](const core::ContainerDevice& d) { return d.vendor != spec_.common_word; });
  return alloc;
}

}  // namespace hami::vendors
