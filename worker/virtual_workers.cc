#include "worker/virtual_workers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/os/paths.h"
#include "core/os/spawn.h"
#include "core/os/unique_fd.h"
#include "dataplane/auth.h"
#include "dataplane/messages.h"
#include "dataplane/messages_offload.h"
#include "dataplane/offload_proof.h"
#include "dataplane/protocol.h"

namespace gm {
namespace {

// What a trainer sends on a virtual worker's connection: OFFLOAD_DATA only.
constexpr FrameLimits kOffloadLimits{64u << 10, kMaxOffloadChunkBytes, 60};
// A result the trainer does not read for this long ends the virtual worker.
constexpr double kOffloadSendTimeoutS = 300;
// How long an ended channel's process may take to be reported by its host.
constexpr double kExitWaitS = 10;
constexpr size_t kPumpBytes = size_t{4} << 20;  // read from a process at once
constexpr double kHostExitWaitS = 5;            // a host told to end, before SIGKILL

// Reads what a process wrote (at most `n` bytes) and the descriptor it passed
// with them (SCM_RIGHTS), if any, into `fd`. The kernel ends a read after the
// bytes a descriptor came with, so one read brings at most one sendmsg's; more
// than one descriptor is refused (EPROTO, all closed).
ssize_t ReadWithFd(int chan, uint8_t* buf, size_t n, UniqueFd* fd) {
  constexpr size_t kRoom = 4;  // to see a process that passes more than one
  iovec iov{buf, n};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kRoom)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t r = ::recvmsg(chan, &msg, MSG_CMSG_CLOEXEC);
  if (r < 0) return r;
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(got);
    }
  }
  if (fds.size() > 1 || (msg.msg_flags & MSG_CTRUNC) != 0) {
    errno = EPROTO;
    return -1;
  }
  if (!fds.empty()) *fd = std::move(fds.front());
  return r;
}

// Sends all of `data` on a stream socket, without SIGPIPE. False once the peer is gone.
bool WriteAll(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Removes the blob caches no virtual worker host holds any more (a host killed,
// with its process group say, before it could remove its own): this user's
// "goldminer-vhost-*" folders in /dev/shm and the temporary folder whose .lock
// nobody holds (flock: a host and its forked workers hold it while they live).
// A folder without its lock is one a host is making: left for a minute
// (python/goldminer/_vhost.py, which sweeps the same way as a host starts).
void SweepHostCaches() {
  constexpr std::string_view kPrefix = "goldminer-vhost-";
  constexpr double kMakingS = 60;
  const char* tmp = std::getenv("TMPDIR");
  for (const std::string& root : {std::string("/dev/shm"), std::string(tmp ? tmp : "/tmp")}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
      if (e.path().filename().string().rfind(kPrefix, 0) != 0) continue;
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
        continue;
      }
      UniqueFd lock(::open((e.path() / ".lock").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
      const bool free = lock.valid() ? ::flock(lock.get(), LOCK_EX | LOCK_NB) == 0
                                     : errno == ENOENT && std::difftime(std::time(nullptr),
                                                                        st.st_mtime) > kMakingS;
      std::error_code ignored;
      if (free) std::filesystem::remove_all(e.path(), ignored);
    }
  }
}

}  // namespace

// Whether `path`'s file name is a Python interpreter's: python, python3, python3.11
// (OFFLOAD_OPEN may name no other program: virtual_workers.h).
bool IsPythonName(std::string_view path) {
  const size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (name.substr(0, 6) != "python") return false;
  name.remove_prefix(6);
  bool digit = false;
  bool dot = false;
  for (char c : name) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c == '.' && digit && !dot) {
      dot = true;
      digit = false;
    } else {
      return false;
    }
  }
  return name.empty() || digit;
}

