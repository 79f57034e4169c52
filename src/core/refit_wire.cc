#include "core/refit_wire.h"

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "core/names.h"
#include "core/pod_codec.h"

namespace hami::core {
namespace {

using nlohmann::json;

constexpr char kWhat[] = "refit request";

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  for (;;) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool IsDeviceUuid(std::string_view s) {
  if (s.empty() || s.size() > kMaxDeviceUuidLength) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.' || c == '/'))
      return false;
  return true;
}

bool IsPrintable(std::string_view s) {
  for (char c : s)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

// `value` quoted for an error, cut to 80 characters with control bytes escaped.
std::string Quote(std::string_view value) {
  std::string out = "\"";
  for (char c : value.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      out += kHex[static_cast<unsigned char>(c) & 0xf];
    }
  }
  if (value.size() > 80) out += "...";
  return out + "\"";
}

Status Require(bool ok, const char* field, std::string_view value, std::string_view rule) {
  if (ok) return OkStatus();
  return InvalidArgument(kWhat, ": ", field, " ", Quote(value), " is not ", rule);
}

}  // namespace

StatusOr<RefitRequest> ParseRefitRequest(std::string_view body) {
  if (body.empty()) return InvalidArgument(kWhat, ": empty body");
  if (body.size() > kMaxRefitBodyBytes)
    return InvalidArgument(kWhat, ": body of ", body.size(), " bytes exceeds ", kMaxRefitBodyBytes);
  HAMI_ASSIGN_OR_RETURN(json j, jsonutil::Parse(body, kWhat));
  if (!j.is_object())
    return InvalidArgument(kWhat, ": expected a JSON object, got ", j.type_name());
  RefitRequest r;
  const std::string where = StrCat(kWhat, ": ");
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "podUID", where, &r.pod_uid));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "podNamespace", where, &r.pod_namespace));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "podName", where, &r.pod_name));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "nodeName", where, &r.node_name));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "containerName", where, &r.container_name));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "deviceType", where, &r.device_type));
  HAMI_RETURN_IF_ERROR(jsonutil::GetInt(j, "containerIndex", -(int64_t{1} << 31),
                                        (int64_t{1} << 31) - 1, where, &r.container_index));
  if (r.pod_uid.empty() || r.pod_namespace.empty() || r.pod_name.empty() || r.node_name.empty())
    return InvalidArgument(
        kWhat, ": incomplete refit request: pod UID, namespace, name, and node are required");
  HAMI_RETURN_IF_ERROR(Require(IsUid(r.pod_uid), "podUID", r.pod_uid, "a Kubernetes uid"));
  HAMI_RETURN_IF_ERROR(
      Require(IsDnsLabel(r.pod_namespace), "podNamespace", r.pod_namespace, "a DNS-1123 label"));
  HAMI_RETURN_IF_ERROR(
      Require(IsDnsSubdomain(r.pod_name), "podName", r.pod_name, "a DNS-1123 subdomain"));
  HAMI_RETURN_IF_ERROR(
      Require(IsDnsSubdomain(r.node_name), "nodeName", r.node_name, "a DNS-1123 subdomain"));
  HAMI_RETURN_IF_ERROR(Require(r.container_name.empty() || IsDnsLabel(r.container_name),
                               "containerName", r.container_name, "a DNS-1123 label"));
  if (r.container_index < 0 || r.container_index > 1023)
    return InvalidArgument(kWhat, ": container index ", r.container_index,
                           " is outside the pod's containers (0..1023)");
  HAMI_RETURN_IF_ERROR(
      Require(!r.device_type.empty() && r.device_type.size() <= 64 && IsPrintable(r.device_type),
              "deviceType", r.device_type, "a device type (printable, 1-64 characters)"));
  const json* allowed = j.contains("allowedDeviceUUIDs") ? &j["allowedDeviceUUIDs"] : nullptr;
  if (allowed != nullptr && !allowed->is_null() && !allowed->is_array())
    return InvalidArgument(kWhat, ": allowedDeviceUUIDs: expected an array, got JSON ",
                           allowed->type_name());
  if (allowed == nullptr || allowed->is_null() || allowed->empty())
    return InvalidArgument(kWhat, ": refit request carries an empty allowed device set");
  if (allowed->size() > kMaxRefitAllowedDevices)
    return InvalidArgument(kWhat, ": refit request carries ", allowed->size(),
                           " allowed devices, limit is ", kMaxRefitAllowedDevices);
  for (const json& u : *allowed) {
    if (!u.is_string())
      return InvalidArgument(kWhat, ": allowedDeviceUUIDs: expected strings, got JSON ",
                             u.type_name());
    const std::string& s = u.get_ref<const std::string&>();
    HAMI_RETURN_IF_ERROR(Require(IsDeviceUuid(s), "allowedDeviceUUIDs entry", s,
                                 "a device UUID (1-128 of [A-Za-z0-9-_./])"));
    r.allowed_device_uuids.push_back(s);
  }
  return r;
}

std::string EncodeRefitRequest(const RefitRequest& r) {
  json j{{"podUID", r.pod_uid},
         {"podNamespace", r.pod_namespace},
         {"podName", r.pod_name},
         {"nodeName", r.node_name},
         {"containerIndex", r.container_index},
         {"deviceType", r.device_type},
         {"allowedDeviceUUIDs", r.allowed_device_uuids}};
  if (!r.container_name.empty()) j["containerName"] = r.container_name;
  return j.dump();
}

StatusOr<RefitResponse> ParseRefitResponse(std::string_view body) {
  constexpr char kWhatReply[] = "refit response";
  if (body.size() > kMaxRefitBodyBytes)
    return InvalidArgument(kWhatReply, ": body of ", body.size(), " bytes exceeds ",
                           kMaxRefitBodyBytes);
  HAMI_ASSIGN_OR_RETURN(json j, jsonutil::Parse(body, kWhatReply));
  if (!j.is_object())
    return InvalidArgument(kWhatReply, ": expected a JSON object, got ", j.type_name());
  RefitResponse r;
  const std::string where = StrCat(kWhatReply, ": ");
  HAMI_RETURN_IF_ERROR(jsonutil::GetBool(j, "succeeded", where, &r.succeeded));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "containerDevices", where, &r.container_devices));
  HAMI_RETURN_IF_ERROR(jsonutil::GetString(j, "failureReason", where, &r.failure_reason));
  return r;
}

std::string EncodeRefitResponse(const RefitResponse& r) {
  json j{{"succeeded", r.succeeded}};
  if (!r.container_devices.empty()) j["containerDevices"] = r.container_devices;
  if (!r.failure_reason.empty()) j["failureReason"] = r.failure_reason;
  // Reasons quote what the caller sent; replace, never throw, on bytes that are not UTF-8.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<std::string> EncodeContainerDevices(const std::vector<ContainerDevice>& devices) {
  PodAllocation one;
  one.containers.push_back(devices);
  HAMI_ASSIGN_OR_RETURN(std::string text, EncodePodDevices(one));
  if (!text.empty() && text.back() == ';') text.pop_back();
  return text;
}

StatusOr<std::vector<ContainerDevice>> DecodeContainerDevices(std::string_view text) {
  if (text.find(';') != std::string_view::npos)
    return InvalidArgument("container devices: \"", text.substr(0, 80),
                           "\" holds more than one container");
  HAMI_ASSIGN_OR_RETURN(PodAllocation a, DecodePodDevices(text));
  if (a.containers.empty()) return std::vector<ContainerDevice>{};
  return std::move(a.containers[0]);
}

}  // namespace hami::core
