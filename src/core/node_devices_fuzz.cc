// Fuzz target: node registration (JSON and legacy CSV), link scores and the cordon list never
// crash, and what decodes survives encode -> decode unchanged.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "core/node_codec.h"
#include "core/text_util.h"

using namespace hami::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto devs = DecodeNodeDevices(text); devs.ok()) {
    const std::string json = EncodeNodeDevicesJson(*devs);
    auto back = DecodeNodeDevices(json);
    FUZZ_CHECK(back.ok(), json.c_str());
    FUZZ_CHECK(*back == *devs, json.c_str());
    const std::string_view t = text::Trim(text);
    if (t.empty() || t.front() != '[') {  // came from CSV: the CSV must round-trip too
      auto csv = EncodeNodeDevicesCsv(*devs);
      FUZZ_CHECK(csv.ok(), std::string(csv.status().message()).c_str());
      auto back_csv = DecodeNodeDevices(*csv);
      FUZZ_CHECK(back_csv.ok() && *back_csv == *devs, csv->c_str());
    }
  }
  if (auto scores = DecodeLinkScores(text); scores.ok()) {
    const std::string enc = EncodeLinkScores(*scores);
    auto back = DecodeLinkScores(enc);
    FUZZ_CHECK(back.ok() && *back == *scores, enc.c_str());
  }
  const auto cordon = DecodeDeviceCordon(text);
  FUZZ_CHECK(DecodeDeviceCordon(EncodeDeviceCordon(cordon)) == cordon, "cordon");
  return 0;
}