// One `PYTHON -m goldminer._vhost FD` process and its control socket (the
// protocol is in python/goldminer/_vhost.py): SPAWN with a descriptor, KILL;
// SPAWNED and EXIT come back, read by a thread of this object.
class VirtualWorkers::Host {
 public:
  static Result<std::shared_ptr<Host>> Start(const std::string& python,
                                             const std::string& package_dir) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      return Status::FromErrno(errno, "virtual worker host: socketpair");
    }
    UniqueFd mine(sv[0]), theirs(sv[1]);
    SpawnRequest request(
        {python, "-m", "goldminer._vhost", "3"},
        {PythonPathPrepending(package_dir),
         // The run's keys stay with the worker; a DataLoader in
         // the blob runs stock.
         std::string(kSecretFileEnv) + "=", std::string(kSecretEnv) + "=", "GOLDMINER_OFFLOAD="});
    request.stdin_null = true;
    request.dup2 = {{theirs.get(), 3}};
    request.ignore_drain_signals = true;  // a drain's signal is the worker's, not its hosts'
    GM_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess(request));
    LogDebug("worker: the virtual DataLoader workers' Python host (" + python + ") is pid " +
             std::to_string(pid));
    auto host = std::shared_ptr<Host>(new Host(std::move(mine), pid, python));
    host->reader_ = std::thread([h = host.get()] { h->ReadLoop(); });
    return host;
  }

  ~Host() {
    ::shutdown(ctl_.get(), SHUT_RDWR);  // the host kills its children and exits
    if (reader_.joinable()) reader_.join();
    const Deadline deadline = Deadline::After(kHostExitWaitS);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (deadline.expired()) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      ::usleep(10000);
    }
    SweepHostCaches();
  }

  bool alive() const {
    MutexLock lock(mu_);
    return alive_;
  }

  // A new virtual worker: our end of its channel and its pid.
  Result<std::pair<UniqueFd, int64_t>> Spawn(const std::vector<std::string>& modules,
                                             double timeout_s) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return Status::FromErrno(errno, "virtual worker: socketpair");
    }
    UniqueFd mine(sv[0]), theirs(sv[1]);
    const std::string text = "SPAWN " + nlohmann::json(modules).dump();
    uint64_t seq = 0;
    {
      MutexLock lock(mu_);
      if (!alive_) return Status::Unavailable("the virtual worker host (" + python_ + ") ended");
      seq = sent_++;
      iovec iov{const_cast<char*>(text.data()), text.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      const int fd = theirs.get();
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
      // One packet, sent under the lock so that sequence numbers follow the
      // order the host reads them in.
      if (::sendmsg(ctl_.get(), &msg, MSG_NOSIGNAL) < 0) {
        alive_ = false;
        return Status::FromErrno(errno, "the virtual worker host (" + python_ + ")");
      }
      theirs.Reset();
      lock.WaitFor(cv_, timeout_s,
                   [&]() REQUIRES(mu_) { return !alive_ || spawned_.contains(seq); });
      auto it = spawned_.find(seq);
      if (it == spawned_.end()) {
        abandoned_.insert(seq);
        return Status::Unavailable(alive_ ? "the virtual worker host (" + python_ +
                                                ") did not start a worker within " +
                                                std::to_string(static_cast<int>(timeout_s)) + " s"
                                          : "the virtual worker host (" + python_ + ") ended");
      }
      const int64_t pid = it->second;
      spawned_.erase(it);
      if (pid <= 0) {
        return Status::ResourceExhausted("the virtual worker host (" + python_ +
                                         ") could not fork a worker");
      }
      return std::make_pair(std::move(mine), pid);
    }
  }

  void Kill(int64_t pid) {
    const std::string text = "KILL " + std::to_string(pid);
    ::send(ctl_.get(), text.data(), text.size(), MSG_NOSIGNAL);
  }

  // The exit status (Python's returncode) of `pid` once the host reported it.
  std::optional<int> WaitExit(int64_t pid, double timeout_s) {
    MutexLock lock(mu_);
    lock.WaitFor(cv_, timeout_s, [&]() REQUIRES(mu_) { return !alive_ || exits_.contains(pid); });
    auto it = exits_.find(pid);
    if (it == exits_.end()) return std::nullopt;
    return it->second;
  }

  void Forget(int64_t pid) {
    MutexLock lock(mu_);
    exits_.erase(pid);
  }

 private:
  Host(UniqueFd ctl, pid_t pid, std::string python)
      : ctl_(std::move(ctl)), pid_(pid), python_(std::move(python)) {}

  void ReadLoop() {
    char buf[256];
    for (;;) {
      const ssize_t n = ::recv(ctl_.get(), buf, sizeof(buf) - 1, 0);
      if (n < 0 && errno == EINTR) continue;
      MutexLock lock(mu_);
      if (n <= 0) {
        alive_ = false;
        cv_.notify_all();
        return;
      }
      buf[n] = '\0';
      long long a = 0, b = 0;
      if (std::sscanf(buf, "SPAWNED %lld", &a) == 1) {
        const uint64_t seq = received_++;
        if (abandoned_.erase(seq) != 0) {
          if (a > 0) Kill(a);  // its channel is closed already: it ends anyway
        } else {
          spawned_[seq] = a;
        }
      } else if (std::sscanf(buf, "EXIT %lld %lld", &a, &b) == 2) {
        exits_[a] = static_cast<int>(b);
        // Bounded: a channel forgets its pid when it ends; a child killed for an
        // abandoned spawn is forgotten here.
        if (exits_.size() > 4096) exits_.erase(exits_.begin());
      }
      cv_.notify_all();
    }
  }

  const UniqueFd ctl_;
  const pid_t pid_;
  const std::string python_;
  std::thread reader_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool alive_ GUARDED_BY(mu_) = true;
  uint64_t sent_ GUARDED_BY(mu_) = 0;                    // SPAWNs sent
  uint64_t received_ GUARDED_BY(mu_) = 0;                // SPAWNED received
  std::map<uint64_t, int64_t> spawned_ GUARDED_BY(mu_);  // SPAWN number -> pid (0: failed)
  std::set<uint64_t> abandoned_ GUARDED_BY(mu_);         // SPAWNs whose caller gave up
  std::map<int64_t, int> exits_ GUARDED_BY(mu_);         // pid -> exit status
};

