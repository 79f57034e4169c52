#include "fakes/shared_state.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

namespace fakegpu {
namespace {

class SharedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fakegpu-state-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::string err;
    ASSERT_TRUE(ParseDevices("A:1024:10;B:2048:20", &cfg_.devices, &err)) << err;
    cfg_.state_path = dir_ + "/state";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  Config cfg_;
};

TEST_F(SharedStateTest, CreatesTheDeviceTableOnce) {
  std::string err;
  std::unique_ptr<SharedState> a(SharedState::Open(cfg_, &err));
  ASSERT_NE(a, nullptr) << err;
  ASSERT_EQ(a->num_devices(), 2);
  EXPECT_STREQ(a->dev(1).name, "B");
  EXPECT_EQ(a->dev(1).total_bytes, 2048ULL << 20);
  EXPECT_EQ(a->dev(1).sms, 20u);
  // A later opener with another device list uses the file's table.
  Config other = cfg_;
  ASSERT_TRUE(ParseDevices("C:1:1", &other.devices, &err));
  std::unique_ptr<SharedState> b(SharedState::Open(other, &err));
  ASSERT_NE(b, nullptr) << err;
  EXPECT_EQ(b->num_devices(), 2);
  ASSERT_TRUE(a->Charge(1, 100));
  EXPECT_EQ(b->UsedBytes(1, 0), 100u);
}

TEST_F(SharedStateTest, RejectsAFileOfAnotherLayout) {
  std::ofstream(cfg_.state_path) << "not a state file, and too short";
  std::string err;
  std::unique_ptr<SharedState> s(SharedState::Open(cfg_, &err));
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(err.find(cfg_.state_path), std::string::npos) << err;
  std::unique_ptr<SharedState> p(SharedState::OpenPrivate(cfg_));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->num_devices(), 2);
}

TEST_F(SharedStateTest, LockHeldByAKilledProcessIsRecovered) {
  std::string err;
  std::unique_ptr<SharedState> s(SharedState::Open(cfg_, &err));
  ASSERT_NE(s, nullptr) << err;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Take the region mutex directly through the public layout and die holding it.
    int fd = open(cfg_.state_path.c_str(), O_RDWR);
    void* p = mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) _exit(2);
    pthread_mutex_lock(&static_cast<Region*>(p)->mu);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(3);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  close(ready[0]);
  close(ready[1]);
  // Would block forever with a non-robust mutex.
  EXPECT_TRUE(s->Charge(0, 1 << 20));
  EXPECT_EQ(s->UsedBytes(0, getpid()), 1u << 20);
}

TEST_F(SharedStateTest, ChargesOfAReusedPidAreReclaimedWhenMemoryRunsOut) {
  std::string err;
  std::unique_ptr<SharedState> s(SharedState::Open(cfg_, &err));
  ASSERT_NE(s, nullptr) << err;
  pid_t sleeper = fork();
  ASSERT_GE(sleeper, 0);
  if (sleeper == 0) {
    pause();
    _exit(0);
  }
  uint64_t real_start = 0;
  for (int i = 0; i < 1000 && real_start == 0; ++i) real_start = ProcStartTime(sleeper);
  ASSERT_NE(real_start, 0u);
  int fd = open(cfg_.state_path.c_str(), O_RDWR);
  void* p = mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  Region* r = static_cast<Region*>(p);
  // A record of an earlier process that had the sleeper's pid and filled device 0.
  struct Case {
    uint64_t start_time;
    bool reclaimed;
  };
  for (const Case& c : {Case{real_start, false}, Case{real_start + 1, true}}) {
    ProcRec& rec = r->procs[kMaxProcs - 1];
    rec = ProcRec{};
    rec.pid = sleeper;
    rec.live = 1;
    rec.start_time = c.start_time;
    rec.mem_bytes[0] = r->devs[0].total_bytes;
    EXPECT_EQ(s->Charge(0, 1 << 20), c.reclaimed) << c.start_time;
    EXPECT_EQ(rec.live != 0, !c.reclaimed);
    if (c.reclaimed) s->Uncharge(0, 1 << 20);
  }
  munmap(p, sizeof(Region));
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
}

