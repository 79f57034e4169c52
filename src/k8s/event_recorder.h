#pragma once
// Asynchronous Event posting: callers on a hot path (the extender's /filter and /bind) hand an
// EventSpec over and return at once; one background thread posts them with Client::CreateEvent.
// The queue is bounded: when the API server is slow and the queue is full, the new event is dropped
// and counted, never waited for. An Event is a courtesy to the user (kubectl describe pod), not
// state: losing some under overload is better than slowing every scheduling decision. They are
// background requests of the client (EventRecorderOptions::background).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <thread>

#include "common/mutex.h"
#include "k8s/client.h"

namespace hami::k8s {

struct EventRecorderOptions {
  size_t capacity = 1024;  // events waiting to be posted; more are dropped
  // Niceness of the posting thread (Linux schedules threads one by one): on a busy machine the
  // decisions' threads get the CPU first, and events that cannot keep up are dropped (counted).
  int nice = 10;
  // After posting what was queued, the thread waits this long before it looks again, so that a
  // steady stream of events (one per /filter and /bind) wakes it once per linger, not once per
  // event. An event is posted at most about this much later. 0 = at once.
  std::chrono::milliseconds linger{20};
  // Post as background requests (BackgroundRequests): an Event takes a rate-limiter token only
  // while more than half the client's burst stays, so on a client it shares with the scheduling
  // path it never makes a decision patch or a bind wait; it gets what they leave of the qps.
  bool background = true;
};

class EventRecorder {
 public:
  // `client` must outlive the recorder. Starts the posting thread.
  explicit EventRecorder(Client& client, EventRecorderOptions opts = {});
  ~EventRecorder();  // posts nothing more: what is still queued is dropped (counted), then joins
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues `spec`; false (and one more dropped()) when the queue is full. Never blocks on I/O.
  bool Record(EventSpec spec);
  // Waits until every event queued before the call has been posted or has failed (for tests and
  // orderly shutdown).
  void Flush();

  uint64_t posted() const;   // created on the API server
  uint64_t failed() const;   // the API server refused or could not be reached
  uint64_t dropped() const;  // never sent: queue full, or still queued at destruction

 private:
  void Run();

  Client& client_;
  const EventRecorderOptions opts_;
  mutable Mutex mu_;
  CondVar cv_;       // work queued or stopping
  CondVar idle_cv_;  // the queue drained and nothing is in flight
  std::deque<EventSpec> queue_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;  // the thread waits for the next event (not lingering)
  uint64_t flushes_ ABSL_GUARDED_BY(mu_) = 0;  // Flush() calls so far: one cuts a linger short
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace hami::k8s