VirtualWorkers::VirtualWorkers(Options options) : options_(std::move(options)) {}

VirtualWorkers::~VirtualWorkers() = default;  // each Host's destructor ends its process

size_t VirtualWorkers::open() const {
  MutexLock lock(mu_);
  return open_;
}

uint64_t VirtualWorkers::shared() const { return shared_.load(std::memory_order_relaxed); }

uint64_t VirtualWorkers::served() const {
  MutexLock lock(mu_);
  return served_;
}

Status VirtualWorkers::Warm(const std::string& python) {
  const std::string chosen = options_.python.empty() ? python : options_.python;
  if (options_.python.empty() && !IsPythonName(chosen)) {
    return Status::InvalidArgument(chosen + " is not a Python interpreter's name");
  }
  if (::access(chosen.c_str(), X_OK) != 0) return Status::FromErrno(errno, chosen);
  return HostFor(chosen).status();
}

Result<std::shared_ptr<VirtualWorkers::Host>> VirtualWorkers::HostFor(const std::string& python) {
  MutexLock lock(mu_);
  auto it = hosts_.find(python);
  if (it != hosts_.end() && it->second->alive()) return it->second;
  if (it != hosts_.end()) {
    LogWarning("worker: the virtual worker host of " + python + " ended; starting a new one");
    hosts_.erase(it);
  }
  if (hosts_.size() >= kMaxHosts) {
    return Status::ResourceExhausted("this worker runs virtual workers for at most " +
                                     std::to_string(kMaxHosts) + " Python interpreters");
  }
  GM_ASSIGN_OR_RETURN(std::shared_ptr<Host> host, Host::Start(python, options_.package_dir));
  hosts_[python] = host;
  return host;
}

