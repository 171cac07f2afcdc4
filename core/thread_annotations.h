// Locks the compiler checks. Members a mutex guards are declared GUARDED_BY(mu_),
// functions that expect it held REQUIRES(mu_); clang's -Wthread-safety (the CI
// build scripts/clang_check.sh) then refuses an access without the lock. gcc
// ignores the annotations.
//
// Mutex is std::mutex with the annotations (libstdc++'s has none); MutexLock holds
// one for a scope (and can let go of it and take it again, e.g. around a blocking
// call), and waits on a condition variable with it. Predicates of waits are
// lambdas annotated REQUIRES(mu), which the analysis then checks under the lock.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GM_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) GM_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY GM_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) GM_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) GM_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) GM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) GM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) GM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) GM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) GM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS GM_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace gm {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Lets go of the mutex, and takes it again (in this order, in one scope).
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

  // Waits on `cv`, the mutex let go meanwhile, until pred() (called with the mutex
  // held: annotate the lambda REQUIRES(mu)) is true; held again on return.
  template <typename Pred>
  void Wait(std::condition_variable& cv, Pred pred) {
    cv.wait(lock_, pred);
  }
  // The same for at most `seconds` (<= 0: pred() is asked, no wait); pred()'s last value.
  template <typename Pred>
  bool WaitFor(std::condition_variable& cv, double seconds, Pred pred) {
    return cv.wait_for(lock_, std::chrono::duration<double>(std::max(0.0, seconds)), pred);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace gm
