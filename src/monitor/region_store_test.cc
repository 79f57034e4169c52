#include "monitor/region_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "monitor/testing/region_writer.h"

namespace hami::monitor {
namespace {

using testing::FakeContainerProcess;
using testing::TempDir;
namespace fs = std::filesystem;

TEST(ParseContainerDir, Table) {
  struct Case {
    std::string dir;
    bool ok;
    std::string uid, container;
  };
  const Case cases[] = {
      {"8f0e2f4c-1f7e-4d55-9f3a-0c1d2e3f4a5b_main", true, "8f0e2f4c-1f7e-4d55-9f3a-0c1d2e3f4a5b",
       "main"},
      {"uid_side_car", true, "uid", "side_car"},
      {"uid_c.1", true, "uid", "c.1"},
      {"nounderscore", false, "", ""},
      {"_main", false, "", ""},
      {"uid_", false, "", ""},
      {"uid_ma in", false, "", ""},
      {"uid_../x", false, "", ""},
  };
  for (const Case& c : cases) {
    std::string uid, ctr;
    EXPECT_EQ(ParseContainerDir(c.dir, &uid, &ctr), c.ok) << c.dir;
    if (c.ok) {
      EXPECT_EQ(uid, c.uid) << c.dir;
      EXPECT_EQ(ctr, c.container) << c.dir;
    }
  }
}

TEST(RegionStore, ScanMapsOneRegionPerContainerDirectory) {
  TempDir root;
  FakeClock clock;
  auto a = FakeContainerProcess::Attach(root.path(), "uid-a", "main");
  auto b = FakeContainerProcess::Attach(root.path(), "uid-b", "side");
  ASSERT_TRUE(a.ok() && b.ok());
  fs::create_directories(root.path() + "/uid-c_empty");  // no process started yet
  std::ofstream(root.path() + "/uid-c_empty/notes.txt") << "x";
  fs::create_directories(root.path() + "/not-a-container");
  fs::create_directories(root.path() + "/uid-d_bad");
  std::ofstream(root.path() + "/uid-d_bad/x.cache") << "garbage";
  std::ofstream(root.path() + "/stray.cache") << "x";

  RegionStore store({root.path(), 300, 16}, clock);
  ScanStats s = store.Rescan();
  EXPECT_EQ(s.regions, 2);
  EXPECT_EQ(s.invalid, 1);
  EXPECT_EQ(s.skipped, 2);  // not-a-container, stray.cache
  auto regions = store.Regions();
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0].dir, "uid-a_main");
  EXPECT_EQ(regions[0].pod_uid, "uid-a");
  EXPECT_EQ(regions[0].container, "main");
  EXPECT_EQ(regions[0].region->path(), (*a)->path());
  EXPECT_EQ(regions[1].container, "side");

  // A rescan keeps the same mapping; a replaced file gets a new one; a vanished one is forgotten.
  auto first = regions[0].region;
  store.Rescan();
  EXPECT_EQ(store.Regions()[0].region, first);
  std::string path = (*a)->path();
  a->reset();
  fs::remove(path);
  auto a2 = FakeContainerProcess::Attach(root.path(), "uid-a", "main");
  ASSERT_TRUE(a2.ok());
  store.Rescan();
  ASSERT_EQ(store.Regions().size(), 2u);
  EXPECT_NE(store.Regions()[0].region, first);
  b->reset();
  fs::remove_all(root.path() + "/uid-b_side");
  EXPECT_EQ(store.Rescan().regions, 1);
}

TEST(RegionStore, ACrowdedDirectoryCostsTheScanABoundedRead) {
  TempDir root;
  FakeClock clock;
  auto a = FakeContainerProcess::Attach(root.path(), "uid-a", "main");
  ASSERT_TRUE(a.ok());
  fs::create_directories(root.path() + "/uid-b_c");
  for (int i = 0; i < 40; ++i) std::ofstream(root.path() + "/uid-b_c/junk" + std::to_string(i));
  RegionStore store({root.path(), 300, 16, /*max_entries_per_dir=*/32}, clock);
  ScanStats s = store.Rescan();
  EXPECT_EQ(s.crowded, 1);
  EXPECT_EQ(s.regions, 1);
  ASSERT_EQ(store.Regions().size(), 1u);
  EXPECT_EQ(store.Regions()[0].pod_uid, "uid-a");
}

TEST(RegionStore, MissingRootIsAnEmptyNode) {
  FakeClock clock;
  RegionStore store({"/nonexistent/hami/containers", 300, 16}, clock);
  ScanStats s = store.Rescan();
  EXPECT_EQ(s.regions, 0);
  EXPECT_TRUE(store.Regions().empty());
}

