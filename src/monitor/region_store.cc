#include "monitor/region_store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "common/log.h"

namespace hami::monitor {
namespace {

struct CacheFile {
  std::string path;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Entries of `dir` (names only, without "." and ".."), at most `max` of them (*more set when there
// are more); empty when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir, size_t max = SIZE_MAX,
                                 bool* more = nullptr) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): glibc's readdir races only on a shared DIR*
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (names.size() == max) {
      if (more) *more = true;
      break;
    }
    names.push_back(std::move(n));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

bool ParseContainerDir(const std::string& dir, std::string* pod_uid, std::string* container) {
  size_t us = dir.find('_');
  if (us == std::string::npos || us == 0 || us + 1 >= dir.size()) return false;
  for (char c : dir) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  *pod_uid = dir.substr(0, us);
  *container = dir.substr(us + 1);
  return true;
}

RegionStore::RegionStore(RegionStoreOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

ScanStats RegionStore::Rescan() {
  MutexLock l(mu_);
  ScanStats stats;
  std::map<std::string, ContainerRegion> next;
  std::map<std::string, Listing> next_listings;
  struct timespec now_ts {};
  clock_gettime(CLOCK_REALTIME, &now_ts);  // the file system's clock, not the injected one
  const int64_t listed_ns = static_cast<int64_t>(now_ts.tv_sec) * 1'000'000'000 + now_ts.tv_nsec;
  for (const std::string& name : ListDir(options_.root)) {
    std::string pod_uid, container;
    std::string dir_path = options_.root + "/" + name;
    struct stat st;
    if (!ParseContainerDir(name, &pod_uid, &container) || lstat(dir_path.c_str(), &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
      ++stats.skipped;
      continue;
    }
    auto listing = listings_.find(name);
    auto kept = regions_.find(name);
    if (listing != listings_.end() && kept != regions_.end() &&
        listing->second.dir_inode == static_cast<uint64_t>(st.st_ino) &&
        listing->second.dir_mtime_ns == MtimeNs(st) &&
        kept->second.region->path() == listing->second.file) {
      struct stat fst;
      if (lstat(listing->second.file.c_str(), &fst) == 0 && S_ISREG(fst.st_mode) &&
          static_cast<uint64_t>(fst.st_ino) == kept->second.region->inode()) {
        next[name] = kept->second;
        next_listings[name] = listing->second;
        ++stats.regions;
        continue;
      }
    }
    std::vector<CacheFile> files;
    bool crowded = false;
    const std::vector<std::string> entries =
        ListDir(dir_path, static_cast<size_t>(std::max(options_.max_entries_per_dir, 1)), &crowded);
    if (crowded) {
      ++stats.crowded;
      if (reported_[dir_path] != "crowded") {
        spdlog::warn("monitor: region directory {} has more than {} entries; reading only those",
                     dir_path, options_.max_entries_per_dir);
        reported_[dir_path] = "crowded";
      }
    }
    for (const std::string& f : entries) {
      if (!EndsWith(f, ".cache")) continue;
      std::string path = dir_path;
      path.append("/").append(f);
      struct stat fst;
      if (lstat(path.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
      files.push_back({path, MtimeNs(fst), static_cast<uint64_t>(fst.st_ino)});
      if (static_cast<int>(files.size()) >= options_.max_files_per_dir) break;
    }
    if (files.empty()) continue;  // no process of the container has started libvgpu yet
    std::stable_sort(files.begin(), files.end(), [](const CacheFile& a, const CacheFile& b) {
      return a.mtime_ns > b.mtime_ns;
    });
    auto old = regions_.find(name);
    std::shared_ptr<MappedRegion> chosen;
    for (const CacheFile& f : files) {
      if (old != regions_.end() && old->second.region->path() == f.path &&
          old->second.region->inode() == f.inode) {
        chosen = old->second.region;
        break;
      }
      auto opened = MappedRegion::Open(f.path);
      if (opened.ok()) {
        chosen = std::move(*opened);
        reported_.erase(f.path);
        break;
      }
      std::string msg(opened.status().message());
      if (reported_[f.path] != msg) {
        // Not initialised yet is the normal state of a region being created: debug only.
        if (absl::IsFailedPrecondition(opened.status())) {
          spdlog::debug("monitor: {}", msg);
        } else {
          spdlog::warn("monitor: skipping region: {}", msg);
        }
        reported_[f.path] = msg;
      }
    }
    if (!chosen) {
      ++stats.invalid;
      continue;
    }
    if (files.size() == 1 && !crowded && chosen->path() == files[0].path &&
        MtimeNs(st) < listed_ns - 1'000'000'000) {
      next_listings[name] = Listing{static_cast<uint64_t>(st.st_ino), MtimeNs(st), files[0].path};
    }
    next[name] = ContainerRegion{name, pod_uid, container, std::move(chosen)};
    ++stats.regions;
  }
  regions_ = std::move(next);
  listings_ = std::move(next_listings);
  stats_ = stats;
  return stats;
}

std::vector<ContainerRegion> RegionStore::Regions() const {
  MutexLock l(mu_);
  std::vector<ContainerRegion> out;
  out.reserve(regions_.size());
  for (const auto& [_, r] : regions_) out.push_back(r);
  return out;
}

ScanStats RegionStore::last_stats() const {
  MutexLock l(mu_);
  return stats_;
}

std::vector<std::string> RegionStore::CleanStale(const PodDirectory& pods) {
  std::vector<std::string> removed;
  if (!pods.Synced()) return removed;
  MutexLock l(mu_);
  const int64_t now_s = clock_.UnixSeconds();
  for (const std::string& name : ListDir(options_.root)) {
    std::string pod_uid, container;
    if (!ParseContainerDir(name, &pod_uid, &container)) continue;
    if (pods.Find(pod_uid).has_value()) continue;
    std::string dir_path = options_.root + "/" + name;
    struct stat st;
    if (lstat(dir_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (now_s - static_cast<int64_t>(st.st_mtim.tv_sec) < options_.stale_after_seconds) continue;
    regions_.erase(name);  // unmapped when the last scrape holding it finishes
    std::error_code ec;
    std::filesystem::remove_all(dir_path, ec);
    if (ec) {
      spdlog::warn("monitor: cannot delete stale region directory {}: {}", dir_path, ec.message());
      continue;
    }
    spdlog::info("monitor: deleted region directory {} (pod {} is gone)", dir_path, pod_uid);
    removed.push_back(name);
  }
  return removed;
}

}  // namespace hami::monitor
