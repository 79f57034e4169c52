#include "k8s/names.h"

#include <string>

namespace hami::k8s {
namespace {

bool LowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// The value as it may appear in an error message: quoted, at most 80 characters, non-printable
// bytes as \xNN.
std::string Shown(std::string_view v) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < v.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (v.size() > 80) out += "...";
  return out + "\"";
}

// One DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?; "" when it is one, else what is wrong.
std::string LabelProblem(std::string_view v) {
  if (v.empty()) return "is empty";
  for (char c : v)
    if (!LowerAlnum(c) && c != '-') return "may contain only lowercase letters, digits and '-'";
  if (!LowerAlnum(v.front()) || !LowerAlnum(v.back()))
    return "must start and end with a lowercase letter or digit";
  return "";
}

}  // namespace

Status ValidateDns1123Label(std::string_view value, std::string_view what) {
  if (value.size() > kMaxLabelLength)
    return InvalidArgument(what, " ", Shown(value), " is not a DNS-1123 label: longer than ",
                           kMaxLabelLength, " characters");
  if (std::string p = LabelProblem(value); !p.empty())
    return InvalidArgument(what, " ", Shown(value), " is not a DNS-1123 label: ", p);
  return OkStatus();
}

Status ValidateDns1123Subdomain(std::string_view value, std::string_view what) {
  if (value.size() > kMaxSubdomainLength)
    return InvalidArgument(what, " ", Shown(value), " is not a DNS-1123 subdomain: longer than ",
                           kMaxSubdomainLength, " characters");
  if (value.empty()) return InvalidArgument(what, " is empty");
  size_t start = 0;
  while (true) {
    const size_t dot = value.find('.', start);
    const std::string_view part =
        value.substr(start, dot == std::string_view::npos ? value.npos : dot - start);
    if (std::string p = LabelProblem(part); !p.empty())
      return InvalidArgument(what, " ", Shown(value),
                             " is not a DNS-1123 subdomain: each dot-separated part ",
                             p == "is empty" ? "must be non-empty" : p);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return OkStatus();
}

Status ValidateUid(std::string_view value, std::string_view what) {
  if (value.empty()) return InvalidArgument(what, " is empty");
  if (value.size() > kMaxUidLength)
    return InvalidArgument(what, " ", Shown(value), " is longer than ", kMaxUidLength,
                           " characters");
  for (char c : value)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
      return InvalidArgument(what, " ", Shown(value), " may contain only letters, digits and '-'");
  return OkStatus();
}

Status ValidateObjectRef(std::string_view ns, std::string_view name, std::string_view uid,
                         bool ns_optional) {
  if (!(ns_optional && ns.empty())) HAMI_RETURN_IF_ERROR(ValidateDns1123Label(ns, "namespace"));
  HAMI_RETURN_IF_ERROR(ValidateDns1123Subdomain(name, "name"));
  if (!uid.empty()) HAMI_RETURN_IF_ERROR(ValidateUid(uid));
  return OkStatus();
}

}  // namespace hami::k8s
