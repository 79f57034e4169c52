#include "vendors/nvidia/device_list.h"

#include <cctype>

namespace hami::vendors::nvidia {
namespace {

bool Letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool Alnum(char c) {
  return Letter(c) || (c >= '0' && c <= '9');
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// CDI's shape for vendor, class, device name and annotation name: `first` holds for the first
// character, alphanumeric for the last, and letters, digits or one of `inner` for the rest.
bool CdiWord(std::string_view s, bool (*first)(char), std::string_view inner) {
  if (s.empty() || !first(s.front()) || !Alnum(s.back())) return false;
  for (char c : s)
    if (!Alnum(c) && inner.find(c) == std::string_view::npos) return false;
  return true;
}

// A DNS-1123 subdomain: labels of [a-z0-9-] starting and ending alphanumeric, dot separated, at
// most 253 characters.
bool DnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63) return false;
    for (char c : label)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

std::string DeviceListStrategies::ToString() const {
  std::string out;
  for (auto [on, word] :
       {std::pair{envvar, "envvar"}, std::pair{volume_mounts, "volume-mounts"},
        std::pair{cdi_annotations, "cdi-annotations"}, std::pair{cdi_cri, "cdi-cri"}})
    if (on) out += StrCat(out.empty() ? "" : ",", word);
  return out;
}

StatusOr<DeviceListStrategies> ParseDeviceListStrategies(std::string_view text) {
  DeviceListStrategies s;
  bool any = false;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view word = Trim(text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (word == "envvar") {
      s.envvar = true;
    } else if (word == "volume-mounts") {
      s.volume_mounts = true;
    } else if (word == "cdi-annotations") {
      s.cdi_annotations = true;
    } else if (word == "cdi-cri") {
      s.cdi_cri = true;
    } else if (!word.empty() || comma != std::string_view::npos || any) {
      // An empty name between commas or after the last one is as wrong as an unknown one.
      return InvalidArgument("device list strategy \"", word,
                             "\" is not one of envvar, volume-mounts, cdi-annotations, cdi-cri");
    }
    any |= !word.empty();
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (!any)
    return InvalidArgument(
        "no device list strategy given: at least one of envvar, volume-mounts, cdi-annotations, "
        "cdi-cri");
  return s;
}

Status CheckDeviceIdStrategy(std::string_view strategy) {
  if (strategy == "uuid" || strategy == "index") return OkStatus();
  return InvalidArgument("device ID strategy \"", strategy, "\" is not one of uuid, index");
}

Status CheckCdiKind(std::string_view kind) {
  const size_t slash = kind.find('/');
  if (slash == std::string_view::npos)
    return InvalidArgument("CDI kind \"", kind, "\" must be <vendor>/<class>, e.g. nvidia.com/gpu");
  const std::string_view vendor = kind.substr(0, slash), cls = kind.substr(slash + 1);
  if (!CdiWord(vendor, Letter, "_-."))
    return InvalidArgument("CDI kind \"", kind, "\": vendor \"", vendor,
                           "\" must start with a letter, end with a letter or digit and hold only "
                           "letters, digits, '_', '-', '.'");
  if (!CdiWord(cls, Letter, "_-"))
    return InvalidArgument("CDI kind \"", kind, "\": class \"", cls,
                           "\" must start with a letter, end with a letter or digit and hold only "
                           "letters, digits, '_', '-'");
  return OkStatus();
}

Status CheckCdiAnnotationPrefix(std::string_view prefix) {
  if (prefix.size() < 2 || prefix.back() != '/' ||
      !DnsSubdomain(prefix.substr(0, prefix.size() - 1)))
    return InvalidArgument("CDI annotation prefix \"", prefix,
                           "\" must be a DNS subdomain followed by '/', e.g. cdi.k8s.io/");
  return OkStatus();
}

StatusOr<std::string> CdiDeviceName(std::string_view kind, std::string_view name) {
  HAMI_RETURN_IF_ERROR(CheckCdiKind(kind));
  if (!CdiWord(name, Alnum, "_-.:"))
    return InvalidArgument("\"", name,
                           "\" cannot be a CDI device name (letters, digits, '_', '-', '.', ':', "
                           "starting and ending with a letter or digit)");
  return StrCat(kind, "=", name);
}

StatusOr<std::string> CdiAnnotationKey(std::string_view prefix, std::string_view allocation_id) {
  HAMI_RETURN_IF_ERROR(CheckCdiAnnotationPrefix(prefix));
  std::string name = StrCat(kCdiAnnotationPlugin, "_", allocation_id);
  for (char& c : name)
    if (c == '/') c = '_';
  if (name.size() > 63 || !CdiWord(name, Alnum, "_-."))
    return InvalidArgument("CDI annotation name \"", name,
                           "\" must be at most 63 letters, digits, '_', '-', '.', starting and "
                           "ending with a letter or digit");
  return StrCat(prefix, name);
}

}  // namespace hami::vendors::nvidia
