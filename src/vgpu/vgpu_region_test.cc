// Shared region: limits, cross-process atomicity, crash recovery, slot reuse, bad files.
// Separate attaches in one process use separate open file descriptions, so they behave like
// separate processes for the OFD liveness locks; fork() is used where real concurrency or SIGKILL
// is the point.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "vgpu/vgpu_core.h"

namespace {

class RegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu_region_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/region.cache";
    vgpu_log_level = 0;
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  int Attach(vgpu_region_ctx* c) {
    vgpu_region_params p{VGPU_POLICY_DEFAULT, 1, nullptr};
    return vgpu_region_attach(c, path_.c_str(), &p);
  }
  // Attaches and registers device "GPU-a" (entry 0) with `limit` bytes.
  void AttachOneDevice(vgpu_region_ctx* c, uint64_t limit) {
    ASSERT_EQ(Attach(c), 0);
    ASSERT_EQ(vgpu_region_device(c, "GPU-a", limit, 100, 0, 0, 10), 0);
  }
  std::string dir_, path_;
};

TEST_F(RegionTest, OomExactlyAtTheLimitAndRelease) {
  vgpu_region_ctx c;
  ASSERT_EQ(Attach(&c), 0);
  int d = vgpu_region_device(&c, "GPU-a", 1000, 100, 4000, 0, 10);
  ASSERT_EQ(d, 0);
  struct Step {
    int reserve;  // 1 reserve, 0 release
    uint64_t bytes;
    int want_rc;
    uint64_t want_used;
  } steps[] = {{1, 600, 0, 600}, {1, 400, 0, 1000}, {1, 1, 1, 1000}, {0, 1, 0, 999},
               {1, 1, 0, 1000},  {0, 5000, 0, 0},   {1, 1001, 1, 0}, {1, UINT64_MAX, 1, 0}};
  for (const Step& s : steps) {
    if (s.reserve) {
      EXPECT_EQ(vgpu_region_reserve(&c, d, s.bytes, 0), s.want_rc) << s.bytes;
    } else {
      vgpu_region_release(&c, d, s.bytes);  // more than held: clamps, never underflows
    }
    EXPECT_EQ(vgpu_region_used(&c, d), s.want_used);
  }
  EXPECT_EQ(vgpu_region_reserve(&c, d, 5000, /*force=*/1), 0);  // context overhead may exceed
  vgpu_region_detach(&c);
}

// The container's peak usage per device (hdr.peak_mib, the exporter's peak series): the highest
// usage of all its processes together, rounded up to MiB; a release never lowers it, a refused
// reservation does not count, a forced (context) charge does.
TEST_F(RegionTest, PeakIsTheContainersHighestUsage) {
  constexpr uint64_t kMiB = 1ull << 20;
  vgpu_region_ctx a, b;
  ASSERT_EQ(Attach(&a), 0);
  ASSERT_EQ(Attach(&b), 0);
  ASSERT_EQ(vgpu_region_device(&a, "GPU-a", 1000 * kMiB, 100, 4000 * kMiB, 0, 10), 0);
  ASSERT_EQ(vgpu_region_device(&b, "GPU-a", 1000 * kMiB, 100, 4000 * kMiB, 0, 10), 0);
  struct Step {
    vgpu_region_ctx* proc;
    int reserve;  // 1 reserve, 0 release
    uint64_t bytes;
    int force;
    uint32_t want_peak_mib;
  } steps[] = {
      {&a, 1, 100 * kMiB, 0, 100},  {&b, 1, 300 * kMiB, 0, 400},      {&a, 0, 100 * kMiB, 0, 400},
      {&b, 1, 1, 0, 400},           {&a, 1, 2000 * kMiB, 0, 400},     {&a, 1, 700 * kMiB, 0, 400},
      {&a, 1, 800 * kMiB, 1, 1101}, {&b, 0, 300 * kMiB + 1, 0, 1101},
  };
  for (const Step& s : steps) {
    if (s.reserve) {
      vgpu_region_reserve(s.proc, 0, s.bytes, s.force);
    } else {
      vgpu_region_release(s.proc, 0, s.bytes);
    }
    EXPECT_EQ(a.r->hdr.peak_mib[0], s.want_peak_mib) << s.bytes;
  }
  vgpu_region_detach(&b);
  vgpu_region_detach(&a);
}

