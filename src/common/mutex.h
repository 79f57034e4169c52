#pragma once
// std::mutex and std::shared_mutex with clang's thread-safety annotations, so that ABSL_GUARDED_BY
// on the state they guard is checked by `clang++ -Wthread-safety` (libstdc++'s own mutexes and
// lock guards carry no annotations, and clang then reports every guarded access). The cost is the
// std types' (inline forwarding). For code that cannot take absl::Mutex: Debian's abseil is built
// with deadlock detection, which costs more than a node evaluation on the decision path.
//
//   hami::Mutex mu_;                 int n_ ABSL_GUARDED_BY(mu_);
//   hami::MutexLock l(mu_);          // exclusive for the scope
//   hami::SharedMutex smu_;          hami::ReaderLock r(smu_);  hami::WriterLock w(smu_);
#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace hami {

class ABSL_LOCKABLE Mutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
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

// Holds a Mutex exclusively for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
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
