#include "vendors/nvidia/request.h"

#include <algorithm>
#include <limits>

#include "core/annotations.h"
#include "core/mig.h"
#include "core/pod_request.h"
#include "core/quantity.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"

namespace hami::vendors::nvidia {
namespace {

using nlohmann::json;

constexpr int64_t kMaxGpuCount = 1024;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// An integer-valued extended resource: whole number in [0, max].
StatusOr<std::optional<int64_t>> WholeResource(const core::ContainerResources& r,
                                               const std::string& name, int64_t max) {
  HAMI_ASSIGN_OR_RETURN(std::optional<core::Quantity> q, r.LimitOrRequest(name));
  if (!q) return std::optional<int64_t>();
  auto v = core::QuantityToExactInt(*q);
  if (!v.ok())
    return InvalidArgument(name, ": ", std::string(v.status().message()),
                           " (an integer such as \"2\")");
  if (*v < 0) return InvalidArgument(name, ": must not be negative, got ", *v);
  if (*v > max)
    return InvalidArgument(name, ": ", *v, " is larger than the supported maximum ", max);
  return std::optional<int64_t>(*v);
}

// gpumem-percentage read as upstream's scheduler reads it: any whole number, negative or past int32
// included (the callers clamp it). A fraction is an error (Kubernetes itself only admits whole
// extended resources). The quantity parser caps values at 2^63-1, so the value fits in int64.
StatusOr<std::optional<int64_t>> PercentResource(const core::ContainerResources& r,
                                                 const std::string& name) {
  HAMI_ASSIGN_OR_RETURN(std::optional<core::Quantity> q, r.LimitOrRequest(name));
  if (!q) return std::optional<int64_t>();
  if (q->milli() % 1000 != 0) {
    return InvalidArgument(name, ": quantity ", core::text::Quote(core::FormatQuantity(*q)),
                           " must be a whole number (an integer such as \"50\")");
  }
  return std::optional<int64_t>(static_cast<int64_t>(q->milli() / 1000));
}

// The defaulting decisions of docs/upstream-contract.md#resource-model, shared by the parser and
// the webhook helper.
struct Defaulted {
  std::optional<core::DeviceRequest> request;
  std::map<std::string, int64_t> added_limits;
};

// `admission`: the webhook's view (upstream's MutateAdmission): gpumem-percentage outside 0..100 is
// an error. Otherwise the scheduler's view (upstream's GenerateResourceRequests): it is clamped or
// ignored.
StatusOr<Defaulted> ApplyDefaulting(const json& resources_json, const ResourceConfig& cfg,
                                    bool admission) {
  HAMI_RETURN_IF_ERROR(cfg.Validate());
  HAMI_ASSIGN_OR_RETURN(core::ContainerResources r, core::ContainerResources::Make(resources_json));
  const ResourceNames& n = cfg.nvidia;
  Defaulted out;

  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> pct, PercentResource(r, n.memory_percentage));
  if (admission) {  // upstream's webhook checks the value in limits and the one in requests
    // A percent resource: a whole number in 0..100 (upstream rejects, not clamps, since v2.10).
    auto check_percent = [&](const std::string& name, const std::string& meaning) -> Status {
      HAMI_ASSIGN_OR_RETURN(std::vector<core::Quantity> both, r.Both(name));
      for (const core::Quantity& q : both) {
        if (q.milli() % 1000 != 0) {
          return InvalidArgument(name, ": quantity ", core::text::Quote(core::FormatQuantity(q)),
                                 " must be a whole number (an integer such as \"50\")");
        }
        if (q.milli() < 0 || q.milli() > 100 * 1000)
          return InvalidArgument(name, ": ", core::FormatQuantity(q), " is outside 0..100 (",
                                 meaning, ")");
      }
      return OkStatus();
    };
    HAMI_RETURN_IF_ERROR(check_percent(
        n.memory_percentage,
        "a share of the card's memory in percent; for an amount use " + n.memory + " in MiB"));
    if (!n.cores.empty())
      HAMI_RETURN_IF_ERROR(check_percent(n.cores, "a share of one card's compute in percent"));
  }
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> count, WholeResource(r, n.count, kMaxGpuCount));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> mem, WholeResource(r, n.memory, kInt32Max));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> cores, WholeResource(r, n.cores, kInt32Max));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> priority, WholeResource(r, n.priority, kInt32Max));

  // Webhook: only gpumem/%/cores in the limits -> add the default count.
  if (!count && (r.InLimits(n.memory) || r.InLimits(n.memory_percentage) || r.InLimits(n.cores)) &&
      cfg.default_gpu_num > 0) {
    count = cfg.default_gpu_num;
    out.added_limits[n.count] = cfg.default_gpu_num;
  }
  // Webhook: no gpucores and (% == 100, or neither % nor gpumem) -> exclusive card.
  bool exclusive_default = false;
  if (count && *count > 0 && !cores) {
    exclusive_default = pct ? *pct == 100 : !mem;
    if (exclusive_default) out.added_limits[n.cores] = 100;
  }
  if (!count || *count == 0) return out;

  core::DeviceRequest req;
  req.vendor = core::kNvidiaVendor;
  req.nums = static_cast<int>(*count);
  if (mem && *mem > 0) {
    if (*mem > kInt32Max / cfg.memory_factor) {
      return InvalidArgument(n.memory, ": ", *mem, " MiB times memoryFactor ", cfg.memory_factor,
                             " exceeds the int32 MiB range");
    }
    req.memreq_mib = *mem * cfg.memory_factor;
  } else if (pct && *pct > 0) {  // 0 and negative values are ignored, as upstream does
    req.mem_percentage = static_cast<int>(std::min<int64_t>(*pct, 100));
  } else if (cfg.default_memory_mib > 0) {
    req.memreq_mib = cfg.default_memory_mib;
  } else {
    req.mem_percentage = 100;
  }
  // The exclusive default books 100 cores here too, not only in the limit the webhook writes: a pod
  // that skipped the webhook is booked as it would have been admitted (docs/migration.md).
  if (cores) {
    req.coresreq = static_cast<int>(std::min<int64_t>(*cores, 100));
  } else {
    req.coresreq = exclusive_default ? 100 : cfg.default_cores;
  }
  req.priority = priority ? static_cast<int>(*priority) : -1;
  out.request = req;
  return out;
}

}  // namespace