TEST_F(SharedStateTest, BusyTimeCountsOnlyCompletedWork) {
  std::string err;
  std::unique_ptr<SharedState> s(SharedState::Open(cfg_, &err));
  ASSERT_NE(s, nullptr) << err;
  // 4 x 2 ms; back to back unless this process is descheduled between launches (a loaded machine),
  // so the windows below start at the first kernel's start, not at end - 8 ms.
  uint64_t end = 0, first_start = 0;
  for (int i = 0; i < 4; ++i) {
    end = s->Launch(0, 2000000, 1000000000ULL);
    if (i == 0) first_start = end - 2000000;
  }
  EXPECT_LE(s->BusyNs(0, 0), 8000000u);
  SleepUntilMono(end);
  EXPECT_EQ(s->BusyNs(0, 0), 8000000u);
  EXPECT_EQ(s->BusyNs(0, getpid()), 8000000u);
  EXPECT_EQ(s->BusyNs(1, 0), 0u);
  auto window = s->BusyInWindow(0, first_start, end);
  ASSERT_EQ(window.size(), 2u);  // total + our pid
  EXPECT_EQ(window[0].ns, 8000000u);
  EXPECT_EQ(window[1].pid, getpid());
  auto half = s->BusyInWindow(0, end - 1000000, end);  // inside the last kernel
  EXPECT_EQ(half[0].ns, 1000000u);
}

// A launch waits only for its own process's queue, never for another process's work, as a real
// driver queues per context (the device-wide admission it replaced held every process back while
// the device had more than the bound queued, so a neighbour keeping the device full decided by a
// wake-up race who launched). Per row: another process queues `other_ms`, this one `own_ms` behind
// it (admitted with no bound), then launches 1 ms under a bound of `bound_ms`. Admitted at once:
// it returns well before the device-wide rule would have let it (tail - bound, 100 ms and more
// ahead). Held: it returns only once its own queue is back within the bound (own end - bound).
TEST_F(SharedStateTest, ALaunchWaitsOnlyForItsOwnProcesssQueue) {
  std::string err;
  std::unique_ptr<SharedState> s(SharedState::Open(cfg_, &err));
  ASSERT_NE(s, nullptr) << err;
  struct Case {
    const char* name;
    uint64_t other_ms, own_ms, bound_ms;
    bool held;
  };
  const Case cases[] = {
      {"another process's 300 ms queued, none of ours", 300, 0, 20, false},
      {"ours 100 ms behind another's 200, bound 150", 200, 100, 150, false},
      {"ours 200 ms, bound 20", 0, 200, 20, true},
      {"ours 200 ms behind another's 100, bound 50", 100, 200, 50, true},
  };
  constexpr uint64_t kMs = 1000000, kNoBound = 1000000 * kMs;
  for (const Case& c : cases) {
    SleepUntilMono(s->dev(0).busy_until_ns);  // an idle device
    if (c.other_ms > 0) {
      pid_t other = fork();
      if (other == 0) {
        std::string e;
        std::unique_ptr<SharedState> o(SharedState::Open(cfg_, &e));
        _exit(o != nullptr && o->Launch(0, c.other_ms * kMs, kNoBound) > 0 ? 0 : 1);
      }
      int status = -1;
      ASSERT_EQ(waitpid(other, &status, 0), other);
      ASSERT_EQ(status, 0) << c.name;
    }
    uint64_t own_end = c.own_ms > 0 ? s->Launch(0, c.own_ms * kMs, kNoBound) : 0;
    const uint64_t tail = s->dev(0).busy_until_ns;
    s->Launch(0, kMs, c.bound_ms * kMs);
    const uint64_t returned = MonoNs();
    if (c.held) {
      EXPECT_GE(returned, own_end - c.bound_ms * kMs) << c.name;
    } else {
      EXPECT_LT(returned + 100 * kMs, tail - c.bound_ms * kMs) << c.name;
    }
  }
  SleepUntilMono(s->dev(0).busy_until_ns);
}

TEST_F(SharedStateTest, XidRingKeepsOrder) {
  std::string err;
  std::unique_ptr<SharedState> s(SharedState::Open(cfg_, &err));
  ASSERT_NE(s, nullptr) << err;
  uint64_t start = s->XidSeq();
  for (uint64_t x = 1; x <= kMaxEvents + 10; ++x) s->InjectXid(static_cast<int>(x % 2), x);
  XidRec rec;
  ASSERT_TRUE(s->NextXid(start, &rec));
  EXPECT_EQ(rec.xid, 11u);  // the oldest 10 were overwritten
  ASSERT_TRUE(s->NextXid(rec.seq, &rec));
  EXPECT_EQ(rec.xid, 12u);
  EXPECT_FALSE(s->NextXid(s->XidSeq(), &rec));
}

}  // namespace
}  // namespace fakegpu