TEST_F(RegionTest, DevicesAreKeyedByUuidAndFirstLimitWins) {
  vgpu_region_ctx a, b;
  ASSERT_EQ(Attach(&a), 0);
  ASSERT_EQ(Attach(&b), 0);
  EXPECT_NE(a.slot, b.slot);
  EXPECT_EQ(vgpu_region_device(&a, "GPU-x", 100, 30, 0, 0, 20), 0);
  EXPECT_EQ(vgpu_region_device(&a, "GPU-y", 200, 70, 0, 1, 20), 1);
  EXPECT_EQ(vgpu_region_device(&b, "GPU-y", 999, 50, 0, 0, 20),
            1);  // b sees y first, gets y's entry
  EXPECT_EQ(a.r->devices[1].limit_bytes, 200u);
  EXPECT_EQ(a.r->devices[1].sm_limit_pct, 70u);
  EXPECT_EQ(vgpu_region_reserve(&b, 1, 150, 0), 0);
  EXPECT_EQ(vgpu_region_reserve(&a, 1, 51, 0), 1);  // shared across processes
  EXPECT_EQ(vgpu_region_reserve(&a, 0, 100, 0), 0);
  vgpu_region_detach(&b);  // normal exit gives its usage back
  EXPECT_EQ(vgpu_region_used(&a, 1), 0u);
  vgpu_region_detach(&a);
}

TEST_F(RegionTest, FourProcessesNeverExceedTheSharedLimit) {
  vgpu_region_ctx c;
  ASSERT_EQ(Attach(&c), 0);
  const uint64_t kLimit = 1 << 20;
  ASSERT_EQ(vgpu_region_device(&c, "GPU-a", kLimit, 100, 0, 0, 10), 0);
  // Each child counts how often it observed the device total above the limit.
  auto* over = static_cast<int*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  pid_t kids[4];
  for (int k = 0; k < 4; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      vgpu_region_ctx me;
      if (Attach(&me) != 0 || vgpu_region_device(&me, "GPU-a", kLimit, 100, 0, 0, 10) != 0)
        _exit(2);
      std::mt19937_64 rng(k);
      uint64_t held[64] = {};
      for (int i = 0; i < 20000; i++) {
        int j = static_cast<int>(rng() % 64);
        if (held[j]) {
          vgpu_region_release(&me, 0, held[j]);
          held[j] = 0;
        } else {
          uint64_t sz = 1 + rng() % (kLimit / 16);
          if (vgpu_region_reserve(&me, 0, sz, 0) == 0) held[j] = sz;
        }
        if (vgpu_region_used(&me, 0) > kLimit) __atomic_add_fetch(&over[k], 1, __ATOMIC_RELAXED);
      }
      for (uint64_t h : held) vgpu_region_release(&me, 0, h);
      _exit(0);
    }
  }
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  for (int k = 0; k < 4; k++) EXPECT_EQ(over[k], 0) << "child " << k;
  EXPECT_EQ(vgpu_region_used(&c, 0), 0u);
  munmap(over, 4096);
  vgpu_region_detach(&c);
}

