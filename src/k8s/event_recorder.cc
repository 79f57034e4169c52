#include "k8s/event_recorder.h"

#include <sys/resource.h>
#include <unistd.h>

#include <optional>
#include <utility>

#include "common/log.h"

namespace hami::k8s {

EventRecorder::EventRecorder(Client& client, EventRecorderOptions opts)
    : client_(client), opts_(opts) {
  thread_ = std::thread([this] {
    // Best effort: a thread that cannot be reniced still posts.
    if (opts_.nice > 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), opts_.nice);
    std::optional<BackgroundRequests> background;
    if (opts_.background) background.emplace();
    Run();
  });
}

EventRecorder::~EventRecorder() {
  {
    MutexLock l(mu_);
    stop_ = true;
    dropped_ += queue_.size();
    queue_.clear();
  }
  cv_.NotifyAll();
  thread_.join();
}

bool EventRecorder::Record(EventSpec spec) {
  {
    MutexLock l(mu_);
    if (stop_ || queue_.size() >= opts_.capacity) {
      ++dropped_;
      return false;
    }
    queue_.push_back(std::move(spec));
    if (!idle_) return true;  // the thread is posting or lingering and will look again
  }
  cv_.NotifyOne();
  return true;
}

void EventRecorder::Flush() {
  MutexLock l(mu_);
  ++flushes_;
  cv_.NotifyAll();  // cuts a linger short
  idle_cv_.Wait(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (queue_.empty() && !in_flight_);
  });
}

uint64_t EventRecorder::posted() const {
  MutexLock l(mu_);
  return posted_;
}
uint64_t EventRecorder::failed() const {
  MutexLock l(mu_);
  return failed_;
}
uint64_t EventRecorder::dropped() const {
  MutexLock l(mu_);
  return dropped_;
}

void EventRecorder::Run() {
  MutexLock l(mu_);
  while (true) {
    if (queue_.empty()) {
      idle_cv_.NotifyAll();
      // Linger first (a Flush called meanwhile cuts it short), then wait for the next event.
      const uint64_t flushes = flushes_;
      if (opts_.linger.count() > 0 && !stop_)
        cv_.WaitFor(mu_, opts_.linger, [this, flushes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || flushes_ != flushes;
        });
      idle_ = true;
      cv_.Wait(mu_,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); });
      idle_ = false;
    }
    if (stop_) break;
    EventSpec spec = std::move(queue_.front());
    queue_.pop_front();
    in_flight_ = true;
    l.Unlock();
    Status s = client_.CreateEvent(spec);
    if (!s.ok()) SPDLOG_DEBUG("event {} not recorded: {}", spec.reason, std::string(s.message()));
    l.Lock();
    in_flight_ = false;
    (s.ok() ? posted_ : failed_) += 1;
  }
  idle_cv_.NotifyAll();
}

}  // namespace hami::k8s
