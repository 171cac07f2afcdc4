// libgoldminer_cupti.so: the CUPTI injection library of `goldminer profile`.
//
// The CUDA driver loads it into an unmodified trainer when CUDA_INJECTION64_PATH
// names it, and calls InitializeInjection() once, from inside cuInit(). When
// $GOLDMINER_PROFILE_DIR is set, the library records every kernel, memcpy and
// memset through CUPTI's activity API into $GOLDMINER_PROFILE_DIR/gpu.<pid>.log (the
// format is in profiler/gpu_log.h): times on CLOCK_MONOTONIC through a timestamp
// callback, clock pairs at start and at exit, CUPTI's dropped-record counts, and an
// "E" line for each CUPTI call that failed. It never aborts or stops the trainer:
// whatever fails is written down and the trainer goes on unprofiled.
//
// The last buffers are flushed at exit (atexit) and, because `goldminer profile`
// stops a trainer with SIGTERM (which skips atexit), also on SIGTERM and SIGINT when
// the trainer left them at their default action: the handler only wakes a thread of
// the library, which flushes, restores the default action and re-sends the signal,
// so the trainer still dies of it. A trainer that handles the signals itself keeps
// its handlers (and its normal exit runs the atexit flush). CUPTI also hands over
// buffers every kFlushPeriodMs, which bounds what a SIGKILL loses.
//
// Threads: CUPTI calls the buffer callbacks from its own thread (periodic flush)
// and from the thread that flushes; writes to the log are serialized by a mutex.
// The state is one process-wide object, because the driver's entry point takes no
// argument and CUPTI's buffer callbacks carry no user pointer. It is never freed:
// CUPTI may call back while the process exits.
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include "core/thread_annotations.h"
#include "profiler/cupti/record_format.h"

namespace gm {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kRecordAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT of cupti_activity.h
// How often CUPTI hands over full-or-not buffers: a trainer killed by a signal (no
// atexit) loses at most this much of its activity.
constexpr uint32_t kFlushPeriodMs = 200;

class Injection {
 public:
  Injection(int fd, pid_t pid) : fd_(fd), pid_(pid) {}

  pid_t pid() const { return pid_; }

  // Appends `text` to the log; a failed write is reported once on stderr.
  void Write(std::string_view text) {
    MutexLock lock(mu_);
    while (!text.empty()) {
      ssize_t n = ::write(fd_, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!write_failed_) {
          std::fprintf(stderr,
                       "goldminer: cannot write the GPU activity log (errno %d); "
                       "GPU activity is lost\n",
                       errno);
        }
        write_failed_ = true;
        return;
      }
      text.remove_prefix(static_cast<size_t>(n));
    }
  }

  void CountUntimed(uint64_t n) { untimed_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t untimed() const { return untimed_.load(std::memory_order_relaxed); }

  // Runs `flush` the first time only; a later caller waits until it has finished.
  template <typename F>
  void FinishOnce(F flush) {
    MutexLock lock(finish_mu_);
    if (finished_) return;
    finished_ = true;
    flush();
  }

  // The stop-signal pipe: the handler writes the signal number, a thread reads it.
  int signal_pipe[2] = {-1, -1};

 private:
  const int fd_;
  const pid_t pid_;
  Mutex mu_;
  bool write_failed_ GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> untimed_{0};
  Mutex finish_mu_;
  bool finished_ GUARDED_BY(finish_mu_) = false;
};

Injection* g_injection = nullptr;  // set once by InitializeInjection, never freed

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t CUPTIAPI MonotonicTimestamp() { return MonotonicNs(); }

// True on success; else writes "E <call> failed: <CUPTI's name> (<code>)".
bool Check(CUptiResult result, std::string_view call) {
  if (result == CUPTI_SUCCESS) return true;
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) name = "?";
  std::string line = "E ";
  line.append(call);
  line.append(" failed: ").append(name).append(" (").append(std::to_string(result));
  line.append(")\n");
  g_injection->Write(line);
  return false;
}