// A process killed at each point inside a reservation leaves a usable region and its usage is
// reclaimed.
TEST_F(RegionTest, SigkillMidReservationIsRecovered) {
  for (int point : {1, 2}) {
    vgpu_region_ctx c;
    ASSERT_EQ(Attach(&c), 0);
    ASSERT_EQ(vgpu_region_device(&c, "GPU-a", 1000, 100, 0, 0, 10), 0);
    ASSERT_EQ(vgpu_region_reserve(&c, 0, 100, 0), 0);
    pid_t kid = fork();
    if (kid == 0) {
      vgpu_region_ctx me;
      if (Attach(&me) != 0) _exit(2);
      if (vgpu_region_reserve(&me, 0, 300, 0) != 0)
        _exit(3);  // held by the child, then killed holding more
      vgpu_region_crash_point = point;
      vgpu_region_reserve(&me, 0, 200, 0);
      _exit(4);  // not reached
    }
    int st = 0;
    waitpid(kid, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "point " << point;
    EXPECT_NE(__atomic_load_n(&c.r->hdr.lock, __ATOMIC_ACQUIRE), 0u)
        << "killed while holding the lock";
    // The survivor's next operation takes the lock over, and a sweep reclaims the dead slot.
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 50, 0), 0);
    EXPECT_EQ(vgpu_region_sweep(&c), 1);
    EXPECT_EQ(vgpu_region_used(&c, 0), 150u) << "point " << point;
    EXPECT_GE(c.r->hdr.recoveries, 1u);
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 850, 0), 0);
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 1, 0), 1);
    vgpu_region_detach(&c);
    unlink(path_.c_str());
  }
}

