#include "webhook/usage_reload.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <fstream>

namespace hami::webhook {

namespace {

// What says the file changed; all unset when it cannot be stat'ed.
UsageRecommendationsFile::Stamp StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_dev)};
}

}  // namespace

StatusOr<UsageRecommendations> ReadUsageRecommendations(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return NotFound("cannot read ", path);
  std::string text(kMaxRecommendationsBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return NotFound("cannot read ", path);
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseUsageRecommendations(text);  // refuses more than kMaxRecommendationsBytes
}

StatusOr<std::unique_ptr<UsageRecommendationsFile>> UsageRecommendationsFile::Open(
    std::string path) {
  const Stamp stamp = StampOf(path);
  HAMI_ASSIGN_OR_RETURN(UsageRecommendations recs, ReadUsageRecommendations(path));
  std::unique_ptr<UsageRecommendationsFile> f(new UsageRecommendationsFile(
      std::move(path), stamp, std::make_shared<const UsageRecommendations>(std::move(recs))));
  MutexLock l(f->mu_);
  f->stats_.loads = 1;
  f->stats_.workloads = static_cast<int64_t>(f->current_->size());
  return f;
}

std::shared_ptr<const UsageRecommendations> UsageRecommendationsFile::Current() const {
  MutexLock l(mu_);
  return current_;
}

bool UsageRecommendationsFile::CheckNow() {
  const Stamp stamp = StampOf(path_);
  {
    MutexLock l(mu_);
    if (stamp == stamp_) return false;
  }
  StatusOr<UsageRecommendations> recs =
      stamp == Stamp{} ? StatusOr<UsageRecommendations>(NotFound("cannot read ", path_))
                       : ReadUsageRecommendations(path_);
  MutexLock l(mu_);
  stamp_ = stamp;  // an error is logged once per change of the file
  if (!recs.ok()) {
    ++stats_.errors;
    spdlog::error(
        "hami scheduler: --usage-recommendations {} not reloaded, the previous {} "
        "workloads stay: {}",
        path_, current_->size(), std::string(recs.status().message()));
    return false;
  }
  current_ = std::make_shared<const UsageRecommendations>(*std::move(recs));
  ++stats_.loads;
  stats_.workloads = static_cast<int64_t>(current_->size());
  spdlog::info("hami scheduler: {} usage recommendations reloaded from {}", current_->size(),
               path_);
  return true;
}

void UsageRecommendationsFile::Start(std::chrono::milliseconds interval) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, interval] {
    MutexLock l(stop_mu_);
    while (!stopping_) {
      stop_cv_.WaitFor(stop_mu_, interval);
      if (stopping_) break;
      l.Unlock();
      CheckNow();
      l.Lock();
    }
  });
}

void UsageRecommendationsFile::Stop() {
  {
    MutexLock l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

UsageRecommendationsFile::Stats UsageRecommendationsFile::stats() const {
  MutexLock l(mu_);
  return stats_;
}

std::string UsageRecommendationsFile::RenderMetrics() const {
  const Stats s = stats();
  return StrCat(
      "# HELP hami_scheduler_usage_recommendations Workloads in the usage recommendations the "
      "webhook applies (--usage-recommendations).\n"
      "# TYPE hami_scheduler_usage_recommendations gauge\n"
      "hami_scheduler_usage_recommendations ",
      s.workloads,
      "\n# HELP hami_scheduler_usage_recommendations_loads_total Good reads of the "
      "--usage-recommendations file, the first included.\n"
      "# TYPE hami_scheduler_usage_recommendations_loads_total counter\n"
      "hami_scheduler_usage_recommendations_loads_total ",
      s.loads,
      "\n# HELP hami_scheduler_usage_recommendations_reload_errors_total Changes of the "
      "--usage-recommendations file that did not load (the previous set stays).\n"
      "# TYPE hami_scheduler_usage_recommendations_reload_errors_total counter\n"
      "hami_scheduler_usage_recommendations_reload_errors_total ",
      s.errors, "\n");
}

}  // namespace hami::webhook