void WriteClockPair() {
  uint64_t cupti_ns = 0;
  if (!Check(cuptiGetTimestamp(&cupti_ns), "cuptiGetTimestamp")) return;
  uint64_t monotonic_ns = MonotonicNs();
  g_injection->Write("C " + std::to_string(cupti_ns) + " " + std::to_string(monotonic_ns) + "\n");
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // A null buffer makes CUPTI drop records, which it counts ("D" lines).
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                              size_t valid_bytes) {
  std::string lines;
  uint64_t untimed = 0;
  CUpti_Activity* record = nullptr;
  while (valid_bytes > 0) {
    CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_bytes, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
    if (r != CUPTI_SUCCESS) {
      g_injection->Write(lines);
      lines.clear();
      Check(r, "cuptiActivityGetNextRecord");
      break;
    }
    if (AppendRecordLine(*record, lines) == RecordLine::kUntimed) ++untimed;
  }
  std::free(buffer);
  size_t dropped = 0;
  // Since CUDA 6 every buffer is global (context NULL, stream 0); the call asks for
  // exactly the queue this buffer came from.
  if (Check(cuptiActivityGetNumDroppedRecords(context, stream, &dropped),
            "cuptiActivityGetNumDroppedRecords")) {
    lines += "D " + std::to_string(dropped) + "\n";
  }
  g_injection->Write(lines);
  g_injection->CountUntimed(untimed);
}

// The end of the log: the last buffers, the closing clock pair, the untimed count.
void Finish() {
  g_injection->FinishOnce([] {
    Check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    WriteClockPair();
    g_injection->Write("# untimed=" + std::to_string(g_injection->untimed()) + "\n");
  });
}

void AtExit() {
  // A child forked after cuInit (a DataLoader worker) inherits this handler; only
  // the process that set CUPTI up may flush it.
  if (g_injection == nullptr || getpid() != g_injection->pid()) return;
  Finish();
}

// Async-signal-safe: only getpid, write, signal and raise.
void OnStopSignal(int signo) {
  if (getpid() != g_injection->pid()) {  // a forked child: just die as by default
    signal(signo, SIG_DFL);
    raise(signo);
    return;
  }
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signo);
  if (write(g_injection->signal_pipe[1], &byte, 1) != 1) {
    signal(signo, SIG_DFL);  // no thread to flush: the signal's default action
    raise(signo);
  }
  errno = saved_errno;
}

void StopSignalThread() {
  unsigned char byte = 0;
  ssize_t n = 0;
  while ((n = read(g_injection->signal_pipe[0], &byte, 1)) < 0 && errno == EINTR) {
  }
  if (n != 1) return;
  int signo = byte;
  g_injection->Write("# signal=" + std::to_string(signo) + "\n");
  Finish();
  signal(signo, SIG_DFL);
  kill(getpid(), signo);
}

