#include "extender/decision_writer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace hami::extender {

DecisionWriter::DecisionWriter(Send send, DecisionWriterOptions opts)
    : send_(std::move(send)), opts_(opts) {
  for (int i = 0; i < std::max(opts_.threads, 1); ++i)
    threads_.emplace_back([this] {
      // Best effort: a thread that cannot be reniced still writes.
      if (opts_.nice > 0)
        (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), opts_.nice);
      Run();
    });
}

DecisionWriter::~DecisionWriter() {
  {
    MutexLock l(mu_);
    stop_ = true;
    for (auto& [uid, e] : entries_) e.queued.reset();
  }
  work_cv_.NotifyAll();
  done_cv_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void DecisionWriter::Submit(DecisionWrite write) {
  {
    MutexLock l(mu_);
    if (stop_) return;
    PruneFailedLocked(std::chrono::steady_clock::now());
    const std::string uid = write.uid;
    Entry& e = entries_[uid];
    e.cancelled = false;
    e.failed.reset();  // a newer decision: the failed one is void
    e.error = OkStatus();
    const bool was_queued = e.queued.has_value();
    e.queued = std::move(write);
    // Replacing a queued write keeps its place; a write in flight re-queues the pod when it ends.
    if (was_queued || e.in_flight) return;
    ready_.push_back(uid);
  }
  work_cv_.NotifyOne();
}

void DecisionWriter::Run() {
  MutexLock l(mu_);
  while (true) {
    work_cv_.Wait(mu_,
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !ready_.empty(); });
    if (stop_) return;
    const std::string uid = std::move(ready_.front());
    ready_.pop_front();
    auto it = entries_.find(uid);
    if (it == entries_.end() || !it->second.queued || it->second.in_flight) continue;  // stale
    DecisionWrite w = std::move(*it->second.queued);
    it->second.queued.reset();
    it->second.in_flight = true;
    l.Unlock();
    Status s = send_(w);
    l.Lock();
    it = entries_.find(uid);  // Cancel keeps an entry in flight, so it is still there
    Entry& e = it->second;
    e.in_flight = false;
    (s.ok() ? counts_.sent : counts_.failed) += 1;
    if (e.queued) {
      ready_.push_back(uid);  // a newer decision came meanwhile: it goes next
      work_cv_.NotifyOne();
    } else if (!s.ok() && !e.cancelled && !stop_) {
      e.failed = std::move(w);
      e.error = std::move(s);
      e.failed_at = std::chrono::steady_clock::now();
      failures_.emplace_back(e.failed_at, uid);
    } else {
      entries_.erase(it);
    }
    done_cv_.NotifyAll();
  }
}

DecisionWriter::Outcome DecisionWriter::Await(const std::string& uid,
                                              std::chrono::milliseconds timeout) {
  MutexLock l(mu_);
  const bool done = done_cv_.WaitFor(mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = entries_.find(uid);
    return stop_ || it == entries_.end() || !Busy(it->second);
  });
  Outcome out;
  auto it = entries_.find(uid);
  if (it == entries_.end()) return out;
  if (!done || Busy(it->second)) {
    out.kind = Outcome::kPending;
    return out;
  }
  out.kind = Outcome::kFailed;
  out.error = std::move(it->second.error);
  out.write = std::move(it->second.failed);
  entries_.erase(it);
  return out;
}

void DecisionWriter::Cancel(const std::string& uid) {
  MutexLock l(mu_);
  auto it = entries_.find(uid);
  if (it == entries_.end()) return;
  if (it->second.in_flight) {
    it->second.queued.reset();
    it->second.cancelled = true;
    return;
  }
  entries_.erase(it);
  done_cv_.NotifyAll();
}

void DecisionWriter::Flush() {
  MutexLock l(mu_);
  done_cv_.Wait(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [uid, e] : entries_)
      if (Busy(e)) return stop_;
    return true;
  });
}

void DecisionWriter::PruneFailedLocked(std::chrono::steady_clock::time_point now) {
  while (!failures_.empty() && now - failures_.front().first > opts_.keep_failed) {
    auto it = entries_.find(failures_.front().second);
    if (it != entries_.end() && !Busy(it->second) && it->second.failed &&
        it->second.failed_at == failures_.front().first)
      entries_.erase(it);
    failures_.pop_front();
  }
}

DecisionWriter::Counts DecisionWriter::counts() const {
  MutexLock l(mu_);
  return counts_;
}

}  // namespace hami::extender
