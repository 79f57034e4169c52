// Fuzz target for the k8s parsers of outside input: kubeconfig YAML, watch event lines, and API
// server error bodies. None may crash, hang or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)hami::k8s::ParseKubeconfig(text, "/nonexistent/fuzz/kubeconfig");
  (void)hami::k8s::ParseWatchEvent(text);
  (void)hami::k8s::StatusFromHttp(409, text, "fuzz");
  (void)hami::k8s::ParseTimeMicros(text.substr(0, 64));
  return 0;
}