TEST_F(RegionTest, NewProcessReclaimsDeadSlotAndBumpsGeneration) {
  vgpu_region_ctx c;
  ASSERT_EQ(Attach(&c), 0);
  ASSERT_EQ(vgpu_region_device(&c, "GPU-a", 1000, 100, 0, 0, 10), 0);
  pid_t kid = fork();
  if (kid == 0) {
    vgpu_region_ctx me;
    if (Attach(&me) != 0 || vgpu_region_reserve(&me, 0, 700, 0) != 0) _exit(2);
    raise(SIGKILL);
  }
  int st = 0;
  waitpid(kid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(vgpu_region_used(&c, 0), 700u);
  int dead_slot = -1;
  for (int i = 0; i < 4; i++) {
    if (c.r->slots[i].pid == static_cast<uint32_t>(kid)) dead_slot = i;
  }
  ASSERT_GE(dead_slot, 0);
  uint32_t gen = c.r->slots[dead_slot].generation;
  vgpu_region_ctx next;  // registering reclaims (and reuses the lowest free slot)
  ASSERT_EQ(Attach(&next), 0);
  EXPECT_EQ(next.slot, dead_slot);
  EXPECT_EQ(next.r->slots[dead_slot].generation, gen + 1);
  EXPECT_EQ(vgpu_region_used(&c, 0), 0u);
  vgpu_region_detach(&next);
  vgpu_region_detach(&c);
}

TEST_F(RegionTest, BadFilesNeverCrash) {
  {  // garbage: re-initialised
    int fd = open(path_.c_str(), O_RDWR | O_CREAT, 0600);
    std::string junk(5000, '\x5a');
    ASSERT_EQ(write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    close(fd);
    vgpu_region_ctx c;
    EXPECT_EQ(Attach(&c), 0);
    EXPECT_EQ(c.r->hdr.magic, VGPU_REGION_MAGIC);
    vgpu_region_detach(&c);
  }
  {  // another layout version nobody uses: rebuilt in place
    vgpu_region_ctx c;
    ASSERT_EQ(Attach(&c), 0);
    c.r->hdr.version = 99;
    vgpu_region_detach(&c);
    vgpu_region_ctx d;
    EXPECT_EQ(Attach(&d), 0);
    EXPECT_EQ(d.shared, 1);
    EXPECT_EQ(d.r->hdr.version, VGPU_REGION_VERSION);
    vgpu_region_detach(&d);
  }
  {  // another layout version a live process uses: refused (fail closed, see below)
    vgpu_region_ctx c;
    ASSERT_EQ(Attach(&c), 0);
    c.r->hdr.version = 99;
    vgpu_region_ctx d;
    EXPECT_EQ(Attach(&d), -1);
    EXPECT_EQ(d.shared, 0);
    EXPECT_EQ(d.refused, 1);
    ASSERT_EQ(vgpu_region_device(&d, "GPU-a", 10, 100, 0, 0, 1), 0);
    EXPECT_EQ(vgpu_region_reserve(&d, 0, 10, 0), 1);
    vgpu_region_detach(&d);
    c.r->hdr.version = VGPU_REGION_VERSION;
    vgpu_region_detach(&c);
  }
  {  // an older layout version of the same size (version 1: grace_ticks was reserved, zero) that a
     // live process uses: shared, not refused, and left at its version
    vgpu_region_ctx c;
    ASSERT_EQ(Attach(&c), 0);
    c.r->hdr.version = VGPU_REGION_MIN_VERSION;
    vgpu_region_ctx d;
    EXPECT_EQ(Attach(&d), 0);
    EXPECT_EQ(d.shared, 1);
    EXPECT_EQ(d.refused, 0);
    EXPECT_EQ(d.r->hdr.version, VGPU_REGION_MIN_VERSION);
    vgpu_region_detach(&d);
    c.r->hdr.version = VGPU_REGION_VERSION;
    vgpu_region_detach(&c);
  }
  {  // a valid header over a garbage body: rebuilt while nobody uses it
    vgpu_region_ctx c;
    ASSERT_EQ(Attach(&c), 0);
    vgpu_region_detach(&c);
    int fd = open(path_.c_str(), O_RDWR);
    std::string junk(sizeof(vgpu_region) - sizeof(vgpu_region_header), '\x5a');
    ASSERT_EQ(pwrite(fd, junk.data(), junk.size(), sizeof(vgpu_region_header)),
              static_cast<ssize_t>(junk.size()));
    close(fd);
    vgpu_region_ctx d;
    EXPECT_EQ(Attach(&d), 0);
    EXPECT_EQ(d.r->hdr.device_count, 0u);
    ASSERT_EQ(vgpu_region_device(&d, "GPU-a", 10, 100, 0, 0, 1), 0);
    EXPECT_EQ(vgpu_region_reserve(&d, 0, 11, 0), 1);
    vgpu_region_detach(&d);
  }
  {  // unusable path
    vgpu_region_ctx c;
    vgpu_region_params p{VGPU_POLICY_DEFAULT, 1, nullptr};
    EXPECT_EQ(vgpu_region_attach(&c, "/nonexistent-dir/x.cache", &p), -1);
    ASSERT_NE(c.r, nullptr);
    vgpu_region_detach(&c);
  }
}

// The region file is created 0660 whatever the umask (group members of the container share it),
// never world-writable, and a link planted at its path is not followed (private fallback instead).
TEST_F(RegionTest, CreatedWithoutWorldBitsAndNeverThroughALink) {
  const mode_t old = umask(0);
  vgpu_region_ctx c;
  EXPECT_EQ(Attach(&c), 0);
  umask(old);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  vgpu_region_detach(&c);

  const std::string target = dir_ + "/target";
  ASSERT_EQ(rename(path_.c_str(), target.c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  vgpu_region_ctx d;
  EXPECT_EQ(Attach(&d), -1);
  EXPECT_EQ(d.shared, 0);
  vgpu_region_detach(&d);
  unlink(target.c_str());
}

// A forged entry cannot loosen the limit of a process that brings its own: the stricter one holds.
TEST_F(RegionTest, RegionLimitsNeverLoosenAProcesssOwn) {
  vgpu_region_ctx a, b;
  ASSERT_EQ(Attach(&a), 0);
  ASSERT_EQ(vgpu_region_device(&a, "GPU-a", 0, 100, 0, 0, 10), 0);  // first process: unlimited
  ASSERT_EQ(Attach(&b), 0);
  ASSERT_EQ(vgpu_region_device(&b, "GPU-a", 1000, 30, 0, 0, 10), 0);
  EXPECT_EQ(b.limit[0], 1000u);
  EXPECT_EQ(b.sm_pct[0], 30u);
  EXPECT_EQ(vgpu_region_reserve(&b, 0, 1001, 0), 1);
  a.r->devices[0].limit_bytes = 5000;  // edited in the file: not trusted
  EXPECT_EQ(vgpu_region_reserve(&b, 0, 1001, 0), 1);
  EXPECT_EQ(vgpu_region_reserve(&b, 0, 1000, 0), 0);
  vgpu_region_detach(&b);
  vgpu_region_detach(&a);
}

// The file overwritten under a live process: its next operation notices, keeps its usage and limit.
TEST_F(RegionTest, OverwrittenRegionIsDetectedAndTheLimitHolds) {
  for (int pattern : {0x00, 0x5a}) {
    vgpu_region_ctx c;
    AttachOneDevice(&c, 1000);
    ASSERT_EQ(vgpu_region_reserve(&c, 0, 600, 0), 0);
    int fd = open(path_.c_str(), O_RDWR);
    std::string bytes(sizeof(vgpu_region), static_cast<char>(pattern));
    ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    close(fd);
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 600, 0), 1) << "pattern " << pattern;
    EXPECT_EQ(c.shared, 0);
    EXPECT_EQ(vgpu_region_used(&c, 0), 600u);
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 400, 0), 0);
    vgpu_region_release(&c, 0, 1000);
    EXPECT_EQ(vgpu_region_used(&c, 0), 0u);
    vgpu_region_detach(&c);
    unlink(path_.c_str());
  }
}

