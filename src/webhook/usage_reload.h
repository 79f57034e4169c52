#pragma once
// `hami scheduler --usage-recommendations FILE` (docs/utilization.md, "Applying recommendations at
// admission"): the recommendations the webhook applies, re-read when the file changes (a ConfigMap
// update, a new `hami recommend` output copied in), without a restart.
//  - Change: the file's stamp (mtime, size and inode, so that kubelet's rename-over of a mounted
//    ConfigMap counts) differs from the one last read. Checked every `interval` by a thread.
//  - Bounded: at most kMaxRecommendationsBytes are read; a larger file is an error.
//  - An error (the file gone or unreadable, too large, not the JSON of `hami recommend`) keeps the
//    previous good set: it is logged once per change of the file and counted (stats, /metrics);
//    the next change that parses replaces the set.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "webhook/usage_apply.h"

namespace hami::webhook {

// The file read whole, at most kMaxRecommendationsBytes (more: INVALID_ARGUMENT), and parsed.
StatusOr<UsageRecommendations> ReadUsageRecommendations(const std::string& path);

class UsageRecommendationsFile {
 public:
  // Reads the file once: an error here is the caller's to report (the scheduler does not start).
  static StatusOr<std::unique_ptr<UsageRecommendationsFile>> Open(std::string path);
  ~UsageRecommendationsFile() { Stop(); }
  UsageRecommendationsFile(const UsageRecommendationsFile&) = delete;
  UsageRecommendationsFile& operator=(const UsageRecommendationsFile&) = delete;

  // The last good set (never null). Thread-safe; the set a caller holds stays valid.
  std::shared_ptr<const UsageRecommendations> Current() const;
  // Re-reads the file when its stamp changed since the last read (good or not). True when a new
  // set replaced the current one.
  bool CheckNow();
  // A thread calling CheckNow every `interval` until Stop() (or destruction). Once.
  void Start(std::chrono::milliseconds interval);
  void Stop();

  struct Stats {
    int64_t loads = 0;   // good reads, the first included
    int64_t errors = 0;  // reads that kept the previous set
    int64_t workloads = 0;
  };
  Stats stats() const;
  // Prometheus text: hami_scheduler_usage_recommendations (workloads in the set),
  // ..._loads_total and ..._reload_errors_total.
  std::string RenderMetrics() const;

  // mtime, size, inode and device of the file (all unset: it cannot be stat'ed).
  struct Stamp {
    int64_t mtime_ns = -1, size = -1;
    uint64_t ino = 0, dev = 0;
    bool operator==(const Stamp&) const = default;
  };

 private:
  UsageRecommendationsFile(std::string path, Stamp stamp,
                           std::shared_ptr<const UsageRecommendations> first)
      : path_(std::move(path)), stamp_(stamp), current_(std::move(first)) {}
  const std::string path_;
  mutable Mutex mu_;
  Stamp stamp_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const UsageRecommendations> current_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace hami::webhook
