// Fuzz target for k8s/names.h and the checked URL path: no input may crash, and whatever passes the
// checks must give a path with exactly the expected segments (no dot segment, no '/', no '%').
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "k8s/client.h"
#include "k8s/names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hami::k8s;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // First line: namespace; rest: name (so both parts are explored).
  const size_t nl = text.find('\n');
  const std::string_view ns = nl == text.npos ? std::string_view("default") : text.substr(0, nl);
  const std::string_view name = nl == text.npos ? text : text.substr(nl + 1);
  (void)ValidateUid(text);
  (void)ValidateDns1123Label(text);
  (void)ValidateObjectRef(ns, name, text.substr(0, 40));
  auto path = CheckedResourcePath(kPods, ns, name, "binding");
  if (path.ok() && !ns.empty()) {  // an empty namespace addresses all namespaces
    const std::string want =
        "/api/v1/namespaces/" + std::string(ns) + "/pods/" + std::string(name) + "/binding";
    if (*path != want || path->find("/../") != std::string::npos ||
        path->find("/./") != std::string::npos || path->find('%') != std::string::npos)
      std::abort();
    if (!ValidateDns1123Subdomain(name).ok() || !ValidateDns1123Label(ns).ok()) std::abort();
  }
  return 0;
}
