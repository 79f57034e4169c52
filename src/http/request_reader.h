#pragma once
// Incremental HTTP/1.1 request decoding with the limits of docs/security.md ("HTTP surfaces"):
// bytes in, at most one request out, never more memory than the header limit plus the body cap.
// No I/O, so the server and the fuzz target run the same code. Built on Boost.Beast's parser.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace hami::http {

struct RequestLimits {
  size_t max_header_bytes = 16u << 10;  // request line + fields
  size_t max_body_bytes = 8u << 20;  // after de-chunking; Content-Length over it is refused unread
};

// One request as handlers see it.
struct HttpRequest {
  std::string method, path, body;
  std::string query;  // after '?', undecoded; "" when none
  // The Authorization header's value; "" when absent or sent more than once (ambiguous).
  std::string authorization;
};

class RequestReader {
 public:
  enum class State {
    kNeedMore,    // feed more bytes
    kHeaderDone,  // header read and accepted: inspect it, then AcceptBody() to go on
    kDone,        // a whole request: Take() it
    kError,       // refused: error_status() / error_reason(); the connection cannot be reused
  };

  explicit RequestReader(RequestLimits limits = {});
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Consumes a prefix of `data` and returns its length. Stops at the end of the header
  // (kHeaderDone) and at the end of the request: bytes after it belong to the next (pipelined)
  // request and are not consumed. In kHeaderDone, kDone and kError nothing is consumed.
  size_t Feed(std::string_view data);
  // The peer closed its side: a request cut short becomes a 400 (nothing read yet stays kNeedMore).
  void FeedEof();
  // kHeaderDone -> kNeedMore (or kDone for a request without a body).
  void AcceptBody();

  State state() const { return state_; }
  bool started() const { return started_; }           // any byte of this request seen
  int error_status() const { return error_status_; }  // 400, 413, 415, 431, 501
  const std::string& error_reason() const { return error_reason_; }

  // Valid from kHeaderDone on.
  // The body size the request announces: Content-Length, or the body cap for chunked.
  uint64_t body_reservation() const;
  bool expects_continue() const;  // "Expect: 100-continue"
  bool keep_alive() const;        // HTTP/1.1 without "Connection: close", or 1.0 with keep-alive
  int version() const;            // 10 or 11

  // kDone only; the reader is spent afterwards (use a fresh one for the next request).
  HttpRequest Take();

 private:
  void Fail(int status, std::string reason);
  void CheckHeader();

  struct Impl;
  std::unique_ptr<Impl> impl_;
  RequestLimits limits_;
  State state_ = State::kNeedMore;
  bool started_ = false, header_checked_ = false;
  int error_status_ = 0;
  std::string error_reason_;
};

}  // namespace hami::http