Status VirtualWorkers::Serve(Socket& socket, int64_t rank, uint64_t channel) {
  const std::string who = "virtual DataLoader worker for rank " + std::to_string(rank) +
                          " (offload channel " + std::to_string(channel) + ")";
  {
    MutexLock lock(mu_);
    if (open_ >= options_.max_channels) {
      lock.Unlock();
      return Refuse(socket,
                    Status::ResourceExhausted("worker " + options_.host_name + " hosts at most " +
                                              std::to_string(options_.max_channels) +
                                              " virtual DataLoader workers at once"));
    }
    ++open_;
  }
  struct Release {
    VirtualWorkers* self;
    ~Release() {
      MutexLock lock(self->mu_);
      --self->open_;
    }
  } release{this};
  GM_ASSIGN_OR_RETURN(Started started, StartOne(socket, rank, channel));
  {
    MutexLock lock(mu_);
    ++served_;
  }
  LogDebug("worker: " + who + " is pid " + std::to_string(started.pid) + ", for " + socket.peer());
  Status st = Relay(socket, started);
  // The trainer closing its end, at a frame's boundary, is how a virtual worker ends.
  if (st.code() == Code::kUnavailable) return Status::Ok();
  return Refuse(socket, st.WithContext(who));
}

Status VirtualWorkers::Refuse(Socket& socket, Status why) {
  SendError(socket, why.message(), Deadline::After(1));
  return why;
}

// OFFLOAD_OPEN, checked; a process from the interpreter's host; OFFLOAD_OPENED.
void VirtualWorkers::SetIssuer(std::string public_key) {
  MutexLock lock(mu_);
  issuer_ = std::move(public_key);
}

Result<VirtualWorkers::Started> VirtualWorkers::StartOne(Socket& socket, int64_t rank,
                                                         uint64_t channel) {
  GM_ASSIGN_OR_RETURN(Frame first,
                      RecvFrame(socket, kControlLimits, Deadline::After(kHandshakeTimeoutS)));
  if (first.type != MsgType::kOffloadOpen) {
    return Refuse(socket, Status::Corrupt("sent " + std::string(MsgTypeName(first.type)) +
                                          " where OFFLOAD_OPEN was expected"));
  }
  Result<OffloadOpenMsg> open = OffloadOpenMsg::Decode(first.meta);
  if (!open.ok()) return Refuse(socket, open.status());
  std::string issuer;
  {
    MutexLock lock(mu_);
    issuer = issuer_;
  }
  // Before anything starts: a ticket the worker key could have minted opens
  // nothing without the coordinator's proof for its rank and channel.
  if (Status proof = CheckOffloadProof(issuer, rank, channel, open->proof); !proof.ok()) {
    return Refuse(socket, proof);
  }
  const std::string python = options_.python.empty() ? open->python : options_.python;
  if (options_.python.empty() && !IsPythonName(python)) {
    return Refuse(socket, Status::InvalidArgument(
                              "worker " + options_.host_name + " does not start " + python +
                              " for a virtual DataLoader worker: it starts a Python interpreter "
                              "(a file named python, python3 or python3.N) or the one " +
                              std::string(kPythonEnv) + " names for `goldminer worker`"));
  }
  if (::access(python.c_str(), X_OK) != 0) {
    return Refuse(socket,
                  Status::InvalidArgument(
                      "worker " + options_.host_name + " cannot run the Python interpreter " +
                      python + " (" + std::strerror(errno) +
                      "): install the trainer's Python at the same path there, or set " +
                      std::string(kPythonEnv) + " for `goldminer worker`"));
  }
  const std::string where = "worker " + options_.host_name;
  Result<std::shared_ptr<Host>> host = HostFor(python);
  if (!host.ok()) return Refuse(socket, host.status().WithContext(where));
  auto spawned = (*host)->Spawn(open->modules, options_.spawn_timeout_s);
  if (!spawned.ok()) return Refuse(socket, spawned.status().WithContext(where));
  Started started{*host, std::move(spawned->first), spawned->second};
  OffloadOpenedMsg opened{started.pid, options_.host_name};
  Status sent = SendFrame(socket, MsgType::kOffloadOpened, opened.Encode(),
                          Deadline::After(kHandshakeTimeoutS));
  if (!sent.ok()) {
    started.host->Kill(started.pid);
    started.host->Forget(started.pid);
    return sent;
  }
  return started;
}