// A file that cannot be trusted while a live process uses it: a newcomer cannot know how much of
// the limit the others hold, so it refuses allocations (forced context charges still count) instead
// of enforcing the whole limit again on a private region beside them. Each kind of damage.
TEST_F(RegionTest, UntrustedRegionInUseRefusesNewcomers) {
  struct Damage {
    const char* name;
    void (*apply)(vgpu_region*);
  } damages[] = {
      {"another layout version", [](vgpu_region* r) { r->hdr.version = 99; }},
      {"no valid header", [](vgpu_region* r) { r->hdr.magic = 0; }},
      {"garbage body", [](vgpu_region* r) { r->slots[7].state = 0x5a5a5a5a; }},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    vgpu_region_ctx live;
    AttachOneDevice(&live, 1000);
    ASSERT_EQ(vgpu_region_reserve(&live, 0, 600, 0), 0);
    d.apply(live.r);
    vgpu_region_ctx late;
    EXPECT_EQ(Attach(&late), -1);
    EXPECT_EQ(late.shared, 0);
    EXPECT_EQ(late.refused, 1);
    ASSERT_EQ(vgpu_region_device(&late, "GPU-a", 1000, 100, 0, 0, 10), 0);
    EXPECT_EQ(vgpu_region_reserve(&late, 0, 400, 0), 1) << "the whole limit again, privately";
    EXPECT_EQ(vgpu_region_reserve(&late, 0, 300, /*force=*/1), 0);
    vgpu_region_detach(&late);
    vgpu_region_detach(&live);
    // Nobody uses it any more: the next process rebuilds it and shares it.
    vgpu_region_ctx next;
    EXPECT_EQ(Attach(&next), 0);
    EXPECT_EQ(next.refused, 0);
    vgpu_region_detach(&next);
    unlink(path_.c_str());
  }
}

// Locks that anything in the container can hold on the file (every process slot's liveness byte,
// the initialisation byte) refuse allocations rather than hand out a private, whole limit.
TEST_F(RegionTest, HeldLocksRefuseInsteadOfAPrivateLimit) {
  vgpu_region_ctx first;
  AttachOneDevice(&first, 1000);
  ASSERT_EQ(first.slot, 0);
  int fd = open(path_.c_str(), O_RDWR);  // its own open file description: conflicts like a process
  ASSERT_GE(fd, 0);
  struct Lock {
    const char* name;
    off_t start, len;
  } locks[] = {{"every free process slot", static_cast<off_t>(VGPU_REGION_LIVENESS_BASE + 1),
                VGPU_MAX_SLOTS - 1},
               {"initialisation", static_cast<off_t>(VGPU_REGION_INIT_LOCK_BYTE), 1}};
  for (const Lock& l : locks) {
    SCOPED_TRACE(l.name);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = l.start;
    fl.l_len = l.len;
    ASSERT_EQ(fcntl(fd, F_OFD_SETLK, &fl), 0);
    vgpu_region_ctx late;
    EXPECT_EQ(Attach(&late), -1);
    EXPECT_EQ(late.refused, 1);
    ASSERT_EQ(vgpu_region_device(&late, "GPU-a", 1000, 100, 0, 0, 10), 0);
    EXPECT_EQ(vgpu_region_reserve(&late, 0, 2, 0), 1);
    vgpu_region_detach(&late);
    fl.l_type = F_UNLCK;
    ASSERT_EQ(fcntl(fd, F_OFD_SETLK, &fl), 0);
  }
  close(fd);
  vgpu_region_detach(&first);
}

