// Fuzz target: the per-node config parser must return a Status for any input, never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "deviceplugin/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  hami::deviceplugin::PluginConfig c;
  (void)hami::deviceplugin::ApplyNodeConfig(text, "node1", &c);
  if (hami::deviceplugin::ApplyNodeConfig(text, "node1", &c).ok()) {
    // Whatever was applied must still be a valid configuration.
    if (!hami::deviceplugin::Validate(c).ok()) __builtin_trap();
  }
  // Entries chosen by nodelabelselector against a labelled node, the same promise.
  hami::deviceplugin::PluginConfig l;
  const hami::deviceplugin::NodeLabelsFn labels = [] {
    return hami::StatusOr<nlohmann::json>(nlohmann::json{{"pool", "a"}, {"gpu", "h100"}});
  };
  if (hami::deviceplugin::ApplyNodeConfig(text, "node9", &l, "fuzz", labels).ok() &&
      !hami::deviceplugin::Validate(l).ok())
    __builtin_trap();
  return 0;
}