// Flushes on SIGTERM and SIGINT where the trainer left their default action.
void FlushOnStopSignals() {
  if (pipe2(g_injection->signal_pipe, O_CLOEXEC) != 0) {
    g_injection->Write("E pipe2 failed (errno " + std::to_string(errno) +
                       "): a SIGTERM will lose the last activity buffers\n");
    return;
  }
  try {
    std::thread(StopSignalThread).detach();
  } catch (const std::system_error& e) {
    g_injection->Write(std::string("E cannot start the signal thread (") + e.what() +
                       "): a SIGTERM will lose the last activity buffers\n");
    return;
  }
  for (int signo : {SIGTERM, SIGINT}) {
    struct sigaction old = {};
    if (sigaction(signo, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) != 0 ||
        old.sa_handler != SIG_DFL) {
      continue;  // the trainer's own handler stays
    }
    struct sigaction action = {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(signo, &action, nullptr);
  }
}

// Returns the clock the activity times will be on.
const char* RegisterClock() {
#if defined(GM_CUPTI_HAS_TIMESTAMP_CALLBACK)
  if (Check(cuptiActivityRegisterTimestampCallback(MonotonicTimestamp),
            "cuptiActivityRegisterTimestampCallback")) {
    return "monotonic";
  }
#else
  (void)MonotonicTimestamp;
  g_injection->Write(
      "E cuptiActivityRegisterTimestampCallback is not in the CUPTI this "
      "library was built with; times are CUPTI's, converted by the C pairs\n");
#endif
  return "cupti";
}

// The "E" line saying why nothing will be recorded.
std::string NoActivityLine(std::string_view why) {
  return "E no GPU activity will be recorded: " + std::string(why) + "\n";
}

// CUPTI reports a missing driver as CUPTI_ERROR_UNKNOWN, so the library looks for
// the driver itself: " (... is not loaded ...)" when it is absent, else "".
std::string DriverHint() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver == nullptr) return " (libcuda.so.1, the NVIDIA driver, is not loaded in this process)";
  dlclose(driver);
  return "";
}

// The records are read with the structs of the CUPTI this library was built with;
// another CUPTI in the process (one a framework loaded first, whose symbols won)
// may write other ones, so it is refused rather than misread.
bool SameCuptiVersion() {
  uint32_t version = 0;
  if (!Check(cuptiGetVersion(&version), "cuptiGetVersion")) return false;
  g_injection->Write("# cupti_api_version=" + std::to_string(version) + "\n");
  if (version == CUPTI_API_VERSION) return true;
  g_injection->Write(
      NoActivityLine("the process uses CUPTI API version " + std::to_string(version) +
                     ", this library was "
                     "built with " +
                     std::to_string(CUPTI_API_VERSION) + " and would misread its records"));
  return false;
}

void Start(const char* dir) {
  pid_t pid = getpid();
  std::string path = std::string(dir) + "/gpu." + std::to_string(pid) + ".log";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr,
                 "goldminer: cannot create the GPU activity log %s (errno %d); "
                 "training goes on without GPU profiling\n",
                 path.c_str(), errno);
    return;
  }
  g_injection = new Injection(fd, pid);
  g_injection->Write("# goldminer gpu log 1 pid=" + std::to_string(pid) + "\n");
  if (!SameCuptiVersion()) return;
  // The clock first: records made before it would be on CUPTI's clock.
  std::string clock = RegisterClock();
  g_injection->Write("# clock=" + clock + "\n");
  if (!Check(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
             "cuptiActivityRegisterCallbacks")) {
    // Nowhere to put records: enabling would only cost the trainer time.
    g_injection->Write(NoActivityLine("CUPTI took no activity buffer callbacks" + DriverHint()));
    return;
  }
  bool any = false;
  any |= Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
               "cuptiActivityEnable(CONCURRENT_KERNEL)");
  any |= Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)");
  any |= Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)");
  if (!any) {
    g_injection->Write(NoActivityLine("CUPTI enabled no activity kind" + DriverHint()));
    return;
  }
#if defined(GM_CUPTI_HAS_FLUSH_PERIOD)
  Check(cuptiActivityFlushPeriod(kFlushPeriodMs), "cuptiActivityFlushPeriod");
#endif
  WriteClockPair();
  if (std::atexit(AtExit) != 0) {
    g_injection->Write("E atexit failed: the last activity buffers will not be flushed\n");
  }
  FlushOnStopSignals();
}

}  // namespace
}  // namespace gm

// The driver's entry point (CUDA_INJECTION64_PATH). Returns 1 (success) always:
// profiling problems are written to the log, never passed on to the trainer.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> started{false};
  const char* dir = std::getenv("GOLDMINER_PROFILE_DIR");
  if (dir == nullptr || *dir == '\0') return 1;
  if (started.exchange(true)) return 1;
  gm::Start(dir);
  return 1;
}
