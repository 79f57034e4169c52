#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace hami {
namespace {

using std::chrono::milliseconds;

struct Box {
  Mutex mu;
  CondVar cv;
  int n ABSL_GUARDED_BY(mu) = 0;
};

// Another thread sets n = 1 under the lock and notifies; only possible while we do not hold it.
std::thread SetLater(Box& b, milliseconds after) {
  return std::thread([&b, after] {
    std::this_thread::sleep_for(after);
    {
      MutexLock l(b.mu);
      b.n = 1;
    }
    b.cv.NotifyAll();
  });
}

TEST(MutexLockTest, UnlockLetsOthersInAndLockTakesItBack) {
  Box b;
  MutexLock l(b.mu);
  l.Unlock();
  std::thread t = SetLater(b, milliseconds(0));
  t.join();  // hangs (test timeout) if Unlock did not release
  l.Lock();
  EXPECT_EQ(b.n, 1);
}

TEST(MutexLockTest, DestructorAfterUnlockDoesNotUnlockAgain) {
  Box b;
  {
    MutexLock l(b.mu);
    l.Unlock();
  }
  // A second unlock would be undefined behaviour; the mutex must simply be free and usable.
  std::thread t = SetLater(b, milliseconds(0));
  t.join();
  MutexLock l(b.mu);
  EXPECT_EQ(b.n, 1);
}

TEST(CondVarTest, TimedWaits) {
  struct Case {
    const char* name;
    bool notify;         // another thread sets n = 1 after 20 ms
    milliseconds limit;  // how long we wait
    bool want;           // predicate result
  };
  const Case cases[] = {
      {"notified before the limit", true, milliseconds(5000), true},
      {"limit passes without a change", false, milliseconds(30), false},
  };
  for (const auto& c : cases) {
    for (bool until : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (until ? " (WaitUntil)" : " (WaitFor)"));
      Box b;
      std::thread t;
      if (c.notify) t = SetLater(b, milliseconds(20));
      bool got;
      {
        MutexLock l(b.mu);
        auto pred = [&b]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu) { return b.n == 1; };
        const auto start = std::chrono::steady_clock::now();
        got =
            until ? b.cv.WaitUntil(b.mu, start + c.limit, pred) : b.cv.WaitFor(b.mu, c.limit, pred);
        if (!c.want) {
          EXPECT_GE(std::chrono::steady_clock::now() - start, c.limit);
        }
        EXPECT_EQ(b.n == 1, c.want);  // the mutex is held again: n is readable
      }
      EXPECT_EQ(got, c.want);
      if (t.joinable()) t.join();
    }
  }
}

TEST(CondVarTest, WaitReturnsOnceThePredicateHolds) {
  Box b;
  std::thread t = SetLater(b, milliseconds(20));
  {
    MutexLock l(b.mu);
    b.cv.Wait(b.mu, [&b]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu) { return b.n == 1; });
    EXPECT_EQ(b.n, 1);
  }
  t.join();
}

TEST(CondVarTest, ThrowingPredicateLeavesTheMutexHeldByTheCaller) {
  Box b;
  {
    MutexLock l(b.mu);
    EXPECT_THROW(b.cv.Wait(b.mu, []() -> bool { throw std::runtime_error("predicate"); }),
                 std::runtime_error);
    b.n = 2;  // still ours; MutexLock releases it once, below
  }
  std::thread t = SetLater(b, milliseconds(0));  // hangs if the mutex was left locked
  t.join();
  MutexLock l(b.mu);
  EXPECT_EQ(b.n, 1);
}

}  // namespace
}  // namespace hami
