#pragma once
// Kubernetes object names, checked before they reach a URL, a file path or a log key.
//
// The API server accepts only these shapes (apimachinery's validation), so a name that fails here
// can never be a real object; refusing it early keeps a crafted name ("..", "a/b", "%2e%2e") from
// changing which URL the client sends (libcurl resolves dot segments: "pods/.." would address the
// namespace itself).
//  - DNS-1123 subdomain (pod, node, lease, configmap, event names): 1-253 characters, lowercase
//    letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or
//    digit;
//  - DNS-1123 label (namespace names): 1-63 characters, lowercase letters, digits and '-', starting
//    and ending with a letter or digit;
//  - uid: 1-64 characters of ASCII letters, digits and '-' (the API server writes RFC 4122 UUIDs;
//    the looser shape admits test fixtures but never a separator or a dot).
// Every function returns InvalidArgument naming `what` and the offending value (quoted, cut to 80
// characters, control bytes escaped) and the rule it breaks.
#include <string_view>

#include "common/status.h"

namespace hami::k8s {

inline constexpr size_t kMaxSubdomainLength = 253;
inline constexpr size_t kMaxLabelLength = 63;
inline constexpr size_t kMaxUidLength = 64;

Status ValidateDns1123Subdomain(std::string_view value, std::string_view what = "name");
Status ValidateDns1123Label(std::string_view value, std::string_view what = "name");
Status ValidateUid(std::string_view value, std::string_view what = "uid");

// The pieces of one object reference: namespace (label; empty allowed only when `ns_optional`),
// name (subdomain), uid (empty allowed).
Status ValidateObjectRef(std::string_view ns, std::string_view name, std::string_view uid,
                         bool ns_optional = false);

}  // namespace hami::k8s