Status ResourceConfig::Validate() const {
  const std::pair<const char*, const std::string*> names[] = {
      {"resourceCountName", &nvidia.count},
      {"resourceMemoryName", &nvidia.memory},
      {"resourceMemoryPercentageName", &nvidia.memory_percentage},
      {"resourceCoreName", &nvidia.cores},
      {"resourcePriorityName", &nvidia.priority}};
  for (const auto& [field, value] : names) {
    if (value->empty()) return InvalidArgument("config nvidia.", field, " must not be empty");
  }
  if (default_memory_mib < 0)
    return InvalidArgument("config nvidia.defaultMemory must be >= 0, got ", default_memory_mib);
  if (default_cores < 0 || default_cores > 100) {
    return InvalidArgument("config nvidia.defaultCores must be in 0..100, got ", default_cores);
  }
  if (default_gpu_num < 0)
    return InvalidArgument("config nvidia.defaultGPUNum must be >= 0, got ", default_gpu_num);
  if (memory_factor < 1 || memory_factor > kInt32Max) {
    return InvalidArgument("config nvidia.memoryFactor must be >= 1, got ", memory_factor);
  }
  return OkStatus();
}

StatusOr<std::optional<core::DeviceRequest>> ParseContainerRequest(const nlohmann::json& resources,
                                                                   const ResourceConfig& config) {
  HAMI_ASSIGN_OR_RETURN(Defaulted d, ApplyDefaulting(resources, config, /*admission=*/false));
  return d.request;
}

StatusOr<std::map<std::string, int64_t>> ComputeAdmissionDefaults(const nlohmann::json& resources,
                                                                  const ResourceConfig& config) {
  HAMI_ASSIGN_OR_RETURN(Defaulted d, ApplyDefaulting(resources, config, /*admission=*/true));
  return d.added_limits;
}

StatusOr<core::DeviceSelectors> ParseDeviceSelectors(
    const std::map<std::string, std::string>& annotations) {
  core::DeviceSelectors s;
  auto get = [&](const char* key) -> const std::string* {
    const auto it = annotations.find(key);
    return it == annotations.end() ? nullptr : &it->second;
  };
  if (auto* v = get(kUseGpuType)) s.use_types = core::text::SplitList(*v);
  if (auto* v = get(kNoUseGpuType)) s.nouse_types = core::text::SplitList(*v);
  if (auto* v = get(kUseGpuUuid)) s.use_uuids = core::text::SplitList(*v);
  if (auto* v = get(kNoUseGpuUuid)) s.nouse_uuids = core::text::SplitList(*v);
  if (auto* v = get(kVgpuMode)) {
    const std::string_view mode = core::text::Trim(*v);
    if (mode != core::kModeHamiCore && mode != core::kModeMig && mode != core::kModeMps) {
      return InvalidArgument("annotation ", kVgpuMode, ": ", core::text::Quote(*v),
                             " is not a sharing mode (expected hami-core, mig or mps)");
    }
    s.vgpu_mode = std::string(mode);
  }
  if (auto* v = get(core::kMigProfilePreference))
    s.mig_profile_preference = core::ParseMigProfilePreference(*v);
  if (auto* v = get(kNumaBind)) {
    // Upstream enforces NUMA binding only for a value Go's ParseBool reads as true; anything else,
    // garbage included, leaves it off (IgnoredAnnotations reports the garbage).
    s.numa_bind = core::text::ParseBool(core::text::Trim(*v)).value_or(false);
  }
  return s;
}

std::vector<std::string> IgnoredAnnotations(const std::map<std::string, std::string>& annotations) {
  std::vector<std::string> out;
  if (auto it = annotations.find(kNumaBind);
      it != annotations.end() && !core::text::ParseBool(core::text::Trim(it->second))) {
    out.push_back(StrCat("annotation ", kNumaBind, ": ", core::text::Quote(it->second),
                         " is not a boolean (true/false/1/0), so NUMA binding is off"));
  }
  return out;
}

}  // namespace hami::vendors::nvidia
