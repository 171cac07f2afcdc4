#include "launcher/supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/clock.h"

namespace gm {

Supervisor::Supervisor(ProcessLauncher& launcher, SupervisorOptions options)
    : launcher_(launcher), options_(std::move(options)) {}

Supervisor::~Supervisor() { launcher_.KillAll(); }

double Supervisor::Now() const { return (options_.clock ? *options_.clock : SystemClock()).Now(); }

Result<pid_t> Supervisor::Start(const LaunchRequest& request) {
  LaunchRequest r = request;
  if (options_.prepare) options_.prepare(r);
  GM_ASSIGN_OR_RETURN(pid_t pid, launcher_.Start(r));
  procs_[pid] = Proc{request};  // as given: a replacement is prepared afresh
  return pid;
}

void Supervisor::Drain(pid_t pid, const std::string& step) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;
  if (it->second.drained) return;
  it->second.drained = true;
  if (options_.drain_kill_s > 0) it->second.kill_at = Now() + options_.drain_kill_s;
  launcher_.Drain(pid, step);
}

void Supervisor::Stop(pid_t pid, int sig) {
  auto it = procs_.find(pid);
  if (it == procs_.end() || it->second.stopped) return;
  it->second.stopped = true;
  it->second.kill_at = Now() + options_.stop_grace_s;
  if (sig != 0) launcher_.Signal(pid, sig);
}

ProcessEnded Supervisor::Ended(const ChildExit& e) {
  ProcessEnded out;
  out.exit = e;
  auto it = procs_.find(e.pid);
  if (it == procs_.end()) return out;
  const Proc proc = std::move(it->second);
  procs_.erase(it);
  out.role = proc.request.role;
  out.slot = proc.request.slot;
  out.drained = proc.drained;
  out.stopped = proc.stopped;
  // A worker that crashed is replaced, in its slot: the first time at once, then
  // after a delay that doubles with each replacement (a worker that cannot start at
  // all does not spin).
  if (out.role == ProcessRole::kWorker && proc.request.replace && !proc.drained && !proc.stopped &&
      e.exit_code() != 0) {
    if (restarts_ >= options_.max_restarts) {
      out.restarts_exhausted = true;
    } else {
      out.will_replace = true;
      out.delay_s = restarts_ == 0 ? 0.0
                                   : std::min(options_.max_backoff_s,
                                              options_.backoff_s * std::ldexp(1.0, restarts_ - 1));
      ++restarts_;
      pending_.push_back({Now() + out.delay_s, proc.request});
    }
  }
  return out;
}

std::optional<ProcessEnded> Supervisor::Poll(double timeout_s,
                                             std::vector<ProcessReplaced>* replaced) {
  const double now = Now();
  for (auto& [pid, proc] : procs_) {
    const bool due = proc.stopped || (proc.drained && options_.drain_kill_s > 0);
    if (due && now >= proc.kill_at) launcher_.Signal(pid, SIGKILL);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->at > now) {
      ++it;
      continue;
    }
    ProcessReplaced r;
    r.slot = it->request.slot;
    r.threads = it->request.threads;
    r.elastic = it->request.elastic;
    Result<pid_t> pid = Start(it->request);
    if (pid.ok()) {
      r.pid = *pid;
    } else {
      r.error = pid.status().message();
    }
    if (replaced != nullptr) replaced->push_back(std::move(r));
    it = pending_.erase(it);
  }
  // Do not sleep past a due replacement or SIGKILL.
  double wait = timeout_s;
  for (const Pending& p : pending_) wait = std::min(wait, std::max(0.0, p.at - now));
  for (const auto& [pid, proc] : procs_) {
    if (proc.stopped) wait = std::min(wait, std::max(0.0, proc.kill_at - now));
  }
  std::optional<ChildExit> e = launcher_.Wait(wait);
  if (!e) return std::nullopt;
  return Ended(*e);
}

std::vector<ProcessEnded> Supervisor::StopAll() {
  pending_.clear();
  std::vector<ProcessEnded> out;
  for (auto& [pid, proc] : procs_) {
    proc.stopped = true;
    launcher_.Signal(pid, SIGTERM);
  }
  const double deadline = Now() + options_.end_grace_s;
  while (!procs_.empty() && Now() < deadline) {
    if (std::optional<ChildExit> e = launcher_.Wait(std::min(0.2, deadline - Now()))) {
      out.push_back(Ended(*e));
    }
  }
  for (const ChildExit& e : launcher_.KillAll()) {
    if (procs_.count(e.pid)) out.push_back(Ended(e));
  }
  procs_.clear();
  return out;
}

size_t Supervisor::running(ProcessRole role) const {
  return static_cast<size_t>(std::count_if(procs_.begin(), procs_.end(), [role](const auto& p) {
    return p.second.request.role == role;
  }));
}

std::vector<pid_t> Supervisor::pids(ProcessRole role) const {
  std::vector<pid_t> out;
  for (const auto& [pid, proc] : procs_) {
    if (proc.request.role == role) out.push_back(pid);
  }
  return out;
}

}  // namespace gm
