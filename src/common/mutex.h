#pragma once
// std::mutex, std::shared_mutex and std::condition_variable with clang's thread-safety annotations,
// so that ABSL_GUARDED_BY on the state they guard is checked by `clang++ -Wthread-safety`
// (libstdc++'s own mutexes and lock guards carry no annotations, and clang then reports every
// guarded access). The cost is the std types' (inline forwarding). For code that cannot take
// absl::Mutex: Debian's abseil is built with deadlock detection, which costs more than a node
// evaluation on the decision path.
//
//   hami::Mutex mu_;                 int n_ ABSL_GUARDED_BY(mu_);
//   hami::MutexLock l(mu_);          // exclusive for the scope
//   hami::SharedMutex smu_;          hami::ReaderLock r(smu_);  hami::WriterLock w(smu_);
//   hami::CondVar cv_;               while (n_ == 0) cv_.Wait(mu_);   // mu_ held
//
// A predicate handed to CondVar is a lambda that reads guarded state: clang analyses its body on
// its own, so it carries the requirement itself: [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {...}.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace hami {

class ABSL_LOCKABLE Mutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_LOCKABLE SharedMutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex exclusively for its scope. Unlock() and Lock() let it go and take it again inside
// the scope (I/O between two critical sections); the destructor unlocks only if held.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// std::condition_variable on a hami::Mutex that the caller holds (a MutexLock, or lock()). Waits
// return with the mutex held again, as std's do; spurious wake-ups are possible where std has them
// (the forms without a predicate).
class CondVar {
 public:
  void Wait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted a(mu);
    cv_.wait(a.l);
  }
  template <class Pred>
  void Wait(Mutex& mu, Pred pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted a(mu);
    cv_.wait(a.l, std::move(pred));
  }
  template <class Clock, class Duration>
  std::cv_status WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted a(mu);
    return cv_.wait_until(a.l, t);
  }
  // True when `pred` holds (false: the time came with it still false).
  template <class Clock, class Duration, class Pred>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& t, Pred pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Adopted a(mu);
    return cv_.wait_until(a.l, t, std::move(pred));
  }
  // WaitUntil now + d on the steady clock (as std's wait_for).
  template <class Rep, class Period>
  std::cv_status WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& d)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + d);
  }
  template <class Rep, class Period, class Pred>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& d, Pred pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + d, std::move(pred));
  }
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  // The caller's lock seen as a std::unique_lock for the wait, and handed back (still held) after
  // it, also when a predicate throws.
  struct Adopted {
    explicit Adopted(Mutex& mu) : l(mu.mu_, std::adopt_lock) {}
    ~Adopted() { l.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> l;
  };
  std::condition_variable cv_;
};

// Holds a SharedMutex exclusively for its scope.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_.lock_shared();
  }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace hami
