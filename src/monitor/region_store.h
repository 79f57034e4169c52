#pragma once
// The regions of one node: <root>/<podUID>_<containerName>/<file>.cache, one directory per
// container (mounted into the container as /usr/local/vgpu by the device plugin). Keeps each region
// mapped across scrapes (re-mapped when the file is replaced) and deletes the directories of pods
// that are gone.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "monitor/pod_directory.h"
#include "monitor/region_reader.h"

namespace hami::monitor {

struct ContainerRegion {
  std::string dir;  // "<podUID>_<containerName>"
  std::string pod_uid;
  std::string container;
  std::shared_ptr<MappedRegion> region;
};

// Splits "<podUID>_<containerName>". Pod UIDs contain no '_' and container names are DNS labels, so
// the first '_' separates them. Returns false for names that are not of this form.
bool ParseContainerDir(const std::string& dir, std::string* pod_uid, std::string* container);

struct RegionStoreOptions {
  std::string root = "/usr/local/vgpu/containers";
  // A directory whose pod is gone is deleted once it has not changed for this long.
  int64_t stale_after_seconds = 300;
  // Files considered per directory (a container can create files in its own directory).
  int max_files_per_dir = 16;
  // Entries read per container directory: a container that fills its directory costs the scan this
  // many names, not all of them (its own region may then be missed: only its series suffer).
  int max_entries_per_dir = 256;
};

struct ScanStats {
  int regions = 0;  // mapped and valid
  int invalid = 0;  // directories with .cache files none of which could be used
  int skipped = 0;  // entries of the root that are not container directories
  int crowded = 0;  // container directories with more than max_entries_per_dir entries
};

class RegionStore {
 public:
  RegionStore(RegionStoreOptions options, const Clock& clock);

  // Re-reads the root: maps new or replaced region files, forgets vanished ones. Per directory the
  // newest valid *.cache file is used. Problems with single files are logged (once per file) and
  // counted, never fatal; a missing root is an empty node.
  ScanStats Rescan();
  // The regions of the last Rescan, sorted by directory name.
  std::vector<ContainerRegion> Regions() const;
  ScanStats last_stats() const;

  // Deletes the directories whose pod is gone from a synced `pods` and whose mtime is older than
  // stale_after_seconds. Returns the deleted directory names.
  std::vector<std::string> CleanStale(const PodDirectory& pods);

  const RegionStoreOptions& options() const { return options_; }

 private:
  RegionStoreOptions options_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::map<std::string, ContainerRegion> regions_ ABSL_GUARDED_BY(mu_);  // by dir
  // file -> last error logged
  std::map<std::string, std::string> reported_ ABSL_GUARDED_BY(mu_);
  // Per directory whose listing found exactly one *.cache file: the directory's identity and mtime
  // then, and that file. While the directory's inode and mtime are unchanged, no entry was added,
  // removed or renamed, so the next scan reuses the listing and only checks the file (two lstat
  // calls per container instead of a directory read). Kept only when the directory's mtime was
  // more than a second older than the listing, so that a change within the same timestamp tick
  // cannot hide.
  struct Listing {
    uint64_t dir_inode = 0;
    int64_t dir_mtime_ns = 0;
    std::string file;
  };
  std::map<std::string, Listing> listings_ ABSL_GUARDED_BY(mu_);
  ScanStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hami::monitor
