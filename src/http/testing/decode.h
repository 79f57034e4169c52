#pragma once
// Test/fuzz helper: decodes a byte stream the way the server does (a fresh RequestReader per
// request, every body accepted), offering `step` bytes at a time (0 = everything at once).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "http/request_reader.h"

namespace hami::http::testing {

struct Decoded {
  std::vector<HttpRequest> requests;
  int error = 0;  // status of the refusal that ended the stream, 0 = none
  std::string reason;
};

inline Decoded DecodeStream(const std::string& wire, RequestLimits limits = {}, size_t step = 0,
                            bool eof = true) {
  Decoded out;
  std::string buf;
  size_t fed = 0;
  auto reader = std::make_unique<RequestReader>(limits);
  // Each round consumes input or changes state, so wire.size() + requests bounds it; the guard only
  // protects the caller from a reader bug.
  for (size_t guard = 0; guard < 4 * wire.size() + 64; ++guard) {
    if (reader->state() == RequestReader::State::kNeedMore) buf.erase(0, reader->Feed(buf));
    switch (reader->state()) {
      case RequestReader::State::kHeaderDone:
        reader->AcceptBody();
        continue;
      case RequestReader::State::kDone:
        out.requests.push_back(reader->Take());
        reader = std::make_unique<RequestReader>(limits);
        continue;
      case RequestReader::State::kError:
        out.error = reader->error_status();
        out.reason = reader->error_reason();
        return out;
      case RequestReader::State::kNeedMore:
        break;
    }
    if (fed == wire.size()) {
      if (eof) reader->FeedEof();
      if (reader->state() == RequestReader::State::kNeedMore) break;
      continue;
    }
    const size_t n = step == 0 ? wire.size() - fed : std::min(step, wire.size() - fed);
    buf.append(wire, fed, n);
    fed += n;
  }
  return out;
}

}  // namespace hami::http::testing
