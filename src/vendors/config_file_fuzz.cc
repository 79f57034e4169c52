// Fuzz target: the device-config.yaml reader never crashes, and what it accepts holds the
// validated ranges (the binaries use the values without checking again) and parses the same twice.
#include <cstdint>
#include <string>

#include "common/log.h"
#include "core/fuzz_check.h"
#include "vendors/config_file.h"
#include "vendors/nvidia/device_list.h"

using namespace hami::vendors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);  // ignored keys log
  (void)quiet;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto got = ParseConfigFile(text, "fuzz.yaml");
  if (!got.ok()) {
    FUZZ_CHECK(std::string(got.status().message()).rfind("fuzz.yaml: ", 0) == 0, text.c_str());
    return 0;
  }
  const DeviceConfig& c = got->nvidia;
  FUZZ_CHECK(c.resources.Validate().ok(), text.c_str());
  FUZZ_CHECK(c.gpu_core_policy == "default" || c.gpu_core_policy == "force" ||
                 c.gpu_core_policy == "disable",
             text.c_str());
  const auto& k = c.plugin;
  FUZZ_CHECK(!k.device_split_count || (*k.device_split_count >= 1 && *k.device_split_count <= 1000),
             text.c_str());
  FUZZ_CHECK(!k.device_memory_scaling || *k.device_memory_scaling > 0, text.c_str());
  FUZZ_CHECK(!k.device_core_scaling || *k.device_core_scaling > 0, text.c_str());
  FUZZ_CHECK(!k.preconfigured_memory || *k.preconfigured_memory >= 0, text.c_str());
  // The device list knobs reach Allocate unchecked: what was accepted is valid there, and the
  // strategy list is kept in the spelling it parses back to.
  if (k.device_list_strategy) {
    auto s = nvidia::ParseDeviceListStrategies(*k.device_list_strategy);
    FUZZ_CHECK(s.ok() && s->ToString() == *k.device_list_strategy, text.c_str());
  }
  FUZZ_CHECK(!k.device_id_strategy || nvidia::CheckDeviceIdStrategy(*k.device_id_strategy).ok(),
             text.c_str());
  FUZZ_CHECK(
      !k.cdi_annotation_prefix || nvidia::CheckCdiAnnotationPrefix(*k.cdi_annotation_prefix).ok(),
      text.c_str());
  FUZZ_CHECK(!k.cdi_kind || nvidia::CheckCdiKind(*k.cdi_kind).ok(), text.c_str());
  auto again = ParseConfigFile(text, "fuzz.yaml");
  FUZZ_CHECK(again.ok() && again->vendors.size() == got->vendors.size() &&
                 again->nvidia.resources.nvidia.count == c.resources.nvidia.count &&
                 again->nvidia.gpu_core_policy == c.gpu_core_policy,
             text.c_str());
  return 0;
}