// An unusable path: per-process limits for plain LD_PRELOAD use, refused when the device plugin
// armed the container (it chose the path, so only something inside the container broke it).
TEST_F(RegionTest, UnusablePathRefusesWhenArmed) {
  for (int armed : {0, 1}) {
    SCOPED_TRACE(armed);
    vgpu_region_armed = armed;
    vgpu_region_ctx c;
    vgpu_region_params p{VGPU_POLICY_DEFAULT, 1, nullptr};
    EXPECT_EQ(vgpu_region_attach(&c, (dir_ + "/missing/x.cache").c_str(), &p), -1);
    vgpu_region_armed = 0;
    EXPECT_EQ(c.refused, armed);
    ASSERT_EQ(vgpu_region_device(&c, "GPU-a", 1000, 100, 0, 0, 10), 0);
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 1000, 0), armed ? 1 : 0);
    EXPECT_EQ(vgpu_region_reserve(&c, 0, 2, 0), 1);
    vgpu_region_detach(&c);
  }
}

// Armed, but the directory is not writable for this user and not its own (an image USER the pod
// spec does not name, no region group): the deployment's permissions, so per-process limits as
// without a limits file. A directory of its own that it made unwritable: refused. Needs root (to
// drop to another user in a child).
TEST_F(RegionTest, ArmedPermissionDeniedRefusesOnlyWhenTheUserOwnsTheDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as another user";
  const uid_t kNobody = 65534;
  for (int own : {0, 1}) {
    SCOPED_TRACE(own);
    const std::string sub = dir_ + (own ? "/own" : "/root");
    ASSERT_EQ(mkdir(sub.c_str(), 0555), 0);
    if (own) {
      ASSERT_EQ(chown(sub.c_str(), kNobody, kNobody), 0);
    }
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
    pid_t kid = fork();
    if (kid == 0) {
      if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(10);
      vgpu_region_armed = 1;
      vgpu_region_ctx c;
      vgpu_region_params p{VGPU_POLICY_DEFAULT, 1, nullptr};
      if (vgpu_region_attach(&c, (sub + "/region.cache").c_str(), &p) != -1) _exit(11);
      _exit(c.refused ? 1 : 0);
    }
    int st = 0;
    waitpid(kid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), own) << "exit " << WEXITSTATUS(st);
    rmdir(sub.c_str());
  }
}

// Every device entry taken by other (forged, unlimited) devices: a process whose device has no
// entry must not run it unlimited (it did: vgpu_region_device returned -1 and the device was not
// accounted). It is refused, on a private region that has room for it.
TEST_F(RegionTest, FullDeviceTableWithoutThisDeviceRefuses) {
  vgpu_region_ctx forger;
  ASSERT_EQ(Attach(&forger), 0);
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    const std::string id = "GPU-forged-" + std::to_string(i);
    ASSERT_EQ(vgpu_region_device(&forger, id.c_str(), 0, 100, 0, i, 10), i);
  }
  vgpu_region_ctx c;
  ASSERT_EQ(Attach(&c), 0);
  int e = vgpu_region_device(&c, "GPU-a", 1000, 100, 0, 0, 10);
  ASSERT_GE(e, 0) << "no entry: the device would run unlimited";
  EXPECT_EQ(c.refused, 1);
  EXPECT_EQ(c.shared, 0);
  EXPECT_EQ(vgpu_region_reserve(&c, e, 2, 0), 1);
  EXPECT_EQ(vgpu_region_reserve(&c, e, 300, /*force=*/1), 0);
  vgpu_region_detach(&c);
  vgpu_region_detach(&forger);
}

