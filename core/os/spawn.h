// The one place goldminer starts a program, and what it reads about a process.
//
// SpawnProcess wraps posix_spawnp (vfork-like in glibc: safe in a multithreaded
// parent, and a failed exec comes back as its result) with one signal hygiene:
// the child starts with no signal blocked and SIGPIPE, SIGINT, SIGTERM, SIGHUP,
// SIGQUIT and SIGCHLD at their default dispositions, whatever this process
// blocks or ignores. It inherits the calling thread's CPU affinity (pin the
// thread first to pin the child).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/os/unique_fd.h"
#include "core/status.h"

namespace gm {

struct SpawnRequest {
  explicit SpawnRequest(std::vector<std::string> argv_, std::vector<std::string> env_ = {})
      : argv(std::move(argv_)), env(std::move(env_)) {}
  std::vector<std::string> argv;  // argv[0] is searched in PATH when it has no '/'
  // "NAME=value" strings; when `inherit_env`, this process's environment with
  // these added (an entry here replaces one of the same name).
  std::vector<std::string> env;
  bool inherit_env = true;
  bool stdin_null = false;                // fd 0 from /dev/null
  std::vector<std::pair<int, int>> dup2;  // (our fd, the child's fd), in order
  // SIGTERM and SIGUSR2, the drain signals (cmd/stop_signals.h), are ignored in
  // the child (a shell's `trap '' TERM USR2` before it execs the program, found in
  // this process's PATH first: a missing one is NotFound as always), which stays
  // so across its exec, in shells and in Python: a drain's signal to every process
  // of a Slurm step reaches the parent only, which ends its children itself
  // (SIGKILL, or closing their pipes).
  bool ignore_drain_signals = false;
  // The child leads a process group of its own: a terminal's Ctrl-C (SIGINT to
  // the foreground group) does not reach it; its parent ends it.
  bool own_process_group = false;
};

// `program` as execvp would find it: itself when it has a '/' (and may be run),
// else the first executable file of that name in this process's PATH.
std::optional<std::string> FindProgram(const std::string& program);

// The child's pid. InvalidArgument for an empty argv; NotFound when the program
// does not exist; ResourceExhausted when out of processes or memory; IoError
// otherwise; each names the program.
Result<pid_t> SpawnProcess(const SpawnRequest& request);

// A pipe for a child's output: the read end and the write end, both close-on-exec
// (a SpawnRequest's dup2 hands the write end to the child). ResourceExhausted
// when out of descriptors, IoError otherwise.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};
Result<Pipe> MakePipe();

// Describes a waitpid() status: "exited with status N" or "was killed by signal N (Name)".
std::string DescribeExit(int wait_status);

// CPU seconds (user + system, including reaped children) process `pid` has used,
// from /proc/PID/stat. IoError when it cannot be read (gone, not ours to see).
Result<double> CpuSecondsOfProcess(pid_t pid);

// The same for `pid` and every live process below it (children, grandchildren:
// a data worker's Python hosts and the virtual DataLoader workers they fork),
// from one pass over /proc. Reaped descendants are in their parents' figures.
Result<double> CpuSecondsOfTree(pid_t pid);
// CpuSecondsOfTree of each of `roots` still running, from one pass over /proc for
// all of them (a run's workers, sampled every interval).
std::map<pid_t, double> CpuSecondsOfTrees(const std::vector<pid_t>& roots);

}  // namespace gm
