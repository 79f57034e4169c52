#include "dra/claim.h"

#include "core/quantity.h"
#include "nlohmann/json.hpp"

namespace hami::dra {

namespace {

using Json = nlohmann::json;

const Json* Field(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string StringField(const Json& j, const char* key) {
  const Json* f = Field(j, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : std::string();
}

const DeviceCapacity* FindDevice(const std::vector<DeviceCapacity>& devices,
                                 const std::string& name) {
  for (const auto& d : devices)
    if (d.name == name) return &d;
  return nullptr;
}

// consumedCapacity of one result: every capacity the map does not name takes the whole device.
StatusOr<Usage> Consumed(const Json* consumed, const DeviceCapacity& dev) {
  Usage u{dev.memory_mib, dev.cores};
  if (consumed == nullptr || consumed->is_null()) return u;
  if (!consumed->is_object()) return InvalidArgument("consumedCapacity is not an object");
  for (const auto& [key, value] : consumed->items()) {
    HAMI_ASSIGN_OR_RETURN(const core::Quantity q, core::ParseQuantityJson(value));
    if (q.IsNegative()) return InvalidArgument("consumedCapacity.", key, " is negative");
    if (key == "memory") {
      // Bytes; the policy's step is 1 MiB, so a remainder only comes from a hand-made claim.
      u.memory_mib = core::QuantityToMiB(q, core::Rounding::kUp);
    } else if (key == "cores") {
      const int64_t c = core::QuantityToUnits(q, core::Rounding::kUp);
      if (c > dev.cores)
        return InvalidArgument("consumedCapacity.cores ", c, " exceeds ", dev.cores);
      u.cores = static_cast<int>(c);
    }  // capacities we do not publish are not ours to arm
  }
  if (u.memory_mib > dev.memory_mib)
    return InvalidArgument("consumedCapacity.memory ", u.memory_mib, " MiB exceeds the device's ",
                           dev.memory_mib, " MiB");
  return u;
}

}  // namespace

std::map<std::string, Usage> ClaimAllocation::ByDevice() const {
  std::map<std::string, Usage> out;
  for (const auto& s : shares) {
    Usage& u = out[s.device];
    u.memory_mib += s.usage.memory_mib;
    u.cores += s.usage.cores;
  }
  return out;
}

Status CheckName(std::string_view s, std::string_view what) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  bool ok = !s.empty() && s.size() <= 128 && alnum(s.front()) && alnum(s.back());
  for (char c : s) ok = ok && (alnum(c) || c == '-' || c == '_' || c == '.');
  if (!ok)
    return InvalidArgument(what, " '", s.substr(0, 64),
                           "' is not 1-128 characters of [A-Za-z0-9._-] starting and ending "
                           "alphanumeric");
  return OkStatus();
}

StatusOr<ClaimAllocation> ParseClaim(const Json& claim, const ClaimRef& ref,
                                     const std::string& driver, const std::string& pool,
                                     const std::vector<DeviceCapacity>& devices, bool shared) {
  const std::string who = StrCat("claim ", ref.namespace_, "/", ref.name);
  HAMI_RETURN_IF_ERROR(CheckName(ref.uid, StrCat(who, ": uid")));
  if (!claim.is_object()) return InvalidArgument(who, ": not a JSON object");
  const Json* meta = Field(claim, "metadata");
  const std::string uid = meta != nullptr ? StringField(*meta, "uid") : "";
  if (uid != ref.uid)
    return FailedPrecondition(who, ": uid is '", uid, "', the kubelet asked for '", ref.uid,
                              "' (the claim was replaced)");
  const Json* status = Field(claim, "status");
  const Json* alloc = status != nullptr ? Field(*status, "allocation") : nullptr;
  if (alloc == nullptr || !alloc->is_object())
    return FailedPrecondition(who, ": not allocated (no status.allocation)");
  const Json* devs = Field(*alloc, "devices");
  const Json* results = devs != nullptr ? Field(*devs, "results") : nullptr;
  if (results == nullptr || !results->is_array())
    return FailedPrecondition(who, ": status.allocation.devices.results is missing");
  ClaimAllocation out;
  out.ref = ref;
  for (size_t i = 0; i < results->size(); ++i) {
    const Json& r = (*results)[i];
    const std::string where = StrCat(who, ": results[", i, "]");
    if (!r.is_object()) return InvalidArgument(where, ": not an object");
    if (StringField(r, "driver") != driver) continue;  // another driver's device
    const std::string rpool = StringField(r, "pool");
    if (rpool != pool)
      return FailedPrecondition(where, ": allocated in pool '", rpool, "', this node's pool is '",
                                pool, "'");
    Share s;
    s.request = StringField(r, "request");
    s.device = StringField(r, "device");
    s.share_id = StringField(r, "shareID");
    if (s.request.empty()) return InvalidArgument(where, ": no request name");
    const DeviceCapacity* dev = FindDevice(devices, s.device);
    if (dev == nullptr)
      return FailedPrecondition(where, ": device '", s.device, "' is not on this node");
    auto usage = Consumed(shared ? Field(r, "consumedCapacity") : nullptr, *dev);
    if (!usage.ok()) return Annotate(usage.status(), where);
    s.usage = *usage;
    out.shares.push_back(std::move(s));
  }
  if (out.shares.empty())
    return FailedPrecondition(who, ": no device allocated for driver ", driver, " in pool ", pool);
  return out;
}

StatusOr<ClaimAllocation> ParseClaimText(std::string_view text, const ClaimRef& ref,
                                         const std::string& driver, const std::string& pool,
                                         const std::vector<DeviceCapacity>& devices) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return InvalidArgument("claim ", ref.namespace_, "/", ref.name, ": not JSON");
  return ParseClaim(j, ref, driver, pool, devices);
}

}  // namespace hami::dra
