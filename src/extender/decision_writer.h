#pragma once
// DecisionWriter: writes /filter's decision patches off the request path (docs/control-plane.md,
// "The decision patch"). Filter reserves, hands the patch over and answers; /bind waits for the
// pod's write before it posts the Binding, because the device plugin must find the decision on
// the pod once it is bound. A write that fails is kept, with its patch, for that wait: the
// caller (Bind) sends it once more itself and gives the reservation up only if that fails too, as
// Filter did when it wrote the patch itself.
//
// Per pod the writes keep their order: a newer decision for the same uid replaces one still
// queued, and one submitted while an older is in flight is sent after it. Thread-safe.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace hami::extender {

// One decision patch: the pod it goes to and the merge patch.
struct DecisionWrite {
  std::string uid, namespace_, name;
  nlohmann::json patch;
};

struct DecisionWriterOptions {
  int threads = 2;  // writes in flight at once (distinct pods)
  // Niceness of the writer's threads (Linux schedules threads one by one). A write is handed over
  // while /filter is still answering, and a woken writer at nice 0 may take the core from the
  // request thread on a busy machine (scale_bench's spread phase at 10,000 nodes, one run each on
  // two loaded cores: the hand-over's p99 4.6 ms at nice 0, 1.5 ms at nice 10). The cost: on a
  // saturated machine /bind waits longer for the write (docs/benchmarks.md).
  int nice = 10;
  // How long a failed write is kept for its pod's Await (a pod whose bind never comes): the
  // reservation TTL is enough.
  std::chrono::milliseconds keep_failed{60'000};
};

class DecisionWriter {
 public:
  // `send` writes one patch (the API request, retried as the client retries); called on the
  // writer's threads.
  using Send = std::function<Status(const DecisionWrite&)>;
  DecisionWriter(Send send, DecisionWriterOptions opts = {});
  ~DecisionWriter();  // sends nothing more: what is queued is dropped; waits for what is in flight
  DecisionWriter(const DecisionWriter&) = delete;
  DecisionWriter& operator=(const DecisionWriter&) = delete;

  // Queues the write; never blocks on I/O.
  void Submit(DecisionWrite write);

  // What became of a pod's latest write.
  struct Outcome {
    enum Kind {
      kWritten,  // sent, or nothing was submitted for the pod (or it was taken already)
      kFailed,   // the send failed: `error`, and the write to send again (now the caller's)
      kPending,  // still queued or in flight when the wait ended
    };
    Kind kind = kWritten;
    Status error;
    std::optional<DecisionWrite> write;
  };
  // Waits up to `timeout` for the pod's write to be done. A failed write is handed over once and
  // forgotten.
  Outcome Await(const std::string& uid, std::chrono::milliseconds timeout);
  // Forgets the pod's write (its reservation was given up): one queued is not sent; one in flight
  // completes but is not kept if it fails.
  void Cancel(const std::string& uid);
  // Waits until nothing is queued or in flight (tests).
  void Flush();

  struct Counts {
    int64_t sent = 0;    // writes that succeeded
    int64_t failed = 0;  // writes whose send failed
  };
  Counts counts() const;

 private:
  struct Entry {
    std::optional<DecisionWrite> queued;  // the next write to send
    bool in_flight = false;
    bool cancelled = false;
    std::optional<DecisionWrite> failed;  // the last send failed; no newer write queued
    Status error;
    std::chrono::steady_clock::time_point failed_at;
  };
  void Run();
  void PruneFailedLocked(std::chrono::steady_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static bool Busy(const Entry& e) { return e.queued.has_value() || e.in_flight; }

  const Send send_;
  const DecisionWriterOptions opts_;
  mutable Mutex mu_;
  CondVar work_cv_;                                            // a write queued, or stopping
  CondVar done_cv_;                                            // a write finished
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by uid
  std::deque<std::string> ready_ ABSL_GUARDED_BY(mu_);  // uids with a queued write (may be stale)
  // When each write failed, oldest first (entries whose failure is kept longer than keep_failed
  // go).
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>> failures_
      ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace hami::extender
