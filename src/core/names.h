#pragma once
// Checks for the names and identifiers that travel in annotations the scheduler reads (refit
// requests, consolidation reservations): what may reach a map key, a log line or a patch.
#include <string_view>

namespace hami::core {

// An RFC 1123 label, as Kubernetes namespaces are: 1-63 of [a-z0-9-], not starting or ending in
// '-'.
bool IsDnsLabel(std::string_view s);
// A Kubernetes uid or similar token: 1-64 of [A-Za-z0-9-].
bool IsUid(std::string_view s);

}  // namespace hami::core
