#include "http/request_reader.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/string_body.hpp>
#include <iterator>

namespace hami::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

struct RequestReader::Impl {
  bhttp::request_parser<bhttp::string_body> parser;
};

RequestReader::RequestReader(RequestLimits limits)
    : impl_(std::make_unique<Impl>()), limits_(limits) {
  impl_->parser.header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  impl_->parser.body_limit(static_cast<std::uint64_t>(limits_.max_body_bytes));
}

RequestReader::~RequestReader() = default;

void RequestReader::Fail(int status, std::string reason) {
  state_ = State::kError;
  error_status_ = status;
  error_reason_ = std::move(reason);
}

namespace {

// Beast's parse errors as an HTTP status and a sentence for the client.
void Classify(const beast::error_code& ec, const RequestLimits& limits, int* status,
              std::string* reason) {
  if (ec == bhttp::error::body_limit) {
    *status = 413;
    *reason = "request body larger than " + std::to_string(limits.max_body_bytes) + " bytes";
  } else if (ec == bhttp::error::header_limit) {
    *status = 431;
    *reason = "request header larger than " + std::to_string(limits.max_header_bytes) + " bytes";
  } else {
    *status = 400;
    *reason = "malformed HTTP request: " + ec.message();
  }
}

}  // namespace

void RequestReader::CheckHeader() {
  header_checked_ = true;
  const auto& h = impl_->parser.get();
  // Compressed bodies are refused, not inflated: no client of these endpoints compresses a request
  // (kube-scheduler and the API server send identity bodies), and a decoder is one more place where
  // a small input turns into a large allocation.
  const auto ce = h.equal_range(bhttp::field::content_encoding);
  for (auto f = ce.first; f != ce.second; ++f) {
    std::string v(f->value().data(), f->value().size());
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t a = v.find_first_not_of(" \t"), b = v.find_last_not_of(" \t");
    v = a == std::string::npos ? "" : v.substr(a, b - a + 1);
    if (v != "identity")
      return Fail(415, "Content-Encoding \"" + std::string(f->value().data(), f->value().size()) +
                           "\" is not accepted: send the body uncompressed");
  }
  // Beast reads a body only for chunked or Content-Length; any other transfer coding would leave
  // the body to be parsed as the next request (smuggling), so it is refused.
  const auto te = h.equal_range(bhttp::field::transfer_encoding);
  if (te.first != te.second && !impl_->parser.chunked())
    return Fail(501, "Transfer-Encoding \"" +
                         std::string(te.first->value().data(), te.first->value().size()) +
                         "\" is not supported (only chunked)");
  if (impl_->parser.chunked()) {
    int codings = 0;
    for (auto f = te.first; f != te.second; ++f)
      for (auto tok : bhttp::token_list(f->value())) {
        (void)tok;
        ++codings;
      }
    if (codings != 1)
      return Fail(501, "Transfer-Encoding other than plain chunked is not supported");
  }
  state_ = State::kHeaderDone;
}

size_t RequestReader::Feed(std::string_view data) {
  if (state_ != State::kNeedMore) return 0;
  auto& p = impl_->parser;
  size_t used = 0;
  while (state_ == State::kNeedMore) {
    if (used == data.size() && p.is_header_done()) break;  // body bytes still to come
    beast::error_code ec;
    const size_t n = p.put(boost::asio::const_buffer(data.data() + used, data.size() - used), ec);
    used += n;
    if (n > 0) started_ = true;
    if (ec == bhttp::error::need_more) {
      if (used < data.size())
        started_ = true;  // a partial header sits unconsumed in the caller's buffer
      break;
    }
    if (ec) {
      int status = 0;
      std::string reason;
      Classify(ec, limits_, &status, &reason);
      Fail(status, std::move(reason));
      break;
    }
    if (p.is_header_done() && !header_checked_) {
      CheckHeader();
      break;
    }
    if (p.is_done()) {
      state_ = State::kDone;
      break;
    }
    if (n == 0) break;
  }
  return used;
}

void RequestReader::FeedEof() {
  if (state_ != State::kNeedMore || !started_) return;
  beast::error_code ec;
  impl_->parser.put_eof(ec);
  if (ec) {
    Fail(400, "the connection closed in the middle of a request");
  } else if (impl_->parser.is_done()) {
    state_ = State::kDone;
  }
}

void RequestReader::AcceptBody() {
  if (state_ != State::kHeaderDone) return;
  impl_->parser.eager(true);
  state_ = impl_->parser.is_done() ? State::kDone : State::kNeedMore;
}

uint64_t RequestReader::body_reservation() const {
  if (impl_->parser.chunked()) return limits_.max_body_bytes;
  return impl_->parser.content_length().value_or(0);
}

bool RequestReader::expects_continue() const {
  const auto& h = impl_->parser.get();
  auto it = h.find(bhttp::field::expect);
  return it != h.end() && beast::iequals(it->value(), "100-continue");
}

bool RequestReader::keep_alive() const {
  return impl_->parser.get().keep_alive();
}
int RequestReader::version() const {
  return static_cast<int>(impl_->parser.get().version());
}

HttpRequest RequestReader::Take() {
  HttpRequest r;
  if (state_ != State::kDone) return r;
  auto msg = impl_->parser.release();
  r.method = std::string(msg.method_string());
  const std::string_view target(msg.target().data(), msg.target().size());
  const size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
  if (auto [first, last] = msg.equal_range(bhttp::field::authorization);
      first != last && std::next(first) == last)
    r.authorization = std::string(first->value());
  r.body = std::move(msg.body());
  return r;
}

}  // namespace hami::http
