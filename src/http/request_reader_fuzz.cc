// Fuzz target: the HTTP request decoder (request line, fields, Content-Length and chunked bodies,
// Content-Encoding / Transfer-Encoding refusals) never crashes, never hands out a body over the
// cap, refuses only with the documented statuses, and decodes the same requests however the bytes
// are split across reads. The first input byte picks the split.
#include <cstdint>
#include <string>

#include "core/fuzz_check.h"
#include "http/testing/decode.h"

using namespace hami::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = data[0] % 17;  // 0 = all at once
  const std::string wire(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_body_bytes = 4096;
  const testing::Decoded whole = testing::DecodeStream(wire, limits, 0);
  const testing::Decoded split = testing::DecodeStream(wire, limits, step == 0 ? 1 : step);
  for (const auto* d : {&whole, &split}) {
    for (const auto& r : d->requests) {
      FUZZ_CHECK(r.body.size() <= limits.max_body_bytes, "no body over the cap");
      FUZZ_CHECK(!r.method.empty(), "a request has a method");
    }
    const int e = d->error;
    FUZZ_CHECK(e == 0 || e == 400 || e == 413 || e == 415 || e == 431 || e == 501,
               "only documented refusals");
    FUZZ_CHECK(e == 0 || !d->reason.empty(), "a refusal says why");
  }
  FUZZ_CHECK(whole.requests.size() == split.requests.size(),
             "the split does not change how many requests");
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    FUZZ_CHECK(whole.requests[i].path == split.requests[i].path, "same path however split");
    FUZZ_CHECK(whole.requests[i].body == split.requests[i].body, "same body however split");
  }
  FUZZ_CHECK(whole.error == split.error, "the same refusal however split");
  return 0;
}