// The process's bytes to the trainer on a thread of its own, the trainer's to
// the process on this one, until the trainer closes or sends what it may not;
// then the process is killed. Returns why the trainer's side ended.
Status VirtualWorkers::Relay(Socket& socket, Started& started) {
  Host& host = *started.host;
  const int chan = started.chan.get();
  const int64_t pid = started.pid;
  // A descriptor the process passes (a result's buffers in a sealed memfd,
  // goldminer._vwire) goes on to a trainer on this host, which then reads no
  // bytes of them through the sockets; to another host it cannot go.
  const bool same_host = socket.transport() == "unix";
  std::thread pump([this, &socket, &host, chan, pid, same_host] {
    std::vector<uint8_t> buf(kPumpBytes);
    bool trainer_gone = false;
    while (!trainer_gone) {
      UniqueFd fd;
      const ssize_t n = ReadWithFd(chan, buf.data(), buf.size(), &fd);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || (fd.valid() && !same_host)) {
        if (n < 0 || fd.valid()) {
          LogWarning("virtual DataLoader worker pid " + std::to_string(pid) +
                     (fd.valid() ? " passed a descriptor for a trainer on another host"
                                 : " passed more than one descriptor at once") +
                     ": it is ended");
          host.Kill(pid);
        }
        break;
      }
      const std::string_view bytes(reinterpret_cast<const char*>(buf.data()),
                                   static_cast<size_t>(n));
      iovec iov{buf.data(), static_cast<size_t>(n)};
      trainer_gone = !SendFrame(socket, MsgType::kOffloadData, EncodeOffloadData(bytes, fd.valid()),
                                std::span<const iovec>(&iov, 1),
                                Deadline::After(kOffloadSendTimeoutS), fd.valid() ? fd.get() : -1)
                          .ok();
      if (fd.valid() && !trainer_gone) shared_.fetch_add(1, std::memory_order_relaxed);
    }
    if (trainer_gone) return;
    OffloadExitMsg exit;
    if (std::optional<int> code = host.WaitExit(pid, kExitWaitS)) {
      exit.status = *code;
    } else {
      exit.status = -SIGKILL;
      exit.why = "its host did not report how it ended";
    }
    (void)SendFrame(socket, MsgType::kOffloadExit, exit.Encode(), Deadline::After(5));
    ::shutdown(socket.fd(), SHUT_WR);  // the trainer closes when it has read it
  });
  Status st;
  bool child_gone = false;
  Frame frame;
  while (st.ok()) {
    st = RecvFrameInto(socket, kOffloadLimits, Deadline::Never(), frame);
    if (!st.ok()) break;
    if (frame.type != MsgType::kOffloadData) {
      st = Status::Corrupt("sent " + std::string(MsgTypeName(frame.type)) +
                           " on a virtual worker's connection, where only OFFLOAD_DATA comes");
      break;
    }
    const std::string_view payload(reinterpret_cast<const char*>(frame.payload.data()),
                                   frame.payload.size());
    st = CheckOffloadData(frame.meta, payload);
    // A process that ended reads nothing more: its pump reports how it ended.
    if (st.ok() && !child_gone)
      child_gone = !WriteAll(chan, frame.payload.data(), frame.payload.size());
  }
  host.Kill(pid);
  ::shutdown(chan, SHUT_RDWR);
  pump.join();
  host.Forget(pid);
  return st;
}

}  // namespace gm
