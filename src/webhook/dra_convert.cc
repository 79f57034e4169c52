#include "webhook/dra_convert.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <iterator>

#include "absl/strings/ascii.h"
#include "core/quantity.h"
#include "k8s/client.h"
#include "vendors/nvidia/annotations.h"

namespace hami::webhook {

namespace {

constexpr char kClaimPrefix[] = "hami-gpu-";  // pod claim entries and templates

template <typename... Args>
Status Refuse(const Args&... args) {
  return absl::PermissionDeniedError(StrCat("hami: ", args...));
}

const Json* Member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// RFC 6901 escaping of one reference token.
std::string Pointer(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// 64-bit FNV-1a as 16 hex digits: a stable name for a template's content. A collision cannot
// give a pod another pod's request: a stored template is used only when its spec is the same.
std::string ContentHash(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

// A CEL string literal of `value`, which must be printable ASCII (an annotation is the user's
// text: quotes and backslashes are escaped so it can never end the literal).
StatusOr<std::string> CelString(const std::string& value, const char* annotation) {
  std::string out = "\"";
  for (char c : value) {
    if (c < 0x20 || c > 0x7e)
      return Refuse(annotation, ": ", Json(value).dump(),
                    " is not printable ASCII; a DRA selector can only match such values");
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

StatusOr<std::string> CelList(const std::vector<std::string>& values, const char* annotation,
                              bool lower) {
  if (values.size() > kMaxDraSelectorValues)
    return Refuse(annotation, " lists ", values.size(), " values; at most ", kMaxDraSelectorValues,
                  " can become a DRA selector");
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    auto lit = CelString(lower ? absl::AsciiStrToLower(values[i]) : values[i], annotation);
    if (!lit.ok()) return lit.status();
    out += StrCat(i ? ", " : "", *lit);
  }
  return out + "]";
}

// `mib` MiB as the API server writes a binary quantity back (its canonical form: the largest binary
// suffix with a whole number, 4096 -> "4Gi", 4000 -> "4000Mi"), so a stored template reads back
// equal to the one sent and the comparisons of K8sDraTemplateStore hold on a real server.
std::string CanonicalMiB(int64_t mib) {
  const char* suffixes[] = {"Mi", "Gi", "Ti", "Pi", "Ei"};
  size_t i = 0;
  while (mib % 1024 == 0 && i + 1 < std::size(suffixes)) {
    mib /= 1024;
    ++i;
  }
  return StrCat(mib, suffixes[i]);
}

// The request's capacity: memory in MiB, cores in percent (0 = no compute share: no SM limit).
// A whole card (all memory, 100 cores) names none, so the DeviceClass's default (the whole
// device) applies, also where consumable capacity is off.
Json CapacityRequests(const core::DeviceRequest& d) {
  Json req = Json::object();
  if (d.memreq_mib > 0) req["memory"] = CanonicalMiB(d.memreq_mib);
  if (d.memreq_mib > 0 || d.coresreq != 100) req["cores"] = std::to_string(d.coresreq);
  return req;
}

bool IsPercentageShare(const core::DeviceRequest& d) {
  return d.memreq_mib == 0 && d.mem_percentage != 100;
}

// A gpumem-percentage share as `firstAvailable`: one subrequest per published size, smallest
// first (dra_convert.h says why), each on devices of exactly that memory capacity.
StatusOr<Json> PercentageSubRequests(const core::DeviceRequest& d, const Json& exactly,
                                     const std::vector<int64_t>& sizes_mib,
                                     const std::string& where, const std::string& pct_resource,
                                     const std::string& driver) {
  if (sizes_mib.empty())
    return Refuse(where, ": ", pct_resource, " ", d.mem_percentage,
                  " needs the GPUs' memory sizes, and no ResourceSlice of driver ", driver,
                  " publishes a device with a memory capacity; start the DRA plugin on the GPU "
                  "nodes, or ask for nvidia.com/gpumem in MiB");
  if (sizes_mib.size() > kMaxDraSubRequests)
    return Refuse(where, ": ", pct_resource, " ", d.mem_percentage,
                  " would need one DRA "
                  "subrequest per GPU size, and driver ",
                  driver, " publishes ", sizes_mib.size(), " sizes (at most ", kMaxDraSubRequests,
                  "); ask for nvidia.com/gpumem in MiB");
  Json subs = Json::array();
  for (int64_t size : sizes_mib) {
    const int64_t mib = size * std::min(d.mem_percentage, 100) / 100;
    if (mib <= 0) continue;  // nothing of a card that small
    Json sub = exactly;
    sub["name"] = StrCat("mib", size);
    Json sel = sub.contains("selectors") ? sub["selectors"] : Json::array();
    sel.push_back({{"cel",
                    {{"expression", StrCat("device.capacity[", Json(driver).dump(),
                                           "].memory.compareTo(quantity(\"", CanonicalMiB(size),
                                           "\")) == 0")}}}});
    sub["selectors"] = std::move(sel);
    sub["capacity"] = {
        {"requests", {{"memory", CanonicalMiB(mib)}, {"cores", std::to_string(d.coresreq)}}}};
    subs.push_back(std::move(sub));
  }
  if (subs.empty())
    return Refuse(where, ": ", pct_resource, " ", d.mem_percentage,
                  " is less than 1 MiB of every published GPU");
  return subs;
}

}  // namespace

bool NeedsDeviceSizes(const std::vector<DraContainer>& containers) {
  for (const DraContainer& c : containers)
    if (c.req != nullptr && !c.req->devices.empty() && IsPercentageShare(c.req->devices.front()))
      return true;
  return false;
}

StatusOr<std::vector<std::string>> DraCelSelectors(const core::DeviceSelectors& s,
                                                   const std::string& driver) {
  auto attr = [&](const char* name) {
    return StrCat("device.attributes[", Json(driver).dump(), "].", name);
  };
  std::vector<std::string> out;
  struct Rule {
    const std::vector<std::string>* values;
    const char* annotation;
    bool type, negate;
  };
  const Rule rules[] = {
      {&s.use_uuids, vendors::nvidia::kUseGpuUuid, false, false},
      {&s.nouse_uuids, vendors::nvidia::kNoUseGpuUuid, false, true},
      {&s.use_types, vendors::nvidia::kUseGpuType, true, false},
      {&s.nouse_types, vendors::nvidia::kNoUseGpuType, true, true},
  };
  for (const Rule& r : rules) {
    if (r.values->empty()) continue;
    auto list = CelList(*r.values, r.annotation, r.type);
    if (!list.ok()) return list.status();
    const std::string match =
        r.type ? StrCat(*list, ".exists(t, ", attr("productName"), ".lowerAscii().contains(t))")
               : StrCat(attr("uuid"), " in ", *list);
    std::string expr = r.negate ? StrCat("!(", match, ")") : match;
    if (expr.size() > kMaxDraSelectorBytes)
      return Refuse(r.annotation, " makes a DRA selector of ", expr.size(), " bytes; at most ",
                    kMaxDraSelectorBytes, " are allowed");
    out.push_back(std::move(expr));
  }
  return out;
}

StatusOr<DraConversion> ConvertPodToDra(const Json& pod,
                                        const std::vector<DraContainer>& containers,
                                        const core::DeviceSelectors& selectors,
                                        const vendors::ResourceNames& nvidia, const std::string& ns,
                                        const DraConversionOptions& opts,
                                        const std::vector<int64_t>& gpu_sizes_mib) {
  const std::pair<bool, const char*> kUnexpressible[] = {
      {selectors.numa_bind, "nvidia.com/numa-bind asks for NUMA binding"},
      {!selectors.vgpu_mode.empty() && selectors.vgpu_mode != "hami-core",
       "nvidia.com/vgpu-mode asks for a mode other than hami-core"},
      {!selectors.mig_profile_preference.empty(), "nvidia.com/mig-profile-preference asks for MIG"},
  };
  for (const auto& [set, what] : kUnexpressible)
    if (set)
      return Refuse(what,
                    ", which a DRA claim of this driver cannot express; remove the "
                    "annotation, or take the pod out of DRA conversion");
  auto cel = DraCelSelectors(selectors, opts.driver);
  if (!cel.ok()) return cel.status();
  Json sel = Json::array();
  for (const std::string& e : *cel) sel.push_back({{"cel", {{"expression", e}}}});

  const Json* spec = Member(pod, "spec");
  const Json* pod_claims = spec ? Member(*spec, "resourceClaims") : nullptr;
  const std::string nvidia_resources[] = {nvidia.count, nvidia.memory, nvidia.memory_percentage,
                                          nvidia.cores, nvidia.priority};
  DraConversion out;
  Json entries = Json::array();  // new spec.resourceClaims entries
  for (size_t i = 0; i < containers.size(); ++i) {
    const DraContainer& c = containers[i];
    if (c.req == nullptr || c.req->devices.empty()) continue;
    const Json* name = Member(*c.json, "name");
    const std::string where =
        StrCat(c.path, " \"", name && name->is_string() ? name->get<std::string>() : "", "\"");
    for (const core::DeviceRequest& other : c.req->devices)
      if (other.vendor != core::kNvidiaVendor)
        return Refuse(where, " asks for ", other.vendor,
                      " devices; only NVIDIA requests become DRA claims, and one pod cannot mix "
                      "the two paths");
    const core::DeviceRequest& d = c.req->devices.front();
    if (d.priority >= 0)
      return Refuse(where, ": ", nvidia.priority, " cannot be expressed by a DRA claim; remove it");
    if (d.nums > kMaxDraGpusPerContainer)
      return Refuse(where, " asks for ", d.nums,
                    " GPUs; a DRA request of this webhook takes at most ", kMaxDraGpusPerContainer);
    if (entries.size() >= kMaxDraClaimsPerPod)
      return Refuse("more than ", kMaxDraClaimsPerPod, " containers ask for GPUs");
    Json exactly = {{"deviceClassName", opts.device_class},
                    {"allocationMode", "ExactCount"},
                    {"count", d.nums}};
    if (!sel.empty()) exactly["selectors"] = sel;
    Json request = {{"name", "gpu"}};
    if (IsPercentageShare(d)) {
      auto subs = PercentageSubRequests(d, exactly, gpu_sizes_mib, where, nvidia.memory_percentage,
                                        opts.driver);
      if (!subs.ok()) return subs.status();
      request["firstAvailable"] = std::move(*subs);
    } else {
      if (Json capacity = CapacityRequests(d); !capacity.empty())
        exactly["capacity"] = {{"requests", std::move(capacity)}};
      request["exactly"] = std::move(exactly);
    }
    const Json claim_spec = {{"devices", {{"requests", Json::array({request})}}}};
    const std::string tpl_name = StrCat(kClaimPrefix, ContentHash(claim_spec.dump()));
    if (std::none_of(out.templates.begin(), out.templates.end(),
                     [&](const DraTemplate& t) { return t.name == tpl_name; }))
      out.templates.push_back(
          {tpl_name,
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaimTemplate"},
            {"metadata",
             {{"name", tpl_name},
              {"namespace", ns},
              {"labels", {{kDraTemplateManagedByLabel, kDraTemplateManagedBy}}}}},
            {"spec", {{"spec", claim_spec}}}}});
    const std::string entry = StrCat(kClaimPrefix, i);
    if (pod_claims != nullptr && pod_claims->is_array())
      for (const Json& e : *pod_claims)
        if (const Json* n = Member(e, "name"); n != nullptr && *n == entry)
          return Refuse("spec.resourceClaims already has an entry named \"", entry,
                        "\", the name the conversion gives ", where, "'s claim; rename it");
    entries.push_back({{"name", entry}, {"resourceClaimTemplateName", tpl_name}});

    // The container: NVIDIA resources out, the claim in.
    const Json* res = Member(*c.json, "resources");
    for (const char* part : {"limits", "requests"}) {
      const Json* m = res ? Member(*res, part) : nullptr;
      if (m == nullptr || !m->is_object()) continue;
      for (const std::string& r : nvidia_resources)
        if (!r.empty() && m->contains(r))
          out.ops.push_back(
              {{"op", "remove"}, {"path", StrCat(c.path, "/resources/", part, "/", Pointer(r))}});
    }
    const Json ref = {{"name", entry}};
    const Json* claims = res ? Member(*res, "claims") : nullptr;
    if (res == nullptr || !res->is_object()) {
      out.ops.push_back({{"op", "add"},
                         {"path", c.path + "/resources"},
                         {"value", {{"claims", Json::array({ref})}}}});
    } else if (claims == nullptr || !claims->is_array()) {
      out.ops.push_back(
          {{"op", "add"}, {"path", c.path + "/resources/claims"}, {"value", Json::array({ref})}});
    } else {
      out.ops.push_back({{"op", "add"}, {"path", c.path + "/resources/claims/-"}, {"value", ref}});
    }
  }
  if (entries.empty()) return out;
  if (spec == nullptr || pod_claims == nullptr || !pod_claims->is_array()) {
    out.ops.push_back({{"op", "add"}, {"path", "/spec/resourceClaims"}, {"value", entries}});
  } else {
    for (Json& e : entries)
      out.ops.push_back({{"op", "add"}, {"path", "/spec/resourceClaims/-"}, {"value", e}});
  }
  return out;
}

namespace {

bool UsesFirstAvailable(const Json& tpl_spec) {
  const Json* spec = Member(tpl_spec, "spec");
  const Json* devices = spec ? Member(*spec, "devices") : nullptr;
  const Json* requests = devices ? Member(*devices, "requests") : nullptr;
  if (requests == nullptr || !requests->is_array()) return false;
  return std::any_of(requests->begin(), requests->end(),
                     [](const Json& r) { return Member(r, "firstAvailable") != nullptr; });
}

constexpr char kPrioritizedListOff[] =
    ": its DRAPrioritizedList feature gate is off (on by default from Kubernetes 1.34), so "
    "gpumem-percentage cannot become a DRA claim (one subrequest per GPU size). Turn the gate on "
    "in kube-apiserver and kube-scheduler, or ask for nvidia.com/gpumem in MiB";

}  // namespace

Status K8sDraTemplateStore::Ensure(const std::string& ns, const DraTemplate& tpl) {
  const Json& want = tpl.object["spec"];
  const bool prioritized = UsesFirstAvailable(want);
  auto created = client_->Create(k8s::kResourceClaimTemplates, ns, tpl.object);
  if (created.ok()) {
    if ((*created)["spec"] == want) return OkStatus();
    // The server kept less than we sent: a gate is off and it dropped what the gate covers
    // (DRAPrioritizedList: firstAvailable; DRAConsumableCapacity: the capacity requests). A
    // claim from it would not be what the pod asked; remove it and refuse.
    const Status del = client_->Delete(k8s::kResourceClaimTemplates, ns, tpl.name);
    const std::string undeleted =
        del.ok() ? "" : StrCat(" (deleting it again failed: ", del.message(), ")");
    if (prioritized && !UsesFirstAvailable((*created)["spec"]))
      return FailedPrecondition(
          "the API server dropped the firstAvailable list of "
          "ResourceClaimTemplate ",
          ns, "/", tpl.name, kPrioritizedListOff, undeleted);
    return FailedPrecondition(
        "the API server dropped the capacity requests of ResourceClaimTemplate ", ns, "/", tpl.name,
        ": its DRAConsumableCapacity feature gate is off (off by default before Kubernetes 1.36), "
        "so gpumem and gpucores cannot become a DRA claim. Turn the gate on in kube-apiserver, "
        "kube-scheduler and the kubelet, or ask for whole GPUs",
        undeleted);
  }
  // A server that drops firstAvailable is left with a request of neither kind, which its
  // validation refuses (nothing is stored).
  if (prioritized && absl::IsInvalidArgument(created.status()) &&
      created.status().message().find("firstAvailable") != std::string_view::npos)
    return FailedPrecondition("the API server refused ResourceClaimTemplate ", ns, "/", tpl.name,
                              " (", created.status().message(), ")", kPrioritizedListOff);
  if (!absl::IsAlreadyExists(created.status())) return created.status();
  auto stored = client_->Get(k8s::kResourceClaimTemplates, ns, tpl.name);
  if (!stored.ok()) return stored.status();
  if ((*stored)["spec"] != want)
    return FailedPrecondition("ResourceClaimTemplate ", ns, "/", tpl.name,
                              " exists with another spec than this pod's request; hami will not "
                              "use it (delete it and create the pod again)");
  return OkStatus();
}

void CollectDeviceSizes(const Json& slices, const std::string& driver,
                        std::vector<int64_t>* sizes) {
  const Json* items = Member(slices, "items");
  if (items == nullptr || !items->is_array()) return;
  for (const Json& slice : *items) {
    const Json* spec = Member(slice, "spec");
    const Json* drv = spec ? Member(*spec, "driver") : nullptr;
    const Json* devices = spec ? Member(*spec, "devices") : nullptr;
    if (drv == nullptr || *drv != driver || devices == nullptr || !devices->is_array()) continue;
    for (const Json& d : *devices) {
      const Json* cap = Member(d, "capacity");
      const Json* mem = cap ? Member(*cap, "memory") : nullptr;
      const Json* value = mem ? Member(*mem, "value") : nullptr;
      if (value == nullptr) continue;
      auto q = core::ParseQuantityJson(*value);
      if (!q.ok()) continue;
      const int64_t mib = core::QuantityToMiB(*q, core::Rounding::kDown);
      if (mib <= 0) continue;
      auto at = std::lower_bound(sizes->begin(), sizes->end(), mib);
      if (at != sizes->end() && *at == mib) continue;
      if (sizes->size() >= kMaxDraDeviceSizes) return;
      sizes->insert(at, mib);
    }
  }
}

StatusOr<std::vector<int64_t>> K8sDraDeviceSizes::SizesMiB() {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count() +
                      1;  // never 0
  MutexLock l(mu_);
  if (fetched_at_ != 0 && now - fetched_at_ < ttl_s_) return sizes_;
  k8s::ListOptions o;
  o.field_selector = StrCat("spec.driver=", driver_);
  o.limit = kDraSlicePage;
  std::vector<int64_t> sizes;
  int pages = 0;
  auto listed = client_->ListPages(
      k8s::kResourceSlices, "", o,
      [&](Json& page) {
        if (++pages <= kMaxDraSlicePages) CollectDeviceSizes(page, driver_, &sizes);
      },
      [&] {
        sizes.clear();
        pages = 0;
      });
  if (!listed.ok()) return listed.status();
  if (pages > kMaxDraSlicePages)
    return absl::ResourceExhaustedError(StrCat("more than ", kMaxDraSlicePages * kDraSlicePage,
                                               " ResourceSlices of driver ", driver_));
  sizes_ = std::move(sizes);
  fetched_at_ = now;
  return sizes_;
}

Status MemoryDraTemplateStore::Ensure(const std::string& ns, const DraTemplate& tpl) {
  MutexLock l(mu_);
  auto [it, inserted] = templates_.emplace(StrCat(ns, "/", tpl.name), tpl.object);
  if (!inserted && it->second["spec"] != tpl.object["spec"])
    return FailedPrecondition("ResourceClaimTemplate ", ns, "/", tpl.name,
                              " exists with another spec");
  return OkStatus();
}

std::map<std::string, Json> MemoryDraTemplateStore::Snapshot() const {
  MutexLock l(mu_);
  return templates_;
}

}  // namespace hami::webhook
