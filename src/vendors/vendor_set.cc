#include "vendors/vendor_set.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/pod_codec.h"
#include "core/pod_request.h"
#include "core/text_util.h"
#include "nlohmann/json.hpp"
#include "vendors/config.h"

namespace hami::vendors {
namespace {

bool EqualFold(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The allocatable count of a vendor's count resource (handshake rule); 0 when absent.
int64_t Allocatable(const Vendor& v, const NodeView& node) {
  const std::string& count = v.resources().count;
  auto it = node.capacity.find(count);
  return it == node.capacity.end() ? 0 : it->second;
}

bool Registers(const Vendor& v, const NodeView& node) {
  const std::string& key = v.keys().node_register;
  return !key.empty() && node.annotations.count(key) > 0;
}

// VendorSet's per-pod state: each covered vendor's selectors (or why they did not parse).
struct PodSelectors final : scheduler::VendorRules::PodState {
  std::vector<std::pair<const Vendor*, StatusOr<core::DeviceSelectors>>> by_vendor;
  const StatusOr<core::DeviceSelectors>* Of(const Vendor* v) const {
    for (const auto& [vendor, sel] : by_vendor)
      if (vendor == v) return &sel;
    return nullptr;
  }
};

}  // namespace

VendorSet::VendorSet(std::vector<std::unique_ptr<Vendor>> vendors) : vendors_(std::move(vendors)) {
  for (const auto& v : vendors_)
    if (v->common_word() == core::kNvidiaVendor) nvidia_ = v.get();
  if (nvidia_ != nullptr) nvidia_first_.push_back(nvidia_);
  for (const auto& v : vendors_)
    if (v.get() != nvidia_) nvidia_first_.push_back(v.get());
}

StatusOr<std::unique_ptr<VendorSet>> VendorSet::Load(std::string_view yaml_text) {
  HAMI_ASSIGN_OR_RETURN(auto vendors, LoadVendors(yaml_text));
  return std::make_unique<VendorSet>(std::move(vendors));
}

const VendorSet& VendorSet::NvidiaOnly() {
  static const VendorSet* const kSet = [] {
    // The defaults always load (vendor_set_test): an error here is a bug in the NVIDIA backend.
    auto vendors = LoadVendors("");
    if (!vendors.ok()) std::abort();
    return new VendorSet(std::move(*vendors));
  }();
  return *kSet;
}

const Vendor* VendorSet::ByCommonWord(std::string_view w) const {
  for (const auto& v : vendors_)
    if (v->common_word() == w) return v.get();
  return nullptr;
}

const Vendor* VendorSet::Find(std::string_view name) const {
  for (const auto& v : vendors_)
    if (EqualFold(v->common_word(), name)) return v.get();
  for (const auto& v : vendors_)
    if (EqualFold(v->name(), name)) return v.get();
  return nullptr;
}

StatusOr<core::PodRequest> VendorSet::ParsePod(const nlohmann::json& pod) const {
  return core::ParsePodJson(pod, this);
}

StatusOr<std::vector<core::DeviceRequest>> VendorSet::ContainerDevices(
    const nlohmann::json& resources, const std::map<std::string, std::string>& annotations) const {
  std::vector<core::DeviceRequest> out;
  if (!resources.is_object()) return out;  // ParsePodJson refused any other non-null value
  auto add = [&](const Vendor& v) -> Status {
    HAMI_ASSIGN_OR_RETURN(auto r, v.ParseRequest(resources, annotations));
    if (r) out.push_back(std::move(*r));
    return OkStatus();
  };
  if (nvidia_ != nullptr) HAMI_RETURN_IF_ERROR(add(*nvidia_));
  for (const auto& v : vendors_)
    if (v.get() != nvidia_) HAMI_RETURN_IF_ERROR(add(*v));
  return out;
}

StatusOr<core::DeviceSelectors> VendorSet::Selectors(
    const std::map<std::string, std::string>& annotations) const {
  core::DeviceSelectors s;
  if (nvidia_ != nullptr) {
    HAMI_ASSIGN_OR_RETURN(s, nvidia_->ParseSelectors(annotations));
  }
  // Upstream v2.11's amd.com/numa-bind (Go's ParseBool, untrimmed): every GPU of a container's
  // request on one NUMA node, through the framework's NUMA grouping, which reads the pod's flag
  // (so in a pod that also asks NVIDIA GPUs, those are grouped too).
  if (ByCommonWord("AMD") != nullptr)
    if (auto it = annotations.find("amd.com/numa-bind"); it != annotations.end())
      s.numa_bind = s.numa_bind || core::text::ParseBool(it->second).value_or(false);
  return s;
}

std::vector<std::string> VendorSet::IgnoredAnnotations(
    const std::map<std::string, std::string>& annotations) const {
  std::vector<std::string> out;
  for (const auto& v : vendors_)
    for (std::string& w : v->IgnoredAnnotations(annotations)) out.push_back(std::move(w));
  return out;
}

VendorSet::NodeDevices VendorSet::DecodeNode(const NodeView& node, int64_t now,
                                             int64_t timeout_s) const {
  NodeDevices out;
  auto say = [&out](absl::string_view why) {
    out.errors += StrCat(out.errors.empty() ? "" : "; ", why);
  };
  for (const Vendor* v : nvidia_first_) {
    auto devs = v->DecodeNode(node);
    if (!devs.ok()) {
      say(devs.status().message());
      continue;
    }
    const bool annotated = Registers(*v, node);
    if (!annotated && devs->empty()) continue;  // no device of this vendor here
    out.registered = true;
    const std::string& hs = v->keys().handshake;
    if (!hs.empty() && annotated) {
      auto it = node.annotations.find(hs);
      const Handshake verdict =
          it == node.annotations.end()
              ? Handshake::kWriteRequest
              : CheckHandshake(it->second, now, Allocatable(*v, node), timeout_s).verdict;
      if (verdict == Handshake::kUnhealthy) {
        out.unhealthy = true;
        say(StrCat(hs, " ", it->second, " unanswered for more than ", timeout_s,
                   " s and no allocatable ", v->resources().count, ": ", v->common_word(),
                   " devices dropped"));
        continue;
      }
      if (verdict == Handshake::kCleanedUp) {
        out.unhealthy = true;
        say(StrCat(hs, " ", it->second, ": cleaned up, ", v->common_word(),
                   " devices dropped until the device plugin reports again"));
        continue;
      }
    }
    out.devices.insert(out.devices.end(), devs->begin(), devs->end());
  }
  return out;
}

std::map<std::string, std::string> VendorSet::HandshakeUpdates(const NodeView& node, int64_t now,
                                                               int64_t timeout_s) const {
  std::map<std::string, std::string> out;
  for (const auto& v : vendors_) {
    const std::string& hs = v->keys().handshake;
    if (hs.empty()) continue;
    auto it = node.annotations.find(hs);
    if (!Registers(*v, node) && it == node.annotations.end()) continue;  // not a node of its
    const HandshakeDecision d = CheckHandshake(
        it == node.annotations.end() ? std::string_view() : std::string_view(it->second), now,
        Allocatable(*v, node), timeout_s);
    if (d.verdict == Handshake::kWriteRequest) out[hs] = d.write_value;
    if (d.verdict == Handshake::kUnhealthy) out[hs] = HandshakeCleanupValue(now);
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> VendorSet::EncodeDecision(const core::PodAllocation& a,
                                                                       int64_t now) const {
  std::map<std::string, std::string> out;
  std::vector<std::string> types;
  for (const auto& c : a.containers)
    for (const auto& d : c)
      if (std::find(types.begin(), types.end(), d.vendor) == types.end()) types.push_back(d.vendor);
  for (const std::string& t : types) {
    const Vendor* v = ByCommonWord(t);
    if (v == nullptr)
      return InvalidArgument(StrCat("decision: device type ", t, " belongs to no enabled vendor"));
    core::PodAllocation mine;
    mine.node = a.node;
    for (const auto& c : a.containers) {
      auto& m = mine.containers.emplace_back();
      for (const auto& d : c)
        if (d.vendor == t) m.push_back(d);
    }
    HAMI_ASSIGN_OR_RETURN(auto ann, v->EncodeDecision(mine, now));
    for (auto& [key, value] : ann) {
      auto [it, added] = out.emplace(key, value);
      if (added || it->second == value) continue;
      if (key != v->keys().allocated && key != v->keys().to_allocate)
        return InvalidArgument(StrCat("decision: ", key, " is written by two vendors (", t,
                                      " and another); a pod cannot take both"));
      // Backends that share a record key (Enflame DRS and vGCU: upstream's one key for both
      // models) write one record of both, container by container; each reads back its own type.
      HAMI_ASSIGN_OR_RETURN(core::PodAllocation both, core::DecodePodDevices(it->second));
      HAMI_ASSIGN_OR_RETURN(core::PodAllocation more, core::DecodePodDevices(value));
      if (both.containers.size() < more.containers.size())
        both.containers.resize(more.containers.size());
      for (size_t i = 0; i < more.containers.size(); ++i)
        both.containers[i].insert(both.containers[i].end(), more.containers[i].begin(),
                                  more.containers[i].end());
      HAMI_ASSIGN_OR_RETURN(it->second, core::EncodePodDevices(both));
    }
  }
  return out;
}

StatusOr<core::PodAllocation> VendorSet::DecodeDecision(const std::map<std::string, std::string>& a,
                                                        bool* has_any) const {
  core::PodAllocation out;
  *has_any = false;
  for (const auto& v : vendors_) {
    if (v->keys().allocated.empty() || a.count(v->keys().allocated) == 0) continue;
    *has_any = true;
    HAMI_ASSIGN_OR_RETURN(core::PodAllocation mine, v->DecodeDecision(a));
    if (out.containers.size() < mine.containers.size())
      out.containers.resize(mine.containers.size());
    for (size_t i = 0; i < mine.containers.size(); ++i)
      out.containers[i].insert(out.containers[i].end(), mine.containers[i].begin(),
                               mine.containers[i].end());
  }
  return out;
}

std::string VendorSet::DecisionFingerprint(const std::map<std::string, std::string>& a) const {
  std::string out;
  for (const auto& v : vendors_) {
    auto it = v->keys().allocated.empty() ? a.end() : a.find(v->keys().allocated);
    if (it != a.end()) out += StrCat(it->first, "=", it->second, "\n");
  }
  return out;
}

std::vector<VendorSet::VendorQuotaKey> VendorSet::QuotaKeys() const {
  std::vector<VendorQuotaKey> out;
  for (const auto& v : vendors_)
    for (QuotaKey& k : v->QuotaKeys()) out.push_back({v->common_word(), std::move(k)});
  return out;
}

std::map<std::string, int64_t> VendorSet::QuotaCharge(
    const std::map<std::string, core::DeviceTotals>& by_vendor) const {
  std::map<std::string, int64_t> out;
  if (by_vendor.empty()) return out;
  for (const VendorQuotaKey& k : QuotaKeys()) {
    auto it = by_vendor.find(k.vendor);
    if (it == by_vendor.end()) continue;
    const int64_t amount = k.key.memory ? it->second.mem_mib : it->second.cores;
    if (amount != 0) out[k.key.resource] += amount;
  }
  return out;
}

bool VendorSet::Covers(const std::string& vendor) const {
  if (vendor == core::kNvidiaVendor) return false;
  return ByCommonWord(vendor) != nullptr;
}

std::unique_ptr<const scheduler::VendorRules::PodState> VendorSet::Prepare(
    const core::PodRequest& pod) const {
  auto out = std::make_unique<PodSelectors>();
  for (const auto& v : vendors_)
    if (v.get() != nvidia_)
      out->by_vendor.emplace_back(v.get(), v->ParseSelectors(pod.annotations));
  return out;
}

scheduler::VendorRules::Verdict VendorSet::Check(const PodState& pod, const core::DeviceRequest& r,
                                                 const core::DeviceInfo& d,
                                                 const core::DeviceUsage& u) const {
  const Vendor* v = ByCommonWord(d.vendor);
  if (v == nullptr) return {scheduler::Reason::kCardTypeMismatch, true};
  // The vendor's own use/nouse annotations; a malformed one selects nothing.
  const auto* sel = static_cast<const PodSelectors&>(pod).Of(v);
  if (sel == nullptr || !sel->ok()) return {scheduler::Reason::kCardTypeMismatch, true};
  if (auto count = v->CheckCount(r, **sel)) return {count->reason, count->never};
  if (auto refusal = v->CheckDevice(r, d, u, **sel)) return {refusal->reason, refusal->never};
  return {};
}

scheduler::VendorRules::Verdict VendorSet::CheckWithPod(const core::DeviceRequest&,
                                                        std::span<const core::DeviceInfo> devices,
                                                        int device,
                                                        std::span<const int> earlier) const {
  const core::DeviceInfo& d = devices[device];
  const Vendor* v = ByCommonWord(d.vendor);
  if (v == nullptr || !v->rules().pod_on_one_device) return {};
  for (int e : earlier)
    if (e != device && devices[e].vendor == d.vendor)
      return {scheduler::Reason::kCardNotFoundCustomFilterRule, false};
  return {};
}

scheduler::VendorRules::Take VendorSet::Grant(const core::DeviceRequest& r,
                                              const core::DeviceInfo& d) const {
  const Vendor* v = ByCommonWord(d.vendor);
  if (v == nullptr) return {r.memreq_mib, r.coresreq};
  const core::ContainerDevice g = v->Grant(r, d);
  return {g.usedmem_mib, g.usedcores};
}

bool VendorSet::Pooled(const std::string& vendor) const {
  const Vendor* v = ByCommonWord(vendor);
  return v != nullptr && v->pooled();
}

scheduler::VendorRules::PoolChoice VendorSet::ChoosePool(
    const std::string& vendor, std::span<const std::optional<core::DeviceRequest>> requests,
    std::span<const PoolNode> nodes) const {
  const Vendor* v = ByCommonWord(vendor);
  if (v == nullptr || !v->pooled()) return VendorRules::ChoosePool(vendor, requests, nodes);
  return v->ChoosePool(requests, nodes);
}

std::string VendorSet::PoolNodeOf(const core::ContainerDevice& device) const {
  const Vendor* v = ByCommonWord(device.vendor);
  return v != nullptr && v->pooled() ? v->PoolNodeOf(device) : std::string();
}

bool VendorSet::Pick(const PodState& pod, const core::DeviceRequest& r,
                     std::span<const core::DeviceInfo> devices,
                     std::span<const core::DeviceUsage> usage, std::span<const int> candidates,
                     std::vector<int>* out) const {
  const Vendor* v = ByCommonWord(r.vendor);
  if (v == nullptr) return false;
  const bool parts_of_cards = std::any_of(candidates.begin(), candidates.end(),
                                          [&](int c) { return !devices[c].card.empty(); });
  if (!v->rules().group_rules && !parts_of_cards) return false;
  out->clear();
  const auto* sel = static_cast<const PodSelectors&>(pod).Of(v);
  if (sel == nullptr || !sel->ok()) return true;  // Check refused every device; nothing to choose
  // Fit over the candidates only (they passed Check), with their usage; map its grant back by uuid.
  std::vector<core::DeviceInfo> sub;
  std::vector<core::DeviceUsage> sub_usage;
  sub.reserve(candidates.size());
  sub_usage.reserve(candidates.size());
  for (int c : candidates) {
    sub.push_back(devices[c]);
    sub_usage.push_back(static_cast<size_t>(c) < usage.size() ? usage[c] : core::DeviceUsage{});
  }
  const FitResult fit = v->Fit(r, sub, sub_usage, **sel, NodeView{});
  for (const core::ContainerDevice& g : fit.devices)
    for (size_t i = 0; i < sub.size(); ++i)
      if (sub[i].uuid == g.uuid &&
          std::find(out->begin(), out->end(), candidates[i]) == out->end()) {
        out->push_back(candidates[i]);
        break;
      }
  if (static_cast<int>(out->size()) < r.nums) out->clear();
  return true;
}

int VendorSet::Score(const core::DeviceRequest& r, std::span<const core::DeviceInfo> devices,
                     std::span<const int> granted) const {
  const Vendor* v = ByCommonWord(r.vendor);
  if (v == nullptr || v->score_polarity() != ScorePolarity::kTopologyCohesion) return 0;
  return std::clamp(v->ScoreNode(devices, granted, NodeView{}), 0, 100);
}

}  // namespace hami::vendors
