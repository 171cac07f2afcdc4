#include "core/os/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/os/file_util.h"

extern char** environ;

namespace gm {
namespace {

std::vector<std::string> Environment(const SpawnRequest& r) {
  if (!r.inherit_env) return r.env;
  std::set<std::string> replaced;
  for (const std::string& kv : r.env) replaced.insert(kv.substr(0, kv.find('=')));
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    if (!replaced.contains(kv.substr(0, kv.find('=')))) env.push_back(std::move(kv));
  }
  env.insert(env.end(), r.env.begin(), r.env.end());
  return env;
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

// `program` as execvp would find it: itself when it has a '/', else the first
// executable file of that name in this process's PATH.
std::optional<std::string> FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) == 0) return program;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return std::nullopt;
}

Result<pid_t> SpawnProcess(const SpawnRequest& request) {
  if (request.argv.empty() || request.argv[0].empty())
    return Status::InvalidArgument("no command to start");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (request.stdin_null) posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  for (const auto& [from, to] : request.dup2) posix_spawn_file_actions_adddup2(&actions, from, to);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (request.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  const std::vector<std::string> env = Environment(request);
  std::vector<std::string> argv = request.argv;
  if (request.ignore_drain_signals) {
    std::optional<std::string> path = FindProgram(argv[0]);
    if (!path) {
      posix_spawnattr_destroy(&attr);
      posix_spawn_file_actions_destroy(&actions);
      return Status::FromErrno(ENOENT, argv[0] + ": cannot start");
    }
    argv[0] = *path;
    argv.insert(argv.begin(), {"/bin/sh", "-c", "trap '' TERM USR2; exec \"$0\" \"$@\""});
  }
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  // Out of processes or memory is the machine's state (ResourceExhausted).
  if (rc != 0) return Status::FromErrno(rc, request.argv[0] + ": cannot start");
  return pid;
}

Result<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(wait_status);
}

namespace {

struct ProcStat {
  pid_t ppid = 0;
  double ticks = 0;  // utime + stime + cutime + cstime
};

Result<ProcStat> ReadProcStat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  if (pid <= 0) return Status::IoError(path + ": no such process");
  GM_ASSIGN_OR_RETURN(std::string stat, ReadFile(path));
  // The fields after the command name, which is in parentheses and may hold
  // spaces and parentheses itself: the last ')' ends it.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return Status::IoError(path + ": unexpected format");
  const char* p = stat.c_str() + close + 1;
  // Fields 3..17: state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime; the last four are in clock ticks.
  ProcStat out;
  for (int field = 3; field <= 17; ++field) {
    while (*p == ' ') ++p;
    char* end = nullptr;
    if (field == 3) {
      if (*p == '\0') return Status::IoError(path + ": unexpected format");
      end = const_cast<char*>(p) + 1;
    } else {
      const long long v = std::strtoll(p, &end, 10);
      if (end == p) return Status::IoError(path + ": unexpected format");
      if (field == 4) out.ppid = static_cast<pid_t>(v);
      if (field >= 14) out.ticks += static_cast<double>(v);
    }
    p = end;
  }
  return out;
}

double TicksToSeconds(double ticks) {
  const long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? ticks / static_cast<double>(hz) : 0.0;
}

}  // namespace

Result<double> CpuSecondsOfProcess(pid_t pid) {
  GM_ASSIGN_OR_RETURN(ProcStat stat, ReadProcStat(pid));
  return TicksToSeconds(stat.ticks);
}

std::map<pid_t, double> CpuSecondsOfTrees(const std::vector<pid_t>& roots) {
  // Every process's parent and ticks, from one pass over /proc; a process that
  // ends in between is skipped (its CPU is in its parent's cutime once reaped).
  std::map<pid_t, double> ticks_of;
  std::multimap<pid_t, pid_t> children;
  if (DIR* dir = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(dir)) {
      char* end = nullptr;
      const long id = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || id <= 0) continue;
      Result<ProcStat> st = ReadProcStat(static_cast<pid_t>(id));
      if (!st.ok()) continue;
      ticks_of[static_cast<pid_t>(id)] = st->ticks;
      children.emplace(st->ppid, static_cast<pid_t>(id));
    }
    ::closedir(dir);
  }
  // Live descendants add their own; reaped ones are in their parents' cutime.
  std::map<pid_t, double> out;
  for (const pid_t root : roots) {
    if (!ticks_of.contains(root)) continue;
    double ticks = 0;
    std::vector<pid_t> todo{root};
    std::set<pid_t> seen{root};
    while (!todo.empty()) {
      const pid_t pid = todo.back();
      todo.pop_back();
      ticks += ticks_of[pid];
      auto [first, last] = children.equal_range(pid);
      for (auto it = first; it != last; ++it) {
        if (seen.insert(it->second).second) todo.push_back(it->second);
      }
    }
    out[root] = TicksToSeconds(ticks);
  }
  return out;
}

Result<double> CpuSecondsOfTree(pid_t pid) {
  GM_RETURN_IF_ERROR(ReadProcStat(pid).status());  // says why when it is not there
  const std::map<pid_t, double> cpu = CpuSecondsOfTrees({pid});
  auto it = cpu.find(pid);
  if (it == cpu.end()) return Status::IoError("/proc/" + std::to_string(pid) + ": it ended");
  return it->second;
}

}  // namespace gm