// Only this process's records changed (its slot's usage and the total zeroed, so that the container
// could allocate its limit again): the rest of the file is valid, so the process restores its slot,
// the total is recomputed, and it keeps sharing; a newcomer sees the restored usage.
TEST_F(RegionTest, ChangedOwnRecordsAreRestoredAndSharingContinues) {
  vgpu_region_ctx a;
  AttachOneDevice(&a, 1000);
  ASSERT_EQ(vgpu_region_reserve(&a, 0, 600, 0), 0);
  a.r->slots[a.slot].used[0] = 0;
  a.r->slots[a.slot].state = VGPU_SLOT_FREE;
  a.r->devices[0].used_bytes = 0;
  EXPECT_EQ(vgpu_region_reserve(&a, 0, 600, 0), 1);
  EXPECT_EQ(a.shared, 1);
  EXPECT_EQ(vgpu_region_used(&a, 0), 600u);
  EXPECT_EQ(a.r->slots[a.slot].state, static_cast<uint32_t>(VGPU_SLOT_ACTIVE));
  vgpu_region_ctx b;
  AttachOneDevice(&b, 1000);
  EXPECT_EQ(vgpu_region_reserve(&b, 0, 401, 0), 1);
  EXPECT_EQ(vgpu_region_reserve(&b, 0, 400, 0), 0);
  vgpu_region_detach(&b);
  vgpu_region_detach(&a);
}

// The whole file overwritten under a live process: it continues privately with its usage and keeps
// its liveness lock, so a newcomer finds the untrusted file in use and is refused (it must not
// rebuild the file and count from zero while the first process still holds 600); once the first
// process is gone the file is rebuilt.
TEST_F(RegionTest, OverwrittenUnderALiveProcessRefusesNewcomersUntilItExits) {
  vgpu_region_ctx a;
  AttachOneDevice(&a, 1000);
  ASSERT_EQ(vgpu_region_reserve(&a, 0, 600, 0), 0);
  int fd = open(path_.c_str(), O_RDWR);
  std::string bytes(sizeof(vgpu_region), '\x5a');
  ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  close(fd);
  EXPECT_EQ(vgpu_region_reserve(&a, 0, 401, 0), 1);
  EXPECT_EQ(a.shared, 0);
  vgpu_region_ctx b;
  EXPECT_EQ(Attach(&b), -1);
  EXPECT_EQ(b.refused, 1);
  vgpu_region_detach(&b);
  vgpu_region_detach(&a);
  vgpu_region_ctx c;
  EXPECT_EQ(Attach(&c), 0);
  EXPECT_EQ(c.refused, 0);
  vgpu_region_detach(&c);
}

// Two processes see the lock holder dead; one of them claims the dead slot (and so its lock word's
// slot bits) and locks before the other's compare-and-swap. The stale compare-and-swap must fail:
// one holder.
vgpu_region_ctx* g_claimer;
const char* g_claim_path;
void ClaimDeadSlotAndLock() {
  vgpu_region_takeover_hook = nullptr;
  vgpu_region_params p{VGPU_POLICY_DEFAULT, 1, nullptr};
  if (vgpu_region_attach(g_claimer, g_claim_path, &p) != 0 || vgpu_region_lock(g_claimer) != 0)
    std::abort();
}