TEST(RegionStore, NewestValidCacheFileWins) {
  TempDir root;
  FakeClock clock;
  auto old_file = FakeContainerProcess::Attach(root.path(), "uid", "main", 0, 1, "old.cache");
  auto new_file = FakeContainerProcess::Attach(root.path(), "uid", "main", 0, 1, "new.cache");
  ASSERT_TRUE(old_file.ok() && new_file.ok());
  struct timespec times[2] = {{0, UTIME_OMIT}, {1000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (*old_file)->path().c_str(), times, 0), 0);
  RegionStore store({root.path(), 300, 16}, clock);
  store.Rescan();
  ASSERT_EQ(store.Regions().size(), 1u);
  EXPECT_EQ(store.Regions()[0].region->path(), (*new_file)->path());
}

// A directory unchanged since it was listed (same inode and mtime, older than a second) is not read
// again: a file added behind the mtime's back is not seen (the test puts the mtime back); once the
// directory changes it is listed again; a directory changed less than a second before its listing
// is always read again.
TEST(RegionStore, UnchangedDirectoryListingIsReused) {
  auto set_mtime = [](const std::string& path, time_t sec) {
    struct timespec times[2] = {{0, UTIME_OMIT}, {sec, 0}};
    return utimensat(AT_FDCWD, path.c_str(), times, 0);
  };
  const time_t now = time(nullptr);
  struct Case {
    const char* name;
    time_t dir_mtime;  // of the directory when listed and after b.cache was added behind its back
    bool reused;
  };
  const Case cases[] = {
      {"directory unchanged for 10 s: listing reused", now - 10, true},
      {"directory changed in this second: read again", now, false},
  };
  for (const Case& c : cases) {
    TempDir root;
    FakeClock clock;
    const std::string dir = root.path() + "/uid_main";
    auto a = FakeContainerProcess::Attach(root.path(), "uid", "main", 0, 1, "a.cache");
    ASSERT_TRUE(a.ok());
    ASSERT_EQ(set_mtime(dir, c.dir_mtime), 0);
    RegionStore store({root.path(), 300, 16}, clock);
    store.Rescan();
    ASSERT_EQ(store.Regions().size(), 1u) << c.name;
    // b.cache is newer and would win if the directory were read; the directory's mtime is put back.
    auto b = FakeContainerProcess::Attach(root.path(), "uid", "main", 0, 1, "b.cache");
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(set_mtime((*a)->path(), 1000), 0);
    ASSERT_EQ(set_mtime(dir, c.dir_mtime), 0);
    store.Rescan();
    ASSERT_EQ(store.Regions().size(), 1u) << c.name;
    EXPECT_EQ(store.Regions()[0].region->path(), c.reused ? (*a)->path() : (*b)->path()) << c.name;
    // Any change of the directory's mtime: read again, the newer file wins.
    ASSERT_EQ(set_mtime(dir, c.dir_mtime - 5), 0);
    store.Rescan();
    EXPECT_EQ(store.Regions()[0].region->path(), (*b)->path()) << c.name;
  }
}

TEST(RegionStore, CleanStaleTable) {
  // The directory's mtime is pinned to kT; the clock decides how old it looks.
  constexpr int64_t kT = 1'700'000'000;
  struct Case {
    const char* name;
    bool pod_known;
    bool synced;
    int64_t age_s;
    bool deleted;
  };
  const Case cases[] = {
      {"pod gone, old", false, true, 301, true},
      {"pod gone, exactly the interval", false, true, 300, true},
      {"pod gone, recent (informer lag)", false, true, 299, false},
      {"pod known, old", true, true, 10000, false},
      {"directory not synced", false, false, 10000, false},
  };
  for (const Case& c : cases) {
    TempDir root;
    {
      auto p = FakeContainerProcess::Attach(root.path(), "uid", "main");
      ASSERT_TRUE(p.ok());
    }
    struct timespec times[2] = {{kT, 0}, {kT, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (root.path() + "/uid_main").c_str(), times, 0), 0);
    FakeClock clock(kT + c.age_s);
    StaticPodDirectory pods(c.synced);
    if (c.pod_known) pods.Set("uid", {"ns", "pod"});
    RegionStore store({root.path(), 300, 16}, clock);
    store.Rescan();
    std::vector<std::string> removed = store.CleanStale(pods);
    EXPECT_EQ(fs::exists(root.path() + "/uid_main"), !c.deleted) << c.name;
    EXPECT_EQ(removed.size(), c.deleted ? 1u : 0u) << c.name;
    EXPECT_EQ(store.Regions().size(), c.deleted ? 0u : 1u) << c.name;
  }
}

}  // namespace
}  // namespace hami::monitor
