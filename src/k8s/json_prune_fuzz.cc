// Fuzz target for k8s/json_prune.h: no input may crash, and a text nlohmann parses with a cut in
// its parser callback must parse, pruned with the same cut, to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "k8s/json_prune.h"

namespace {
bool Cut(int depth, const std::string& key) {
  return key == "a" || key == "managedFields" || (depth == 2 && key == "b");
}
nlohmann::json Parse(const std::string& text) {
  return nlohmann::json::parse(
      text,
      [](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        return event != nlohmann::json::parse_event_t::key || !parsed.is_string() ||
               !Cut(depth, parsed.get_ref<const std::string&>());
      },
      /*allow_exceptions=*/false);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string pruned = hami::k8s::PruneJson(text, Cut);
  const nlohmann::json whole = Parse(text);
  if (whole.is_discarded()) return 0;
  const nlohmann::json cut = Parse(pruned);
  if (cut.is_discarded() || cut != whole) std::abort();
  return 0;
}