TEST_F(RegionTest, DeadOwnerTakeoverHasOneWinner) {
  vgpu_region_ctx a;
  AttachOneDevice(&a, 1000);
  pid_t kid = fork();
  if (kid == 0) {
    vgpu_region_ctx me;
    if (Attach(&me) != 0) _exit(2);
    vgpu_region_crash_point = 2;  // dies holding the lock
    vgpu_region_reserve(&me, 0, 1, 0);
    _exit(4);
  }
  int st = 0;
  waitpid(kid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));
  ASSERT_NE(__atomic_load_n(&a.r->hdr.lock, __ATOMIC_ACQUIRE), 0u);
  vgpu_region_ctx c;
  g_claimer = &c;
  g_claim_path = path_.c_str();
  vgpu_region_takeover_hook = ClaimDeadSlotAndLock;
  // a sees the owner dead; c claims its slot and locks in between; a must not get the lock too.
  EXPECT_EQ(vgpu_region_reserve(&a, 0, 10, 0), -1) << "two processes held the region lock at once";
  EXPECT_EQ(vgpu_region_takeover_hook, nullptr) << "the race window was not reached";
  EXPECT_EQ(__atomic_load_n(&a.r->hdr.lock, __ATOMIC_ACQUIRE), c.lock_word);
  vgpu_region_unlock(&c);
  EXPECT_EQ(vgpu_region_reserve(&a, 0, 10, 0), 0);
  vgpu_region_detach(&c);
  vgpu_region_detach(&a);
}

// A one-shot broker on `path` that answers the first connection with `reply` (after reading the
// 8-byte request into `request`).
std::thread ServeOnce(const std::string& path, std::string reply, std::string* request) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(fd, 1), 0);
  return std::thread([fd, reply, request] {
    int c = accept(fd, nullptr, nullptr);
    char buf[8];
    size_t got = 0;
    while (c >= 0 && got < sizeof(buf)) {
      ssize_t n = recv(c, buf + got, sizeof(buf) - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    request->assign(buf, got);
    if (c >= 0) {
      (void)send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      close(c);
    }
    close(fd);
  });
}

// The slot's host PID comes from the device plugin's broker when one is named (upstream's protocol
// version 1, big-endian); an answer that is not a valid success, or no broker, falls back to /proc
// (here the same namespace: this process's PID).
TEST_F(RegionTest, HostPidFromTheBrokerElseFromProc) {
  using std::string;
  const string ok_reply =
      string("HPID\x00\x01\x00\x00", 8) + string("\x00\x01\xe2\x40", 4);  // 123456
  struct Case {
    const char* name;
    string reply;  // empty: no broker listening
    uint32_t want;
  };
  const Case cases[] = {
      {"answer", ok_reply, 123456u},
      {"status invalid", string("HPID\x00\x01\x00\x01", 8) + string("\x00\x01\xe2\x40", 4),
       static_cast<uint32_t>(getpid())},
      {"wrong magic", string("HPIX\x00\x01\x00\x00", 8) + string("\x00\x01\xe2\x40", 4),
       static_cast<uint32_t>(getpid())},
      {"version 2", string("HPID\x00\x02\x00\x00", 8) + string("\x00\x01\xe2\x40", 4),
       static_cast<uint32_t>(getpid())},
      {"short", string("HPID\x00\x01\x00\x00", 8), static_cast<uint32_t>(getpid())},
      {"no broker", "", static_cast<uint32_t>(getpid())},
  };
  for (const Case& tc : cases) {
    const string sock = dir_ + "/broker.sock";
    string request;
    std::thread server;
    if (!tc.reply.empty()) server = ServeOnce(sock, tc.reply, &request);
    vgpu_region_params p{VGPU_POLICY_DEFAULT, 1, sock.c_str()};
    vgpu_region_ctx c;
    ASSERT_EQ(vgpu_region_attach(&c, path_.c_str(), &p), 0) << tc.name;
    EXPECT_EQ(c.r->slots[c.slot].host_pid, tc.want) << tc.name;
    vgpu_region_detach(&c);
    if (server.joinable()) {
      server.join();
      EXPECT_EQ(request, string("HPID\x00\x01\x00\x01", 8)) << tc.name;
    }
    unlink(sock.c_str());
    unlink(path_.c_str());
  }
}

}  // namespace
