#include "cmd/stop_signals.h"

#include <pthread.h>

#include <utility>

namespace gm::cli {

// SIGUSR1 ends the waiting thread (sent by the destructor).
StopOnSignal::StopOnSignal(bool drain_signal) {
  sigemptyset(&set_);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set_, sig);
  if (drain_signal) sigaddset(&set_, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
}

StopOnSignal::~StopOnSignal() {
  if (thread_.joinable()) {
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  // Drop a SIGUSR1 that arrived after the waiting thread had already ended.
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGUSR1);
  timespec zero{};
  while (sigtimedwait(&wake, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

int StopOnSignal::TakePending() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  timespec zero{};
  siginfo_t info{};
  const int sig = sigtimedwait(&stop, &info, &zero);
  if (sig <= 0) return 0;
  last_from_terminal_ = info.si_code == SI_KERNEL;  // the tty driver's, not kill(2)'s
  return sig;
}

void StopOnSignal::Watch(std::function<void(int)> on_signal) {
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0 || sig == SIGUSR1) return;
      on_signal(sig);
    }
  });
}

}  // namespace gm::cli
